// A worker's own ERROR reaching the user as what it is: real tessera-worker processes with a
// 1 MiB tile memory cap, asked to hold more than that by a STORE, a multiply and a profile.
#include "tessera/transport/request.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/multiply/multiply.hpp"
#include "tessera/gemm/wire_io.hpp"

namespace tessera::balance {
namespace {

namespace tp = tessera::transport;
using testing::ChildProcess;

using testing::kSecret;
const std::vector<std::string> kOneMiBCap = {"--memory-cap-mb", "1"};

::testing::AssertionResult contains(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << needle << "'";
}

class WorkerErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_file(dir_.file("secret"), kSecret);
    cluster_.name = "errors";
    cluster_.secret = kSecret;
    cluster_.source_path = dir_.file("cluster.yaml");
  }

  // Starts a worker named `name` (one compute thread, `extra` flags) on a free loopback port and
  // waits until it accepts connections.
  void start_worker(const std::string& name, const std::vector<std::string>& extra = {}) {
    cluster::NodeSpec node;
    node.name = name;
    node.host = "127.0.0.1";
    node.port = testing::free_loopback_port();
    node.threads = 1;
    node.line = static_cast<int>(cluster_.nodes.size() + 1);
    std::vector<std::string> args = {TESSERA_WORKER_BINARY, "--listen", node.endpoint(), "--threads", "1",
                                     "--secret-file", dir_.file("secret")};
    args.insert(args.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<ChildProcess>(args, dir_.file(name + ".log")));
    ASSERT_TRUE(testing::wait_until_listening(node)) << "worker " << name << " never listened on " << node.endpoint();
    cluster_.nodes.push_back(node);
  }

  plan::Plan plan_for(plan::Policy policy, uint64_t m, uint64_t n, uint64_t k, uint64_t tile_rows = 0) {
    plan::PlanRequest request;
    request.policy = policy;
    request.m = m;
    request.n = n;
    request.k = k;
    request.panel_width = 64;
    request.panels_in_flight = 3;
    request.tile_rows = tile_rows;
    for (const cluster::NodeSpec& node : cluster_.nodes) request.node_names.push_back(node.name);
    Result<plan::Plan> plan = plan::make_plan(request);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return plan.is_ok() ? *plan : plan::Plan{};
  }

  testing::TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

// The seam itself: the worker refuses a 2 MiB STORE and closes; whether the coordinator's write
// or its next read notices first, the caller gets the worker's reason with kResourceExhausted.
TEST_F(WorkerErrors, AStoreOverTheCapIsReportedAsOutOfMemory) {
  ASSERT_NO_FATAL_FAILURE(start_worker("small", kOneMiBCap));
  Result<cluster::ClusterConnection> cluster = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  tp::FrameConnection& connection = *cluster->links()[0].connection;

  const std::vector<double> tile(256 * 1024, 1.0);
  const auto prefix = gemm::encode_store_prefix(gemm::TilePrefix{7, 256, 1024});
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix), asio::buffer(tile)};
  tp::FrameHeader store;
  store.type = static_cast<uint16_t>(tp::MessageType::kStore);
  Status outcome = connection.write_frame(store, parts);
  if (outcome.is_ok()) {
    gemm::Probe echo;
    echo.kind = gemm::ProbeKind::kEcho;
    outcome = gemm::request_reply<gemm::ProbeResult>(connection, echo).status();
  }
  if (outcome.code() == StatusCode::kNetworkError) {
    if (std::optional<Status> parting = tp::read_parting_error(connection)) outcome = *parting;
  }
  EXPECT_EQ(outcome.code(), StatusCode::kResourceExhausted) << outcome.to_string();
  EXPECT_TRUE(contains(outcome.message(), connection.peer() + " reported out of memory: STORE"));
  EXPECT_TRUE(contains(outcome.message(), "1048576-byte cap"));
}

// A dynamic plan is not checked against the workers' caps up front (tiles are pulled as they
// go), so the only worker runs out of memory on its first tile and the run fails as such.
TEST_F(WorkerErrors, AMultiplyOnAWorkerOutOfMemoryFailsAsResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(start_worker("small", kOneMiBCap));
  Result<cluster::ClusterConnection> cluster = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  // The first tile's A alone is 64 x 4096 doubles, 2 MiB.
  const linalg::Matrix a = linalg::random_matrix(1024, 4096, 1, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(4096, 64, 2, linalg::FillKind::kIntegers);
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*cluster, plan_for(plan::Policy::kDynamic, 1024, 64, 4096, 256), a, b, c);
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().code(), StatusCode::kResourceExhausted) << run.status().to_string();
  EXPECT_TRUE(contains(run.status().message(), "every node failed"));
  EXPECT_TRUE(contains(run.status().message(), "node 'small' (" + cluster_.nodes[0].endpoint() + ")"));
  EXPECT_TRUE(contains(run.status().message(), "reported out of memory: STORE"));
}

// One node out of memory among healthy ones is a lost node like any other: its tile is reissued,
// the product is exact, and the report says why it was lost.
TEST_F(WorkerErrors, ANodeOutOfMemoryIsLostWithItsReasonAndTheRunStaysExact) {
  ASSERT_NO_FATAL_FAILURE(start_worker("big"));
  ASSERT_NO_FATAL_FAILURE(start_worker("small", kOneMiBCap));
  Result<cluster::ClusterConnection> cluster = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  // As a coordinator that does not know the cap (the up-front check only sees HELLO's figure):
  // the static share really reaches the worker.
  cluster->links()[1].hello.tile_memory_cap = 0;
  const linalg::Matrix a = linalg::random_matrix(200, 3000, 3, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(3000, 50, 4, linalg::FillKind::kIntegers);
  linalg::Matrix c;
  Result<multiply::MultiplyRun> run = multiply::run_multiply(*cluster, plan_for(plan::Policy::kEven, 200, 50, 3000), a, b, c);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
  ASSERT_EQ(run->lost_nodes, std::vector<std::string>{"small"});
  ASSERT_EQ(run->lost_reasons.size(), 1u);
  EXPECT_TRUE(contains(run->lost_reasons[0], "node 'small' (" + cluster_.nodes[1].endpoint() + ")"));
  EXPECT_TRUE(contains(run->lost_reasons[0], "reported out of memory: STORE"));
  EXPECT_FALSE(contains(run->lost_reasons[0], "closed the connection"));
  EXPECT_EQ(run->reissued_tiles, std::vector<uint64_t>{1}) << "small's one block";
  EXPECT_EQ(run->nodes[1].rows, 0u);
  EXPECT_EQ(run->nodes[0].rows, 200u);
}

// The reference GEMM probe needs three 1024 x 1024 matrices (24 MiB) on a 1 MiB worker.
TEST_F(WorkerErrors, AProbeThatDoesNotFitFailsTheProfileAsResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(start_worker("small", kOneMiBCap));
  Result<cluster::ClusterConnection> cluster = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  profile::ProfileOptions options;
  options.quick = true;
  options.quick_window_seconds = 0.05;
  Result<profile::ClusterProfile> profile = profile::run_profile(*cluster, cluster_, std::nullopt, options);
  ASSERT_FALSE(profile.is_ok());
  EXPECT_EQ(profile.status().code(), StatusCode::kResourceExhausted) << profile.status().to_string();
  EXPECT_TRUE(contains(profile.status().message(), "node 'small' (" + cluster_.nodes[0].endpoint() + ")"));
  EXPECT_TRUE(contains(profile.status().message(), "reported out of memory: GEMM probe of size 1024"));
}

}  // namespace
}  // namespace tessera::balance
