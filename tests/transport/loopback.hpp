// Two FrameConnections joined by a real TCP connection on 127.0.0.1, and a peer thread that
// cannot outlive a failed test: its destructor shuts the connection down and joins.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "tessera/transport/frame_connection.hpp"

namespace tessera::transport::testing {

struct LoopbackPair {
  asio::io_context server_context;  // outlives `server`, whose socket is bound to it
  std::unique_ptr<FrameConnection> client;  // made by FrameConnection::connect
  std::unique_ptr<FrameConnection> server;  // accepted
  uint16_t port = 0;
};

inline std::unique_ptr<LoopbackPair> make_loopback(Limits client_limits = {}, Limits server_limits = {}) {
  auto pair = std::make_unique<LoopbackPair>();
  asio::ip::tcp::acceptor acceptor(pair->server_context,
                                   asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  pair->port = acceptor.local_endpoint().port();
  // The kernel completes the handshake from the listen backlog, so connecting before accept()
  // needs no second thread.
  auto client = FrameConnection::connect("127.0.0.1", pair->port, std::chrono::seconds(5), client_limits);
  EXPECT_TRUE(client) << client.status().to_string();
  if (!client) return nullptr;
  pair->client = std::move(*client);
  asio::ip::tcp::socket socket(pair->server_context);
  acceptor.accept(socket);
  pair->server = std::make_unique<FrameConnection>(std::move(socket), server_limits);
  return pair;
}

// Runs `body` on its own thread. join() waits normally; if the test leaves the scope early (a
// failed ASSERT), the destructor shuts `connection` down first so a blocked body returns.
class PeerThread {
 public:
  PeerThread(FrameConnection& connection, std::function<void()> body)
      : connection_(connection), thread_(std::move(body)) {}
  ~PeerThread() {
    if (thread_.joinable()) connection_.shutdown();
  }
  PeerThread(const PeerThread&) = delete;
  PeerThread& operator=(const PeerThread&) = delete;

  void join() { thread_.join(); }

 private:
  FrameConnection& connection_;
  std::jthread thread_;  // joins on destruction, after the shutdown above
};

}  // namespace tessera::transport::testing
