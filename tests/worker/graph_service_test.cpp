#include "tessera/worker/graph_service.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../graph/graph_fixtures.hpp"
#include "in_process_worker.hpp"
#include "tessera/balance/graphs/termination.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/state.hpp"
#include "tessera/graph/wire.hpp"
#include "tessera/graph/wire_codec.hpp"
#include "tessera/worker/gemm_service.hpp"
#include "worker_test_client.hpp"

namespace tessera::worker {
namespace {

using namespace std::chrono_literals;
namespace bal = tessera::balance;
namespace gr = tessera::graph;
namespace tp = tessera::transport;
using testing::InProcessWorker;
using testing::kInProcessSecret;
using testing::read_closed;
using testing::read_error;
using testing::Watchdog;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<Service> graph_only(const GraphServiceOptions& options = {}) {
  std::vector<Service> services;
  services.push_back(graph_service(options));
  return services;
}

// One graph worker with an open coordinator session, both ended with the object.
class OneWorker {
 public:
  explicit OneWorker(uint64_t memory_cap = 16 << 20, const GraphServiceOptions& options = {})
      : worker_(graph_only(options), memory_cap) {
    if (!worker_.running()) return;
    session_ = worker_.open_session();
    if (session_ != nullptr) watchdog_ = std::make_unique<Watchdog>(*session_, 30s);
  }
  bool ready() const { return session_ != nullptr; }
  InProcessWorker& worker() { return worker_; }
  tp::FrameConnection& session() { return *session_; }

 private:
  InProcessWorker worker_;
  std::unique_ptr<tp::FrameConnection> session_;
  std::unique_ptr<Watchdog> watchdog_;
};

Status write_raw(tp::FrameConnection& connection, std::span<const std::byte> bytes) {
  const std::array<asio::const_buffer, 1> parts{asio::buffer(bytes.data(), bytes.size())};
  return connection.write_buffers(parts);
}

Status write_graph(tp::FrameConnection& connection, const gr::GraphMessage& message) {
  return gr::write_graph_frame(connection, gr::graph_message_type(message), gr::encode_graph_parts(message));
}

// Several graph workers on loopback ports inside the test process, one coordinator session with
// each, and the coordinator's side of a run over the wire calls. Workers stop with the object.
class GraphCluster {
 public:
  explicit GraphCluster(uint32_t size, uint64_t memory_cap = 64 << 20) {
    for (uint32_t i = 0; i < size; ++i) {
      workers_.push_back(std::make_unique<InProcessWorker>(graph_only(), memory_cap));
      if (!workers_.back()->running()) return;
      sessions_.push_back(workers_.back()->open_session());
      if (sessions_.back() == nullptr) return;
      watchdogs_.push_back(std::make_unique<Watchdog>(*sessions_.back(), 60s));
    }
    ready_ = true;
  }

  bool ready() const { return ready_; }
  uint32_t size() const { return static_cast<uint32_t>(workers_.size()); }
  InProcessWorker& worker(uint32_t i) { return *workers_[i]; }
  tp::FrameConnection& session(uint32_t i) { return *sessions_[i]; }

  // The graph cut by part_of, shipped to the workers with initial values.
  Status load(const graphdata::DirectedGraph& graph, const gr::AlgorithmSpec& spec, std::span<const int32_t> part_of,
              double tolerance, uint64_t run_id = 1) {
    placement_ = gr::make_placement(part_of, size());
    const gr::VertexState state = gr::initial_state(graph, spec);
    const std::vector<gr::GraphPart> parts = gr::build_parts(graph, placement_, state.value, state.delta);
    gr::RunSetup setup;
    setup.run_id = run_id;
    setup.algorithm = spec;
    setup.engine.threads = 2;
    setup.engine.idle_residual = tolerance / (2.0 * size());
    for (uint32_t i = 0; i < size(); ++i) setup.peers.push_back({"127.0.0.1", workers_[i]->port()});
    for (uint32_t i = 0; i < size(); ++i) TESSERA_RETURN_IF_ERROR(gr::load_part(session(i), setup, parts[i]));
    vertex_count_ = graph.vertex_count;
    return Status::ok();
  }

  // What the coordinator's termination rule reads from each worker.
  Result<std::vector<bal::graphs::NodeCounters>> poll() {
    std::vector<bal::graphs::NodeCounters> counters;
    for (uint32_t i = 0; i < size(); ++i) {
      Result<gr::NodeProgress> progress = gr::request_progress(session(i));
      if (!progress) return progress.status();
      counters.push_back({progress->engine.updates, progress->engine.batches_sent, progress->engine.batches_received,
                          progress->engine.residual});
    }
    return counters;
  }

  Status run_async(double tolerance) {
    for (uint32_t i = 0; i < size(); ++i) TESSERA_RETURN_IF_ERROR(gr::start_async(session(i)));
    return settle(tolerance);
  }

  // Polls until the coordinator's own termination rule (balance/graphs/termination.hpp) holds:
  // on two consecutive polls nothing updated, sent or received, every batch sent was received,
  // and the residual is within the tolerance.
  Status settle(double tolerance) {
    bal::graphs::TerminationDetector detector(tolerance);
    const auto deadline = std::chrono::steady_clock::now() + 45s;
    while (std::chrono::steady_clock::now() < deadline) {
      Result<std::vector<bal::graphs::NodeCounters>> counters = poll();
      if (!counters) return counters.status();
      ++polls_;
      if (detector.observe(*counters)) return Status::ok();
      std::this_thread::sleep_for(20ms);
    }
    return internal_error("the run did not settle within 45 s: " + detector.waiting_for());
  }

  // Sync steps until a step leaves nothing pending and sends nothing.
  Status run_sync(int max_steps) {
    bal::graphs::SyncLedger ledger(size());  // the coordinator's bookkeeping of what each step must wait for
    for (uint64_t step = 1; step <= static_cast<uint64_t>(max_steps); ++step) {
      std::vector<std::vector<uint64_t>> sent_to;
      double residual = 0.0;
      uint64_t sent = 0;
      for (uint32_t i = 0; i < size(); ++i) {
        Result<gr::StepReport> report = gr::run_step(session(i), step, ledger.expected_next()[i]);
        if (!report) return report.status();
        residual += report->progress.residual;
        for (uint64_t batches : report->batches_sent_to) sent += batches;
        sent_to.push_back(std::move(report->batches_sent_to));
      }
      ledger.record_step(sent_to);
      if (residual == 0.0 && sent == 0) return Status::ok();
    }
    return internal_error("sync run did not finish");
  }

  // Stops every engine and gathers the values into global order.
  Result<std::vector<double>> values() {
    std::vector<double> global(static_cast<std::size_t>(vertex_count_), 0.0);
    for (uint32_t i = 0; i < size(); ++i) {
      TESSERA_RETURN_IF_ERROR(gr::stop_run(session(i)));
      Result<std::vector<double>> part = gr::request_values(session(i));
      if (!part) return part.status();
      if (part->size() != placement_.vertices[i].size()) return internal_error("part values of the wrong size");
      gr::scatter_values(placement_, i, *part, global);
    }
    return global;
  }

  int polls() const { return polls_; }

 private:
  std::vector<std::unique_ptr<InProcessWorker>> workers_;
  std::vector<std::unique_ptr<tp::FrameConnection>> sessions_;
  std::vector<std::unique_ptr<Watchdog>> watchdogs_;  // destroyed first: they watch the sessions
  gr::Placement placement_;
  int64_t vertex_count_ = 0;
  int polls_ = 0;
  bool ready_ = false;
};

gr::AlgorithmSpec pagerank() { return gr::AlgorithmSpec{}; }

// PageRank on a directed cycle ranks every vertex the same; a residual of 1e-12 bounds the error
// by 1e-12 / (1 - d).
void expect_uniform_ranks(Result<std::vector<double>> values, uint32_t vertices) {
  ASSERT_TRUE(values) << values.status().to_string();
  ASSERT_EQ(values->size(), vertices);
  gr::normalise_pagerank(*values);
  for (double value : *values) EXPECT_NEAR(value, 1.0 / vertices, 1e-10);
}

gr::AlgorithmSpec sssp_from(int64_t source) {
  gr::AlgorithmSpec spec;
  spec.kind = gr::AlgorithmKind::kShortestPaths;
  spec.source = source;
  return spec;
}

// A one-part run's part for the raw-protocol tests: a directed path of n vertices, all owned.
gr::GraphLoad path_load(uint32_t n, uint32_t part_count = 1, uint64_t run_id = 5) {
  const graphdata::DirectedGraph graph = gr::fixtures::directed_path(n);
  std::vector<int32_t> part_of(n, 0);
  const gr::Placement placement = gr::make_placement(part_of, part_count);
  const gr::VertexState state = gr::initial_state(graph, pagerank());
  gr::GraphLoad load;
  load.part = gr::build_parts(graph, placement, state.value, state.delta)[0];
  load.setup.run_id = run_id;
  for (uint32_t i = 0; i < part_count; ++i) load.setup.peers.push_back({"127.0.0.1", 9});
  return load;
}

// --- Runs end to end -------------------------------------------------------------------------

TEST(GraphService, DefaultWorkerHostsGemmAndGraph) {
  Result<ServiceTable> table = ServiceTable::build(default_services());
  ASSERT_TRUE(table) << table.status().to_string();
  EXPECT_EQ(table->capabilities(),
            tp::kCapabilityGemm | tp::kCapabilityExpression | tp::kCapabilityTransposedJobs | tp::kCapabilityGraph |
                tp::kCapabilityGraphProbe | tp::kCapabilityForward | tp::kCapabilityTileSend);
  EXPECT_TRUE(table->takes_peers());
  EXPECT_NE(table->find_peer(static_cast<uint16_t>(tp::MessageType::kGraphDeltas)), nullptr);
  EXPECT_EQ(table->find_peer(static_cast<uint16_t>(tp::MessageType::kJob)), nullptr);
  EXPECT_EQ(table->find(static_cast<uint16_t>(tp::MessageType::kGraphDeltas)), nullptr) << "a peer message only";
  EXPECT_FALSE(table->admit_peer().is_ok()) << "no run loaded";
  EXPECT_TRUE(contains(table->describe(), "graph (GRAPH_LOAD, GRAPH_START, GRAPH_STEP, GRAPH_PROGRESS_REQUEST, "
                                          "GRAPH_VALUES_REQUEST, GRAPH_STOP; from peers: GRAPH_PEER_HELLO, "
                                          "GRAPH_DELTAS)"))
      << table->describe();
}

TEST(GraphService, PageRankOnADirectedCycleReachesTheUniformFixedPoint) {
  constexpr uint32_t kVertices = 60;
  const graphdata::DirectedGraph graph = gr::fixtures::directed_cycle(kVertices);
  for (uint32_t workers : {2u, 3u}) {
    SCOPED_TRACE(std::to_string(workers) + " workers");
    GraphCluster cluster(workers);
    ASSERT_TRUE(cluster.ready());
    const double tolerance = 1e-12;
    const std::vector<int32_t> part_of = gr::fixtures::scattered_placement(kVertices, workers);
    ASSERT_TRUE(cluster.load(graph, pagerank(), part_of, tolerance).is_ok());
    const Status ran = cluster.run_async(tolerance);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    expect_uniform_ranks(cluster.values(), kVertices);
  }
}

TEST(GraphService, ShortestPathsOnAGridAreExactAsync) {
  constexpr uint32_t kWidth = 7;
  constexpr uint32_t kHeight = 5;
  const graphdata::DirectedGraph graph = gr::fixtures::grid(kWidth, kHeight, /*weighted=*/false);
  for (uint32_t workers : {2u, 3u}) {
    SCOPED_TRACE(std::to_string(workers) + " workers");
    GraphCluster cluster(workers);
    ASSERT_TRUE(cluster.ready());
    const std::vector<int32_t> part_of = gr::fixtures::scattered_placement(graph.vertex_count, workers);
    ASSERT_TRUE(cluster.load(graph, sssp_from(0), part_of, 0.0).is_ok());
    const Status ran = cluster.run_async(0.0);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    Result<std::vector<double>> values = cluster.values();
    ASSERT_TRUE(values) << values.status().to_string();
    for (uint32_t y = 0; y < kHeight; ++y) {
      for (uint32_t x = 0; x < kWidth; ++x) EXPECT_EQ((*values)[x + kWidth * y], x + y) << x << "," << y;
    }
  }
}

TEST(GraphService, SyncStepsWaitForEachOthersBatchesAndReachTheSameDistances) {
  constexpr uint32_t kWidth = 6;
  constexpr uint32_t kHeight = 6;
  const graphdata::DirectedGraph graph = gr::fixtures::grid(kWidth, kHeight, /*weighted=*/false);
  GraphCluster cluster(3);
  ASSERT_TRUE(cluster.ready());
  const std::vector<int32_t> part_of = gr::fixtures::scattered_placement(graph.vertex_count, 3);
  ASSERT_TRUE(cluster.load(graph, sssp_from(kWidth * kHeight - 1), part_of, 0.0).is_ok());
  const Status ran = cluster.run_sync(4 * (kWidth + kHeight));
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  Result<std::vector<double>> values = cluster.values();
  ASSERT_TRUE(values) << values.status().to_string();
  for (uint32_t y = 0; y < kHeight; ++y) {
    for (uint32_t x = 0; x < kWidth; ++x) {
      EXPECT_EQ((*values)[x + kWidth * y], (kWidth - 1 - x) + (kHeight - 1 - y)) << x << "," << y;
    }
  }
}

// --- Refusals ----------------------------------------------------------------------------------

TEST(GraphService, LoadOverTheMemoryCapIsRefusedBeforeItsDataIsRead) {
  OneWorker one(/*memory_cap=*/1 << 20);
  ASSERT_TRUE(one.ready());
  tp::FrameConnection* session = &one.session();
  // A header claiming 1 MiB and not one byte of it: the answer must come without the data.
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(tp::MessageType::kGraphLoad);
  header.payload_length = 1 << 20;
  ASSERT_TRUE(write_raw(*session, tp::encode_header(header)).is_ok());
  std::string why;
  EXPECT_TRUE(read_error(*session, tp::ErrorCode::kOutOfMemory, &why));
  EXPECT_TRUE(contains(why, "GRAPH_LOAD of 1048576 bytes")) << why;
  EXPECT_TRUE(contains(why, "1048576-byte memory cap")) << why;
  EXPECT_TRUE(read_closed(*session));
}

TEST(GraphService, LyingCountsAndBrokenPartsAreRefusedAndEndTheSession) {
  InProcessWorker worker(graph_only(), 16 << 20);
  ASSERT_TRUE(worker.running());
  struct Case {
    const char* what;
    std::vector<std::byte> payload;
    std::string refusal;
  };
  std::vector<Case> cases;
  std::vector<std::byte> inflated = gr::encode_graph_payload(path_load(10));
  const uint32_t huge = 0x7FFFFFFF;
  std::memcpy(inflated.data() + 80, &huge, sizeof huge);  // local_count
  cases.push_back({"inflated local_count", inflated, "local_count 2147483647"});
  gr::GraphLoad broken = path_load(10);
  broken.part.targets[3] = 99;  // no such slot
  cases.push_back({"target out of range", gr::encode_graph_payload(broken),
                   "graph part 0 of 1: edge 3 targets slot 99 but the part has 10 slots"});
  std::vector<std::byte> garbage(4096, std::byte{0xAB});
  cases.push_back({"garbage", garbage, "GRAPH_LOAD"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto session = worker.open_session();
    ASSERT_NE(session, nullptr);
    Watchdog watchdog(*session, 30s);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kGraphLoad);
    const std::array<asio::const_buffer, 1> parts{asio::buffer(c.payload)};
    ASSERT_TRUE(session->write_frame(header, parts).is_ok());
    std::string why;
    EXPECT_TRUE(read_error(*session, tp::ErrorCode::kBadFrame, &why));
    EXPECT_TRUE(contains(why, c.refusal)) << why;
    EXPECT_TRUE(read_closed(*session));
  }
}

TEST(GraphService, WorkerWithoutTheGraphServiceNamesIt) {
  std::vector<Service> gemm_only;
  gemm_only.push_back(gemm_service());
  InProcessWorker worker(std::move(gemm_only));
  ASSERT_TRUE(worker.running());
  tp::Hello hello;
  auto session = worker.open_session(&hello);
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 30s);
  EXPECT_EQ(hello.capabilities & tp::kCapabilityGraph, 0u);
  const gr::GraphLoad load = path_load(10);
  const Status refused = gr::load_part(*session, load.setup, load.part);
  EXPECT_EQ(refused.code(), StatusCode::kProtocolError) << refused.to_string();
  EXPECT_TRUE(contains(refused.message(), "unexpected GRAPH_LOAD from the coordinator: no service of this worker "
                                          "handles it"))
      << refused.to_string();
  EXPECT_TRUE(contains(refused.message(), "GRAPH_LOAD belongs to the graph service, which this worker does not host"))
      << refused.to_string();
}

TEST(GraphService, RequestsWithoutALoadedRunAreRefused) {
  OneWorker one;
  ASSERT_TRUE(one.ready());
  const Status refused = gr::start_async(one.session());
  EXPECT_EQ(refused.code(), StatusCode::kProtocolError);
  EXPECT_TRUE(contains(refused.message(), "GRAPH_START but no graph run is loaded here")) << refused.to_string();
}

TEST(GraphService, StepNamesTheBatchesThatDidNotArrive) {
  GraphServiceOptions options;
  options.step_wait = 300ms;
  OneWorker one(16 << 20, options);
  ASSERT_TRUE(one.ready());
  tp::FrameConnection* session = &one.session();
  // Part 0 of 2 with no edge to part 1: it opens no link, and part 1 never sends.
  const gr::GraphLoad load = path_load(8, /*part_count=*/2);
  ASSERT_TRUE(gr::load_part(*session, load.setup, load.part).is_ok());
  Result<gr::StepReport> first = gr::run_step(*session, 1, 0);
  ASSERT_TRUE(first) << first.status().to_string();
  EXPECT_EQ(first->batches_sent_to, (std::vector<uint64_t>{0, 0}));
  Result<gr::StepReport> starved = gr::run_step(*session, 2, 3);
  EXPECT_EQ(starved.status().code(), StatusCode::kNetworkError) << starved.status().to_string();
  EXPECT_TRUE(contains(starved.status().message(), "reported a failed peer link: run 5, step 2: part 0 received 0 of "
                                                   "the 3 batches of step 1 within 0.3 s (from part 1: 0)"))
      << starved.status().to_string();
}

// A coordinator session once the worker has let the previous one go: a session that just ended
// (the coordinator vanished, or the worker answered ERROR) may hold the slot a moment longer.
std::unique_ptr<tp::FrameConnection> next_session(InProcessWorker& worker) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    auto connection = tp::FrameConnection::connect("127.0.0.1", worker.port(), 5s);
    if (!connection) return nullptr;
    Result<tp::Hello> hello = tp::client_handshake(**connection, kInProcessSecret);
    if (hello) {
      // Refused after the handshake when a run still admits peers: ERROR(kBusy) is then waiting.
      if (!(*connection)->wait_readable(100ms)) return std::move(*connection);
    } else if (hello.status().code() != StatusCode::kBusy) {
      ADD_FAILURE() << hello.status().to_string();
      return nullptr;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the worker kept the previous session for 10 s";
      return nullptr;
    }
    std::this_thread::sleep_for(50ms);
  }
}

TEST(GraphService, EndingTheSessionEndsTheRunAndGivesItsMemoryBack) {
  // The part takes about half the cap, so a second one fits only if the first was given back.
  InProcessWorker worker(graph_only(), 1 << 20);
  ASSERT_TRUE(worker.running());
  const gr::GraphLoad load = path_load(12000);
  for (const char* ending : {"vanishes", "says BYE", "vanishes"}) {
    SCOPED_TRACE(ending);
    auto session = next_session(worker);
    ASSERT_NE(session, nullptr);
    {
      Watchdog watchdog(*session, 30s);
      // The previous session's run went with it.
      const Status gone = gr::request_progress(*session).status();
      EXPECT_TRUE(contains(gone.message(), "GRAPH_PROGRESS_REQUEST but no graph run is loaded here")) << gone.to_string();
    }
    session = next_session(worker);
    ASSERT_NE(session, nullptr);
    Watchdog watchdog(*session, 30s);
    const Status loaded = gr::load_part(*session, load.setup, load.part);
    ASSERT_TRUE(loaded.is_ok()) << loaded.to_string();
    Result<gr::NodeProgress> progress = gr::request_progress(*session);
    ASSERT_TRUE(progress) << progress.status().to_string();
    EXPECT_GT(progress->memory_bytes, load.part.memory_bytes());
    EXPECT_LT(progress->memory_bytes, uint64_t{1} << 20);
    if (std::string_view(ending) == "says BYE") {
      ASSERT_TRUE(session->write_message(tp::Bye{}).is_ok());
      testing::AnyFrame frame;
      EXPECT_TRUE(testing::read_expect<tp::Bye>(*session, frame));
    }
  }
}

// --- Peer links ----------------------------------------------------------------------------------

// A raw peer link to `worker`: connected and authenticated with the peer label, or nullptr.
std::unique_ptr<tp::FrameConnection> open_peer_link(InProcessWorker& worker, std::string_view secret,
                                                    Status* failure = nullptr) {
  auto connection = tp::FrameConnection::connect("127.0.0.1", worker.port(), 5s);
  if (!connection) {
    if (failure != nullptr) *failure = connection.status();
    return nullptr;
  }
  Result<tp::Hello> hello = tp::client_handshake(**connection, secret, 5s, tp::SessionRole::kPeer);
  if (!hello) {
    if (failure != nullptr) *failure = hello.status();
    return nullptr;
  }
  return std::move(*connection);
}

TEST(GraphService, PeerLinksNeedALoadedRunAndTheSecret) {
  InProcessWorker worker(graph_only());
  ASSERT_TRUE(worker.running());
  {
    // No coordinator session either: with one but no run, a newcomer is refused as busy before
    // its handshake, since nothing tells a peer from a coordinator before it.
    auto link = open_peer_link(worker, kInProcessSecret);
    ASSERT_NE(link, nullptr);
    Watchdog watchdog(*link, 30s);
    std::string why;
    EXPECT_TRUE(read_error(*link, tp::ErrorCode::kBadFrame, &why));
    EXPECT_EQ(why, "no graph run here");
    EXPECT_TRUE(read_closed(*link));
  }
  auto session = worker.open_session();
  ASSERT_NE(session, nullptr);
  Watchdog watchdog(*session, 30s);
  const gr::GraphLoad load = path_load(8, 2);
  ASSERT_TRUE(gr::load_part(*session, load.setup, load.part).is_ok());
  Status failure;
  EXPECT_EQ(open_peer_link(worker, "not the cluster secret", &failure), nullptr);
  EXPECT_EQ(failure.code(), StatusCode::kAuthFailed) << failure.to_string();
}

TEST(GraphService, APeerLinkTakesPeerMessagesOnlyAndRefusesBadBatches) {
  OneWorker one;
  ASSERT_TRUE(one.ready());
  InProcessWorker& worker = one.worker();
  tp::FrameConnection* session = &one.session();
  const gr::GraphLoad load = path_load(8, 2);
  ASSERT_TRUE(gr::load_part(*session, load.setup, load.part).is_ok());

  gr::DeltaBatch bad_slot;
  bad_slot.from_part = 1;
  bad_slot.to_part = 0;
  bad_slot.slots = {8};
  bad_slot.deltas = {0.5};
  struct Case {
    const char* what;
    std::vector<gr::GraphMessage> frames;  // after the first, which is sent raw below when empty
    bool job = false;
    std::string refusal;
  };
  const std::vector<Case> cases = {
      {"deltas first", {gr::GraphDeltas{5, bad_slot}}, false, "GRAPH_DELTAS before GRAPH_PEER_HELLO"},
      {"other run", {gr::GraphPeerHello{6, 1}}, false, "GRAPH_PEER_HELLO for run 6, but this worker runs run 5"},
      {"own part", {gr::GraphPeerHello{5, 0}}, false, "GRAPH_PEER_HELLO from part 0"},
      {"slot out of range", {gr::GraphPeerHello{5, 1}, gr::GraphDeltas{5, bad_slot}}, false,
       "GRAPH_DELTAS of run 5: batch from part 1 has slot 8 but this part owns 8 vertices"},
      {"coordinator message", {gr::GraphPeerHello{5, 1}}, true, "unexpected JOB on a peer link"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto link = open_peer_link(worker, kInProcessSecret);
    ASSERT_NE(link, nullptr);
    Watchdog watchdog(*link, 30s);
    for (const gr::GraphMessage& frame : c.frames) ASSERT_TRUE(write_graph(*link, frame).is_ok());
    if (c.job) {
      ASSERT_TRUE(gemm::write_message(*link, testing::gemm_job(1, 1, 2, 3, 4, 4, 4)).is_ok());
    }
    std::string why;
    EXPECT_TRUE(read_error(*link, tp::ErrorCode::kBadFrame, &why));
    EXPECT_TRUE(contains(why, c.refusal)) << why;
    EXPECT_TRUE(read_closed(*link));
  }
  // A batch of another run is dropped without ending the link; the next one is delivered.
  auto link = open_peer_link(worker, kInProcessSecret);
  ASSERT_NE(link, nullptr);
  gr::DeltaBatch good = bad_slot;
  good.step = 1;
  good.slots = {0};
  ASSERT_TRUE(write_graph(*link, gr::GraphPeerHello{5, 1}).is_ok());
  ASSERT_TRUE(write_graph(*link, gr::GraphDeltas{99, bad_slot}).is_ok());
  ASSERT_TRUE(write_graph(*link, gr::GraphDeltas{5, good}).is_ok());
  ASSERT_TRUE(gr::run_step(*session, 1, 0));
  Result<gr::StepReport> step = gr::run_step(*session, 2, 1);  // waits for the good batch
  ASSERT_TRUE(step) << step.status().to_string();
  EXPECT_EQ(step->progress.batches_received, 1u);
  EXPECT_EQ(step->progress.deltas_received, 1u);
  // Stopping the run closes the link.
  ASSERT_TRUE(gr::stop_run(*session).is_ok());
  Watchdog watchdog(*link, 30s);
  EXPECT_TRUE(read_closed(*link));
}

TEST(GraphService, ASecondCoordinatorIsRefusedAsBusyWhilePeerLinksAreOpen) {
  constexpr uint32_t kVertices = 40;
  const graphdata::DirectedGraph graph = gr::fixtures::directed_cycle(kVertices);
  GraphCluster cluster(2);
  ASSERT_TRUE(cluster.ready());
  const double tolerance = 1e-12;
  const std::vector<int32_t> part_of = gr::fixtures::scattered_placement(kVertices, 2);
  ASSERT_TRUE(cluster.load(graph, pagerank(), part_of, tolerance).is_ok());
  ASSERT_TRUE(gr::start_async(cluster.session(0)).is_ok());
  ASSERT_TRUE(gr::start_async(cluster.session(1)).is_ok());

  auto intruder = tp::FrameConnection::connect("127.0.0.1", cluster.worker(0).port(), 5s);
  ASSERT_TRUE(intruder) << intruder.status().to_string();
  Watchdog watchdog(**intruder, 30s);
  // While peers may connect the newcomer handshakes first; as a coordinator it is then refused.
  Result<tp::Hello> hello = tp::client_handshake(**intruder, kInProcessSecret);
  if (hello) {
    std::string why;
    EXPECT_TRUE(read_error(**intruder, tp::ErrorCode::kBusy, &why));
    EXPECT_TRUE(contains(why, "worker busy with a session from")) << why;
  } else {
    EXPECT_EQ(hello.status().code(), StatusCode::kBusy) << hello.status().to_string();
  }
  // The run goes on untouched.
  const Status settled = cluster.settle(tolerance);
  ASSERT_TRUE(settled.is_ok()) << settled.to_string();
  expect_uniform_ranks(cluster.values(), kVertices);
}

}  // namespace
}  // namespace tessera::worker
