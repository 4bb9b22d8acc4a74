// Chain forwarding on real in-process workers over loopback: the coordinator sets the chain up
// from its tail, stores B's pieces on the head only, and every other node announces each piece
// with STORED and multiplies with it exactly; a wrong run, a STORE before the run is named, an
// unreachable next node and a next node that goes away are each refused or reported. SEND_TILE:
// a tile computed on one worker reaches the others straight, after the jobs sent before it, and a
// send to a worker without the run, or of a tile not stored, is answered with why.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <asio.hpp>

#include "tessera/gemm/forward_codec.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/worker_server.hpp"
#include "in_process_worker.hpp"
#include "worker_test_client.hpp"

namespace tessera::worker {
namespace {

namespace tp = tessera::transport;
using namespace std::chrono_literals;
using testing::Dense;
using testing::gemm_job;
using testing::read_expect;
using testing::store_tile;

constexpr uint64_t kTileMemory = 16 << 20;
constexpr uint64_t kToken = 0x5eed;
constexpr uint32_t kFirstPiece = 16;

class ChainForwardingTest : public ::testing::Test {
 protected:
  std::unique_ptr<tp::FrameConnection> session(int i, tp::SessionRole role = tp::SessionRole::kCoordinator) {
    tp::Hello hello;
    std::unique_ptr<tp::FrameConnection> connection = workers_[i].open_session(&hello, role);
    if (!connection) return nullptr;
    EXPECT_NE(hello.capabilities & tp::kCapabilityForward, 0u);
    connection->set_read_timeout(10s);
    return connection;
  }

  // A run forwarding `pieces` tile ids from kFirstPiece on.
  gemm::ForwardSetup setup_for(int next, uint32_t pieces = 2) const {
    gemm::ForwardSetup setup{kToken, kFirstPiece, kFirstPiece + pieces, "", 0};
    if (next >= 0) {
      setup.next_host = "127.0.0.1";
      setup.next_port = workers_[next].port();
    }
    return setup;
  }

  // Each stops when the test ends, also after a failed assertion.
  std::array<testing::InProcessWorker, 3> workers_{testing::InProcessWorker(default_services(), kTileMemory),
                                                   testing::InProcessWorker(default_services(), kTileMemory),
                                                   testing::InProcessWorker(default_services(), kTileMemory)};
};

Result<gemm::ForwardMessage> read_forward(tp::FrameConnection& connection) {
  Result<tp::FrameHeader> header = connection.read_header();
  if (!header) return header.status();
  if (!tp::is_forward_message(header->type)) {
    return protocol_error("expected a forwarding message, got " + tp::message_type_name(header->type));
  }
  return gemm::read_forward_payload(connection, *header);
}

::testing::AssertionResult ready(tp::FrameConnection& connection, bool linked, const std::string& reason_part = "") {
  Result<gemm::ForwardMessage> message = read_forward(connection);
  if (!message) return ::testing::AssertionFailure() << message.status().to_string();
  const auto* answer = std::get_if<gemm::ForwardReady>(&*message);
  if (answer == nullptr) return ::testing::AssertionFailure() << "not FORWARD_READY";
  if (answer->linked != linked || answer->run_token != kToken) {
    return ::testing::AssertionFailure() << "linked " << answer->linked << ": " << answer->reason;
  }
  if (answer->reason.find(reason_part) == std::string::npos) {
    return ::testing::AssertionFailure() << "reason '" << answer->reason << "' lacks '" << reason_part << "'";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ChainForwardingTest, PiecesStoredOnTheHeadReachEveryNodeAndMultiplyExactly) {
  std::array<std::unique_ptr<tp::FrameConnection>, 3> coordinator;
  for (int i = 0; i < 3; ++i) {
    coordinator[i] = session(i);
    ASSERT_NE(coordinator[i], nullptr);
  }
  // From the tail: a node admits its upstream's peer link only once its own run is set up.
  for (int i = 2; i >= 0; --i) {
    ASSERT_TRUE(gemm::write_forward_message(*coordinator[i], setup_for(i == 2 ? -1 : i + 1)).is_ok());
    ASSERT_TRUE(ready(*coordinator[i], true)) << "node " << i;
  }
  const Dense b = Dense::integers(8, 5, 1);
  const std::array<Dense, 2> pieces{b.rows_range(0, 4), b.rows_range(4, 4)};
  for (uint32_t p = 0; p < 2; ++p) ASSERT_TRUE(store_tile(*coordinator[0], kFirstPiece + p, pieces[p]).is_ok());
  for (int i = 1; i < 3; ++i) {
    std::set<uint32_t> announced;
    while (announced.size() < 2) {
      Result<gemm::ForwardMessage> message = read_forward(*coordinator[i]);
      ASSERT_TRUE(message) << "node " << i << ": " << message.status().to_string();
      const auto* stored = std::get_if<gemm::Stored>(&*message);
      ASSERT_NE(stored, nullptr);
      EXPECT_EQ(stored->run_token, kToken);
      announced.insert(stored->tile_id);
    }
    EXPECT_EQ(announced, (std::set<uint32_t>{kFirstPiece, kFirstPiece + 1}));
  }
  for (int i = 0; i < 3; ++i) {
    const Dense a = Dense::integers(3, 8, 10 + i);
    // A whole: the jobs read its two column halves (a_col), one piece of B each.
    ASSERT_TRUE(store_tile(*coordinator[i], 100, a).is_ok());
    for (uint32_t p = 0; p < 2; ++p) {
      gemm::Job job = gemm_job(p + 1, 100, kFirstPiece + p, 200, 3, 5, 4,
                             (p == 0 ? gemm::kJobCreateOutput : gemm::kJobSendResult) | gemm::kJobReleaseB);
      job.a_col = 4 * p;
      job.c_rows = 3;
      job.c_cols = 5;
      ASSERT_TRUE(gemm::write_message(*coordinator[i], job, job.job_id).is_ok());
    }
    testing::AnyFrame frame;
    ASSERT_TRUE(read_expect<gemm::Credit>(*coordinator[i], frame));
    ASSERT_TRUE(read_expect<gemm::Credit>(*coordinator[i], frame));
    ASSERT_TRUE(read_expect<gemm::ResultTile>(*coordinator[i], frame));
    const auto& result = std::get<gemm::ResultTile>(frame.message);
    const Dense expected = testing::multiply(a, b);
    ASSERT_EQ(result.data.size(), expected.values.size());
    for (std::size_t v = 0; v < expected.values.size(); ++v) EXPECT_EQ(result.data[v], expected.values[v]) << "node " << i;
  }
}

TEST_F(ChainForwardingTest, UnreachableNextNodeIsReportedByName) {
  auto head = session(0);
  ASSERT_NE(head, nullptr);
  // Node 1 has no run: it refuses the peer link, and the head says so naming it.
  ASSERT_TRUE(gemm::write_forward_message(*head, setup_for(1)).is_ok());
  const std::string next = "127.0.0.1:" + std::to_string(workers_[1].port());
  EXPECT_TRUE(ready(*head, false, "cannot link to the next node " + next));
}

TEST_F(ChainForwardingTest, PeerLinksOfAnotherRunOrWithoutSetupAreRefused) {
  auto tail = session(1);
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(gemm::write_forward_message(*tail, setup_for(-1)).is_ok());
  ASSERT_TRUE(ready(*tail, true));

  auto stranger = session(1, tp::SessionRole::kPeer);
  ASSERT_NE(stranger, nullptr);
  ASSERT_TRUE(gemm::write_forward_message(*stranger, gemm::ForwardSetup{kToken + 1, 0, 0, "", 0}).is_ok());
  std::string message;
  EXPECT_TRUE(testing::read_error(*stranger, tp::ErrorCode::kBadFrame, &message));
  EXPECT_NE(message.find("is not this worker's current run"), std::string::npos) << message;

  auto early = session(1, tp::SessionRole::kPeer);
  ASSERT_NE(early, nullptr);
  ASSERT_TRUE(store_tile(*early, kFirstPiece, Dense::integers(2, 2, 0)).is_ok());
  EXPECT_TRUE(testing::read_error(*early, tp::ErrorCode::kBadFrame, &message));
  EXPECT_NE(message.find("before its FORWARD_SETUP"), std::string::npos) << message;

  auto outside = session(1, tp::SessionRole::kPeer);
  ASSERT_NE(outside, nullptr);
  ASSERT_TRUE(gemm::write_forward_message(*outside, gemm::ForwardSetup{kToken, 0, 0, "", 0}).is_ok());
  ASSERT_TRUE(ready(*outside, true));  // the peer link is taken for the run
  ASSERT_TRUE(store_tile(*outside, kFirstPiece + 7, Dense::integers(2, 2, 0)).is_ok());
  EXPECT_TRUE(testing::read_error(*outside, tp::ErrorCode::kBadFrame, &message));
  EXPECT_NE(message.find("outside the run's forwarded ids"), std::string::npos) << message;
}

TEST_F(ChainForwardingTest, ANextNodeThatGoesAwayIsReportedToTheCoordinator) {
  auto tail = session(1);
  auto head = session(0);
  ASSERT_NE(tail, nullptr);
  ASSERT_NE(head, nullptr);
  // Each id is forwarded once per run: every round stores a new one.
  constexpr uint32_t kRounds = 200;
  ASSERT_TRUE(gemm::write_forward_message(*tail, setup_for(-1, kRounds)).is_ok());
  ASSERT_TRUE(ready(*tail, true));
  ASSERT_TRUE(gemm::write_forward_message(*head, setup_for(1, kRounds)).is_ok());
  ASSERT_TRUE(ready(*head, true));
  // The tail's coordinator leaves: its run ends and it closes the head's peer link.
  tail.reset();
  // Pieces keep coming until the head's forwarding write fails; then it reports, unasked.
  bool reported = false;
  for (uint32_t round = 0; round < kRounds && !reported; ++round) {
    ASSERT_TRUE(store_tile(*head, kFirstPiece + round, Dense::integers(64, 64, 0)).is_ok());
    if (head->wait_readable(20ms)) {
      ASSERT_TRUE(ready(*head, false, "the link to the next node"));
      reported = true;
    }
  }
  EXPECT_TRUE(reported);
}

// What a SEND_TILE answers: SENT for tile `id`.
::testing::AssertionResult sent(tp::FrameConnection& connection, uint32_t id, bool delivered,
                                const std::string& reason_part = "") {
  Result<gemm::ForwardMessage> message = read_forward(connection);
  if (!message) return ::testing::AssertionFailure() << message.status().to_string();
  const auto* answer = std::get_if<gemm::Sent>(&*message);
  if (answer == nullptr) return ::testing::AssertionFailure() << "not SENT";
  if (answer->tile_id != id || answer->delivered != delivered || answer->run_token != kToken) {
    return ::testing::AssertionFailure() << "tile " << answer->tile_id << " delivered " << answer->delivered << ": "
                                         << answer->reason;
  }
  if (answer->reason.find(reason_part) == std::string::npos) {
    return ::testing::AssertionFailure() << "reason '" << answer->reason << "' lacks '" << reason_part << "'";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ChainForwardingTest, AComputedTileIsSentToTheOtherWorkersAfterItsJobs) {
  std::array<std::unique_ptr<tp::FrameConnection>, 3> coordinator;
  for (int i = 0; i < 3; ++i) {
    coordinator[i] = session(i);
    ASSERT_NE(coordinator[i], nullptr);
    // A run of tile sends only: no next node, the DAG's ids in range.
    ASSERT_TRUE(gemm::write_forward_message(*coordinator[i], setup_for(-1, 8)).is_ok());
    ASSERT_TRUE(ready(*coordinator[i], true)) << "node " << i;
  }
  // Node 0 computes C = A B into tile kFirstPiece + 2 and, right behind the job (not after its
  // CREDIT), is told to send it to nodes 1 and 2: the send waits for the job.
  const Dense a = Dense::integers(96, 80, 3);
  const Dense b = Dense::integers(80, 64, 4);
  ASSERT_TRUE(store_tile(*coordinator[0], 100, a).is_ok());
  ASSERT_TRUE(store_tile(*coordinator[0], 101, b).is_ok());
  gemm::Job job = gemm_job(1, 100, 101, kFirstPiece + 2, 96, 64, 80, gemm::kJobCreateOutput);
  job.c_rows = 96;
  job.c_cols = 64;
  ASSERT_TRUE(gemm::write_message(*coordinator[0], job, job.job_id).is_ok());
  for (int to = 1; to < 3; ++to) {
    const gemm::SendTile send{kToken, kFirstPiece + 2, "127.0.0.1", workers_[to].port()};
    ASSERT_TRUE(gemm::write_forward_message(*coordinator[0], send).is_ok());
  }
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*coordinator[0], frame));
  ASSERT_TRUE(sent(*coordinator[0], kFirstPiece + 2, true));
  ASSERT_TRUE(sent(*coordinator[0], kFirstPiece + 2, true));
  const Dense c = testing::multiply(a, b);
  for (int i = 1; i < 3; ++i) {
    Result<gemm::ForwardMessage> message = read_forward(*coordinator[i]);
    ASSERT_TRUE(message) << "node " << i << ": " << message.status().to_string();
    const auto* stored = std::get_if<gemm::Stored>(&*message);
    ASSERT_NE(stored, nullptr);
    EXPECT_EQ(stored->tile_id, kFirstPiece + 2);
    // The receiver computes with it: C times an identity-like integer block, checked exactly.
    const Dense e = Dense::integers(64, 8, 5 + i);
    ASSERT_TRUE(store_tile(*coordinator[i], 102, e).is_ok());
    gemm::Job use = gemm_job(1, kFirstPiece + 2, 102, 103, 96, 8, 64, gemm::kJobCreateOutput | gemm::kJobSendResult);
    use.c_rows = 96;
    use.c_cols = 8;
    ASSERT_TRUE(gemm::write_message(*coordinator[i], use, use.job_id).is_ok());
    ASSERT_TRUE(read_expect<gemm::Credit>(*coordinator[i], frame));
    ASSERT_TRUE(read_expect<gemm::ResultTile>(*coordinator[i], frame));
    const auto& result = std::get<gemm::ResultTile>(frame.message);
    const Dense expected = testing::multiply(c, e);
    ASSERT_EQ(result.data.size(), expected.values.size());
    for (std::size_t v = 0; v < expected.values.size(); ++v) EXPECT_EQ(result.data[v], expected.values[v]) << "node " << i;
  }
}

TEST_F(ChainForwardingTest, ATileSendThatCannotGoIsAnsweredWithWhy) {
  auto sender = session(0);
  ASSERT_NE(sender, nullptr);
  ASSERT_TRUE(gemm::write_forward_message(*sender, setup_for(-1, 8)).is_ok());
  ASSERT_TRUE(ready(*sender, true));
  ASSERT_TRUE(store_tile(*sender, kFirstPiece, Dense::integers(4, 4, 1)).is_ok());
  // Node 1 has no run: it refuses the peer link, and the SENT names it.
  const std::string peer = "127.0.0.1:" + std::to_string(workers_[1].port());
  ASSERT_TRUE(gemm::write_forward_message(*sender, gemm::SendTile{kToken, kFirstPiece, "127.0.0.1", workers_[1].port()}).is_ok());
  EXPECT_TRUE(sent(*sender, kFirstPiece, false, "did not reach " + peer));
  // Another run's token: refused without trying.
  ASSERT_TRUE(gemm::write_forward_message(*sender, gemm::SendTile{kToken + 1, kFirstPiece, "127.0.0.1", workers_[1].port()}).is_ok());
  Result<gemm::ForwardMessage> other = read_forward(*sender);
  ASSERT_TRUE(other) << other.status().to_string();
  const auto* refused_send = std::get_if<gemm::Sent>(&*other);
  ASSERT_NE(refused_send, nullptr);
  EXPECT_FALSE(refused_send->delivered);
  EXPECT_NE(refused_send->reason.find("is not this worker's current run"), std::string::npos) << refused_send->reason;
  // A tile that is not stored: the session ends with an ERROR naming it.
  ASSERT_TRUE(gemm::write_forward_message(*sender, gemm::SendTile{kToken, kFirstPiece + 5, "127.0.0.1", workers_[1].port()}).is_ok());
  std::string message;
  EXPECT_TRUE(testing::read_error(*sender, tp::ErrorCode::kNoSuchTile, &message));
  EXPECT_NE(message.find("tile " + std::to_string(kFirstPiece + 5) + " is not stored"), std::string::npos) << message;
}

// A loopback listener in front of a worker: closes the first `to_close` connections it accepts
// as soon as they arrive (what a worker does to the handshakes it evicts when many peers dial it
// at once) and relays the next one, byte for byte both ways, to the worker; then it accepts no
// more. Closes everything when it goes away.
class ClosingRelay {
 public:
  ClosingRelay(uint16_t worker_port, int to_close)
      : acceptor_(io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        worker_port_(worker_port), to_close_(to_close) {
    accepting_ = std::jthread([this] { accept_loop(); });
  }
  ~ClosingRelay() {
    std::error_code ignored;
    // Wakes an accept still waiting (closing the descriptor would not, on Linux).
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    {
      std::lock_guard lock(mutex_);
      for (auto& socket : sockets_) socket->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    }
    accepting_.join();
    pumps_.clear();  // joins
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int closed() const { return closed_.load(); }

 private:
  void accept_loop() {
    for (;;) {
      auto client = std::make_shared<asio::ip::tcp::socket>(io_);
      std::error_code error;
      acceptor_.accept(*client, error);
      if (error) return;
      if (closed_.load() < to_close_) {
        client->close(error);
        ++closed_;
        continue;
      }
      auto worker = std::make_shared<asio::ip::tcp::socket>(io_);
      worker->connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), worker_port_), error);
      if (error) return;
      std::lock_guard lock(mutex_);
      sockets_.push_back(client);
      sockets_.push_back(worker);
      pumps_.emplace_back([client, worker] { pump(*client, *worker); });
      pumps_.emplace_back([client, worker] { pump(*worker, *client); });
      return;
    }
  }
  static void pump(asio::ip::tcp::socket& from, asio::ip::tcp::socket& to) {
    std::array<char, 64 * 1024> buffer;
    std::error_code error;
    for (;;) {
      const std::size_t n = from.read_some(asio::buffer(buffer), error);
      if (error || asio::write(to, asio::buffer(buffer.data(), n), error) != n || error) break;
    }
    to.shutdown(asio::ip::tcp::socket::shutdown_send, error);
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  const uint16_t worker_port_;
  const int to_close_;
  std::atomic<int> closed_{0};
  std::mutex mutex_;
  std::vector<std::shared_ptr<asio::ip::tcp::socket>> sockets_;
  std::vector<std::jthread> pumps_;
  std::jthread accepting_;  // last: starts once the rest is built
};

// A worker that many peers dial at once evicts its oldest unauthenticated connections, which the
// evicted dialler sees only as the connection closing mid-handshake: it tries again until its
// deadline, and the tile arrives.
TEST_F(ChainForwardingTest, ATileSendWhoseHandshakeIsClosedTriesAgainAndArrives) {
  auto receiver = session(1);
  ASSERT_NE(receiver, nullptr);
  ASSERT_TRUE(gemm::write_forward_message(*receiver, setup_for(-1, 8)).is_ok());
  ASSERT_TRUE(ready(*receiver, true));
  auto sender = session(0);
  ASSERT_NE(sender, nullptr);
  ASSERT_TRUE(gemm::write_forward_message(*sender, setup_for(-1, 8)).is_ok());
  ASSERT_TRUE(ready(*sender, true));
  ASSERT_TRUE(store_tile(*sender, kFirstPiece, Dense::integers(32, 32, 7)).is_ok());

  ClosingRelay evicting(workers_[1].port(), 3);
  ASSERT_TRUE(gemm::write_forward_message(*sender, gemm::SendTile{kToken, kFirstPiece, "127.0.0.1", evicting.port()}).is_ok());
  ASSERT_TRUE(sent(*sender, kFirstPiece, true));
  EXPECT_EQ(evicting.closed(), 3) << "three handshakes closed, the fourth got in";
  Result<gemm::ForwardMessage> message = read_forward(*receiver);
  ASSERT_TRUE(message) << message.status().to_string();
  const auto* stored = std::get_if<gemm::Stored>(&*message);
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->tile_id, kFirstPiece);
}


}  // namespace
}  // namespace tessera::worker
