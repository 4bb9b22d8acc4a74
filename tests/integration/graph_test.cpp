// Graph runs against real tessera-worker processes on loopback: every algorithm verified against
// its reference under each placement and both modes with 1, 2, 3 and 7 workers (a matrix that
// covers every value of each dimension, not the full cross product), on graphs with dangling
// vertices, self-loops, parallel edges, isolated vertices and several components; a worker killed
// with SIGKILL mid-run; a worker without the graph service; and `tessera graph` through the CLI.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <asio.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <numeric>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/graph/reference.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::balance {
namespace {

namespace tg = tessera::graph;
namespace tpart = tessera::partition;

const std::string kDirected = std::string(TESSERA_TEST_INSTANCES) + "/graphs/directed/";

graphdata::DirectedGraph load(const std::string& input) {
  Result<graphdata::DirectedGraph> graph = input.find(':') != std::string::npos
                                        ? graphdata::generate_directed_graph(input, 7)
                                        : graphdata::read_directed_graph_file(kDirected + input);
  EXPECT_TRUE(graph) << input << ": " << graph.status().message();
  return graph ? std::move(*graph) : graphdata::DirectedGraph{};
}

// Short intervals: the graphs converge in milliseconds, and polls are what the runs wait for.
graphs::GraphRunOptions fast_options(const tg::AlgorithmSpec& spec) {
  graphs::GraphRunOptions options;
  options.algorithm = spec;
  options.poll_interval = std::chrono::milliseconds(10);
  options.snapshot_interval = std::chrono::milliseconds(200);
  options.node_timeout_s = 20.0;
  options.max_wall_s = 60.0;
  options.verify = true;
  return options;
}

Result<cluster::ClusterConnection> connect_for_graphs(const cluster::ClusterSpec& spec) {
  cluster::ConnectOptions options;
  options.required_capabilities = transport::kCapabilityGraph;
  return cluster::ClusterConnection::connect(spec, options);
}

// Seven workers shared by the matrix; a case with k workers uses the first k.
class GraphRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    cluster_ = new testing::LocalCluster(testing::start_local_cluster("graph-runs", "graph-secret", 7, *dir_));
  }
  static void TearDownTestSuite() {
    delete cluster_;  // stops the workers by pid
    delete dir_;
    cluster_ = nullptr;
    dir_ = nullptr;
  }

  static cluster::ClusterSpec first(std::size_t count) {
    cluster::ClusterSpec spec = cluster_->spec;
    spec.nodes.resize(count);
    return spec;
  }

  static testing::TempDir* dir_;
  static testing::LocalCluster* cluster_;
};
testing::TempDir* GraphRuns::dir_ = nullptr;
testing::LocalCluster* GraphRuns::cluster_ = nullptr;

struct Case {
  const char* name;
  tg::AlgorithmKind kind;
  const char* graph;
  tpart::PartitionMethod method;
  graphs::GraphMode mode;
  std::size_t workers;
  std::optional<int64_t> source = std::nullopt;
  bool max_label = true;
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.name; }

using tg::AlgorithmKind;
using tpart::PartitionMethod;
// Every algorithm in both modes; every placement, and 1, 2, 3 and 7 workers, for every algorithm
// at least once across the cases.
const Case kCases[] = {
    {"pagerank_components_metis_async_3", AlgorithmKind::kPageRank, "components.edges", PartitionMethod::kMetis,
     graphs::GraphMode::kAsync, 3},
    {"pagerank_lognormal_hash_sync_2", AlgorithmKind::kPageRank, "lognormal:3000", PartitionMethod::kHash,
     graphs::GraphMode::kSync, 2},
    {"pagerank_rmat_contiguous_async_7", AlgorithmKind::kPageRank, "rmat:11", PartitionMethod::kContiguous,
     graphs::GraphMode::kAsync, 7},
    {"pagerank_tiny_metis_sync_1", AlgorithmKind::kPageRank, "tiny.snap", PartitionMethod::kMetis, graphs::GraphMode::kSync, 1},
    {"katz_components_metis_sync_3", AlgorithmKind::kKatz, "components.edges", PartitionMethod::kMetis,
     graphs::GraphMode::kSync, 3},
    {"katz_from_source_rmat_hash_async_7", AlgorithmKind::kKatz, "rmat:10", PartitionMethod::kHash, graphs::GraphMode::kAsync, 7,
     int64_t{1}},
    {"katz_tiny_contiguous_async_2", AlgorithmKind::kKatz, "tiny.snap", PartitionMethod::kContiguous, graphs::GraphMode::kAsync,
     2},
    {"cc_components_contiguous_sync_7", AlgorithmKind::kConnectedComponents, "components.edges",
     PartitionMethod::kContiguous, graphs::GraphMode::kSync, 7},
    {"cc_min_rmat_metis_async_2", AlgorithmKind::kConnectedComponents, "rmat:10", PartitionMethod::kMetis,
     graphs::GraphMode::kAsync, 2, std::nullopt, false},
    {"cc_tiny_hash_async_1", AlgorithmKind::kConnectedComponents, "tiny.snap", PartitionMethod::kHash, graphs::GraphMode::kAsync,
     1},
    {"sssp_components_hash_async_3", AlgorithmKind::kShortestPaths, "components.edges", PartitionMethod::kHash,
     graphs::GraphMode::kAsync, 3, int64_t{0}},
    {"sssp_mesh_metis_sync_2", AlgorithmKind::kShortestPaths, "mesh2d:24x17", PartitionMethod::kMetis, graphs::GraphMode::kSync,
     2, int64_t{5}},
    {"sssp_lognormal_contiguous_async_7", AlgorithmKind::kShortestPaths, "lognormal:2000", PartitionMethod::kContiguous,
     graphs::GraphMode::kAsync, 7, int64_t{3}},
    {"sssp_weighted_hash_sync_1", AlgorithmKind::kShortestPaths, "components.edges", PartitionMethod::kHash,
     graphs::GraphMode::kSync, 1, int64_t{10}},
};

class GraphMatrix : public GraphRuns, public ::testing::WithParamInterface<Case> {};

TEST_P(GraphMatrix, VerifiedAgainstTheReference) {
  const Case& c = GetParam();
  const graphdata::DirectedGraph graph = load(c.graph);
  ASSERT_GT(graph.vertex_count, 0);
  tg::AlgorithmSpec spec;
  spec.kind = c.kind;
  spec.source = c.source;
  spec.max_label = c.max_label;
  if (c.kind == AlgorithmKind::kKatz) spec.beta = 0.5 / tg::spectral_radius_bounds(graph).upper;
  graphs::GraphRunOptions options = fast_options(spec);
  options.method = c.method;
  options.mode = c.mode;
  // Unequal targets, so that the placement's weighting is exercised too.
  options.weights.source = graphs::TargetWeights::Source::kExplicit;
  for (std::size_t i = 0; i < c.workers; ++i) options.weights.weights.push_back(1.0 + static_cast<double>(i % 3));

  Result<cluster::ClusterConnection> connection = connect_for_graphs(first(c.workers));
  ASSERT_TRUE(connection) << connection.status().message();
  Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection, graph, options);
  ASSERT_TRUE(outcome) << outcome.status().message();

  ASSERT_TRUE(outcome->verification.has_value());
  EXPECT_TRUE(outcome->verification->passed) << outcome->verification->detail;
  ASSERT_EQ(outcome->values.size(), static_cast<std::size_t>(graph.vertex_count));
  if (c.kind == AlgorithmKind::kPageRank) {
    EXPECT_NEAR(std::accumulate(outcome->values.begin(), outcome->values.end(), 0.0), 1.0, 1e-9);
  }
  // Why a node was lost, should one be: the run survives it, but nothing here should lose one.
  std::string lost;
  for (std::size_t i = 0; i < outcome->lost_nodes.size(); ++i) {
    lost += outcome->lost_nodes[i] + ": " + (i < outcome->lost_reasons.size() ? outcome->lost_reasons[i] : "") + "\n";
  }
  EXPECT_TRUE(outcome->lost_nodes.empty()) << lost;
  EXPECT_EQ(outcome->restarts, 0u) << lost;
  ASSERT_EQ(outcome->nodes.size(), c.workers);
  ASSERT_EQ(outcome->placement.nodes.size(), c.workers);
  // Every vertex and every edge placed exactly once.
  EXPECT_EQ(std::accumulate(outcome->placement.vertices.begin(), outcome->placement.vertices.end(), int64_t{0}),
            graph.vertex_count);
  EXPECT_EQ(std::accumulate(outcome->placement.edges.begin(), outcome->placement.edges.end(), int64_t{0}),
            outcome->edges);
  // Nothing is in flight at the end: every batch sent was received.
  uint64_t sent = 0, received = 0, updates = 0;
  for (const graphs::GraphNodeFigures& node : outcome->nodes) {
    sent += node.batches_sent;
    received += node.batches_received;
    updates += node.updates;
    EXPECT_GT(node.memory_bytes, 0u) << node.name;
  }
  EXPECT_EQ(sent, received);
  if (c.workers == 1) {
    EXPECT_EQ(sent, 0u);
  }
  EXPECT_GT(updates, 0u);
  EXPECT_LE(outcome->residual, outcome->tolerance);
  EXPECT_FALSE(outcome->trace.empty());
  if (c.mode == graphs::GraphMode::kSync) {
    EXPECT_GT(outcome->steps, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GraphMatrix, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.name); });

TEST_F(GraphRuns, ASpecTheGraphCannotTakeIsRefusedBeforeAnythingIsShipped) {
  Result<cluster::ClusterConnection> connection = connect_for_graphs(first(2));
  ASSERT_TRUE(connection) << connection.status().message();
  const graphdata::DirectedGraph graph = load("components.edges");
  tg::AlgorithmSpec sssp;
  sssp.kind = AlgorithmKind::kShortestPaths;
  sssp.source = 30;
  Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection, graph, fast_options(sssp));
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outcome.status().message().find("--source 30"), std::string::npos) << outcome.status().message();
  const graphdata::DirectedGraph negative = load("weighted.edges");
  sssp.source = 0;
  outcome = graphs::run_graph(*connection, negative, fast_options(sssp));
  ASSERT_FALSE(outcome);
  EXPECT_NE(outcome.status().message().find("edge 2 -> 0 has weight -1"), std::string::npos)
      << outcome.status().message();
}

// SIGKILL of one worker in the middle of a run: its part restarts on the survivors from its last
// snapshot, the answer is still verified, and the outcome names the node.
TEST(GraphFailures, AWorkerKilledMidRunIsNamedAndTheRunStillConverges) {
  for (graphs::GraphMode mode : {graphs::GraphMode::kAsync, graphs::GraphMode::kSync}) {
    SCOPED_TRACE(std::string(graphs::graph_mode_name(mode)));
    testing::TempDir dir;
    testing::LocalCluster cluster = testing::start_local_cluster("graph-kill", "kill-secret", 3, dir);
    Result<cluster::ClusterConnection> connection = connect_for_graphs(cluster.spec);
    ASSERT_TRUE(connection) << connection.status().message();
    // Big enough to take a while on one core per worker, with a tight tolerance.
    const graphdata::DirectedGraph graph = load("lognormal:40000");
    tg::AlgorithmSpec pagerank;
    graphs::GraphRunOptions options = fast_options(pagerank);
    options.tolerance = 1e-10;
    options.method = PartitionMethod::kContiguous;
    options.mode = mode;
    options.snapshot_interval = std::chrono::milliseconds(50);
    options.node_timeout_s = 10.0;
    // A survivor whose step failed on its link to the dead node reports that and ends its
    // session; with the secret it is reconnected rather than lost.
    options.secret = "kill-secret";
    std::atomic<bool> killed{false};
    double killed_at = 0.0;
    std::jthread killer;
    graphs::GraphHooks hooks;
    // After a snapshot or two (a quiet machine ran sync to 1e-6 within 0.15 s once), while the
    // residual is still far from the tolerance; from another
    // thread a few milliseconds later, so that the kill may land inside a step or a poll.
    hooks.on_progress = [&](const graphs::TracePoint& point) {
      if (!killer.joinable() && point.time_s > 0.08 && point.residual > 1e-6) {
        killed_at = point.time_s;
        killer = std::jthread([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(3));
          cluster.processes[2]->kill_now();
          killed = true;
        });
      }
    };
    std::string notices;
    hooks.on_notice = [&](const std::string& notice) { notices += notice + "\n"; };
    Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection, graph, options, hooks);
    if (killer.joinable()) killer.join();
    ASSERT_TRUE(killed) << "the run converged before the worker could be killed; use a bigger graph";
    ASSERT_TRUE(outcome) << outcome.status().message() << "\n" << notices;
    SCOPED_TRACE(notices);
    EXPECT_EQ(outcome->lost_nodes, std::vector<std::string>{"c"});
    EXPECT_GE(outcome->restarts, 1u);
    ASSERT_TRUE(outcome->final_placement.has_value());
    EXPECT_EQ(outcome->final_placement->nodes, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(outcome->nodes[2].lost);
    ASSERT_TRUE(outcome->verification.has_value());
    EXPECT_TRUE(outcome->verification->passed) << outcome->verification->detail;
    EXPECT_GT(outcome->wall_s, killed_at);
  }
}

TEST(GraphFailures, WithNoSurvivorTheRunFailsNamingTheNodes) {
  testing::TempDir dir;
  testing::LocalCluster cluster = testing::start_local_cluster("graph-none", "none-secret", 1, dir);
  Result<cluster::ClusterConnection> connection = connect_for_graphs(cluster.spec);
  ASSERT_TRUE(connection) << connection.status().message();
  const graphdata::DirectedGraph graph = load("lognormal:40000");
  graphs::GraphRunOptions options = fast_options(tg::AlgorithmSpec{});
  options.tolerance = 1e-12;
  graphs::GraphHooks hooks;
  hooks.on_progress = [&](const graphs::TracePoint&) { cluster.processes[0]->kill_now(); };
  Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection, graph, options, hooks);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(outcome.status().message().find("every node was lost"), std::string::npos) << outcome.status().message();
  EXPECT_NE(outcome.status().message().find("a: "), std::string::npos) << outcome.status().message();
}

// A peer that completes the handshake but offers only GEMM, as a worker without the graph service
// does; it answers BYE with BYE.
class GemmOnlyPeer {
 public:
  explicit GemmOnlyPeer(std::string secret)
      : acceptor_(context_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        port_(acceptor_.local_endpoint().port()), thread_([this, secret] { serve(secret); }) {}
  ~GemmOnlyPeer() {
    asio::error_code ignored;
    acceptor_.close(ignored);
  }
  uint16_t port() const { return port_; }

 private:
  void serve(const std::string& secret) {
    asio::error_code error;
    asio::ip::tcp::socket socket(context_);
    acceptor_.accept(socket, error);
    if (error) return;
    transport::FrameConnection connection(std::move(socket), transport::Limits{});
    connection.set_read_deadline(std::chrono::milliseconds(5000));
    transport::Hello hello;
    hello.worker_version = "gemm-only";
    hello.threads = 1;
    hello.cores = 1;
    hello.capabilities = transport::kCapabilityGemm;
    for (std::size_t i = 0; i < hello.challenge.size(); ++i) hello.challenge[i] = static_cast<uint8_t>(i * 7 + 1);
    if (!transport::server_handshake(connection, hello, secret).is_ok()) return;
    Result<transport::IncomingFrame> frame = connection.read_frame();
    if (frame && std::holds_alternative<transport::Bye>(frame->message)) (void)connection.write_message(transport::Bye{});
  }

  asio::io_context context_;
  asio::ip::tcp::acceptor acceptor_;
  uint16_t port_;
  std::jthread thread_;
};

TEST(GraphFailures, AWorkerWithoutTheGraphServiceIsRefusedByName) {
  testing::TempDir dir;
  testing::LocalCluster cluster = testing::start_local_cluster("graph-gemm", "gemm-secret", 1, dir);
  GemmOnlyPeer peer("gemm-secret");
  cluster::NodeSpec gemm_only;
  gemm_only.name = "oldie";
  gemm_only.host = "127.0.0.1";
  gemm_only.port = peer.port();
  cluster.spec.nodes.push_back(gemm_only);
  Result<cluster::ClusterConnection> connection = connect_for_graphs(cluster.spec);
  ASSERT_FALSE(connection);
  EXPECT_EQ(connection.status().code(), StatusCode::kInvalidConfig);
  EXPECT_NE(connection.status().message().find("node 'oldie'"), std::string::npos) << connection.status().message();
  EXPECT_NE(connection.status().message().find("missing graph"), std::string::npos) << connection.status().message();
}

// The facade: profile weights need a profile; a cancel flag stops a run and frees the workers.
TEST(GraphSession, ProfileWeightsNeedAProfileAndCancellingFreesTheWorkers) {
  testing::TempDir dir;
  testing::LocalCluster cluster = testing::start_local_cluster("graph-session", "session-secret", 2, dir);
  session::SessionOptions session_options;
  session_options.connect.required_capabilities = transport::kCapabilityGraph;
  Result<session::Session> session = session::Session::open(cluster.spec, session_options);
  ASSERT_TRUE(session) << session.status().message();
  const graphdata::DirectedGraph graph = load("lognormal:40000");
  graphs::GraphRunOptions options = fast_options(tg::AlgorithmSpec{});
  options.weights.source = graphs::TargetWeights::Source::kProfile;
  Result<graphs::GraphOutcome> refused = session->graph(graph, options);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);
  EXPECT_NE(refused.status().message().find("tessera profile"), std::string::npos) << refused.status().message();

  options.weights = graphs::TargetWeights{};
  options.tolerance = 1e-13;
  std::atomic<bool> cancel{false};
  session::RunControl control;
  control.cancel = &cancel;
  control.on_graph_progress = [&](const graphs::TracePoint&) { cancel = true; };
  Result<graphs::GraphOutcome> cancelled_run = session->graph(graph, options, control);
  ASSERT_FALSE(cancelled_run);
  EXPECT_EQ(cancelled_run.status().code(), StatusCode::kCancelled) << cancelled_run.status().message();

  // The workers let the cancelled sessions go: a new session runs to the end.
  Result<session::Session> again = session::Session::open(cluster.spec, session_options);
  for (int attempt = 0; attempt < 50 && !again && again.status().code() == StatusCode::kBusy; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    again = session::Session::open(cluster.spec, session_options);
  }
  ASSERT_TRUE(again) << again.status().message();
  options.tolerance = 1e-6;
  Result<graphs::GraphOutcome> outcome = again->graph(graph, options);
  ASSERT_TRUE(outcome) << outcome.status().message();
  ASSERT_TRUE(outcome->verification.has_value());
  EXPECT_TRUE(outcome->verification->passed) << outcome->verification->detail;
}

// --- Through the CLI -------------------------------------------------------------------------

std::string cli(const std::string& config, const testing::TempDir& dir, const std::string& flags) {
  // The placement cache goes to the test's folder, never to the user's ~/.cache.
  return std::string(TESSERA_CLI_BINARY) + " graph " + config + " --run-dir " + dir.file("run") + " --placement-cache " +
         dir.file("cache") + " " + flags;
}

TEST(GraphCli, BadInputExitsTwoNamingTheFileLineOrTheValidValues) {
  testing::TempDir dir;
  cluster::ClusterSpec spec;
  spec.name = "graph-cli-bad";
  spec.secret = "s";
  cluster::NodeSpec node;
  node.name = "a";
  node.host = "127.0.0.1";
  node.port = testing::free_loopback_port();
  spec.nodes.push_back(node);
  const std::string config = testing::write_cluster_file(dir, spec);

  testing::CommandResult truncated =
      testing::run_command(cli(config, dir, "--algorithm pagerank --graph " + kDirected + "truncated.graph"));
  EXPECT_EQ(truncated.exit_code, 2) << truncated.output;
  EXPECT_NE(truncated.output.find("truncated.graph:"), std::string::npos) << truncated.output;

  testing::CommandResult token = testing::run_command(cli(config, dir, "--algorithm cc --graph " + kDirected + "bad-token.snap"));
  EXPECT_EQ(token.exit_code, 2) << token.output;
  EXPECT_NE(token.output.find("bad-token.snap:3"), std::string::npos) << token.output;

  testing::CommandResult method =
      testing::run_command(cli(config, dir, "--algorithm cc --generate rmat:5 --partition random"));
  EXPECT_EQ(method.exit_code, 2) << method.output;
  EXPECT_NE(method.output.find("metis"), std::string::npos) << method.output;

  testing::CommandResult algorithm = testing::run_command(cli(config, dir, "--algorithm bfs --generate rmat:5"));
  EXPECT_EQ(algorithm.exit_code, 2) << algorithm.output;
  EXPECT_NE(algorithm.output.find("pagerank, katz, cc or sssp"), std::string::npos) << algorithm.output;

  testing::CommandResult beta = testing::run_command(cli(config, dir, "--algorithm katz --generate rmat:5"));
  EXPECT_EQ(beta.exit_code, 2) << beta.output;
  EXPECT_NE(beta.output.find("--beta"), std::string::npos) << beta.output;

  // Nobody listens there: the node is named, exit 1.
  testing::CommandResult unreachable = testing::run_command(cli(config, dir, "--algorithm cc --generate rmat:5"));
  EXPECT_EQ(unreachable.exit_code, 1) << unreachable.output;
  EXPECT_NE(unreachable.output.find("node 'a'"), std::string::npos) << unreachable.output;
}

TEST(GraphCli, EndToEndWithValuesReportAndVerification) {
  testing::TempDir dir;
  testing::LocalCluster cluster = testing::start_local_cluster("graph-cli", "cli-graph-secret", 2, dir);
  const std::string config = testing::write_cluster_file(dir, cluster.spec);
  testing::CommandResult run = testing::run_command(
      cli(config, dir, "--algorithm sssp --source 0 --graph " + kDirected + "components.edges --weights 2,1 --verify " +
                           "--poll-ms 10 --out " + dir.file("values.txt") + " --report " + dir.file("report.json")));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("verified: all 30 distances equal the reference"), std::string::npos) << run.output;
  // --partition auto without graph rates to forecast with: the locality placement with the smaller cut.
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(plan \((chunks|fennel) by weights explicit 2,1\))"))) << run.output;
  EXPECT_NE(run.output.find("nodes (auto): "), std::string::npos) << run.output;

  std::ifstream values(dir.file("values.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(values, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 30u);
  EXPECT_EQ(lines[0], "0");
  EXPECT_EQ(lines[18], "inf");  // isolated

  const nlohmann::json report = nlohmann::json::parse(testing::read_file(dir.file("report.json")));
  EXPECT_EQ(report["algorithm"]["name"], "sssp");
  EXPECT_EQ(report["nodes"].size(), 2u);
  EXPECT_EQ(report["verification"]["passed"], true);
  ASSERT_FALSE(report["trace"].empty());
  // The last poll saw every batch that was sent arrive (what termination waited for).
  const nlohmann::json& last = report["trace"].back();
  EXPECT_EQ(last["batches_sent"], last["batches_received"]);
  EXPECT_EQ(report["placement"]["parts"].size(), 2u);
}

TEST(GraphCli, ProgressShowsTheResidualOnlyWhenAsked) {
  // Node b holds every delta batch 40 ms, so each synchronous step waits that long: ~80 PageRank
  // steps to 1e-6 last seconds, however fast this machine is.
  testing::TempDir dir;
  testing::LocalCluster cluster =
      testing::start_local_cluster("graph-progress", "progress-secret", 2, dir, "", {"--fault-delay-deltas-ms", "40"});
  const std::string config = testing::write_cluster_file(dir, cluster.spec);
  ::chmod(config.c_str(), 0600);  // else every run warns about the inline secret
  const auto run = [&](const std::string& progress) {
    const std::string out = dir.file("out.txt"), err = dir.file("err.txt");
    const testing::CommandResult result = testing::run_command(
        "(" + cli(config, dir, "--algorithm pagerank --generate rmat:8 --partition hash --mode sync --weights equal " +
                                   progress + " > " + out + " 2> " + err + ")"));
    EXPECT_EQ(result.exit_code, 0) << testing::read_file(out) << testing::read_file(err);
    return std::pair{testing::read_file(out), testing::read_file(err)};
  };
  const auto [out, err] = run("--progress always");
  EXPECT_NE(out.find("total: "), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  const std::regex line("\rgraph  residual [0-9.e+-]+ -> 1e-06  [0-9.smh ]+  ETA [^\r]+\x1b\\[K");
  EXPECT_TRUE(std::regex_search(err, line)) << err;
  EXPECT_TRUE(err.ends_with("\r\x1b[K")) << err;

  const auto [quiet_out, quiet_err] = run("--progress auto");
  EXPECT_NE(quiet_out.find("total: "), std::string::npos) << quiet_out;
  EXPECT_EQ(quiet_err, "") << "stderr is a file";
}

}  // namespace
}  // namespace tessera::balance
