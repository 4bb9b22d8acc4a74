// Graph runs against real worker processes, one of them the test twin tessera-worker-faulty
// (worker/include/tessera/worker/fault_hooks.hpp):
//  - with every delta batch it sends held back for kHoldMs before it is written, async PageRank
//    and connected components still stop only once every batch has arrived: the coordinator polls
//    every 10 ms, so many polls fall while batches are held (some of them with the residual
//    already within the tolerance, where only the batch counters keep the run going), and the
//    answer verifies, exactly for cc;
//  - a real worker that hosts only the GEMM service is refused by name, by the session facade and
//    by `tessera graph`.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "process_fixture.hpp"
#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance {
namespace {

namespace tg = tessera::graph;

// Long next to the 10 ms poll interval, so a held batch spans many polls.
constexpr uint32_t kHoldMs = 150;

session::SessionOptions graph_session() {
  session::SessionOptions options;
  options.connect.required_capabilities = transport::kCapabilityGraph;
  return options;
}

// Three workers; the last, c, holds back every delta batch it sends.
class HeldDeltas : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    cluster_ = new testing::LocalCluster(testing::start_local_cluster(
        "graph-held", "held-secret", 3, *dir_, "", {"--fault-delay-deltas-ms", std::to_string(kHoldMs)}));
  }
  static void TearDownTestSuite() {
    delete cluster_;  // stops the workers by pid
    delete dir_;
    cluster_ = nullptr;
    dir_ = nullptr;
  }

  // Runs `spec` async on rmat:12 over the three workers and checks what termination promises.
  static void expect_termination_waits_for_held_batches(const tg::AlgorithmSpec& spec) {
    Result<graphdata::DirectedGraph> graph = graphdata::generate_directed_graph("rmat:12", 7);
    ASSERT_TRUE(graph) << graph.status().message();
    Result<session::Session> session = session::Session::open(cluster_->spec, graph_session());
    ASSERT_TRUE(session) << session.status().message();
    graphs::GraphRunOptions options;
    options.algorithm = spec;
    options.mode = graphs::GraphMode::kAsync;
    options.poll_interval = std::chrono::milliseconds(10);
    options.node_timeout_s = 20.0;
    options.max_wall_s = 60.0;
    options.verify = true;
    Result<graphs::GraphOutcome> outcome = session->graph(*graph, options);
    ASSERT_TRUE(outcome) << outcome.status().message();

    ASSERT_TRUE(outcome->verification.has_value());
    EXPECT_TRUE(outcome->verification->passed) << outcome->verification->detail;
    if (spec.kind == tg::AlgorithmKind::kConnectedComponents) {
      EXPECT_EQ(outcome->verification->mismatches, 0) << outcome->verification->first_mismatch;
    }
    EXPECT_TRUE(outcome->lost_nodes.empty());
    EXPECT_EQ(outcome->restarts, 0u);
    EXPECT_LE(outcome->residual, outcome->tolerance);

    // The engines stopped with nothing in flight: a batch still held when the run was stopped
    // would be counted sent and never received.
    ASSERT_EQ(outcome->nodes.size(), 3u);
    uint64_t sent = 0;
    uint64_t received = 0;
    for (const graphs::GraphNodeFigures& node : outcome->nodes) {
      sent += node.batches_sent;
      received += node.batches_received;
    }
    EXPECT_EQ(sent, received);
    EXPECT_GT(outcome->nodes[2].batches_sent, 0u) << "node c held nothing back; the test proves nothing";

    // Polls saw batches in flight; in some of them the residual alone would already have ended
    // the run (what a rule that ignored the batch counters would have done, losing the batches).
    uint64_t in_flight = 0;
    uint64_t settled_but_in_flight = 0;
    for (const graphs::TracePoint& point : outcome->trace) {
      if (point.batches_sent == point.batches_received) continue;
      ++in_flight;
      if (point.residual <= outcome->tolerance) ++settled_but_in_flight;
    }
    EXPECT_GT(in_flight, 0u);
    EXPECT_GT(settled_but_in_flight, 0u) << "no poll saw the residual within the tolerance while batches were held";
    const graphs::TracePoint& last = outcome->trace.back();
    EXPECT_EQ(last.batches_sent, last.batches_received);
    RecordProperty("polls", static_cast<int>(outcome->polls));
    RecordProperty("polls_in_flight", static_cast<int>(in_flight));
    RecordProperty("polls_settled_but_in_flight", static_cast<int>(settled_but_in_flight));
  }

  static testing::TempDir* dir_;
  static testing::LocalCluster* cluster_;
};
testing::TempDir* HeldDeltas::dir_ = nullptr;
testing::LocalCluster* HeldDeltas::cluster_ = nullptr;

TEST_F(HeldDeltas, PageRankStopsOnlyOnceEveryHeldBatchArrived) {
  expect_termination_waits_for_held_batches(tg::AlgorithmSpec{});
}

TEST_F(HeldDeltas, ConnectedComponentsStopOnlyOnceEveryHeldBatchArrivedAndAreExact) {
  tg::AlgorithmSpec cc;
  cc.kind = tg::AlgorithmKind::kConnectedComponents;
  expect_termination_waits_for_held_batches(cc);
}

// A real worker process that hosts only GEMM (the twin with --fault-services gemm) next to a
// complete one: a graph session refuses it by name; a session that needs no graph service takes it.
TEST(GraphServiceMissing, ARealWorkerWithoutTheGraphServiceIsRefusedByName) {
  testing::TempDir dir;
  testing::LocalCluster cluster =
      testing::start_local_cluster("graph-gemm-only", "gemm-only-secret", 2, dir, "", {"--fault-services", "gemm"});

  Result<session::Session> refused = session::Session::open(cluster.spec, graph_session());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidConfig);
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("node 'b'"), std::string::npos) << message;
  EXPECT_NE(message.find("missing graph"), std::string::npos) << message;
  EXPECT_EQ(message.find("node 'a'"), std::string::npos) << message;

  Result<session::Session> gemm = session::Session::open(cluster.spec);
  ASSERT_TRUE(gemm) << gemm.status().message();
  const std::vector<transport::Hello> facts = gemm->node_facts();
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[1].capabilities & transport::kCapabilityGraph, 0u);
  EXPECT_NE(facts[1].capabilities & transport::kCapabilityGemm, 0u);
  gemm->close();

  const std::string config = testing::write_cluster_file(dir, cluster.spec);
  const testing::CommandResult run = testing::run_command(std::string(TESSERA_CLI_BINARY) + " graph " + config +
                                                          " --run-dir " + dir.file("run") +
                                                          " --algorithm cc --generate rmat:5");
  // A cluster that cannot run graphs is bad input, like a bad cluster file: exit 2.
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("node 'b'"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("missing graph, it offers gemm"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace tessera::balance
