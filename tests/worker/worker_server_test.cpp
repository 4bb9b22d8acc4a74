#include "tessera/worker/worker_server.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/compute_pool.hpp"
#include "tessera/worker/gemm_service.hpp"
#include "tessera/gemm/client.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "tessera/transport/block_key.hpp"
#include "worker_test_client.hpp"

namespace tessera::worker {
namespace {

namespace tp = tessera::transport;
using namespace std::chrono_literals;
using testing::add_scaled_job;
using testing::Dense;
using testing::gemm_job;
using testing::read_error;
using testing::read_expect;
using testing::store_tile;

constexpr char kSecret[] = "in-process test secret";
constexpr uint64_t kCapBytes = 64 * 1024;
// How long stop() may take to make run() return; only a server that never stops reaches it.
constexpr std::chrono::seconds kStopDeadline{30};

// Shuts `connection` down once `timeout` has passed, as testing::Watchdog does, and remembers
// that it did: a read that failed because of the deadline must not pass for the worker closing
// the session, or a worker that never answers would pass every test that expects a close.
class SessionDeadline {
 public:
  SessionDeadline(tp::FrameConnection& connection, std::chrono::seconds timeout)
      : timeout_(timeout), thread_([this, &connection] {
          std::unique_lock lock(mutex_);
          if (!cv_.wait_for(lock, timeout_, [this] { return done_; })) {
            expired_ = true;
            connection.shutdown();
          }
        }) {}
  ~SessionDeadline() { (void)finish(); }
  SessionDeadline(const SessionDeadline&) = delete;
  SessionDeadline& operator=(const SessionDeadline&) = delete;

  bool expired() const { return expired_; }
  std::chrono::seconds timeout() const { return timeout_; }
  // Ends the wait; whether the deadline had passed by then.
  bool finish() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return expired_;
  }

 private:
  const std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> expired_{false};
  std::thread thread_;  // last: it starts once the members it reads exist
};

// One connection to the worker under test, under a SessionDeadline: if the worker stops
// answering, the connection is shut down and the test fails (when the session is closed or
// destroyed) instead of hanging. Empty (false) when connecting failed.
class Session {
 public:
  Session() = default;
  Session(std::unique_ptr<tp::FrameConnection> connection, std::chrono::seconds deadline)
      : connection_(std::move(connection)),
        deadline_(connection_ ? std::make_unique<SessionDeadline>(*connection_, deadline) : nullptr) {}
  Session(Session&&) noexcept = default;
  Session& operator=(Session&& other) noexcept {
    if (this != &other) {
      close();
      connection_ = std::move(other.connection_);
      deadline_ = std::move(other.deadline_);
      hello_ = other.hello_;
    }
    return *this;
  }
  ~Session() { close(); }

  explicit operator bool() const { return connection_ != nullptr; }
  tp::FrameConnection& operator*() const { return *connection_; }
  tp::FrameConnection* operator->() const { return connection_.get(); }
  // The worker's HELLO, once handshake() succeeded.
  const tp::Hello& hello() const { return hello_; }

  // Reads the worker's HELLO and answers it with `secret`.
  Status handshake(std::string_view secret) {
    Result<tp::Hello> hello = tp::client_handshake(*connection_, secret);
    if (!hello) return hello.status();
    hello_ = *hello;
    return Status::ok();
  }

  // The worker has closed the connection: the next read finds no frame, and not because the
  // deadline shut the connection down.
  ::testing::AssertionResult closed_by_worker() {
    ::testing::AssertionResult closed = testing::read_closed(*connection_);
    if (closed && deadline_->expired()) {
      return ::testing::AssertionFailure() << "the connection was shut down by the test's " << deadline_->timeout().count()
                                           << " s deadline, not closed by the worker";
    }
    return closed;
  }

  // Ends the deadline's wait (a failure if it had passed) and closes the connection.
  void close() {
    if (deadline_ && deadline_->finish()) {
      ADD_FAILURE() << "the worker did not answer within the session's " << deadline_->timeout().count()
                    << " s deadline; the connection was shut down";
    }
    deadline_.reset();  // before the connection it watches
    connection_.reset();
  }

 private:
  std::unique_ptr<tp::FrameConnection> connection_;
  std::unique_ptr<SessionDeadline> deadline_;
  tp::Hello hello_;
};

// A WorkerServer serving on a thread of its own, so that a test can bound its wait for run() to
// return. A run() that does not return leaves the server and its thread running (leaked, never
// destroyed under run()), so that the binary goes on to report the failure instead of hanging.
class ServerThread {
 public:
  explicit ServerThread(std::unique_ptr<WorkerServer> server) : server_(std::move(server)) {
    std::promise<void> returned;
    returned_ = returned.get_future();
    thread_ = std::thread([server = server_.get(), returned = std::move(returned)]() mutable {
      server->run();
      returned.set_value();
    });
  }
  ~ServerThread() {
    if (thread_.joinable()) {
      EXPECT_TRUE(stop());
    }
  }
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

  WorkerServer& server() const { return *server_; }

  // run() has returned, or returns within `deadline`.
  ::testing::AssertionResult returned_within(std::chrono::seconds deadline) {
    if (!server_) return ::testing::AssertionFailure() << "run() never returned";
    if (!thread_.joinable()) return ::testing::AssertionSuccess();
    if (returned_.wait_for(deadline) != std::future_status::ready) {
      thread_.detach();
      (void)server_.release();
      return ::testing::AssertionFailure() << "run() had not returned " << deadline.count() << " s later";
    }
    thread_.join();
    return ::testing::AssertionSuccess();
  }
  // stop(), then run() returns within `deadline`.
  ::testing::AssertionResult stop(std::chrono::seconds deadline = kStopDeadline) {
    if (server_ && thread_.joinable()) server_->stop();
    return returned_within(deadline);
  }

 private:
  std::unique_ptr<WorkerServer> server_;
  std::future<void> returned_;
  std::thread thread_;
};

// Tiles to STORE, by id.
using Tiles = std::vector<std::pair<uint32_t, Dense>>;

::testing::AssertionResult store_tiles(tp::FrameConnection& connection, const Tiles& tiles) {
  for (const auto& [id, tile] : tiles) {
    if (Status stored = store_tile(connection, id, tile); !stored.is_ok()) {
      return ::testing::AssertionFailure() << "STORE of tile " << id << ": " << stored.to_string();
    }
  }
  return ::testing::AssertionSuccess();
}

// Reads the next frame and expects ERROR with `code` and a message that holds `reason`.
::testing::AssertionResult read_error_saying(tp::FrameConnection& connection, tp::ErrorCode code,
                                             std::string_view reason) {
  std::string message;
  if (::testing::AssertionResult read = read_error(connection, code, &message); !read) return read;
  if (message.find(reason) == std::string::npos) {
    return ::testing::AssertionFailure() << "ERROR \"" << message << "\" does not say \"" << reason << "\"";
  }
  return ::testing::AssertionSuccess();
}

// An orderly end: BYE, answered by BYE (the worker is free again once it has answered).
::testing::AssertionResult say_bye(tp::FrameConnection& connection) {
  if (Status sent = connection.write_message(tp::Bye{}); !sent.is_ok()) {
    return ::testing::AssertionFailure() << "BYE: " << sent.to_string();
  }
  testing::AnyFrame frame;
  return read_expect<tp::Bye>(connection, frame);
}

// `job` creating its C as a new c_rows x c_cols tile.
gemm::Job creating_output(gemm::Job job, uint32_t c_rows, uint32_t c_cols) {
  job.flags |= gemm::kJobCreateOutput;
  job.c_rows = c_rows;
  job.c_cols = c_cols;
  return job;
}

// Where a job's blocks start inside its stored tiles.
struct BlockOffsets {
  uint32_t a_row = 0, a_col = 0, b_row = 0, b_col = 0, c_row = 0, c_col = 0;
};
gemm::Job placed(gemm::Job job, const BlockOffsets& at) {
  job.a_row = at.a_row;
  job.a_col = at.a_col;
  job.b_row = at.b_row;
  job.b_col = at.b_col;
  job.c_row = at.c_row;
  job.c_col = at.c_col;
  return job;
}

// `job` with `edit` applied: one case of a table that bends a valid job.
template <typename Edit>
gemm::Job edited(gemm::Job job, Edit edit) {
  edit(job);
  return job;
}

// A worker server on a loopback port, serving on its own thread; stopped (with a deadline) after
// every test, also one whose assertion failed.
class WorkerServerTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kThreads = 2;

  virtual uint64_t cap_bytes() const { return kCapBytes; }
  virtual uint32_t threads() const { return kThreads; }
  // How long a connection of the test may wait for the worker; only a worker that fails to
  // answer ever reaches it.
  virtual std::chrono::seconds deadline() const { return 60s; }
  // The worker's --store folder; empty: none.
  virtual std::string store_dir() const { return ""; }

  void SetUp() override {
    WorkerOptions options;
    options.listen_host = "127.0.0.1";
    options.port = 0;
    options.threads = threads();
    options.secret = kSecret;
    options.tile_memory_cap = cap_bytes();
    options.store_dir = store_dir();
    auto started = WorkerServer::start(options);
    ASSERT_TRUE(started.is_ok()) << started.status().to_string();
    server_.emplace(std::move(started).value());
  }

  void TearDown() override {
    if (server_) {
      EXPECT_TRUE(server_->stop()) << "stopping the worker after the test";
    }
    server_.reset();
  }

  WorkerServer& server() { return server_->server(); }

  // A connection whose HELLO is still unread.
  Session connect() {
    auto connection = tp::FrameConnection::connect("127.0.0.1", server().port(), 5s);
    EXPECT_TRUE(connection.is_ok()) << connection.status().to_string();
    if (!connection.is_ok()) return {};
    return Session(std::move(connection).value(), deadline());
  }

  // A connected, authenticated coordinator session.
  Session open_session() {
    Session session = connect();
    if (!session) return session;
    const Status handshake = session.handshake(kSecret);
    EXPECT_TRUE(handshake.is_ok()) << handshake.to_string();
    if (!handshake.is_ok()) return {};
    return session;
  }

  // A new session stores `tiles` and sends `job`; the worker must answer ERROR(code) saying
  // `reason`, and end the session.
  void expect_job_refused(const Tiles& tiles, const gemm::Job& job, tp::ErrorCode code, std::string_view reason = "") {
    Session session = open_session();
    ASSERT_TRUE(session);
    ASSERT_TRUE(store_tiles(*session, tiles));
    ASSERT_TRUE(gemm::write_message(*session, job).is_ok());
    EXPECT_TRUE(read_error_saying(*session, code, reason));
    EXPECT_TRUE(session.closed_by_worker());
  }

  std::optional<ServerThread> server_;
};

// The worker with one coordinator session open (session_), for what a session does.
class WorkerSessionTest : public WorkerServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(WorkerServerTest::SetUp());
    session_ = open_session();
    ASSERT_TRUE(session_);
  }

  void TearDown() override {
    session_.close();  // its deadline's verdict is the test's, before the worker stops
    WorkerServerTest::TearDown();
  }

  Session session_;
};

TEST_F(WorkerSessionTest, HandshakeReportsNodeFacts) {
  const tp::Hello& hello = session_.hello();
  EXPECT_EQ(hello.worker_version, worker_version());
  EXPECT_EQ(hello.threads, 2u);
  EXPECT_EQ(hello.tile_memory_cap, kCapBytes);
  const NodeFacts facts = read_node_facts();
  EXPECT_EQ(hello.cores, facts.cores);
  EXPECT_EQ(hello.arch, facts.arch);
  EXPECT_EQ(hello.hostname, facts.hostname);
  EXPECT_GT(hello.memory_bytes, 0u);
  EXPECT_NE(hello.challenge, (std::array<uint8_t, tp::kChallengeSize>{}));
  EXPECT_EQ(hello.capabilities, tp::kCapabilityGemm | tp::kCapabilityGraph | tp::kCapabilityExpression |
                                    tp::kCapabilityTransposedJobs | tp::kCapabilityGraphProbe | tp::kCapabilityForward | tp::kCapabilityTileSend | tp::kCapabilityTls)
      << "no block-store bit: this worker has no --store";
  // Linux always reports its load; the value itself moves with whatever else runs here.
  EXPECT_TRUE(hello.load_milli.has_value());
  EXPECT_TRUE(read_load_milli().has_value());
  EXPECT_EQ(server().services().describe(),
            "gemm (PROBE, STORE, JOB, RELEASE, STATS_REQUEST, FORWARD_SETUP, SEND_TILE, BLOCK_QUERY, BLOCK_LOAD; from peers: "
            "FORWARD_SETUP, STORE); graph (GRAPH_LOAD, GRAPH_START, GRAPH_STEP, "
            "GRAPH_PROGRESS_REQUEST, GRAPH_VALUES_REQUEST, GRAPH_STOP; from peers: GRAPH_PEER_HELLO, GRAPH_DELTAS); "
            "graph-probe (GRAPH_PROBE)");
}

TEST_F(WorkerServerTest, V1CoordinatorIsToldBothVersionsInItsOwnFraming) {
  Session connection = connect();
  ASSERT_TRUE(connection);
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<tp::Hello>(*connection, frame));
  // What a v1 coordinator would send if it got this far: AUTH in a v1 header.
  tp::FrameHeader v1_header;
  v1_header.version = 1;
  v1_header.type = static_cast<uint16_t>(tp::MessageType::kAuth);
  const std::vector<std::byte> auth = tp::encode_payload(tp::Auth{});
  const std::array<asio::const_buffer, 1> payload{asio::buffer(auth)};
  ASSERT_TRUE(connection->write_frame(v1_header, payload).is_ok());

  std::array<std::byte, tp::kHeaderSize> reply_header{};
  ASSERT_TRUE(connection->read_exact(reply_header).is_ok());
  EXPECT_EQ(tp::foreign_protocol_version(reply_header), std::optional<uint16_t>(1));
  uint64_t length = 0;
  std::memcpy(&length, reply_header.data() + 16, sizeof length);  // the host is little-endian
  ASSERT_LE(length, 4096u);
  std::vector<std::byte> reply(length);
  ASSERT_TRUE(connection->read_exact(reply).is_ok());
  auto error = tp::decode_payload(static_cast<uint16_t>(tp::MessageType::kError), reply, tp::Limits{});
  ASSERT_TRUE(error) << error.status().to_string();
  EXPECT_EQ(std::get<tp::Error>(*error).message, "peer speaks Tessera protocol v1, this build speaks v2");
  EXPECT_TRUE(connection.closed_by_worker());
  EXPECT_TRUE(open_session()) << "the worker must accept the next (v2) coordinator";
}

TEST_F(WorkerServerTest, WrongSecretIsRefused) {
  Session connection = connect();
  ASSERT_TRUE(connection);
  const Status handshake = connection.handshake("not the secret");
  ASSERT_FALSE(handshake.is_ok());
  EXPECT_EQ(handshake.code(), StatusCode::kAuthFailed) << handshake.to_string();
  // The worker is free again for the real coordinator.
  EXPECT_TRUE(open_session());
}

TEST_F(WorkerSessionTest, StreamedPanelsAccumulateIntoTheExactProduct) {
  const Dense a = Dense::integers(3, 5, 1);
  const Dense b = Dense::integers(5, 4, 2);
  const Dense expected = testing::multiply(a, b);
  // B travels as two k-panels (rows 0..1 and 2..4); each job adds its panel's product into C.
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {10, b.rows_range(0, 2)}, {11, b.rows_range(2, 3)}}));
  ASSERT_TRUE(gemm::write_message(*session_, creating_output(gemm_job(100, 1, 10, 50, 3, 4, 2, gemm::kJobReleaseB), 3, 4), 7)
                  .is_ok());
  auto second = gemm_job(101, 1, 11, 50, 3, 4, 3, gemm::kJobReleaseB | gemm::kJobSendResult);
  second.a_col = 2;
  ASSERT_TRUE(gemm::write_message(*session_, second, 8).is_ok());

  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 100u);
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).credits, 1u);
  EXPECT_EQ(frame.header.request_id, 7u);
  const double first_seconds = std::get<gemm::Credit>(frame.message).compute_seconds;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 101u);
  const double second_seconds = std::get<gemm::Credit>(frame.message).compute_seconds;
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  EXPECT_EQ(result.job_id, 101u);
  EXPECT_EQ(frame.header.request_id, 8u);
  EXPECT_EQ(result.tile, (gemm::TilePrefix{50, 3, 4, gemm::tile_crc32c(expected.values)}));
  EXPECT_DOUBLE_EQ(result.compute_seconds, first_seconds + second_seconds);
  ASSERT_EQ(result.data.size(), expected.values.size());
  for (std::size_t i = 0; i < expected.values.size(); ++i) EXPECT_EQ(result.data[i], expected.values[i]) << i;

  // kJobReleaseB dropped both panels; A is still there. Referencing a panel is now an error.
  ASSERT_TRUE(gemm::write_message(*session_, gemm_job(102, 1, 10, 50, 3, 4, 2)).is_ok());
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kNoSuchTile));
  EXPECT_TRUE(session_.closed_by_worker());
}

TEST_F(WorkerSessionTest, JobsOnSubRectanglesOfLargerTiles) {
  const Dense a = Dense::integers(6, 7, 3);
  const Dense b = Dense::integers(8, 9, 4);
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, b}}));
  // C[1:4, 2:7] += A[2:5, 1:5] * B[3:7, 4:9], inside a 5 x 8 output tile.
  const gemm::Job job = placed(creating_output(gemm_job(1, 1, 2, 3, 3, 5, 4, gemm::kJobSendResult), 5, 8),
                               {.a_row = 2, .a_col = 1, .b_row = 3, .b_col = 4, .c_row = 1, .c_col = 2});
  ASSERT_TRUE(gemm::write_message(*session_, job).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  ASSERT_EQ(result.data.size(), 40u);
  for (uint32_t i = 0; i < 5; ++i)
    for (uint32_t j = 0; j < 8; ++j) {
      double expected = 0.0;
      if (i >= 1 && i < 4 && j >= 2 && j < 7)
        for (uint32_t p = 0; p < 4; ++p) expected += a.at(i - 1 + 2, 1 + p) * b.at(3 + p, j - 2 + 4);
      EXPECT_EQ(result.data[i * 8 + j], expected) << i << "," << j;
    }
  ASSERT_TRUE(say_bye(*session_));
}

TEST_F(WorkerSessionTest, JobOutsideItsTileGetsBadJobAndEndsTheSession) {
  ASSERT_TRUE(store_tiles(*session_, {{1, Dense::integers(3, 5, 0)}, {2, Dense::integers(5, 4, 0)}}));
  // k = 6 > A's 5 columns
  ASSERT_TRUE(gemm::write_message(*session_, creating_output(gemm_job(9, 1, 2, 3, 3, 4, 6), 3, 4)).is_ok());
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kBadJob, "job 9"));
  EXPECT_TRUE(session_.closed_by_worker());
  EXPECT_TRUE(open_session()) << "the worker must accept the next session";
}

TEST_F(WorkerServerTest, InvalidJobsAreRejected) {
  struct Case {
    const char* name;
    gemm::Job job;
    tp::ErrorCode code;
  };
  const gemm::Job ok = gemm_job(1, 1, 2, 3, 3, 4, 5);
  const Case cases[] = {
      {"m zero", edited(ok, [](gemm::Job& j) { j.m = 0; }), tp::ErrorCode::kBadJob},
      {"no such A", edited(ok, [](gemm::Job& j) { j.a_tile = 77; }), tp::ErrorCode::kNoSuchTile},
      {"no such C", ok, tp::ErrorCode::kNoSuchTile},
      {"C aliases A", edited(ok, [](gemm::Job& j) { j.c_tile = 1; }), tp::ErrorCode::kBadJob},
      {"B overflow", edited(ok, [](gemm::Job& j) { j.b_col = 0xFFFFFFFF; }), tp::ErrorCode::kBadJob},
      {"C rect outside created tile", creating_output(ok, 3, 3), tp::ErrorCode::kBadJob},
      {"created tile over the cap", creating_output(ok, 1000, 1000), tp::ErrorCode::kOutOfMemory},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_job_refused({{1, Dense::integers(3, 5, 0)}, {2, Dense::integers(5, 4, 0)}}, c.job, c.code);
  }
}

// A 1x1 tile holding `value`: how the coordinator stores an expression's scalars.
Dense scalar(double value) {
  Dense s(1, 1);
  s.at(0, 0) = value;
  return s;
}

// (3 A - A2) B computed as an expression is: C = 3 A (created), C += -1 A2, D = C B. The sum
// never leaves the worker, and the product must see both additions (jobs run in order).
TEST_F(WorkerSessionTest, AddScaledSumsStayOnTheWorkerAndFeedAProduct) {
  EXPECT_NE(session_.hello().capabilities & tp::kCapabilityExpression, 0u)
      << tp::capability_names(session_.hello().capabilities);
  const Dense a = Dense::integers(3, 4, 1);
  const Dense a2 = Dense::integers(3, 4, 5);
  const Dense b = Dense::integers(4, 2, 2);
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, a2}, {3, b}, {5, scalar(3.0)}, {6, scalar(-1.0)}}));

  ASSERT_TRUE(gemm::write_message(*session_, creating_output(add_scaled_job(200, 1, 5, 10, 3, 4), 3, 4), 1).is_ok());
  // The difference's result is sent too, so the sum itself is checked, not only the product.
  ASSERT_TRUE(gemm::write_message(*session_, add_scaled_job(201, 2, 6, 10, 3, 4, gemm::kJobSendResult), 2).is_ok());
  const gemm::Job product =
      creating_output(gemm_job(202, 10, 3, 11, 3, 2, 4, gemm::kJobReleaseA | gemm::kJobSendResult), 3, 2);
  ASSERT_TRUE(gemm::write_message(*session_, product, 3).is_ok());

  Dense difference(3, 4);
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t j = 0; j < 4; ++j) difference.at(i, j) = 3.0 * a.at(i, j) - a2.at(i, j);
  const Dense expected = testing::multiply(difference, b);

  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 200u);
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).credits, 1u);
  EXPECT_EQ(frame.header.request_id, 1u);
  const double first_seconds = std::get<gemm::Credit>(frame.message).compute_seconds;
  EXPECT_GE(first_seconds, 0.0);
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 201u);
  const double second_seconds = std::get<gemm::Credit>(frame.message).compute_seconds;
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  {
    const auto& result = std::get<gemm::ResultTile>(frame.message);
    EXPECT_EQ(result.job_id, 201u);
    EXPECT_EQ(frame.header.request_id, 2u);
    EXPECT_EQ(result.tile, (gemm::TilePrefix{10, 3, 4, gemm::tile_crc32c(difference.values)}));
    EXPECT_DOUBLE_EQ(result.compute_seconds, first_seconds + second_seconds);
    ASSERT_EQ(result.data.size(), difference.values.size());
    for (std::size_t i = 0; i < difference.values.size(); ++i) EXPECT_EQ(result.data[i], difference.values[i]) << i;
  }
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 202u);
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  {
    const auto& result = std::get<gemm::ResultTile>(frame.message);
    EXPECT_EQ(result.job_id, 202u);
    EXPECT_EQ(frame.header.request_id, 3u);
    EXPECT_EQ(result.tile, (gemm::TilePrefix{11, 3, 2, gemm::tile_crc32c(expected.values)}));
    ASSERT_EQ(result.data.size(), expected.values.size());
    for (std::size_t i = 0; i < expected.values.size(); ++i) EXPECT_EQ(result.data[i], expected.values[i]) << i;
  }

  ASSERT_TRUE(gemm::write_message(*session_, gemm::StatsRequest{}, 4).is_ok());
  ASSERT_TRUE(read_expect<gemm::Stats>(*session_, frame));
  EXPECT_EQ(std::get<gemm::Stats>(frame.message).jobs, 3u) << "ADD_SCALED jobs count like GEMM jobs";

  // kJobReleaseA on the product dropped the sum's tile 10; the operands are still there.
  ASSERT_TRUE(gemm::write_message(*session_, add_scaled_job(203, 10, 5, 12, 3, 4)).is_ok());
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kNoSuchTile, "job 203: a_tile 10 is not stored"));
  EXPECT_TRUE(session_.closed_by_worker());
}

// A scaled block inside larger tiles: C[1:3, 2:6] += B[1][2] * A[2:4, 1:5] in a new 4 x 7 C (the
// rest stays zero), the scalar taken from inside a 2 x 3 tile; then the scalar's tile released
// by kJobReleaseB, so the next job naming it is refused.
TEST_F(WorkerSessionTest, AddScaledOnSubRectanglesReadsTheScalarAtItsPosition) {
  const Dense a = Dense::integers(5, 6, 3);
  Dense b(2, 3);
  for (uint32_t i = 0; i < 2; ++i)
    for (uint32_t j = 0; j < 3; ++j) b.at(i, j) = 10.0 * i + j + 1;  // every entry differs
  b.at(1, 2) = -2.0;
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, b}}));
  gemm::Job job = placed(creating_output(add_scaled_job(1, 1, 2, 3, 2, 4, gemm::kJobReleaseB | gemm::kJobSendResult), 4, 7),
                         {.a_row = 2, .a_col = 1, .b_row = 1, .b_col = 2, .c_row = 1, .c_col = 2});
  ASSERT_TRUE(gemm::write_message(*session_, job).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  ASSERT_EQ(result.data.size(), 28u);
  for (uint32_t i = 0; i < 4; ++i)
    for (uint32_t j = 0; j < 7; ++j) {
      const bool inside = i >= 1 && i < 3 && j >= 2 && j < 6;
      const double expected = inside ? -2.0 * a.at(i - 1 + 2, j - 2 + 1) : 0.0;
      EXPECT_EQ(result.data[i * 7 + j], expected) << i << "," << j;
    }
  job.flags = 0;
  job.job_id = 2;
  ASSERT_TRUE(gemm::write_message(*session_, job).is_ok());
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kNoSuchTile));
  EXPECT_TRUE(session_.closed_by_worker());
}

TEST_F(WorkerServerTest, InvalidAddScaledJobsAreRejected) {
  struct Case {
    const char* name;
    gemm::Job job;
    tp::ErrorCode code;
    const char* reason;
  };
  // Stored: A 3 x 4 (tile 1), the scalar 1 x 1 (tile 2), C 3 x 4 (tile 3).
  const Tiles tiles = {{1, Dense::integers(3, 4, 0)}, {2, scalar(2.0)}, {3, Dense::integers(3, 4, 1)}};
  const gemm::Job ok = add_scaled_job(1, 1, 2, 3, 3, 4);
  const Case cases[] = {
      {"scalar row outside B", edited(ok, [](gemm::Job& j) { j.b_row = 1; }), tp::ErrorCode::kBadJob,
       "scalar at row 1, col 0 lies outside b_tile 2 (1 x 1)"},
      {"scalar col outside B", edited(ok, [](gemm::Job& j) { j.b_col = 1; }), tp::ErrorCode::kBadJob,
       "lies outside b_tile 2"},
      {"A rect outside A", edited(ok, [](gemm::Job& j) { j.a_col = 1; }), tp::ErrorCode::kBadJob,
       "A rows 0+3, cols 1+4 lie outside a_tile 1 (3 x 4)"},
      {"A rows outside A", edited(creating_output(ok, 4, 4), [](gemm::Job& j) { j.m = 4; }), tp::ErrorCode::kBadJob,
       "lie outside a_tile 1"},
      {"C rect outside C", edited(ok, [](gemm::Job& j) { j.c_row = 1; j.m = 3; j.a_row = 0; }), tp::ErrorCode::kBadJob,
       "C rows 1+3, cols 0+4 lie outside c_tile 3 (3 x 4)"},
      {"k not zero", edited(ok, [](gemm::Job& j) { j.k = 1; }), tp::ErrorCode::kBadJob, "k 1 must be 0 for op 2"},
      {"unknown op", edited(ok, [](gemm::Job& j) { j.op = static_cast<gemm::JobOp>(3); }), tp::ErrorCode::kBadJob,
       "op 3 unknown"},
      {"C aliases A", edited(ok, [](gemm::Job& j) { j.c_tile = 1; }), tp::ErrorCode::kBadJob, "must differ"},
      {"C aliases the scalar", edited(creating_output(ok, 3, 4), [](gemm::Job& j) { j.c_tile = 2; }),
       tp::ErrorCode::kBadJob, "must differ"},
      {"no such A", edited(ok, [](gemm::Job& j) { j.a_tile = 77; }), tp::ErrorCode::kNoSuchTile, "a_tile 77 is not stored"},
      {"no such scalar", edited(ok, [](gemm::Job& j) { j.b_tile = 78; }), tp::ErrorCode::kNoSuchTile,
       "b_tile 78 is not stored"},
      {"no such C", edited(ok, [](gemm::Job& j) { j.c_tile = 79; }), tp::ErrorCode::kNoSuchTile, "c_tile 79 is not stored"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_job_refused(tiles, c.job, c.code, c.reason);
  }
}

// Reads the CREDIT and RESULT of job `job_id` and expects the result to be `expected` exactly.
::testing::AssertionResult read_exact_result(tp::FrameConnection& connection, uint64_t job_id, const Dense& expected) {
  testing::AnyFrame frame;
  if (auto credit = read_expect<gemm::Credit>(connection, frame); !credit) return credit;
  if (std::get<gemm::Credit>(frame.message).job_id != job_id) {
    return ::testing::AssertionFailure() << "CREDIT for job " << std::get<gemm::Credit>(frame.message).job_id;
  }
  if (auto read = read_expect<gemm::ResultTile>(connection, frame); !read) return read;
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  if (result.job_id != job_id || result.tile.rows != expected.rows || result.tile.cols != expected.cols) {
    return ::testing::AssertionFailure() << "RESULT of job " << result.job_id << ", " << result.tile.rows << " x "
                                         << result.tile.cols;
  }
  for (std::size_t i = 0; i < expected.values.size(); ++i) {
    if (result.data[i] != expected.values[i]) {
      return ::testing::AssertionFailure() << "job " << job_id << ": entry " << i / expected.cols << ","
                                           << i % expected.cols << " is " << result.data[i] << ", not "
                                           << expected.values[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// op(X)[i][p] of the block at (row, col) of a stored tile, read as stored or transposed.
double op_at(const Dense& x, bool transposed, uint32_t row, uint32_t col, uint32_t i, uint32_t p) {
  return transposed ? x.at(row + p, col + i) : x.at(row + i, col + p);
}

// C[1:4, 2:7] += op(A) * op(B) in a new 5 x 8 C, the blocks at offsets inside larger tiles:
// op(A) = A[2:6, 1:4]^T (A's block k x m = 4 x 3) or A[2:5, 1:5]; op(B) = B[3:8, 4:8]^T (n x k
// = 5 x 4) or B[3:7, 4:9]. The same two stored tiles serve every combination.
TEST_F(WorkerSessionTest, TransposedOperandsOnSubRectanglesGiveTheExactProduct) {
  EXPECT_NE(session_.hello().capabilities & tp::kCapabilityTransposedJobs, 0u)
      << tp::capability_names(session_.hello().capabilities);
  const Dense a = Dense::integers(7, 6, 3);
  const Dense b = Dense::integers(8, 9, 4);
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, b}}));
  constexpr uint32_t m = 3, n = 5, k = 4;
  const uint32_t flag_sets[] = {gemm::kJobTransposeA, gemm::kJobTransposeB, gemm::kJobTransposeA | gemm::kJobTransposeB};
  uint64_t job_id = 1;
  for (uint32_t flags : flag_sets) {
    SCOPED_TRACE(flags);
    const bool transpose_a = (flags & gemm::kJobTransposeA) != 0;
    const bool transpose_b = (flags & gemm::kJobTransposeB) != 0;
    const gemm::Job job =
        placed(creating_output(gemm_job(job_id, 1, 2, 10 + static_cast<uint32_t>(job_id), m, n, k, flags | gemm::kJobSendResult), 5, 8),
               {.a_row = 2, .a_col = 1, .b_row = 3, .b_col = 4, .c_row = 1, .c_col = 2});
    ASSERT_TRUE(gemm::write_message(*session_, job).is_ok());
    Dense expected(5, 8);
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j)
        for (uint32_t p = 0; p < k; ++p)
          expected.at(1 + i, 2 + j) += op_at(a, transpose_a, 2, 1, i, p) * op_at(b, transpose_b, 3, 4, p, j);
    EXPECT_TRUE(read_exact_result(*session_, job_id, expected));
    ++job_id;
  }
  ASSERT_TRUE(say_bye(*session_));
}

// The HITS pattern, (A' A) h, with A sent once: A' A is one job naming A's tile as both operands,
// the first read transposed; its product then feeds a plain GEMM by h, which releases A.
TEST_F(WorkerSessionTest, ATransposeATimesHReadsOneStoredA) {
  const Dense a = Dense::integers(6, 4, 2);
  const Dense h = Dense::integers(4, 1, 5);
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, h}}));
  const gemm::Job gram = creating_output(gemm_job(1, 1, 1, 10, 4, 4, 6, gemm::kJobTransposeA | gemm::kJobSendResult), 4, 4);
  ASSERT_TRUE(gemm::write_message(*session_, gram).is_ok());
  const gemm::Job times_h = creating_output(gemm_job(2, 10, 2, 11, 4, 1, 4, gemm::kJobSendResult), 4, 1);
  ASSERT_TRUE(gemm::write_message(*session_, times_h).is_ok());
  const Dense expected_gram = testing::multiply(testing::transpose(a), a);
  EXPECT_TRUE(read_exact_result(*session_, 1, expected_gram));
  EXPECT_TRUE(read_exact_result(*session_, 2, testing::multiply(expected_gram, h)));
  ASSERT_TRUE(say_bye(*session_));
}

// ADD_SCALED with A^T: C[1:3, 2:6] += B[1][2] * A[1:5, 2:4]^T (A's block n x m = 4 x 2) in a new
// 4 x 7 C; then S - S' of a square tile from a sum and a transposed difference, which must come
// out antisymmetric.
TEST_F(WorkerSessionTest, AddScaledWithATransposedOnSubRectangles) {
  const Dense a = Dense::integers(6, 5, 3);
  Dense b(2, 3);
  b.at(1, 2) = -2.0;
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, b}}));
  const gemm::Job job =
      placed(creating_output(add_scaled_job(1, 1, 2, 3, 2, 4, gemm::kJobTransposeA | gemm::kJobSendResult), 4, 7),
             {.a_row = 1, .a_col = 2, .b_row = 1, .b_col = 2, .c_row = 1, .c_col = 2});
  ASSERT_TRUE(gemm::write_message(*session_, job).is_ok());
  Dense expected(4, 7);
  for (uint32_t i = 0; i < 2; ++i)
    for (uint32_t j = 0; j < 4; ++j) expected.at(1 + i, 2 + j) = -2.0 * a.at(1 + j, 2 + i);
  EXPECT_TRUE(read_exact_result(*session_, 1, expected));

  const Dense s = Dense::integers(5, 5, 1);
  ASSERT_TRUE(store_tiles(*session_, {{4, s}, {5, scalar(1.0)}, {6, scalar(-1.0)}}));
  ASSERT_TRUE(gemm::write_message(*session_, creating_output(add_scaled_job(2, 4, 5, 7, 5, 5), 5, 5)).is_ok());
  ASSERT_TRUE(gemm::write_message(*session_, add_scaled_job(3, 4, 6, 7, 5, 5, gemm::kJobTransposeA | gemm::kJobSendResult))
                  .is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  Dense antisymmetric(5, 5);
  for (uint32_t i = 0; i < 5; ++i)
    for (uint32_t j = 0; j < 5; ++j) antisymmetric.at(i, j) = s.at(i, j) - s.at(j, i);
  EXPECT_TRUE(read_exact_result(*session_, 3, antisymmetric));
  EXPECT_NE(antisymmetric.values, Dense(5, 5).values) << "S must not be symmetric, or the test proves nothing";
  ASSERT_TRUE(say_bye(*session_));
}

TEST_F(WorkerServerTest, InvalidTransposedJobsAreRejected) {
  struct Case {
    const char* name;
    gemm::Job job;
    const char* reason;
  };
  // Stored: A 5 x 3 (tile 1), B 4 x 5 (tile 2), C 3 x 4 (tile 3), a scalar (tile 4), C 3 x 5
  // (tile 5). C[3 x 4] += A^T B^T with k = 5 fits them exactly, as does C[3 x 5] += s A^T.
  const Tiles tiles = {{1, Dense::integers(5, 3, 0)}, {2, Dense::integers(4, 5, 1)}, {3, Dense::integers(3, 4, 2)},
                       {4, scalar(2.0)}, {5, Dense::integers(3, 5, 3)}};
  const gemm::Job ok = gemm_job(1, 1, 2, 3, 3, 4, 5, gemm::kJobTransposeA | gemm::kJobTransposeB);
  const gemm::Job ok_sum = add_scaled_job(2, 1, 4, 5, 3, 5, gemm::kJobTransposeA);
  const Case cases[] = {
      {"A^T rows run over k", edited(ok, [](gemm::Job& j) { j.a_row = 1; }),
       "A rows 1+5, cols 0+3 (read transposed) lie outside a_tile 1 (5 x 3)"},
      {"A^T cols run over m", edited(ok, [](gemm::Job& j) { j.a_col = 1; }),
       "A rows 0+5, cols 1+3 (read transposed) lie outside a_tile 1 (5 x 3)"},
      {"A read as stored does not fit", edited(ok, [](gemm::Job& j) { j.flags = gemm::kJobTransposeB; }),
       "A rows 0+3, cols 0+5 lie outside a_tile 1 (5 x 3)"},
      {"B^T rows run over n", edited(ok, [](gemm::Job& j) { j.b_row = 1; }),
       "B rows 1+4, cols 0+5 (read transposed) lie outside b_tile 2 (4 x 5)"},
      {"B^T cols run over k", edited(ok, [](gemm::Job& j) { j.b_col = 1; }),
       "B rows 0+4, cols 1+5 (read transposed) lie outside b_tile 2 (4 x 5)"},
      {"B read as stored does not fit", edited(ok, [](gemm::Job& j) { j.flags = gemm::kJobTransposeA; }),
       "B rows 0+5, cols 0+4 lie outside b_tile 2 (4 x 5)"},
      {"ADD_SCALED A^T rows run over n", edited(ok_sum, [](gemm::Job& j) { j.a_row = 1; }),
       "A rows 1+5, cols 0+3 (read transposed) lie outside a_tile 1 (5 x 3)"},
      {"ADD_SCALED A^T cols run over m", edited(ok_sum, [](gemm::Job& j) { j.a_col = 1; }),
       "A rows 0+5, cols 1+3 (read transposed) lie outside a_tile 1 (5 x 3)"},
      {"ADD_SCALED refuses B^T", edited(ok_sum, [](gemm::Job& j) { j.flags |= gemm::kJobTransposeB; }),
       "set transpose_b 0x00000020, which op 2 (add_scaled) refuses"},
      {"unknown flag bit 6", edited(ok, [](gemm::Job& j) { j.flags |= 1u << 6; }), "has unknown bits 0x00000040"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_job_refused(tiles, c.job, tp::ErrorCode::kBadJob, c.reason);
  }
  // The jobs the cases bend are valid as they stand.
  Session session = open_session();
  ASSERT_TRUE(session);
  ASSERT_TRUE(store_tiles(*session, tiles));
  ASSERT_TRUE(gemm::write_message(*session, ok).is_ok());
  ASSERT_TRUE(gemm::write_message(*session, ok_sum).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 1u);
  ASSERT_TRUE(read_expect<gemm::Credit>(*session, frame));
  EXPECT_EQ(std::get<gemm::Credit>(frame.message).job_id, 2u);
}

// Three compute threads and room for real sizes: a transposed job's rows of C split over every
// thread (GEMM strips take columns of the stored A, sum strips walk A's columns in blocks).
class WorkerServerSplitTest : public WorkerSessionTest {
 protected:
  uint64_t cap_bytes() const override { return 16ull << 20; }
  uint32_t threads() const override { return 3; }
  std::chrono::seconds deadline() const override { return 120s; }
};

TEST_F(WorkerServerSplitTest, TransposedJobsSplitOverEveryComputeThread) {
  ASSERT_EQ(session_.hello().threads, 3u);
  // GEMM: m = 101 rows of C (not divisible by 3) from the stored 53 x 101 A, read as A^T, times B
  // as stored and then times B^T.
  const Dense a = Dense::integers(53, 101, 1);
  const Dense b = Dense::integers(53, 37, 2);
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, b}, {3, testing::transpose(b)}}));
  const gemm::Job plain_b =
      creating_output(gemm_job(1, 1, 2, 10, 101, 37, 53, gemm::kJobTransposeA | gemm::kJobSendResult), 101, 37);
  auto both = plain_b;
  both.job_id = 2;
  both.b_tile = 3;
  both.c_tile = 11;
  both.flags |= gemm::kJobTransposeB;
  ASSERT_TRUE(gemm::write_message(*session_, plain_b).is_ok());
  ASSERT_TRUE(gemm::write_message(*session_, both).is_ok());
  const Dense product = testing::multiply(testing::transpose(a), b);
  EXPECT_TRUE(read_exact_result(*session_, 1, product));
  EXPECT_TRUE(read_exact_result(*session_, 2, product));

  // ADD_SCALED: C (301 x 401) = -3 A^T from the stored 401 x 301 A, enough entries for a strip
  // per thread; then C += 2 A^T onto it, so the sum reads the C the first job wrote.
  const Dense big = Dense::integers(401, 301, 3);
  ASSERT_TRUE(store_tiles(*session_, {{4, big}, {5, scalar(-3.0)}, {6, scalar(2.0)}}));
  ASSERT_GE(301u * 401u / AddScaledRowStrips::kMinStripEntries, 3u);
  const gemm::Job scaled =
      creating_output(add_scaled_job(3, 4, 5, 12, 301, 401, gemm::kJobTransposeA | gemm::kJobSendResult), 301, 401);
  ASSERT_TRUE(gemm::write_message(*session_, scaled).is_ok());
  ASSERT_TRUE(gemm::write_message(*session_, add_scaled_job(4, 4, 6, 12, 301, 401, gemm::kJobTransposeA | gemm::kJobSendResult))
                  .is_ok());
  const Dense big_t = testing::transpose(big);
  Dense times_minus_three(301, 401), times_minus_one(301, 401);
  for (std::size_t i = 0; i < big_t.values.size(); ++i) {
    times_minus_three.values[i] = -3.0 * big_t.values[i];
    times_minus_one.values[i] = -1.0 * big_t.values[i];
  }
  EXPECT_TRUE(read_exact_result(*session_, 3, times_minus_three));
  EXPECT_TRUE(read_exact_result(*session_, 4, times_minus_one));
  ASSERT_TRUE(say_bye(*session_));
}

TEST_F(WorkerSessionTest, SecondConcurrentConnectionIsBusy) {
  // The worker claims the session slot just after sending AUTH_OK; one answered request proves
  // the claim has happened, so the intruder below arrives at an active session.
  gemm::Probe echo;
  echo.kind = gemm::ProbeKind::kEcho;
  echo.echo = {1, 2, 3};
  ASSERT_TRUE(gemm::write_message(*session_, echo).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::ProbeResult>(*session_, frame));
  EXPECT_EQ(std::get<gemm::ProbeResult>(frame.message).echo, (std::vector<uint8_t>{1, 2, 3}));

  Session intruder = connect();
  ASSERT_TRUE(intruder);
  EXPECT_TRUE(read_error_saying(*intruder, tp::ErrorCode::kBusy, "busy"));
  EXPECT_TRUE(intruder.closed_by_worker());
  // The first session is unaffected.
  echo.echo = {4, 5};
  ASSERT_TRUE(gemm::write_message(*session_, echo).is_ok());
  ASSERT_TRUE(read_expect<gemm::ProbeResult>(*session_, frame));
  EXPECT_EQ(std::get<gemm::ProbeResult>(frame.message).echo, (std::vector<uint8_t>{4, 5}));
}

TEST_F(WorkerSessionTest, StoreBeyondTheCapIsOutOfMemory) {
  ASSERT_TRUE(store_tile(*session_, 1, Dense(64, 100)).is_ok());  // 51200 of 65536 bytes
  (void)store_tile(*session_, 2, Dense(32, 100));                // another 25600: over the cap
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kOutOfMemory, "cap"));
}

TEST_F(WorkerSessionTest, SingleStoreLargerThanTheCapIsOutOfMemory) {
  (void)store_tile(*session_, 1, Dense(100, 100));  // 80000 bytes > 65536
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kOutOfMemory));
}

TEST_F(WorkerSessionTest, StoreWithDamagedDataIsRefusedAsCorruptAndNotKept) {
  const Dense tile = Dense::integers(4, 6, 3);
  const gemm::TilePrefix prefix{1, tile.rows, tile.cols, gemm::tile_crc32c(tile.values) ^ 0x1u};
  const auto prefix_bytes = gemm::encode_store_prefix(prefix);
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix_bytes),
                                                asio::buffer(tile.values.data(), tile.values.size() * sizeof(double))};
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(tp::MessageType::kStore);
  ASSERT_TRUE(session_->write_frame(header, parts).is_ok());
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kCorrupt, "STORE tile 1 (4 x 6): checksum mismatch"));
  // The session ends, and the worker empties its store whenever one does: nothing of it is kept.
  EXPECT_TRUE(session_.closed_by_worker());
}

// An echo PROBE's bytes go to memory charged to the tile cap before it exists: a header claiming
// more echo than the cap is refused without reading (or allocating) it, and one within the cap
// comes back unchanged.
TEST_F(WorkerSessionTest, ProbeEchoIsChargedToTheTileCap) {
  gemm::Probe echo{gemm::ProbeKind::kEcho, 0, 0.0, std::vector<uint8_t>(1000)};
  for (std::size_t i = 0; i < echo.echo.size(); ++i) echo.echo[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(gemm::write_message(*session_, echo, 5).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::ProbeResult>(*session_, frame));
  EXPECT_EQ(frame.header.request_id, 5u);
  EXPECT_EQ(std::get<gemm::ProbeResult>(frame.message).echo, echo.echo);
  // An orderly end, answered, so the worker is free before the next session connects (a bare
  // close is noticed a moment later, and a session opened in that moment is refused as busy).
  ASSERT_TRUE(say_bye(*session_));

  Session next = open_session();
  ASSERT_TRUE(next);
  const uint32_t claimed = 4 * kCapBytes;  // within Limits::max_echo_bytes, beyond the cap
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(tp::MessageType::kProbe);
  header.payload_length = gemm::kProbeFixedBytes + claimed;
  std::array<std::byte, gemm::kProbeFixedBytes> fixed{};
  for (int i = 0; i < 4; ++i) fixed[16 + static_cast<std::size_t>(i)] = static_cast<std::byte>(claimed >> (8 * i));
  const auto header_bytes = tp::encode_header(header);
  const std::array<asio::const_buffer, 2> parts{asio::buffer(header_bytes), asio::buffer(fixed)};
  ASSERT_TRUE(next->write_buffers(parts).is_ok());
  EXPECT_TRUE(read_error_saying(*next, tp::ErrorCode::kOutOfMemory, "PROBE echo of 262144 bytes"));
}

TEST_F(WorkerSessionTest, NextSessionStartsWithAnEmptyStore) {
  ASSERT_TRUE(store_tile(*session_, 1, Dense::integers(3, 5, 0)).is_ok());
  ASSERT_TRUE(say_bye(*session_));

  Session next = open_session();
  ASSERT_TRUE(next);
  ASSERT_TRUE(store_tile(*next, 2, Dense::integers(5, 4, 0)).is_ok());
  ASSERT_TRUE(gemm::write_message(*next, creating_output(gemm_job(1, 1, 2, 3, 3, 4, 5), 3, 4)).is_ok());
  EXPECT_TRUE(read_error(*next, tp::ErrorCode::kNoSuchTile));
}

TEST_F(WorkerSessionTest, ReleaseDropsTiles) {
  ASSERT_TRUE(store_tiles(*session_, {{1, Dense::integers(3, 5, 0)}, {2, Dense::integers(5, 4, 0)}}));
  ASSERT_TRUE(gemm::write_message(*session_, gemm::Release{{1, 99}}).is_ok());
  ASSERT_TRUE(gemm::write_message(*session_, creating_output(gemm_job(1, 1, 2, 3, 3, 4, 5), 3, 4)).is_ok());
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kNoSuchTile));
}

TEST_F(WorkerSessionTest, GemmProbeReportsSpeed) {
  gemm::Probe probe;
  probe.kind = gemm::ProbeKind::kGemm;
  probe.size = 48;  // 3 x 18 KiB of scratch fits the 64 KiB cap
  probe.min_seconds = 0.05;
  ASSERT_TRUE(gemm::write_message(*session_, probe, 3).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::ProbeResult>(*session_, frame));
  const auto& result = std::get<gemm::ProbeResult>(frame.message);
  EXPECT_EQ(result.kind, gemm::ProbeKind::kGemm);
  EXPECT_EQ(result.size, 48u);
  EXPECT_GE(result.repetitions, 1u);
  EXPECT_GE(result.seconds, 0.05);
  EXPECT_GT(result.gflops, 0.0);
  EXPECT_EQ(frame.header.request_id, 3u);

  probe.size = 64;  // scratch beyond the cap
  ASSERT_TRUE(gemm::write_message(*session_, probe).is_ok());
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kOutOfMemory));
}

// Issue 40: a probe no core could finish a repetition of within kProbeRepetitionSeconds is
// refused before its matrices are allocated (this worker's 64 KiB cap would otherwise answer out
// of memory), naming the size and the bound for its thread count.
TEST_F(WorkerSessionTest, AGemmProbeBeyondTheThreadsBoundIsRefusedBeforeAllocating) {
  gemm::Probe probe;
  probe.kind = gemm::ProbeKind::kGemm;
  probe.size = 8192;  // within Limits::max_probe_size
  probe.min_seconds = 0.05;
  ASSERT_TRUE(gemm::write_message(*session_, probe).is_ok());
  std::string message;
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kBadFrame, &message));
  EXPECT_NE(message.find("GEMM probe of size 8192 refused"), std::string::npos) << message;
  EXPECT_NE(message.find("on 2 compute threads"), std::string::npos) << message;
  EXPECT_NE(message.find("up to size 7937"), std::string::npos) << message;
  EXPECT_TRUE(session_.closed_by_worker());
}

TEST(GemmProbeBound, GrowsWithTheThreadsUpToTheProtocolLimit) {
  EXPECT_EQ(gemm_probe_size_bound(1, 8192), 6299u);
  EXPECT_EQ(gemm_probe_size_bound(0, 8192), 6299u);  // 0 threads counts as one
  EXPECT_EQ(gemm_probe_size_bound(2, 8192), 7937u);
  EXPECT_EQ(gemm_probe_size_bound(3, 8192), 8192u);
  EXPECT_EQ(gemm_probe_size_bound(64, 8192), 8192u);
  EXPECT_EQ(gemm_probe_size_bound(1, 1024), 1024u);
  for (uint32_t threads : {1u, 2u, 3u, 7u, 16u}) {
    const double bound = gemm_probe_size_bound(threads, 1u << 20);
    const double most = threads * kProbeFastestThreadFlops * kProbeRepetitionSeconds;
    EXPECT_LE(2.0 * bound * bound * bound, most) << threads;
    EXPECT_GT(2.0 * (bound + 1) * (bound + 1) * (bound + 1), most) << threads;
  }
  // The coordinator's own probes (up to 2048) are never refused by it.
  EXPECT_GE(gemm_probe_size_bound(1, 8192), 2048u);
}

// The frame header bounds a JOB only by the frame limit now; its layout is the GEMM codec's. A
// length no JOB has is refused all the same and ends the session: a claim beyond the control
// payload bound before anything is read or allocated, a few bytes too many by the codec.
TEST_F(WorkerServerTest, AJobOfALengthItsLayoutCannotHaveIsRefused) {
  struct Case {
    std::size_t length;
    tp::ErrorCode code;
    const char* reason;
  };
  // Refused from the header, by the codec's bounds, before the payload is read.
  const Case cases[] = {{gemm::kJobPayloadBytes + 1, tp::ErrorCode::kBadFrame, "JOB: payload_length 73 out of range 72..72"},
                        {gemm::kJobPayloadBytes - 1, tp::ErrorCode::kBadFrame, "JOB: payload_length 71 out of range 72..72"},
                        {1 << 20, tp::ErrorCode::kBadFrame, "JOB payload of 1048576 bytes exceeds the 65536-byte limit"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.length);
    Session session = open_session();
    ASSERT_TRUE(session);
    // The claim beyond the bound is sent without its payload: the worker refuses it from the
    // header, and closing on unread bytes would reset the connection before the ERROR is read.
    const bool sent_whole = c.length < kMaxControlPayloadBytes;
    std::vector<std::byte> payload = gemm::encode_gemm_payload(gemm_job(1, 1, 2, 3, 4, 4, 4));
    payload.resize(sent_whole ? c.length : 0);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kJob);
    header.payload_length = c.length;
    const auto header_bytes = tp::encode_header(header);
    const std::array<asio::const_buffer, 2> parts{asio::buffer(header_bytes), asio::buffer(payload)};
    ASSERT_TRUE(session->write_buffers(parts).is_ok());
    EXPECT_TRUE(read_error_saying(*session, c.code, c.reason));
    EXPECT_TRUE(session.closed_by_worker());
  }
}

TEST_F(WorkerSessionTest, UnexpectedMessageIsBadFrame) {
  ASSERT_TRUE(gemm::write_message(*session_, gemm::Credit{1, 1, 0.0}).is_ok());
  EXPECT_TRUE(read_error(*session_, tp::ErrorCode::kBadFrame));
  EXPECT_TRUE(session_.closed_by_worker());
}

TEST_F(WorkerServerTest, StatsRequestBeforeAuthenticationIsRefused) {
  Session connection = connect();
  ASSERT_TRUE(connection);
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<tp::Hello>(*connection, frame));
  ASSERT_TRUE(gemm::write_message(*connection, gemm::StatsRequest{}).is_ok());
  EXPECT_TRUE(read_error(*connection, tp::ErrorCode::kAuthRequired));
  EXPECT_TRUE(connection.closed_by_worker());
}

// Real GEMM sizes need more than the 64 KiB store the other tests use.
class WorkerServerStatsTest : public WorkerSessionTest {
 protected:
  uint64_t cap_bytes() const override { return 16ull << 20; }
  std::chrono::seconds deadline() const override { return 120s; }
};

::testing::AssertionResult read_stats(tp::FrameConnection& connection, uint64_t request_id, gemm::Stats& stats) {
  if (!gemm::write_message(connection, gemm::StatsRequest{}, request_id).is_ok()) {
    return ::testing::AssertionFailure() << "cannot send STATS_REQUEST";
  }
  testing::AnyFrame frame;
  auto read = read_expect<gemm::Stats>(connection, frame);
  if (!read) return read;
  if (frame.header.request_id != request_id) {
    return ::testing::AssertionFailure() << "STATS answered request " << frame.header.request_id << ", not "
                                         << request_id;
  }
  stats = std::get<gemm::Stats>(frame.message);
  return ::testing::AssertionSuccess();
}

TEST_F(WorkerServerStatsTest, StatsCountJobsBytesAndCpuOfTheSession) {
  constexpr uint32_t kSize = 256;
  constexpr int kJobs = 4;
  const Dense a = Dense::integers(kSize, kSize, 1);
  const Dense b = Dense::integers(kSize, kSize, 2);
  ASSERT_TRUE(store_tiles(*session_, {{1, a}, {2, b}}));
  const uint64_t store_bytes = 2 * gemm::store_payload_bytes(gemm::TilePrefix{1, kSize, kSize});

  // C = kJobs * A * B, accumulated in place by kJobs jobs; the last one sends C back.
  for (int i = 0; i < kJobs; ++i) {
    uint32_t flags = i == 0 ? gemm::kJobCreateOutput : 0;
    if (i == kJobs - 1) flags |= gemm::kJobSendResult;
    auto job = gemm_job(static_cast<uint64_t>(i), 1, 2, 3, kSize, kSize, kSize, flags);
    job.c_rows = kSize;
    job.c_cols = kSize;
    ASSERT_TRUE(gemm::write_message(*session_, job).is_ok());
  }
  testing::AnyFrame frame;
  for (int i = 0; i < kJobs; ++i) ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame)) << "job " << i;
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  const Dense product = testing::multiply(a, b);
  ASSERT_EQ(result.data.size(), product.values.size());
  for (std::size_t i = 0; i < product.values.size(); ++i) {
    ASSERT_EQ(result.data[i], kJobs * product.values[i]) << i;
  }
  const uint64_t result_bytes = gemm::result_payload_bytes(gemm::TilePrefix{3, kSize, kSize});

  gemm::Stats first;
  ASSERT_TRUE(read_stats(*session_, 21, first));
  EXPECT_EQ(first.jobs, static_cast<uint64_t>(kJobs));
  EXPECT_GT(first.session_seconds, 0.0);
  EXPECT_GT(first.compute_cpu_seconds, 0.0);
  EXPECT_GT(first.io_cpu_seconds, 0.0);
  EXPECT_GT(first.compute_wall_seconds, 0.0);
  EXPECT_LE(first.compute_wall_seconds, first.session_seconds);
  // The pool's threads cannot have used more CPU than they had wall time.
  EXPECT_LE(first.compute_cpu_seconds, kThreads * first.session_seconds * 1.1);
  EXPECT_GE(first.bytes_received, store_bytes);
  EXPECT_GE(first.bytes_sent, result_bytes);
  RecordProperty("io_cpu_share_percent",
                 std::to_string(100.0 * first.io_cpu_seconds / (first.io_cpu_seconds + first.compute_cpu_seconds)));

  // One more job: every figure grows or stays.
  ASSERT_TRUE(gemm::write_message(*session_, gemm_job(kJobs, 1, 2, 3, kSize, kSize, kSize)).is_ok());
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  gemm::Stats second;
  ASSERT_TRUE(read_stats(*session_, 22, second));
  EXPECT_EQ(second.jobs, static_cast<uint64_t>(kJobs + 1));
  EXPECT_GT(second.session_seconds, first.session_seconds);
  EXPECT_GE(second.io_cpu_seconds, first.io_cpu_seconds);
  EXPECT_GT(second.compute_cpu_seconds, first.compute_cpu_seconds);
  EXPECT_GT(second.compute_wall_seconds, first.compute_wall_seconds);
  EXPECT_GT(second.bytes_received, first.bytes_received);
  EXPECT_GT(second.bytes_sent, first.bytes_sent);
  EXPECT_LE(second.compute_cpu_seconds, kThreads * second.session_seconds * 1.1);

  ASSERT_TRUE(say_bye(*session_));
}

TEST_F(WorkerServerStatsTest, NextSessionStatsStartFromZero) {
  ASSERT_TRUE(store_tiles(*session_, {{1, Dense::integers(64, 64, 1)}, {2, Dense::integers(64, 64, 2)}}));
  ASSERT_TRUE(gemm::write_message(*session_, creating_output(gemm_job(1, 1, 2, 3, 64, 64, 64), 64, 64)).is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  ASSERT_TRUE(say_bye(*session_));

  Session next = open_session();
  ASSERT_TRUE(next);
  gemm::Stats stats;
  ASSERT_TRUE(read_stats(*next, 1, stats));
  EXPECT_EQ(stats.jobs, 0u);
  EXPECT_EQ(stats.compute_cpu_seconds, 0.0);
  EXPECT_EQ(stats.compute_wall_seconds, 0.0);
  // Only the STATS_REQUEST frame itself has arrived; no reply has been sent before this one.
  EXPECT_EQ(stats.bytes_received, tp::kHeaderSize);
  EXPECT_EQ(stats.bytes_sent, 0u);
}

// stop() from another thread while a coordinator is connected: run() returns, and the session's
// connection is closed by the worker (not by the test's deadline).
TEST_F(WorkerSessionTest, StopEndsAnActiveSession) {
  EXPECT_TRUE(server_->stop());
  EXPECT_TRUE(session_.closed_by_worker());
}

TEST(WorkerServerStart, EmptySecretIsRefused) {
  WorkerOptions options;
  options.listen_host = "127.0.0.1";
  options.port = 0;
  auto started = WorkerServer::start(options);
  ASSERT_FALSE(started.is_ok());
  EXPECT_EQ(started.status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerServerStart, PortInUseNamesTheEndpoint) {
  WorkerOptions options;
  options.listen_host = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.secret = "s";
  auto first = WorkerServer::start(options);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  options.port = (*first)->port();
  auto second = WorkerServer::start(options);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(options.port)), std::string::npos)
      << second.status().message();
}

// A stop() that comes before run() is not lost: run() then returns at once instead of serving.
TEST(WorkerServerStart, StopBeforeRunMakesRunReturn) {
  WorkerOptions options;
  options.listen_host = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.secret = "s";
  auto started = WorkerServer::start(options);
  ASSERT_TRUE(started.is_ok()) << started.status().to_string();
  (*started)->stop();
  ServerThread running(std::move(started).value());  // run() only now
  EXPECT_TRUE(running.returned_within(kStopDeadline));
}

// --- The block store on the wire (kCapabilityBlockStore) ---

TEST_F(WorkerSessionTest, AWorkerWithoutAStoreOffersNoneAndRefusesItsMessagesByName) {
  gemm::BlockQuery query;
  query.keys.push_back(*tp::block_key(1, 1, std::vector<double>{1.0}));
  ASSERT_TRUE(gemm::write_block_message(*session_, query).is_ok());
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kBadFrame, "this worker has no block store"));
  EXPECT_TRUE(session_.closed_by_worker());
}

// A worker with a store folder of its own (removed afterwards), and a 64 KiB tile cap.
class WorkerBlockStoreTest : public WorkerSessionTest {
 protected:
  std::string store_dir() const override { return dir_.string(); }
  void TearDown() override {
    WorkerSessionTest::TearDown();
    std::filesystem::remove_all(dir_);
  }
  // STOREs `tile` under `id` with the keep flag and returns its key.
  tp::BlockKey keep(uint32_t id, const Dense& tile) {
    gemm::GemmClient client(*session_);
    EXPECT_TRUE(client.store_rows(id, tile.rows, tile.cols, tile.values.data(), tile.cols, gemm::tile_crc32c(tile.values),
                                  /*keep=*/true)
                    .is_ok());
    return *tp::block_key(tile.rows, tile.cols, tile.values);
  }
  const std::filesystem::path dir_ = std::filesystem::temp_directory_path() /
                                     ("tessera-worker-store-" + std::to_string(::getpid()) + "-" +
                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
};

TEST_F(WorkerBlockStoreTest, AKeptStoreIsHeldAndLoadsUnderAnotherIdExactly) {
  EXPECT_NE(server().capabilities() & tp::kCapabilityBlockStore, 0u);
  const Dense tile = Dense::integers(8, 10, 2);
  const tp::BlockKey key = keep(1, tile);
  const tp::BlockKey other = *tp::block_key(8, 10, Dense::integers(8, 10, 3).values);
  gemm::GemmClient client(*session_);
  Result<std::vector<bool>> held = client.query_blocks(std::vector<tp::BlockKey>{key, other});
  ASSERT_TRUE(held.is_ok()) << held.status().to_string();
  EXPECT_EQ(*held, (std::vector<bool>{true, false})) << "answered after the worker wrote it";
  Result<std::vector<bool>> loaded =
      client.load_blocks(std::vector<gemm::BlockToLoad>{{key, 7, 8, 10}, {other, 8, 8, 10}, {key, 9, 10, 8}});
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(*loaded, (std::vector<bool>{true, false, false})) << "a claim of another shape is not loaded";
  // Tile 7 holds the block: a job reading it (C = 7 * I) gives it back exactly.
  Dense identity(10, 10);
  for (uint32_t i = 0; i < 10; ++i) identity.at(i, i) = 1.0;
  ASSERT_TRUE(store_tile(*session_, 2, identity).is_ok());
  ASSERT_TRUE(gemm::write_message(*session_, creating_output(gemm_job(1, 7, 2, 3, 8, 10, 10, gemm::kJobSendResult), 8, 10))
                  .is_ok());
  testing::AnyFrame frame;
  ASSERT_TRUE(read_expect<gemm::Credit>(*session_, frame));
  ASSERT_TRUE(read_expect<gemm::ResultTile>(*session_, frame));
  const auto& result = std::get<gemm::ResultTile>(frame.message);
  EXPECT_EQ(std::vector<double>(result.data.begin(), result.data.end()), tile.values);
}

TEST_F(WorkerBlockStoreTest, ALoadThatClaimsMoreEntriesThanItHoldsIsRefusedAndCloses) {
  gemm::BlockLoad load;
  load.blocks.push_back({*tp::block_key(1, 1, std::vector<double>{1.0}), 1, 1, 1});
  std::vector<std::byte> payload = gemm::encode_block_payload(load);
  payload[0] = std::byte{0xE8};  // count 1000, one entry's bytes
  payload[1] = std::byte{0x03};
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(tp::MessageType::kBlockLoad);
  const std::array<asio::const_buffer, 1> parts{asio::buffer(payload.data(), payload.size())};
  ASSERT_TRUE(session_->write_frame(header, parts).is_ok());
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kBadFrame, "does not hold 1000 entries"));
  EXPECT_TRUE(session_.closed_by_worker());
}

TEST_F(WorkerBlockStoreTest, ALoadBeyondTheTileCapIsOutOfMemoryBeforeItIsRead) {
  const Dense tile = Dense::integers(64, 100, 1);  // 51200 of the 65536-byte cap
  const tp::BlockKey key = keep(1, tile);
  gemm::GemmClient client(*session_);
  ASSERT_TRUE(client.query_blocks(std::vector<tp::BlockKey>{key}).is_ok());
  // Tile 1 still holds its 51200 bytes: a second copy does not fit.
  ASSERT_TRUE(gemm::write_block_message(*session_, gemm::BlockLoad{{{key, 2, 64, 100}}}).is_ok());
  EXPECT_TRUE(read_error_saying(*session_, tp::ErrorCode::kOutOfMemory, "BLOCK_LOAD"));
}

}  // namespace
}  // namespace tessera::worker
