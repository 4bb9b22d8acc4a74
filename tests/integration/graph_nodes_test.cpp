// Which nodes take part in a graph run, against real tessera-worker processes on loopback:
// --nodes auto with hand-made graph costs leaves out a node whose share costs more than it saves
// and names it with why, best runs the fastest node alone, a list runs those nodes, an unknown
// name is refused; without graph rates auto takes every node and says so. The placement cache
// and the run memory: a METIS placement is reused by the next run (and a damaged entry ignored),
// and the second run's forecast starts from what the first measured. Every run verified.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/graphs/run_memory.hpp"
#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance {
namespace {

namespace tg = tessera::graph;
namespace tpart = tessera::partition;
using graphs::NodeChoice;

graphs::GraphRunOptions fast_options() {
  graphs::GraphRunOptions options;
  options.poll_interval = std::chrono::milliseconds(10);
  options.snapshot_interval = std::chrono::milliseconds(200);
  options.node_timeout_s = 20.0;
  options.max_wall_s = 60.0;
  options.verify = true;
  return options;
}

graphs::GraphNodeCosts costs_of(const std::string& name, double edges_per_s, double per_delta_s) {
  graphs::GraphNodeCosts costs;
  costs.name = name;
  costs.rates.edge_updates_per_s = edges_per_s;
  costs.rates.send_s_per_delta = per_delta_s;
  costs.rates.receive_s_per_delta = per_delta_s;
  costs.to_node_bytes_per_s = 1e9;
  costs.from_node_bytes_per_s = 1e9;
  return costs;
}

class GraphNodes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    cluster_ = new testing::LocalCluster(testing::start_local_cluster("graph-nodes", "nodes-secret", 3, *dir_));
  }
  static void TearDownTestSuite() {
    delete cluster_;  // stops the workers by pid
    delete dir_;
    cluster_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    cluster::ConnectOptions options;
    options.required_capabilities = transport::kCapabilityGraph;
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_->spec, options);
    ASSERT_TRUE(connection) << connection.status().message();
    connection_.emplace(std::move(*connection));
  }
  void TearDown() override {
    if (connection_) connection_->close();
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const cluster::NodeSpec& node : cluster_->spec.nodes) out.push_back(node.name);
    return out;
  }
  // The first node fast, the others slow with dear deltas: on a graph that cuts badly the model
  // keeps the first alone.
  std::vector<graphs::GraphNodeCosts> lopsided_costs() const {
    const std::vector<std::string> all = names();
    return {costs_of(all[0], 5e8, 1e-8), costs_of(all[1], 1e7, 2e-5), costs_of(all[2], 1e7, 2e-5)};
  }

  static void expect_verified(const Result<graphs::GraphOutcome>& outcome) {
    ASSERT_TRUE(outcome) << outcome.status().message();
    ASSERT_TRUE(outcome->verification.has_value());
    EXPECT_TRUE(outcome->verification->passed) << outcome->verification->detail;
  }

  static testing::TempDir* dir_;
  static testing::LocalCluster* cluster_;
  std::optional<cluster::ClusterConnection> connection_;
};
testing::TempDir* GraphNodes::dir_ = nullptr;
testing::LocalCluster* GraphNodes::cluster_ = nullptr;

TEST_F(GraphNodes, AutoLeavesOutNodesWhoseDeltasCostMoreThanTheySaveAndSaysWhy) {
  const graphdata::DirectedGraph graph = *graphdata::generate_directed_graph("rmat:11", 3);
  graphs::GraphRunOptions options = fast_options();
  options.node_costs = lopsided_costs();
  options.choose_method = true;
  const Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection_, graph, options);
  expect_verified(outcome);
  EXPECT_EQ(outcome->choice.mode, "auto");
  EXPECT_EQ(outcome->choice.taking_part, std::vector<std::string>{names()[0]});
  ASSERT_EQ(outcome->choice.left_out.size(), 2u);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_NE(outcome->choice.left_out[i - 1].find(names()[i]), std::string::npos) << outcome->choice.left_out[i - 1];
    EXPECT_TRUE(outcome->nodes[i].left_out);
    EXPECT_EQ(outcome->nodes[i].edge_updates, 0u) << "a node left out does no work";
  }
  ASSERT_TRUE(outcome->choice.forecast.has_value());
  EXPECT_GT(outcome->choice.forecast->total_s, 0.0);
  EXPECT_EQ(outcome->choice.candidates.size(), 3u) << "alone, the best two, all three";
  EXPECT_EQ(outcome->placing.method, "one part");
}

TEST_F(GraphNodes, AllBestAndAListRunWhatTheyNameAndAnUnknownNameIsRefused) {
  const graphdata::DirectedGraph graph = *graphdata::generate_directed_graph("mesh2d:30x20", 3);
  for (const std::string& choice : {std::string("all"), std::string("best"), names()[2] + "," + names()[1]}) {
    SCOPED_TRACE(choice);
    graphs::GraphRunOptions options = fast_options();
    options.algorithm.kind = tg::AlgorithmKind::kConnectedComponents;
    options.node_costs = lopsided_costs();
    options.nodes = *graphs::parse_node_choice(choice);
    const Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection_, graph, options);
    expect_verified(outcome);
    const std::vector<std::string> expected = choice == "all"    ? names()
                                              : choice == "best" ? std::vector<std::string>{names()[0]}
                                                                 : std::vector<std::string>{names()[1], names()[2]};
    EXPECT_EQ(outcome->choice.taking_part, expected);
    EXPECT_TRUE(outcome->choice.left_out.empty()) << "only auto explains a choice";
  }
  graphs::GraphRunOptions options = fast_options();
  options.nodes = *graphs::parse_node_choice("nosuchnode");
  const Result<graphs::GraphOutcome> refused = graphs::run_graph(*connection_, graph, options);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("nosuchnode"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find(names()[0]), std::string::npos) << "lists the nodes there are";

  options.nodes.mode = NodeChoice::Mode::kBest;  // no graph rates
  const Result<graphs::GraphOutcome> no_rates = graphs::run_graph(*connection_, graph, options);
  ASSERT_FALSE(no_rates);
  EXPECT_NE(no_rates.status().message().find("tessera profile"), std::string::npos) << no_rates.status().message();
}

TEST_F(GraphNodes, WithoutGraphRatesAutoTakesEveryNodeAndSaysWhy) {
  const graphdata::DirectedGraph graph = *graphdata::generate_directed_graph("rmat:10", 5);
  const Result<graphs::GraphOutcome> outcome = graphs::run_graph(*connection_, graph, fast_options());
  expect_verified(outcome);
  EXPECT_EQ(outcome->choice.taking_part, names());
  EXPECT_FALSE(outcome->choice.forecast.has_value());
  EXPECT_NE(outcome->choice.workload_source.find("tessera profile"), std::string::npos) << outcome->choice.workload_source;
}

TEST_F(GraphNodes, AMetisPlacementIsReusedByTheNextRunAndADamagedEntryIgnored) {
  testing::TempDir cache;
  const graphdata::DirectedGraph graph = *graphdata::generate_directed_graph("lognormal:3000", 9);
  graphs::GraphRunOptions options = fast_options();
  options.nodes.mode = NodeChoice::Mode::kAll;
  options.method = tpart::PartitionMethod::kMetis;
  options.cache_dir = cache.file("graphs");
  const Result<graphs::GraphOutcome> first = graphs::run_graph(*connection_, graph, options);
  expect_verified(first);
  EXPECT_FALSE(first->placing.cached);
  const Result<graphs::GraphOutcome> second = graphs::run_graph(*connection_, graph, options);
  expect_verified(second);
  EXPECT_TRUE(second->placing.cached) << second->placing.cache_note;
  EXPECT_EQ(second->placement.quality.edge_cut, first->placement.quality.edge_cut);

  // Every placement file damaged: the next run places again and says why.
  int damaged = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache.file("graphs"))) {
    if (entry.path().extension() != ".tpc") continue;
    std::fstream file(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(40);
    file.put('\x7f');
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  const Result<graphs::GraphOutcome> third = graphs::run_graph(*connection_, graph, options);
  expect_verified(third);
  EXPECT_FALSE(third->placing.cached);
  EXPECT_NE(third->placing.cache_note.find("ignored"), std::string::npos) << third->placing.cache_note;

  // A different graph of the same size never reuses it.
  const graphdata::DirectedGraph other = *graphdata::generate_directed_graph("lognormal:3000", 10);
  const Result<graphs::GraphOutcome> fourth = graphs::run_graph(*connection_, other, options);
  expect_verified(fourth);
  EXPECT_FALSE(fourth->placing.cached);
}

TEST_F(GraphNodes, TheSecondRunOnAGraphForecastsFromWhatTheFirstMeasured) {
  testing::TempDir cache;
  const graphdata::DirectedGraph graph = *graphdata::generate_directed_graph("rmat:10", 11);
  graphs::GraphRunOptions options = fast_options();
  options.node_costs = lopsided_costs();
  options.cache_dir = cache.file("graphs");
  const Result<graphs::GraphOutcome> first = graphs::run_graph(*connection_, graph, options);
  expect_verified(first);
  EXPECT_EQ(first->choice.workload_source.find("measured by past runs"), std::string::npos) << first->choice.workload_source;
  const Result<graphs::GraphOutcome> second = graphs::run_graph(*connection_, graph, options);
  expect_verified(second);
  EXPECT_NE(second->choice.workload_source.find("measured by past runs"), std::string::npos) << second->choice.workload_source;
}

TEST_F(GraphNodes, ASetThatRanIsForecastWithWhatItTookBeyondItsForecastAndItsRatesAreNotTakenForAlone) {
  testing::TempDir cache;
  const graphdata::DirectedGraph graph = *graphdata::generate_directed_graph("rmat:10", 5);
  graphs::GraphRunOptions options = fast_options();
  options.node_costs = lopsided_costs();
  options.nodes = *graphs::parse_node_choice("all");
  options.cache_dir = cache.file("graphs");
  const Result<graphs::GraphOutcome> first = graphs::run_graph(*connection_, graph, options);
  expect_verified(first);
  std::vector<std::string> memories;
  for (const auto& entry : std::filesystem::directory_iterator(options.cache_dir)) {
    if (entry.path().filename().string().starts_with("run-")) memories.push_back(entry.path().string());
  }
  ASSERT_EQ(memories.size(), 1u);
  const graphs::RunMemory memory = graphs::load_run_memory(memories[0]);
  const std::string every = graphs::set_key(names());
  ASSERT_EQ(memory.extra_by_set.count(every), 1u) << "the set that ran keeps its own extra";
  EXPECT_TRUE(memory.edge_updates_per_s.empty()) << "with others, busy time is not an edge rate";

  const Result<graphs::GraphOutcome> second = graphs::run_graph(*connection_, graph, options);
  expect_verified(second);
  ASSERT_TRUE(second->choice.forecast.has_value());
  EXPECT_DOUBLE_EQ(second->choice.forecast->extra_s, memory.extra_by_set.at(every));
}

}  // namespace
}  // namespace tessera::balance
