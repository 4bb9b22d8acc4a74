// The user's path through the real `tessera` program: up, status, profile, multiply, down.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/local/local_cluster.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance {
namespace {

using testing::run_command;

class CliCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.file("cluster.yaml");
    run_dir_ = dir_.file("run");
    std::string yaml = "cluster: cli-test\nsecret: cli-secret\nnodes:\n";
    for (const char* name : {"fast", "slow"}) {
      yaml += std::string("  - name: ") + name + "\n    host: 127.0.0.1\n    port: " +
              std::to_string(testing::free_loopback_port()) + "\n    threads: 1\n";
    }
    testing::write_file(config_, yaml);
  }

  // Whatever a test did, no worker it started survives it.
  void TearDown() override {
    run("down");
    Result<ClusterSpec> cluster = load_cluster_spec(config_);
    if (!cluster) return;
    for (int pid : local_cluster_pids(*cluster, {run_dir_, "", {}})) ::kill(pid, SIGKILL);
  }

  testing::CommandResult run(const std::string& subcommand, const std::string& extra = "") {
    return run_command(std::string(TESSERA_CLI_BINARY) + " " + subcommand + " " + config_ + " --run-dir " +
                       run_dir_ + " " + extra);
  }

  std::vector<int> live_pids() {
    Result<ClusterSpec> cluster = load_cluster_spec(config_);
    return cluster ? local_cluster_pids(*cluster, {run_dir_, "", {}}) : std::vector<int>{};
  }

  testing::TempDir dir_;
  std::string config_;
  std::string run_dir_;
};

TEST_F(CliCluster, UpProfileMultiplyDown) {
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("started"), std::string::npos) << up.output;
  const std::vector<int> pids = live_pids();
  ASSERT_EQ(pids.size(), 2u);

  testing::CommandResult again = run("up");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("already running"), std::string::npos) << again.output;
  EXPECT_EQ(live_pids(), pids);

  testing::CommandResult status = run("status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("reachable"), std::string::npos) << status.output;

  testing::CommandResult profile = run("profile", "--quick");
  ASSERT_EQ(profile.exit_code, 0) << profile.output;
  EXPECT_TRUE(std::filesystem::exists(dir_.file("cluster.profile.yaml")));
  EXPECT_NE(profile.output.find("pw"), std::string::npos) << profile.output;

  const std::string report_path = dir_.file("r.json");
  testing::CommandResult multiply =
      run("multiply", "--n 200 --policy proportional --verify freivalds --report " + report_path);
  ASSERT_EQ(multiply.exit_code, 0) << multiply.output;
  EXPECT_NE(multiply.output.find("verified: true"), std::string::npos) << multiply.output;
  const nlohmann::json report = nlohmann::json::parse(testing::read_file(report_path));
  for (const char* key : {"makespan_s", "gflops", "verified", "imbalance", "policy", "n", "nodes"}) {
    EXPECT_TRUE(report.contains(key)) << key;
  }
  EXPECT_EQ(report["verified"], true);
  EXPECT_EQ(report["policy"], "proportional");
  EXPECT_EQ(report["n"], 200);
  ASSERT_EQ(report["nodes"].size(), 2u);
  uint64_t rows = 0;
  for (const auto& node : report["nodes"]) {
    for (const char* key : {"name", "rows", "weight", "compute_s", "comm_s", "idle_s", "finish_s"}) {
      EXPECT_TRUE(node.contains(key)) << key;
    }
    rows += node["rows"].get<uint64_t>();
  }
  EXPECT_EQ(rows, 200u);

  testing::CommandResult exact = run("multiply", "--m 33 --n 17 --k 45 --policy even --fill integers --verify exact");
  EXPECT_EQ(exact.exit_code, 0) << exact.output;
  EXPECT_NE(exact.output.find("verified: true"), std::string::npos) << exact.output;

  // C cut into rectangles, and k split with partial sums added by the coordinator.
  for (const char* layout : {"2d", "3d"}) {
    testing::CommandResult boxes = run("multiply", std::string("--m 40 --n 36 --k 500 --policy even --fill integers "
                                                               "--verify exact --refill 2 --show-plan --layout ") + layout);
    EXPECT_EQ(boxes.exit_code, 0) << boxes.output;
    EXPECT_NE(boxes.output.find(std::string("layout ") + layout), std::string::npos) << boxes.output;
    EXPECT_NE(boxes.output.find("refill 2"), std::string::npos) << boxes.output;
    EXPECT_NE(boxes.output.find("verified: true"), std::string::npos) << boxes.output;
  }

  testing::CommandResult down = run("down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_NE(down.output.find("stopped"), std::string::npos) << down.output;
  for (int pid : pids) EXPECT_FALSE(testing::process_alive(pid)) << pid;

  testing::CommandResult down_again = run("down");
  EXPECT_EQ(down_again.exit_code, 0) << down_again.output;
  EXPECT_NE(down_again.output.find("not running"), std::string::npos) << down_again.output;

  testing::CommandResult status_down = run("status");
  EXPECT_NE(status_down.exit_code, 0);
  EXPECT_NE(status_down.output.find("UNREACHABLE"), std::string::npos) << status_down.output;
}

TEST_F(CliCluster, StalePidFileIsRemovedWithoutSignallingThatProcess) {
  // A pid file naming a live process that is not a worker (this test itself) must not be killed.
  std::filesystem::create_directories(run_dir_ + "/cli-test");
  testing::write_file(run_dir_ + "/cli-test/fast.pid", std::to_string(::getpid()) + "\n");
  testing::write_file(run_dir_ + "/cli-test/slow.pid", "999999999\n");
  testing::CommandResult down = run("down");
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_NE(down.output.find("stale pid file removed"), std::string::npos) << down.output;
  EXPECT_FALSE(std::filesystem::exists(run_dir_ + "/cli-test/fast.pid"));

  // And `up` over stale files starts fresh workers.
  testing::write_file(run_dir_ + "/cli-test/fast.pid", std::to_string(::getpid()) + "\n");
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_EQ(live_pids().size(), 2u);
}

TEST_F(CliCluster, BadInputsGetClearMessagesAndExitCode2) {
  testing::CommandResult policy = run("multiply", "--n 10 --policy fastest");
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_NE(policy.output.find("use one of: even, proportional, model"), std::string::npos) << policy.output;

  testing::CommandResult layout = run("multiply", "--n 10 --policy even --layout diagonal");
  EXPECT_EQ(layout.exit_code, 2);
  EXPECT_NE(layout.output.find("rows, 2d, square-corner, 3d"), std::string::npos) << layout.output;
  testing::CommandResult refill = run("multiply", "--n 10 --policy even --refill 9");
  EXPECT_EQ(refill.exit_code, 2);
  EXPECT_NE(refill.output.find("--refill 9 must be between 1 and --panels-in-flight 4"), std::string::npos)
      << refill.output;
  testing::CommandResult dynamic_2d = run("multiply", "--n 10 --policy dynamic --layout 2d");
  EXPECT_EQ(dynamic_2d.exit_code, 2);
  EXPECT_NE(dynamic_2d.output.find("row tiles"), std::string::npos) << dynamic_2d.output;

  testing::CommandResult weights = run("multiply", "--n 10 --weights 1,2,3");
  EXPECT_EQ(weights.exit_code, 2);
  EXPECT_NE(weights.output.find("3 values for 2 nodes"), std::string::npos) << weights.output;

  testing::write_file(dir_.file("broken.yaml"), "cluster: x\nsecret: s\nnodes:\n  - name: a\n    host: h\n    prot: 1\n");
  testing::CommandResult broken = run_command(std::string(TESSERA_CLI_BINARY) + " profile " + dir_.file("broken.yaml"));
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.output.find("broken.yaml:6"), std::string::npos) << broken.output;

  // Nothing runs: every node is unreachable, and the message names them.
  testing::CommandResult unreachable = run("multiply", "--n 10 --policy even");
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_NE(unreachable.output.find("'fast'"), std::string::npos) << unreachable.output;
  EXPECT_NE(unreachable.output.find("'slow'"), std::string::npos) << unreachable.output;
}

TEST_F(CliCluster, NpyInputsAndOutput) {
  ASSERT_EQ(run("up").exit_code, 0);
  // Shapes that do not chain are refused before anything is sent.
  linalg::Matrix a = linalg::random_matrix(20, 9, 1, linalg::FillKind::kIntegers);
  linalg::Matrix b = linalg::random_matrix(9, 4, 2, linalg::FillKind::kIntegers);
  linalg::Matrix wrong = linalg::random_matrix(8, 4, 3, linalg::FillKind::kIntegers);
  ASSERT_TRUE(linalg::write_npy(dir_.file("a.npy"), a).is_ok());
  ASSERT_TRUE(linalg::write_npy(dir_.file("b.npy"), b).is_ok());
  ASSERT_TRUE(linalg::write_npy(dir_.file("wrong.npy"), wrong).is_ok());

  testing::CommandResult mismatch =
      run("multiply", "--a " + dir_.file("a.npy") + " --b " + dir_.file("wrong.npy") + " --policy even");
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.output.find("A's columns must equal B's rows"), std::string::npos) << mismatch.output;

  testing::CommandResult ok = run("multiply", "--a " + dir_.file("a.npy") + " --b " + dir_.file("b.npy") +
                                                  " --policy even --verify exact --out " + dir_.file("c.npy"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  Result<linalg::Matrix> c = linalg::read_npy(dir_.file("c.npy"));
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->rows, 20u);
  ASSERT_EQ(c->cols, 4u);
  for (std::size_t i = 0; i < 20; ++i) {
    for (std::size_t j = 0; j < 4; ++j) {
      double expected = 0;
      for (std::size_t p = 0; p < 9; ++p) expected += a.at(i, p) * b.at(p, j);
      EXPECT_EQ(c->at(i, j), expected) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace tessera::balance
