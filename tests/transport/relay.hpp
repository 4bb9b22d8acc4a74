// A TCP relay on 127.0.0.1 for tests that must see or change the bytes on the wire: a client
// connects to the relay, which connects on to the real server and copies both directions. It
// records what the client sent and can flip one byte of it, as a man in the middle would.
// One client connection; the destructor shuts both sockets down and joins its threads, so a
// failed test leaves nothing running. Thread-safe accessors.
#pragma once

#include <asio.hpp>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace tessera::transport::testing {

class Relay {
 public:
  explicit Relay(uint16_t server_port)
      : acceptor_(context_, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0)),
        to_client_(context_),
        to_server_(context_) {
    port_ = acceptor_.local_endpoint().port();
    accepting_ = std::thread([this, server_port] {
      asio::error_code error;
      acceptor_.accept(to_client_, error);
      if (error) return;
      to_server_.connect({asio::ip::address_v4::loopback(), server_port}, error);
      if (error) return;
      upstream_ = std::thread([this] { pump(to_client_, to_server_, /*from_client=*/true); });
      downstream_ = std::thread([this] { pump(to_server_, to_client_, /*from_client=*/false); });
    });
  }
  ~Relay() {
    asio::error_code ignored;
    // shutdown(2) wakes an accept() blocked in another thread; close alone does not.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    accepting_.join();
    acceptor_.close(ignored);
    to_client_.shutdown(asio::socket_base::shutdown_both, ignored);
    to_server_.shutdown(asio::socket_base::shutdown_both, ignored);
    if (upstream_.joinable()) upstream_.join();
    if (downstream_.joinable()) downstream_.join();
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  uint16_t port() const { return port_; }
  // The next byte from the client after `skip` more bytes is inverted on its way to the server.
  void corrupt_after(std::size_t skip) {
    std::lock_guard lock(mutex_);
    corrupt_at_ = client_bytes_.size() + skip;
  }
  // Everything the client has sent so far, as it left the client.
  std::string client_bytes() const {
    std::lock_guard lock(mutex_);
    return client_bytes_;
  }

 private:
  void pump(asio::ip::tcp::socket& from, asio::ip::tcp::socket& to, bool from_client) {
    char buffer[65536];
    for (;;) {
      asio::error_code error;
      const std::size_t got = from.read_some(asio::buffer(buffer), error);
      if (error || got == 0) break;
      if (from_client) {
        std::lock_guard lock(mutex_);
        const std::size_t start = client_bytes_.size();
        client_bytes_.append(buffer, got);
        if (corrupt_at_ >= start && corrupt_at_ < start + got) {
          buffer[corrupt_at_ - start] = static_cast<char>(~buffer[corrupt_at_ - start]);
          corrupt_at_ = SIZE_MAX;
        }
      }
      asio::write(to, asio::buffer(buffer, got), error);
      if (error) break;
    }
    asio::error_code ignored;
    to.shutdown(asio::socket_base::shutdown_send, ignored);
  }

  asio::io_context context_;
  asio::ip::tcp::acceptor acceptor_;
  asio::ip::tcp::socket to_client_;
  asio::ip::tcp::socket to_server_;
  uint16_t port_ = 0;
  mutable std::mutex mutex_;
  std::string client_bytes_;
  std::size_t corrupt_at_ = SIZE_MAX;
  std::thread accepting_, upstream_, downstream_;
};

}  // namespace tessera::transport::testing
