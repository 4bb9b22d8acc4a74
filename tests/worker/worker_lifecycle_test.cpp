// The worker's connection lifecycle under silent and hostile peers: idle sessions yield to the
// next coordinator (and BUSY says how long they have been idle), silent
// unauthenticated connections are evicted rather than locking the coordinator out, one source
// address cannot take every handshake slot, and a GEMM probe stops when its coordinator leaves.
// In-process servers on loopback; every bound asserted is an upper bound, with a wide margin.
#include "tessera/worker/worker_server.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/gemm_service.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "worker_test_client.hpp"

namespace tessera::worker {
namespace {

namespace tp = tessera::transport;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kSecret[] = "lifecycle test secret";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class Worker {
 public:
  explicit Worker(const WorkerOptions& tuned) {
    WorkerOptions options = tuned;
    options.listen_host = "127.0.0.1";
    options.port = 0;
    options.threads = 1;
    options.secret = kSecret;
    options.tile_memory_cap = 16 << 20;
    auto started = WorkerServer::start(options);
    EXPECT_TRUE(started.is_ok()) << started.status().to_string();
    if (!started.is_ok()) return;
    server_ = std::move(started).value();
    runner_ = std::jthread([this] { server_->run(); });
  }
  ~Worker() {
    if (server_) server_->stop();
  }
  uint16_t port() const { return server_->port(); }

  Result<std::unique_ptr<tp::FrameConnection>> open_session() {
    auto connection = tp::FrameConnection::connect("127.0.0.1", port(), std::chrono::seconds(5));
    if (!connection) return connection.status();
    Result<tp::Hello> hello = tp::client_handshake(**connection, kSecret, std::chrono::seconds(10));
    if (!hello) return hello.status();
    return connection;
  }

 private:
  std::unique_ptr<WorkerServer> server_;
  std::jthread runner_;  // declared last: joined before server_ goes
};

// A connection from a chosen loopback source address (127.0.0.0/8 is all local on Linux) that
// reads the worker's HELLO and then says nothing.
class SilentPeer {
 public:
  SilentPeer(asio::io_context& context, const std::string& source, uint16_t port)
      : connection_(testing::connect_from(context, source, port)) {}
  tp::FrameConnection& connection() { return *connection_; }
  // True once the worker has sent HELLO (within 10 s).
  bool got_hello() {
    connection_->set_read_timeout(milliseconds(10000));
    Result<tp::IncomingFrame> frame = connection_->read_frame();
    return frame.is_ok() && std::holds_alternative<tp::Hello>(frame->message);
  }
  // True when the worker closes the connection within `within`.
  bool closed_by_worker(milliseconds within) {
    connection_->set_read_timeout(within);
    for (;;) {
      Result<tp::IncomingFrame> frame = connection_->read_frame();
      if (frame.is_ok()) continue;  // an ERROR before the close is fine
      return frame.status().message().find("no frame from") == std::string::npos;
    }
  }

 private:
  std::unique_ptr<tp::FrameConnection> connection_;
};

// BYE answered with BYE: the session was still being served.
bool says_bye(tp::FrameConnection& session) {
  if (!session.write_message(tp::Bye{}, 1).is_ok()) return false;
  session.set_read_timeout(milliseconds(20000));
  Result<tp::IncomingFrame> reply = session.read_frame();
  return reply.is_ok() && std::holds_alternative<tp::Bye>(reply->message);
}

TEST(WorkerLifecycle, AnIdleSessionNobodyElseAsksForIsKept) {
  WorkerOptions options;
  options.idle_timeout = milliseconds(200);
  Worker worker(options);
  auto session = worker.open_session();
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  std::this_thread::sleep_for(milliseconds(1000));  // five idle timeouts, and nobody else came
  EXPECT_TRUE(says_bye(**session)) << "a lone idle session was ended";
}

TEST(WorkerLifecycle, AnIdleSessionYieldsToTheNextCoordinator) {
  WorkerOptions options;
  options.idle_timeout = milliseconds(300);
  Worker worker(options);
  auto first = worker.open_session();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  std::this_thread::sleep_for(milliseconds(600));  // idle for at least the idle timeout
  auto second = worker.open_session();
  ASSERT_TRUE(second.is_ok()) << "the idle session did not yield: " << second.status().to_string();
  // The first one was ended, with an ERROR or just a close.
  (*first)->set_read_timeout(milliseconds(20000));
  for (;;) {
    Result<tp::IncomingFrame> frame = (*first)->read_frame();
    if (!frame.is_ok()) {
      EXPECT_EQ(frame.status().message().find("no frame from"), std::string::npos) << frame.status().message();
      break;
    }
  }
  EXPECT_TRUE(says_bye(**second));
}

TEST(WorkerLifecycle, ABusyReplySaysHowLongTheSessionHasBeenIdle) {
  WorkerOptions options;
  options.idle_timeout = milliseconds(600000);  // never reached here: the second one is refused
  Worker worker(options);
  auto first = worker.open_session();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  std::this_thread::sleep_for(milliseconds(400));
  auto second = worker.open_session();
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kBusy) << second.status().to_string();
  const std::string message = second.status().message();  // status() is a copy
  const std::string marker = ", idle for ";
  const auto at = message.find(marker);
  ASSERT_NE(at, std::string::npos) << message;
  EXPECT_NE(message.find("worker busy with a session from 127.0.0.1:"), std::string::npos) << message;
  EXPECT_GE(std::stod(message.substr(at + marker.size())), 0.3) << message;  // slept 0.4 s: a lower bound
  EXPECT_NE(message.find("a session idle for 600 s yields to the next coordinator"), std::string::npos) << message;
  EXPECT_TRUE(says_bye(**first));
}

TEST(WorkerLifecycle, SilentUnauthenticatedConnectionsEndAfterTheHandshakeTimeout) {
  WorkerOptions options;
  options.handshake_timeout = milliseconds(500);
  Worker worker(options);
  asio::io_context context;
  SilentPeer peer(context, "127.0.0.1", worker.port());
  ASSERT_TRUE(peer.got_hello());
  const auto start = Clock::now();
  EXPECT_TRUE(peer.closed_by_worker(milliseconds(15000)));
  EXPECT_LT(seconds_since(start), 15.0);
}

TEST(WorkerLifecycle, SilentConnectionsAreEvictedRatherThanLockingTheCoordinatorOut) {
  WorkerOptions options;
  options.handshake_timeout = milliseconds(120000);  // only eviction can free a slot in this test
  Worker worker(options);
  asio::io_context context;
  // 21 silent connections from three addresses: more than the 16 handshake slots.
  std::vector<std::unique_ptr<SilentPeer>> peers;
  for (int i = 0; i < 21; ++i) {
    peers.push_back(std::make_unique<SilentPeer>(context, "127.0.0." + std::to_string(2 + i % 3), worker.port()));
    ASSERT_TRUE(peers.back()->got_hello()) << "connection " << i;
  }
  const auto start = Clock::now();
  auto session = worker.open_session();
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  EXPECT_LT(seconds_since(start), 15.0);
  // The oldest silent connection made room.
  EXPECT_TRUE(peers.front()->closed_by_worker(milliseconds(15000)));
}

TEST(WorkerLifecycle, OneSourceCannotTakeEveryHandshakeSlot) {
  WorkerOptions options;
  options.handshake_timeout = milliseconds(120000);
  Worker worker(options);
  asio::io_context context;
  std::vector<std::unique_ptr<SilentPeer>> peers;
  for (int i = 0; i < 12; ++i) {
    peers.push_back(std::make_unique<SilentPeer>(context, "127.0.0.2", worker.port()));
    ASSERT_TRUE(peers.back()->got_hello()) << "connection " << i;
  }
  // At most 8 from one address: the 4 oldest were evicted, the newest 8 are still waiting.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(peers[static_cast<std::size_t>(i)]->closed_by_worker(milliseconds(15000))) << i;
  for (int i = 4; i < 12; ++i) EXPECT_FALSE(peers[static_cast<std::size_t>(i)]->connection().peer_closed()) << i;
  // The other 8 slots stay open to everyone else.
  std::vector<std::unique_ptr<SilentPeer>> others;
  for (int i = 0; i < 7; ++i) {
    others.push_back(std::make_unique<SilentPeer>(context, "127.0.0.3", worker.port()));
    ASSERT_TRUE(others.back()->got_hello()) << "other connection " << i;
  }
  for (auto& other : others) EXPECT_FALSE(other->connection().peer_closed());
  auto session = worker.open_session();
  EXPECT_TRUE(session.is_ok()) << session.status().to_string();
}

TEST(WorkerLifecycle, GemmProbeStopsWhenTheCoordinatorLeaves) {
  Worker worker(WorkerOptions{});
  {
    auto session = worker.open_session();
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    gemm::Probe probe;
    probe.kind = gemm::ProbeKind::kGemm;
    probe.size = 64;
    probe.min_seconds = 30.0;  // the protocol's longest, unless the probe notices nobody waits
    ASSERT_TRUE(gemm::write_message(*(*session), probe, 1).is_ok());
    std::this_thread::sleep_for(milliseconds(200));  // let the probe start
  }  // the coordinator leaves
  // The worker is free again once the probe has stopped; until then it answers BUSY.
  const auto start = Clock::now();
  Result<std::unique_ptr<tp::FrameConnection>> next = worker.open_session();
  while (!next.is_ok() && seconds_since(start) < 20.0) {
    std::this_thread::sleep_for(milliseconds(100));
    next = worker.open_session();
  }
  // Well before the probe's 30 s would have run out.
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_LT(seconds_since(start), 20.0);
}

}  // namespace
}  // namespace tessera::worker
