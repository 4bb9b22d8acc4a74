// The dynamic (pull) policy against real workers: exact products for awkward sizes, a worker
// killed mid-run whose tiles the others finish, sessions still usable afterwards.
#include "tessera/balance/multiply/multiply.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/plan/plan.hpp"

namespace tessera::balance {
namespace {

using testing::ChildProcess;

class DynamicWorkers : public ::testing::Test {
 protected:
  void start_workers(std::size_t count) {
    testing::LocalCluster started = testing::start_local_cluster("dyn", "dynamic-secret", count, dir_);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  plan::Plan dynamic_plan(uint64_t m, uint64_t n, uint64_t k, uint64_t tile_rows, uint64_t panel_width = 64) {
    plan::PlanRequest request;
    request.policy = plan::Policy::kDynamic;
    request.m = m;
    request.n = n;
    request.k = k;
    request.panel_width = panel_width;
    request.panels_in_flight = 3;
    request.tile_rows = tile_rows;
    for (const cluster::NodeSpec& node : cluster_.nodes) request.node_names.push_back(node.name);
    Result<plan::Plan> plan = plan::make_plan(request);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return *plan;
  }

  // A 600 x 600 dynamic multiply on three new workers whose profile-like expectations are
  // `expected` (the links are all loopback: only the expectations differ); checks that the
  // product is exact and every row came back once.
  Result<multiply::MultiplyRun> run_expecting(const std::vector<multiply::NodeExpectation>& expected) {
    start_workers(3);
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
    if (!connection) return connection.status();
    const uint64_t n = 600;
    const linalg::Matrix a = linalg::random_matrix(n, n, 5, linalg::FillKind::kIntegers);
    const linalg::Matrix b = linalg::random_matrix(n, n, 6, linalg::FillKind::kIntegers);
    linalg::Matrix c;
    multiply::MultiplyHooks hooks;
    hooks.deadlines.nodes = expected;
    Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, dynamic_plan(n, n, n, 32), a, b, c, hooks);
    if (run) {
      EXPECT_EQ(c, reference_product(a, b));
      EXPECT_EQ(total_rows(*run), n);
    }
    return run;
  }

  static uint64_t total_rows(const multiply::MultiplyRun& run) {
    uint64_t rows = 0;
    for (const multiply::NodeRunStats& node : run.nodes) rows += node.rows;
    return rows;
  }

  testing::TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(DynamicWorkers, ManySmallTilesAndUnevenSizesAreExact) {
  start_workers(3);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  for (uint64_t n : {1000u, 1001u}) {
    // Integer-valued inputs: the distributed product must equal the local one bit for bit.
    const linalg::Matrix a = linalg::random_matrix(n, n, n, linalg::FillKind::kIntegers);
    const linalg::Matrix b = linalg::random_matrix(n, n, n + 1, linalg::FillKind::kIntegers);
    linalg::Matrix c;
    Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, dynamic_plan(n, n, n, 64), a, b, c);
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    EXPECT_EQ(c, reference_product(a, b)) << "n=" << n;
    EXPECT_EQ(total_rows(*run), n) << "every row delivered exactly once";
    EXPECT_GE(run->tiles, n / 64);
    EXPECT_TRUE(run->lost_nodes.empty());
  }
}

TEST_F(DynamicWorkers, ANodeWhoseLinkCannotPayForBSitsTheRunOutAndReceivesNothing) {
  // a and b fast, c behind a 10 kB/s link: B alone (2.9 MB) would take it about 5 minutes.
  Result<multiply::MultiplyRun> run = run_expecting({{1e9, 1e9, 1e9}, {1e9, 1e9, 1e9}, {1e4, 1e4, 1e9}});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run->nodes[2].rows, 0u) << "c must not start a tile it cannot pay for";
  EXPECT_EQ(run->nodes[2].tiles, 0u);
  EXPECT_LT(run->nodes[2].bytes_to_node, 1024u * 1024u) << "c received no tile data (only control frames)";
  EXPECT_GT(run->nodes[0].rows, 0u);
  EXPECT_GT(run->nodes[1].rows, 0u);
}

TEST_F(DynamicWorkers, WhenBDominatesEveryNodesFirstTileTheBestStarterStillStarts) {
  // Every node expects B (2.9 MB at 1 MB/s) to take longer than the whole product's compute: by
  // the start rule alone none would pay, so the nodes that would start soonest (here all, equal)
  // must start anyway, or the run would never end.
  Result<multiply::MultiplyRun> run = run_expecting({{1e6, 1e6, 1e9}, {1e6, 1e6, 1e9}, {1e6, 1e6, 1e9}});
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
}

TEST_F(DynamicWorkers, SessionsServeTheNextMultiplyAfterADynamicOne) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(300, 200, 1, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(200, 150, 2, linalg::FillKind::kIntegers);
  for (int round = 0; round < 3; ++round) {
    linalg::Matrix c;
    Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, dynamic_plan(300, 150, 200, 32, 48), a, b, c);
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    EXPECT_EQ(c, reference_product(a, b)) << "round " << round;
  }
}

TEST_F(DynamicWorkers, AWorkerKilledMidRunLosesItsTilesToTheOthersAndTheProductIsExact) {
  start_workers(4);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(1200, 1200, 7, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(1200, 1200, 8, linalg::FillKind::kIntegers);
  std::atomic<bool> killed{false};
  multiply::MultiplyHooks hooks;
  // kill -9 node 'c' at its first credit: it then holds a tile it will never finish.
  hooks.on_credit = [&](std::size_t node, uint64_t) {
    if (node == 2 && !killed.exchange(true)) workers_[2]->kill_now();
  };
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, dynamic_plan(1200, 1200, 1200, 64), a, b, c, hooks);
  ASSERT_TRUE(killed.load());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
  ASSERT_EQ(run->lost_nodes, std::vector<std::string>{"c"}) << ::testing::PrintToString(run->lost_reasons);
  EXPECT_FALSE(run->reissued_tiles.empty()) << "the dead node held a tile";
  EXPECT_EQ(run->nodes[2].rows, 0u);
  EXPECT_EQ(total_rows(*run), 1200u);
}

TEST_F(DynamicWorkers, WhenEveryWorkerDiesTheRunFailsNamingThem) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(400, 400, 1);
  const linalg::Matrix b = linalg::random_matrix(400, 400, 2);
  multiply::MultiplyHooks hooks;
  std::atomic<bool> killed{false};
  hooks.on_credit = [&](std::size_t, uint64_t) {
    if (!killed.exchange(true)) {
      for (auto& worker : workers_) worker->kill_now();
    }
  };
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, dynamic_plan(400, 400, 400, 32, 32), a, b, c, hooks);
  ASSERT_FALSE(run.is_ok());
  EXPECT_NE(run.status().message().find("every node failed"), std::string::npos) << run.status().message();
  EXPECT_NE(run.status().message().find("node 'a'"), std::string::npos) << run.status().message();
  EXPECT_NE(run.status().message().find("node 'b'"), std::string::npos) << run.status().message();
}

}  // namespace
}  // namespace tessera::balance
