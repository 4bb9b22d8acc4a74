// 2D and 3D layouts and the credit refill rule against real workers: exact products when C is cut
// into rectangles or k is split (partial sums added into C by the coordinator), fewer bytes moved
// by rectangles, and a node lost in the middle of a 3D run.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/multiply/multiply.hpp"
#include "tessera/balance/plan/plan.hpp"

namespace tessera::balance {
namespace {

using partition::Layout;

class LayoutWorkers : public ::testing::Test {
 protected:
  void start_workers(std::size_t count) {
    testing::LocalCluster started = testing::start_local_cluster("layouts", "layout-secret", count, dir_);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  plan::Plan plan_for(Layout layout, uint64_t m, uint64_t n, uint64_t k, std::vector<double> weights,
                uint64_t panel_width = 64, uint32_t depth = 3, uint32_t refill = 1) {
    plan::PlanRequest request;
    request.policy = weights.empty() ? plan::Policy::kEven : plan::Policy::kProportional;
    request.layout = layout;
    request.m = m;
    request.n = n;
    request.k = k;
    request.panel_width = panel_width;
    request.panels_in_flight = depth;
    request.refill_threshold = refill;
    request.weights = std::move(weights);
    for (const cluster::NodeSpec& node : cluster_.nodes) request.node_names.push_back(node.name);
    Result<plan::Plan> plan = plan::make_plan(request);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return plan.is_ok() ? *plan : plan::Plan{};
  }

  static uint64_t total_volume(const multiply::MultiplyRun& run) {
    uint64_t volume = 0;
    for (const multiply::NodeRunStats& node : run.nodes) volume += node.volume;
    return volume;
  }

  static uint64_t bytes_to_nodes(const multiply::MultiplyRun& run) {
    uint64_t bytes = 0;
    for (const multiply::NodeRunStats& node : run.nodes) bytes += node.bytes_to_node;
    return bytes;
  }

  testing::TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<testing::ChildProcess>> workers_;
};

TEST_F(LayoutWorkers, EveryLayoutGivesTheExactProductForUnevenSizes) {
  start_workers(3);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  // Integer-valued inputs: every partial product and every sum of partial sums is exact in
  // float64, so the distributed product must equal the local one bit for bit.
  const linalg::Matrix a = linalg::random_matrix(301, 411, 21, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(411, 257, 22, linalg::FillKind::kIntegers);
  const linalg::Matrix expected = reference_product(a, b);
  for (Layout layout : {Layout::kRows, Layout::kColumnBased, Layout::kSquareCorner, Layout::kRecursive3d}) {
    SCOPED_TRACE(std::string(partition::layout_name(layout)));
    const plan::Plan plan = plan_for(layout, 301, 257, 411, {4, 1, 1}, 50);
    linalg::Matrix c;
    Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c);
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    EXPECT_EQ(c, expected);
    EXPECT_EQ(total_volume(*run), 301u * 257u * 411u);
    EXPECT_TRUE(run->lost_nodes.empty()) << ::testing::PrintToString(run->lost_reasons);
    // The fast node did most of the work, as the weights asked.
    EXPECT_GT(run->nodes[0].weight, 0.5);
  }
}

TEST_F(LayoutWorkers, SplittingKSendsPartialSumsThatTheCoordinatorAdds) {
  start_workers(4);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  // A deep, narrow product: the 3D layout cuts k, so nodes share cells of C.
  const linalg::Matrix a = linalg::random_matrix(96, 3001, 5, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(3001, 80, 6, linalg::FillKind::kIntegers);
  const plan::Plan plan = plan_for(Layout::kRecursive3d, 96, 80, 3001, {}, 128);
  bool splits_k = false;
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    for (const partition::Block& block : plan.blocks_of(i)) splits_k |= block.depth < plan.k;
  }
  ASSERT_TRUE(splits_k) << plan.to_string();
  linalg::Matrix c(96, 80);
  for (double& value : c.values) value = 12345.0;  // whatever C held before must not leak in
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
}

TEST_F(LayoutWorkers, RectanglesMoveFewerBytesThanRowBlocks) {
  start_workers(4);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(512, 512, 1);
  const linalg::Matrix b = linalg::random_matrix(512, 512, 2);
  linalg::Matrix rows_c, blocks_c;
  Result<multiply::MultiplyRun> rows = multiply::run_multiply(*connection, plan_for(Layout::kRows, 512, 512, 512, {}), a, b, rows_c);
  Result<multiply::MultiplyRun> blocks =
      multiply::run_multiply(*connection, plan_for(Layout::kColumnBased, 512, 512, 512, {}), a, b, blocks_c);
  ASSERT_TRUE(rows.is_ok()) << rows.status().to_string();
  ASSERT_TRUE(blocks.is_ok()) << blocks.status().to_string();
  // Four row blocks each need all of B: 2 MiB of A in all plus 4 x 2 MiB of B = 10 MiB. Four
  // 256 x 256 squares need half of A and half of B each: 4 x (1 + 1) MiB = 8 MiB.
  EXPECT_LT(bytes_to_nodes(*blocks), bytes_to_nodes(*rows) * 85 / 100)
      << "rows " << bytes_to_nodes(*rows) << " blocks " << bytes_to_nodes(*blocks);
  EXPECT_LT(std::abs(rows_c.values[777] - blocks_c.values[777]), 1e-9);
}

TEST_F(LayoutWorkers, RefillThresholdSendsInBurstsAndStaysExact) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(200, 700, 3, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(700, 150, 4, linalg::FillKind::kIntegers);
  for (uint32_t refill : {1u, 4u, 8u}) {
    SCOPED_TRACE(refill);
    const plan::Plan plan = plan_for(Layout::kRows, 200, 150, 700, {2, 1}, 16, 8, refill);
    linalg::Matrix c;
    std::atomic<uint64_t> credits{0};
    multiply::MultiplyHooks hooks;
    hooks.on_credit = [&](std::size_t, uint64_t) { ++credits; };
    Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c, hooks);
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    EXPECT_EQ(c, reference_product(a, b));
    EXPECT_EQ(credits.load(), 2u * 44u) << "one credit per job: 44 panels of 16 per node";
  }
}

TEST_F(LayoutWorkers, ANodeKilledDuringA3dRunLeavesAnExactProduct) {
  start_workers(4);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(128, 4000, 9, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(4000, 128, 10, linalg::FillKind::kIntegers);
  const plan::Plan plan = plan_for(Layout::kRecursive3d, 128, 128, 4000, {}, 64);
  std::atomic<bool> killed{false};
  multiply::MultiplyHooks hooks;
  hooks.on_credit = [&](std::size_t node, uint64_t) {
    if (node == 3 && !killed.exchange(true)) workers_[3]->kill_now();
  };
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c, hooks);
  ASSERT_TRUE(killed.load());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
  EXPECT_EQ(run->lost_nodes, std::vector<std::string>{"d"});
  EXPECT_FALSE(run->reissued_tiles.empty());
  EXPECT_EQ(total_volume(*run), 128u * 128u * 4000u);
}

}  // namespace
}  // namespace tessera::balance
