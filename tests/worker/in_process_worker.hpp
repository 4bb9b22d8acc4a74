// A WorkerServer with a chosen set of services, running on a loopback port inside the test
// process; stopped and joined when the object goes away, even after a failed assertion.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/service.hpp"
#include "tessera/worker/worker_server.hpp"

namespace tessera::worker::testing {

inline constexpr char kInProcessSecret[] = "in-process services test secret";

class InProcessWorker {
 public:
  explicit InProcessWorker(std::vector<Service> services, uint64_t tile_memory_cap = 1 << 20) {
    WorkerOptions options;
    options.listen_host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.secret = kInProcessSecret;
    options.tile_memory_cap = tile_memory_cap;
    auto started = WorkerServer::start(options, std::move(services));
    EXPECT_TRUE(started.is_ok()) << started.status().to_string();
    if (!started.is_ok()) return;
    server_ = std::move(started).value();
    runner_ = std::jthread([this] { server_->run(); });
  }
  ~InProcessWorker() {
    if (server_) server_->stop();
    if (runner_.joinable()) runner_.join();
  }
  InProcessWorker(const InProcessWorker&) = delete;
  InProcessWorker& operator=(const InProcessWorker&) = delete;

  bool running() const { return server_ != nullptr; }
  WorkerServer& server() { return *server_; }
  uint16_t port() const { return server_->port(); }

  // A connected, authenticated session in `role` (a coordinator's by default), or nullptr (with a
  // test failure).
  std::unique_ptr<transport::FrameConnection> open_session(transport::Hello* hello = nullptr,
                                                           transport::SessionRole role = transport::SessionRole::kCoordinator) {
    auto connection = transport::FrameConnection::connect("127.0.0.1", port(), std::chrono::seconds(5));
    EXPECT_TRUE(connection.is_ok()) << connection.status().to_string();
    if (!connection.is_ok()) return nullptr;
    auto handshake =
        transport::client_handshake(**connection, kInProcessSecret, transport::kDefaultHandshakeTimeout, role);
    EXPECT_TRUE(handshake.is_ok()) << handshake.status().to_string();
    if (!handshake.is_ok()) return nullptr;
    if (hello != nullptr) *hello = *handshake;
    return std::move(connection).value();
  }

 private:
  std::unique_ptr<WorkerServer> server_;
  std::jthread runner_;
};

}  // namespace tessera::worker::testing
