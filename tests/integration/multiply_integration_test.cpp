// End-to-end multiplies against real tessera-worker processes over loopback TCP.
#include "tessera/balance/multiply/multiply.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/multiply/verify.hpp"

namespace tessera::balance {
namespace {

using testing::ChildProcess;
using testing::TempDir;

using testing::kSecret;

class LocalWorkers : public ::testing::Test {
 protected:
  // Starts `count` workers with one thread each and waits until each completes a handshake.
  void start_workers(std::size_t count, const std::string& worker_secret = kSecret) {
    testing::LocalCluster started = testing::start_local_cluster("it", kSecret, count, dir_, worker_secret);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  std::string log_path(std::size_t i) const { return dir_.file("worker" + std::to_string(i) + ".log"); }

  plan::Plan plan_for(plan::Policy policy, uint64_t m, uint64_t n, uint64_t k, std::vector<double> weights,
                uint64_t panel_width = 64) {
    plan::PlanRequest request;
    request.policy = policy;
    request.m = m;
    request.n = n;
    request.k = k;
    request.panel_width = panel_width;
    request.panels_in_flight = 3;
    request.weights = std::move(weights);
    for (const cluster::NodeSpec& node : cluster_.nodes) request.node_names.push_back(node.name);
    Result<plan::Plan> plan = plan::make_plan(request);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return plan.is_ok() ? *plan : plan::Plan{};
  }

  TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(LocalWorkers, ThreeWorkersMultiplyExactlyWithWeights532) {
  start_workers(3);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();

  // Integer-valued inputs: every partial product and sum is exact in float64, so the distributed
  // result must equal the local one bit for bit whatever the summation order.
  const linalg::Matrix a = linalg::random_matrix(300, 517, 11, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(517, 211, 12, linalg::FillKind::kIntegers);
  const plan::Plan plan = plan_for(plan::Policy::kProportional, 300, 211, 517, {0.5, 0.3, 0.2});
  EXPECT_EQ(plan.shares[0].rows.count, 150u);
  EXPECT_EQ(plan.shares[1].rows.count, 90u);
  EXPECT_EQ(plan.shares[2].rows.count, 60u);

  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));

  ASSERT_EQ(run->nodes.size(), 3u);
  for (const multiply::NodeRunStats& node : run->nodes) {
    EXPECT_GT(node.finish_s, 0.0) << node.name;
    EXPECT_GT(node.compute_s, 0.0) << node.name;
    EXPECT_LE(node.finish_s, run->makespan_s) << node.name;
    EXPECT_EQ(node.panels, 9u) << node.name;  // ceil(517 / 64)
    // Each node receives its A rows and every B panel, and returns its C rows.
    EXPECT_GE(node.bytes_to_node, 8 * (node.rows * 517 + 517 * 211)) << node.name;
    EXPECT_GE(node.bytes_from_node, 8 * node.rows * 211) << node.name;
    // The worker's own CPU accounting for this run came back, split into both parts.
    EXPECT_GT(node.worker_compute_cpu_s, 0.0) << node.name;
    EXPECT_GT(node.worker_io_cpu_s, 0.0) << node.name;
    ASSERT_TRUE(node.worker_comm_share().has_value()) << node.name;
    EXPECT_LT(*node.worker_comm_share(), 1.0) << node.name;
  }
  EXPECT_GE(run->imbalance, 1.0);
  EXPECT_TRUE(multiply::verify_product(a, b, c, multiply::VerifyMode::kExact, 1).passed);
  EXPECT_TRUE(multiply::verify_product(a, b, c, multiply::VerifyMode::kFreivalds, 1).passed);
}

TEST_F(LocalWorkers, UnevenSizesAndEvenPolicyWithRealValues) {
  start_workers(3);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  const linalg::Matrix a = linalg::random_matrix(101, 333, 5);
  const linalg::Matrix b = linalg::random_matrix(333, 77, 6);
  // Panel width 50 leaves a last panel of 33 rows.
  const plan::Plan plan = plan_for(plan::Policy::kEven, 101, 77, 333, {}, 50);
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const multiply::Verification exact = multiply::verify_product(a, b, c, multiply::VerifyMode::kExact, 2);
  EXPECT_TRUE(exact.passed) << exact.detail;
  EXPECT_TRUE(multiply::verify_product(a, b, c, multiply::VerifyMode::kFreivalds, 2).passed);
}

TEST_F(LocalWorkers, SessionsAreReusableForSeveralMultiplies) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const linalg::Matrix a = linalg::random_matrix(40, 30, seed, linalg::FillKind::kIntegers);
    const linalg::Matrix b = linalg::random_matrix(30, 20, seed + 100, linalg::FillKind::kIntegers);
    linalg::Matrix c;
    Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan_for(plan::Policy::kProportional, 40, 20, 30, {3, 1}, 7), a, b, c);
    ASSERT_TRUE(run.is_ok()) << run.status().to_string();
    EXPECT_EQ(c, reference_product(a, b)) << "seed " << seed;
  }
}

TEST_F(LocalWorkers, ZeroWeightNodeGetsNoRowsAndResultStillExact) {
  start_workers(3);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(50, 40, 1, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(40, 30, 2, linalg::FillKind::kIntegers);
  const plan::Plan plan = plan_for(plan::Policy::kProportional, 50, 30, 40, {1, 0, 1});
  EXPECT_EQ(plan.shares[1].rows.count, 0u);
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
  EXPECT_EQ(run->nodes[1].finish_s, 0.0);
}

TEST_F(LocalWorkers, UnreachableNodeIsNamedWithItsAddress) {
  start_workers(1);
  cluster::NodeSpec ghost;
  ghost.name = "ghost";
  ghost.host = "127.0.0.1";
  ghost.port = testing::free_loopback_port();
  cluster_.nodes.push_back(ghost);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_, {std::chrono::milliseconds(2000)});
  ASSERT_FALSE(connection.is_ok());
  EXPECT_EQ(connection.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(connection.status().message().find("'ghost'"), std::string::npos) << connection.status().message();
  EXPECT_NE(connection.status().message().find(ghost.endpoint()), std::string::npos) << connection.status().message();
  EXPECT_NE(connection.status().message().find("unreachable"), std::string::npos);
}

TEST_F(LocalWorkers, WrongSecretIsRefusedOnBothSidesAndWorkerKeepsServing) {
  start_workers(1, "the-workers-secret");
  Result<cluster::ClusterConnection> refused = cluster::ClusterConnection::connect(cluster_);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kAuthFailed);
  EXPECT_NE(refused.status().message().find("refused the shared secret"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("'a'"), std::string::npos);

  // The worker logged the refusal too, and still serves a coordinator with the right secret.
  cluster_.secret = "the-workers-secret";
  Result<cluster::ClusterConnection> accepted = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(accepted.is_ok()) << accepted.status().to_string();
  accepted->close();
  const std::string log = testing::read_file(log_path(0));
  EXPECT_NE(log.find("does not match the secret"), std::string::npos) << "worker log:\n" << log;
}

// A static plan survives a node's death too: its unfinished block goes to whoever asks next.
TEST_F(LocalWorkers, WorkerKilledMidRunUnderAStaticPlanLosesItsBlockToTheOthers) {
  start_workers(4);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(400, 2000, 3, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(2000, 300, 4, linalg::FillKind::kIntegers);
  const plan::Plan plan = plan_for(plan::Policy::kEven, 400, 300, 2000, {}, 32);
  std::atomic<bool> killed{false};
  multiply::MultiplyHooks hooks;
  // kill -9 node 'b' when it returns its first credit: most of its panels are still to come.
  hooks.on_credit = [&](std::size_t node, uint64_t) {
    if (node == 1 && !killed.exchange(true)) workers_[1]->kill_now();
  };
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c, hooks);
  ASSERT_TRUE(killed.load());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
  ASSERT_EQ(run->lost_nodes, std::vector<std::string>{"b"});
  ASSERT_EQ(run->lost_reasons.size(), 1u);
  EXPECT_NE(run->lost_reasons[0].find("node 'b' (" + cluster_.nodes[1].endpoint() + ")"), std::string::npos)
      << run->lost_reasons[0];
  EXPECT_EQ(run->reissued_tiles, std::vector<uint64_t>{1}) << "b's one block";
  EXPECT_EQ(run->nodes[1].rows, 0u);
  uint64_t rows = 0;
  for (const multiply::NodeRunStats& node : run->nodes) rows += node.rows;
  EXPECT_EQ(rows, 400u);
  // b's block went out as three spare row pieces, one per other node, not whole to one survivor:
  // three own blocks plus three pieces were delivered.
  uint64_t delivered = 0;
  for (const multiply::NodeRunStats& node : run->nodes) delivered += node.tiles;
  EXPECT_EQ(delivered, 6u);
  EXPECT_EQ(run->tiles, 4u);
  // The survivors stay up for the next session.
  EXPECT_TRUE(testing::process_alive(workers_[0]->pid()));
  EXPECT_TRUE(testing::process_alive(workers_[2]->pid()));
}

TEST_F(LocalWorkers, AShareLargerThanTheWorkersTileMemoryIsRefusedBeforeSending) {
  start_workers(2);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  for (cluster::NodeLink& link : connection->links()) link.hello.tile_memory_cap = 1 << 20;  // as a 1 MiB worker says
  const linalg::Matrix a = linalg::random_matrix(400, 400, 1);
  const linalg::Matrix b = linalg::random_matrix(400, 400, 2);
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan_for(plan::Policy::kEven, 400, 400, 400, {}), a, b, c);
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(run.status().message().find("node 'a'"), std::string::npos) << run.status().message();
  EXPECT_NE(run.status().message().find("--memory-cap-mb"), std::string::npos) << run.status().message();
}

TEST_F(LocalWorkers, MismatchedDimensionsAreRefusedBeforeSending) {
  start_workers(1);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok());
  const linalg::Matrix a = linalg::random_matrix(10, 12, 1);
  const linalg::Matrix b = linalg::random_matrix(13, 5, 2);
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan_for(plan::Policy::kEven, 10, 5, 12, {}), a, b, c);
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("B is 13x5"), std::string::npos) << run.status().message();
}

}  // namespace
}  // namespace tessera::balance
