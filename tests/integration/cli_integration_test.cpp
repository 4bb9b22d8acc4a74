// The user's path through the real `tessera` program: up, status, profile, multiply, down.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/core/memory.hpp"
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
    Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_);
    if (!cluster) return;
    for (int pid : emulation::local_cluster_pids(*cluster, {run_dir_, "", {}})) ::kill(pid, SIGKILL);
  }

  testing::CommandResult run(const std::string& subcommand, const std::string& extra = "") {
    return run_command(std::string(TESSERA_CLI_BINARY) + " " + subcommand + " " + config_ + " --run-dir " +
                       run_dir_ + " " + extra);
  }

  std::vector<int> live_pids() {
    Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_);
    return cluster ? emulation::local_cluster_pids(*cluster, {run_dir_, "", {}}) : std::vector<int>{};
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
  // A header, then each node's load over its cores ("0.42/2") in the load column.
  EXPECT_TRUE(std::regex_search(status.output, std::regex("node +endpoint +state +load +detail\n"))) << status.output;
  for (const char* name : {"fast", "slow"}) {
    EXPECT_TRUE(std::regex_search(status.output, std::regex(std::string(name) + " .* reachable +[0-9]+\\.[0-9]{2}/[0-9]+ ")))
        << name << ": " << status.output;
  }

  testing::CommandResult profile = run("profile", "--quick");
  ASSERT_EQ(profile.exit_code, 0) << profile.output;
  EXPECT_TRUE(std::filesystem::exists(dir_.file("cluster.profile.yaml")));
  EXPECT_NE(profile.output.find("pw"), std::string::npos) << profile.output;
  // Latency with every node computing: measured for both, written to the profile.
  EXPECT_TRUE(std::regex_search(profile.output, std::regex("latency while computing \\(one way\\): fast [0-9.]+ ms, slow [0-9.]+ ms")))
      << profile.output;
  {
    Result<profile::ClusterProfile> measured = profile::load_profile(dir_.file("cluster.profile.yaml"));
    ASSERT_TRUE(measured.is_ok()) << measured.status().to_string();
    for (const profile::NodeProfile& node : measured->nodes) {
      EXPECT_GT(node.link.busy_latency_s, 0.0) << node.name;
      EXPECT_LT(node.link.busy_latency_s, 1.0) << node.name;
    }
  }

  // The model's forecast of every static policy from that profile, without running anything.
  testing::CommandResult model = run_command(std::string(TESSERA_CLI_BINARY) + " model " + config_ + " --n 512");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  for (const char* policy : {"plan even", "plan proportional", "plan model"}) {
    EXPECT_NE(model.output.find(policy), std::string::npos) << policy << ": " << model.output;
  }
  EXPECT_TRUE(std::regex_search(model.output, std::regex("fast +predicted finish [0-9]+\\.[0-9]{3} s"))) << model.output;

  // Status as JSON, against the profile just measured: every node reachable, its worker's facts,
  // the profile's age, nothing changed since.
  testing::CommandResult json_status = run("status", "--json");
  ASSERT_EQ(json_status.exit_code, 0) << json_status.output;
  const std::size_t brace = json_status.output.find('{');
  ASSERT_NE(brace, std::string::npos) << json_status.output;
  const nlohmann::json states = nlohmann::json::parse(json_status.output.substr(brace));
  ASSERT_EQ(states["nodes"].size(), 2u) << json_status.output;
  for (const auto& node : states["nodes"]) {
    EXPECT_EQ(node["state"], "reachable") << node.dump();
    EXPECT_TRUE(node["profile_age_s"].is_number()) << node.dump();
    EXPECT_TRUE(node["changed_since_profile"].empty()) << node.dump();
    EXPECT_EQ(node["worker"]["threads"], 1) << node.dump();
    EXPECT_TRUE(node["load"].is_number() && node["load"].get<double>() >= 0.0) << node.dump();
  }
  EXPECT_EQ(run("status", "--watch -1").exit_code, 2);
  EXPECT_EQ(run("status", "--deadline-ms 5").exit_code, 2);

  const std::string report_path = dir_.file("r.json");
  testing::CommandResult multiply =
      run("multiply", "--n 200 --policy proportional --verify freivalds --report " + report_path);
  ASSERT_EQ(multiply.exit_code, 0) << multiply.output;
  EXPECT_NE(multiply.output.find("verified: true"), std::string::npos) << multiply.output;
  const nlohmann::json report = nlohmann::json::parse(testing::read_file(report_path));
  for (const char* key : {"makespan_s", "gflops", "verified", "imbalance", "policy", "n", "nodes", "coordinator_cpu_s"}) {
    EXPECT_TRUE(report.contains(key)) << key;
  }
  // The coordinator did work (generating, sending, checking) and said how much.
  EXPECT_GT(report["coordinator_cpu_s"].get<double>(), 0.0);
  EXPECT_EQ(report["verified"], true);
  EXPECT_EQ(report["policy"], "proportional");
  EXPECT_EQ(report["n"], 200);
  ASSERT_EQ(report["nodes"].size(), 2u);
  uint64_t rows = 0;
  for (const auto& node : report["nodes"]) {
    for (const char* key : {"name", "rows", "weight", "compute_s", "comm_s", "idle_s", "finish_s"}) {
      EXPECT_TRUE(node.contains(key)) << key;
    }
    // Forecast from the profile: the share of its cores the node keeps beside the coordinator.
    ASSERT_TRUE(node["predicted_host_share"].is_number()) << node.dump();
    EXPECT_GT(node["predicted_host_share"].get<double>(), 0.0);
    EXPECT_LE(node["predicted_host_share"].get<double>(), 1.0);
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
  EXPECT_TRUE(std::regex_search(status_down.output, std::regex("UNREACHABLE +- ")))
      << "no load for a node that did not answer: " << status_down.output;
  testing::CommandResult json_down = run("status", "--json");
  const std::size_t down_brace = json_down.output.find('{');
  ASSERT_NE(down_brace, std::string::npos) << json_down.output;
  for (const auto& node : nlohmann::json::parse(json_down.output.substr(down_brace))["nodes"]) {
    EXPECT_TRUE(node["load"].is_null()) << node.dump();
  }
}

// A lab of 64 on paper: scripts/paper-profile.py gives the shipped pi-lab-64.yaml the figures of
// local-mixed-lan's measured nodes (the profile kept under tests/instances), and `tessera model --scale` forecasts the model policy for the
// first 1, 2, 4, ... 32 nodes and all 64 (no worker runs). With a switch uplink the coordinator's
// bytes grow with the nodes taking rows, so beyond some count more nodes stop shortening the run.
TEST(ModelScale, APaperLabOf64IsForecastAgainstTheNumberOfNodes) {
  testing::TempDir dir;
  const std::string source = TESSERA_SOURCE_DIR;
  const std::string profile = dir.file("pi-lab-64.profile.yaml");
  const testing::CommandResult written = testing::run_command(
      "timeout 120 python3 " + source + "/scripts/paper-profile.py " + source + "/configs/pi-lab-64.yaml --from " + source +
      "/tests/instances/profile/local-mixed-lan.profile.yaml --like desktop=desktop --like pi=pi1 --link pi=1gbit --out " + profile);
  ASSERT_EQ(written.exit_code, 0) << written.output;
  const testing::CommandResult model = testing::run_command("timeout 120 " + std::string(TESSERA_CLI_BINARY) + " model " +
                                                            source + "/configs/pi-lab-64.yaml --profile " + profile +
                                                            " --n 8192 --scale");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  EXPECT_NE(model.output.find("switch uplink 1gbit"), std::string::npos) << model.output;
  std::vector<int> counts;
  std::istringstream lines(model.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    int nodes = 0;
    double makespan = 0.0;
    if (fields >> nodes >> makespan && makespan > 0.0) counts.push_back(nodes);
  }
  EXPECT_EQ(counts, (std::vector<int>{1, 2, 4, 8, 16, 32, 64})) << model.output;
}

TEST_F(CliCluster, StalePidFileIsRemovedWithoutSignallingThatProcess) {
  // A pid file naming a live process that is not a worker (this test itself) must not be killed.
  std::filesystem::create_directories(run_dir_ + "/cli-test");
  // Run directories must be private (0700) or they are not believed at all.
  ::chmod(run_dir_.c_str(), 0700);
  ::chmod((run_dir_ + "/cli-test").c_str(), 0700);
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

// ---------------------------------------------------------------------------------------------
// Hostile and broken inputs (docs/failures-and-security.md): every one ends in a sentence and an exit code, never an
// abort, a hang or a write through someone else's link.

TEST_F(CliCluster, SpecialFilesAsConfigAreRefusedByWhatTheyAre) {
  const std::string fifo = dir_.file("cluster-fifo.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "a character device"}, {fifo, "a FIFO"}, {dir_.path(), "a directory"}}) {
    testing::CommandResult result =
        run_command(std::string(TESSERA_CLI_BINARY) + " multiply " + path + " --n 16 --run-dir " + run_dir_);
    EXPECT_EQ(result.exit_code, 2) << path << ": " << result.output;
    EXPECT_NE(result.output.find("cluster file '" + path + "' is " + kind), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("terminate"), std::string::npos) << result.output;
  }
  // A FIFO nobody writes to would block a plain open() forever.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST_F(CliCluster, SecretFileThatIsADeviceIsRefused) {
  testing::write_file(config_, "cluster: cli-test\nsecret_file: /dev/zero\nnodes:\n  - name: a\n    host: 127.0.0.1\n"
                               "    port: " + std::to_string(testing::free_loopback_port()) + "\n");
  testing::CommandResult up = run("up");
  EXPECT_EQ(up.exit_code, 2) << up.output;
  EXPECT_NE(up.output.find(":2: secret file '/dev/zero' is a character device"), std::string::npos) << up.output;
}

// Checked before connecting: no `up` here, so had the command tried to connect (or profile) first,
// it would have failed on the unreachable nodes instead.
TEST_F(CliCluster, AZeroSizedNpyIsRefusedNamingItBeforeConnecting) {
  ASSERT_TRUE(linalg::write_npy(dir_.file("empty.npy"), linalg::Matrix(0, 5)).is_ok());
  ASSERT_TRUE(linalg::write_npy(dir_.file("b.npy"), linalg::random_matrix(5, 3, 1)).is_ok());
  testing::CommandResult refused =
      run("multiply", "--a " + dir_.file("empty.npy") + " --b " + dir_.file("b.npy") + " --policy even");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find(dir_.file("empty.npy") + " holds A as a 0x5 matrix, which has no entries"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find("unreachable"), std::string::npos) << refused.output;
}

TEST_F(CliCluster, TooLargeForMemoryIsRefusedNamingTheSize) {
  ASSERT_EQ(run("up").exit_code, 0);
  const auto start = std::chrono::steady_clock::now();
  testing::CommandResult huge = run("multiply", "--n 200000");
  EXPECT_EQ(huge.exit_code, 1) << huge.output;
  // 200000^2 doubles are 298 GiB; a test machine with that much free memory is not expected.
  EXPECT_NE(huge.output.find("A 200000x200000 needs 298 GiB; this machine has "), std::string::npos) << huge.output;
  EXPECT_NE(huge.output.find("use a smaller --n"), std::string::npos) << huge.output;
  EXPECT_EQ(huge.output.find("bad_alloc"), std::string::npos) << huge.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST_F(CliCluster, NonFiniteInputIsRefusedWithItsPositionUnlessAllowed) {
  ASSERT_EQ(run("up").exit_code, 0);
  linalg::Matrix a = linalg::random_matrix(20, 10, 3);
  a.values[12 * 10 + 7] = std::numeric_limits<double>::quiet_NaN();
  const linalg::Matrix b = linalg::random_matrix(10, 6, 4);
  ASSERT_TRUE(linalg::write_npy(dir_.file("a.npy"), a).is_ok());
  ASSERT_TRUE(linalg::write_npy(dir_.file("b.npy"), b).is_ok());
  const std::string files = " --a " + dir_.file("a.npy") + " --b " + dir_.file("b.npy");

  testing::CommandResult refused = run("multiply", files);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("A[12][7] is NaN"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--allow-nonfinite"), std::string::npos) << refused.output;

  for (const char* verify : {"freivalds", "exact"}) {
    const std::string out = dir_.file(std::string("c-") + verify + ".npy");
    testing::CommandResult allowed =
        run("multiply", files + " --allow-nonfinite --verify " + verify + " --out " + out);
    EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
    EXPECT_NE(allowed.output.find("verified: true"), std::string::npos) << allowed.output;
    Result<linalg::Matrix> c = linalg::read_npy(out);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    // Row 12 of C is NaN wherever A's NaN reaches; every other row is finite.
    for (std::size_t j = 0; j < c->cols; ++j) EXPECT_TRUE(std::isnan(c->at(12, j)));
    EXPECT_TRUE(std::isfinite(c->at(11, 0)));
  }
}

// Issue 40: finite inputs whose product overflows (A's entries 1.7e308, B all ones: C all +inf).
// The exact check passed it and Freivalds failed it; both must fail it the same way, exiting as
// a failed verification (3) with stderr naming the overflow and its first cell.
TEST_F(CliCluster, AProductThatOverflowsFailsVerificationInEveryMode) {
  ASSERT_EQ(run("up").exit_code, 0);
  linalg::Matrix a(20, 10), b(10, 6);
  std::fill(a.values.begin(), a.values.end(), 1.7e308);
  std::fill(b.values.begin(), b.values.end(), 1.0);
  ASSERT_TRUE(linalg::write_npy(dir_.file("a.npy"), a).is_ok());
  ASSERT_TRUE(linalg::write_npy(dir_.file("b.npy"), b).is_ok());
  const std::string files = " --a " + dir_.file("a.npy") + " --b " + dir_.file("b.npy") + " --policy even";
  for (const char* verify : {"", " --verify freivalds", " --verify exact"}) {
    const std::string stderr_path = dir_.file("stderr.txt");
    // stderr alone to a file (the subshell's own 2>&1 then only merges what is left).
    const testing::CommandResult multiply =
        run_command("(" + std::string(TESSERA_CLI_BINARY) + " multiply " + config_ + " --run-dir " + run_dir_ + files +
                    verify + " 2>" + stderr_path + ")");
    const std::string errors = testing::read_file(stderr_path);
    EXPECT_EQ(multiply.exit_code, 3) << verify << ": " << multiply.output << errors;
    EXPECT_NE(errors.find("verification FAILED: the product overflowed"), std::string::npos) << verify << ": " << errors;
    EXPECT_NE(errors.find("C[0][0] is +inf"), std::string::npos) << verify << ": " << errors;
    EXPECT_NE(multiply.output.find("verified: false"), std::string::npos) << verify << ": " << multiply.output;
  }
}

TEST_F(CliCluster, UpWritesTheSecretPrivatelyAndNeverThroughALink) {
  // Another user's trap: the cluster's secret is a symlink to a file they want it written into.
  const std::string cluster_dir = run_dir_ + "/cli-test";
  ASSERT_EQ(::mkdir(run_dir_.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(cluster_dir.c_str(), 0700), 0);
  const std::string target = dir_.file("trap");
  testing::write_file(target, "untouched\n");
  std::filesystem::create_symlink(target, cluster_dir + "/secret");

  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  std::ifstream trap(target);
  std::string content((std::istreambuf_iterator<char>(trap)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "untouched\n");
  struct stat info {};
  ASSERT_EQ(::lstat((cluster_dir + "/secret").c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(CliCluster, UpRefusesARunDirectoryThatIsALinkOrNotPrivate) {
  // A symlinked run directory: nothing may be created through it.
  const std::string elsewhere = dir_.file("elsewhere");
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  std::filesystem::create_symlink(elsewhere, run_dir_);
  testing::CommandResult linked = run("up");
  EXPECT_EQ(linked.exit_code, 2) << linked.output;
  EXPECT_NE(linked.output.find("run directory '" + run_dir_ + "' is a symbolic link"), std::string::npos)
      << linked.output;
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere));
  EXPECT_TRUE(live_pids().empty());
  std::filesystem::remove(run_dir_);

  // A group-readable one: refused with the chmod that fixes it, for up and for the readers.
  ASSERT_EQ(::mkdir(run_dir_.c_str(), 0750), 0);
  ASSERT_EQ(::chmod(run_dir_.c_str(), 0750), 0);  // whatever the umask
  testing::CommandResult shared = run("up");
  EXPECT_EQ(shared.exit_code, 2) << shared.output;
  EXPECT_NE(shared.output.find("has mode 0750"), std::string::npos) << shared.output;
  EXPECT_NE(shared.output.find("chmod 700 " + run_dir_), std::string::npos) << shared.output;
  EXPECT_FALSE(std::filesystem::exists(run_dir_ + "/cli-test"));
  testing::CommandResult multiply = run("multiply", "--n 16");
  EXPECT_EQ(multiply.exit_code, 2) << multiply.output;
  EXPECT_NE(multiply.output.find("chmod 700"), std::string::npos) << multiply.output;

  ASSERT_EQ(::chmod(run_dir_.c_str(), 0700), 0);
  testing::CommandResult fixed = run("up");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
}

TEST_F(CliCluster, InlineSecretInAReadableConfigIsWarnedAbout) {
  ASSERT_EQ(::chmod(config_.c_str(), 0644), 0);
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("warning: " + config_ + " holds the secret inline and is readable by every user"),
            std::string::npos)
      << up.output;
  ASSERT_EQ(::chmod(config_.c_str(), 0600), 0);
  testing::CommandResult again = run("up");
  EXPECT_EQ(again.output.find("holds the secret inline"), std::string::npos) << again.output;
}

// ---------------------------------------------------------------------------------------------
// Terminal escapes in input files (issue 40): what `tessera` prints on stderr about a hostile file
// holds no control byte but newline, no DEL, no C1 control and only valid UTF-8, whichever reader
// found the problem. The instances hold ESC ] 0;PWNED BEL (sets a terminal's title), ESC [ 2J
// (clears it), a NUL and 0x91 (a Windows-1252 quote, not UTF-8). None of these commands gets as
// far as connecting, so no workers are started.

// Whether `text` can go to a terminal as it is. Written here, not with core's printable, so the
// test does not trust the code it tests: UTF-8 per RFC 3629 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool terminal_safe(std::string_view text, std::string& why) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto at = [&](const char* what) {
      why = std::string(what) + " at byte " + std::to_string(i);
      return false;
    };
    if (byte < 0x80) {
      if (byte == 0x7f || (byte < 0x20 && byte != '\n')) return at("a control byte");
      ++i;
      continue;
    }
    std::size_t length = 0;
    uint32_t code_point = 0;
    if (byte >= 0xc2 && byte <= 0xdf) {
      length = 2;
      code_point = byte & 0x1fu;
    } else if (byte >= 0xe0 && byte <= 0xef) {
      length = 3;
      code_point = byte & 0x0fu;
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      length = 4;
      code_point = byte & 0x07u;
    } else {
      return at("a byte that starts no UTF-8 sequence");
    }
    if (i + length > text.size()) return at("a UTF-8 sequence cut short");
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0u) != 0x80u) return at("a bad UTF-8 continuation byte");
      code_point = (code_point << 6) | (next & 0x3fu);
    }
    const uint32_t smallest = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    if (code_point < smallest || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) {
      return at("an overlong, surrogate or out-of-range UTF-8 sequence");
    }
    if (code_point <= 0x9f) return at("a C1 control");
    i += length;
  }
  return true;
}

// The checker itself, so that the tests below can fail.
TEST(TerminalSafe, RefusesEveryKindOfUnsafeByte) {
  std::string why;
  for (const std::string_view unsafe : {std::string_view("\x1b[2J"), std::string_view("\x07"), std::string_view("\0", 1),
                                        std::string_view("\x91"), std::string_view("\x7f"), std::string_view("\t"),
                                        std::string_view("\xc2\x9b"), std::string_view("\xed\xa0\x80"),
                                        std::string_view("\xc0\xaf"), std::string_view("\xe2\x82")}) {
    EXPECT_FALSE(terminal_safe(unsafe, why)) << ::testing::PrintToString(std::string(unsafe));
  }
  EXPECT_TRUE(terminal_safe("tessera: a.edges:2: vertex id '\\x1b' is not an integer\nn\xc3\xb6" "de \xe2\x82\xac\n", why)) << why;
}

class CliHostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.file("cluster.yaml");
    testing::write_file(config_, "cluster: hostile\nsecret: s\nnodes:\n  - name: a\n    host: 127.0.0.1\n    port: " +
                                     std::to_string(testing::free_loopback_port()) + "\n");
    ::chmod(config_.c_str(), 0600);
  }

  // stderr alone (stdout to /dev/null) and the exit code of `tessera ARGUMENTS`.
  testing::CommandResult stderr_of(const std::string& arguments) {
    return run_command("(" + std::string(TESSERA_CLI_BINARY) + " " + arguments + " 2>&1 >/dev/null)");
  }

  // The command fails with exit 2 and a safe stderr that holds every phrase.
  void expect_refused_safely(const std::string& arguments, const std::vector<std::string>& phrases) {
    SCOPED_TRACE(arguments);
    const testing::CommandResult result = stderr_of(arguments);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    std::string why;
    EXPECT_TRUE(terminal_safe(result.output, why)) << why << " in: " << ::testing::PrintToString(result.output);
    EXPECT_EQ(result.output.rfind("tessera: ", 0), 0u) << result.output;
    for (const std::string& phrase : phrases) {
      EXPECT_NE(result.output.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << result.output;
    }
  }

  static std::string instance(const std::string& name) { return std::string(TESSERA_TEST_INSTANCES) + "/" + name; }

  testing::TempDir dir_;
  std::string config_;
  const std::string run_dir_ = " --run-dir " + dir_.file("run");
};

TEST_F(CliHostileInput, GraphFilesOfEveryFormatAreQuotedEscaped) {
  const std::string token = "'\\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J'";
  for (const auto& [file, line] : std::vector<std::pair<std::string, int>>{
           {"graphs/hostile-token.edges", 2}, {"graphs/hostile-value.mtx", 3}, {"graphs/hostile-neighbour.graph", 3}}) {
    const std::string located = instance(file) + ":" + std::to_string(line) + ": ";
    // `graph` reads the file with the directed readers, `partition` with the undirected ones.
    expect_refused_safely("graph " + config_ + run_dir_ + " --algorithm pagerank --graph " + instance(file),
                          {located, token});
    expect_refused_safely("partition " + instance(file) + " --weights 1,1", {located, token});
  }
  // A file name holds any byte too; it is escaped where the message names it.
  const std::string named = dir_.file("x\x1b]0;PWNED\x07.edges");
  testing::write_file(named, "0 one\n");
  expect_refused_safely("partition '" + named + "' --weights 1,1",
                        {"x\\x1b]0;PWNED\\x07.edges:1: vertex id 'one' is not an integer"});
}

TEST_F(CliHostileInput, NpyHeaderFieldsAreQuotedEscaped) {
  ASSERT_TRUE(linalg::write_npy(dir_.file("b.npy"), linalg::random_matrix(3, 2, 1)).is_ok());
  expect_refused_safely("multiply " + config_ + run_dir_ + " --a " + instance("npy/hostile-descr.npy") + " --b " +
                            dir_.file("b.npy"),
                        {instance("npy/hostile-descr.npy") + ": dtype '<f8\\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J'"});
  expect_refused_safely("multiply " + config_ + run_dir_ + " --a " + instance("npy/hostile-shape.npy") + " --b " +
                            dir_.file("b.npy"),
                        {instance("npy/hostile-shape.npy") + ": malformed header", "(2, \\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J)"});
}

TEST_F(CliHostileInput, ClusterFilesWithBinaryBytesOrBrokenSyntaxAreRefusedSafely) {
  for (const auto& [file, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"config/escape-byte.yaml", ":2: this line holds the byte \\x1b (ESC), and a YAML file is text; remove the ESC"},
           {"config/nul-byte.yaml", ":4: this line holds the byte \\x00 (NUL), and a YAML file is text; remove the NUL"},
           {"config/bad-escape-non-utf8.yaml", ":2: YAML syntax error: unknown escape character: \\x91"},
           {"config/non-utf8-name.yaml", ":4: name 'pi\\xff\\xc2\\x9b2J' in node #1 is not a valid name"},
           {"config/deep-nesting.yaml", ":7: the document nests deeper than 64 levels here; flatten it"},
           {"config/tagged-secret.yaml", ":2: secret has the YAML tag '!!binary'; tags are not supported"},
           {"config/leading-zero-port.yaml", ":6: node 'a' has port: 016513: a leading zero is ambiguous (octal in YAML "
                                             "1.1); write port: 16513"}}) {
    expect_refused_safely("status " + instance(file) + run_dir_, {instance(file) + phrase});
  }
  // A binary file from start to end (an .npy given as the cluster file).
  expect_refused_safely("status " + instance("npy/good-v1.npy") + run_dir_, {instance("npy/good-v1.npy") + ":1: "});
}

TEST_F(CliHostileInput, TheFlagsAndTheEmptyGraphAreNamed) {
  expect_refused_safely("multiply " + config_ + run_dir_ + " --n 4000000000",
                        {"--n 4000000000 is over 1048576, the largest matrix dimension supported; give --n 1048576 or less"});
  expect_refused_safely("multiply " + config_ + run_dir_ + " --n 8 --k 0",
                        {"--k 0: a matrix needs at least one row and one column"});
  expect_refused_safely("graph " + config_ + run_dir_ + " --algorithm pagerank --graph " + instance("graphs/empty.edges"),
                        {instance("graphs/empty.edges") + " has no vertices, so there is nothing to compute"});
}

// A secret_file others can read is the cluster file's problem, not the nodes': status says so
// once, with the chmod that fixes it, and exits 2 as multiply does.
TEST_F(CliHostileInput, StatusRefusesASecretFileOthersCanReadAsMultiplyDoes) {
  const std::string secret = dir_.file("cluster.secret");
  testing::write_file(secret, "s3cret\n");
  ASSERT_EQ(::chmod(secret.c_str(), 0644), 0);
  testing::write_file(config_, "cluster: hostile\nsecret_file: cluster.secret\nnodes:\n  - name: a\n    host: 127.0.0.1\n"
                               "    port: " + std::to_string(testing::free_loopback_port()) + "\n");
  const testing::CommandResult multiply = stderr_of("multiply " + config_ + " --n 8" + run_dir_);
  const testing::CommandResult status = stderr_of("status " + config_ + run_dir_);
  EXPECT_EQ(multiply.exit_code, 2) << multiply.output;
  EXPECT_EQ(status.exit_code, 2) << status.output;
  EXPECT_NE(status.output.find("chmod 600 " + secret), std::string::npos) << status.output;
  EXPECT_EQ(status.output.find("UNREACHABLE"), std::string::npos) << status.output;
  EXPECT_EQ(status.output, multiply.output);
}

// Progress lines: node b is the test twin that holds every CREDIT back 200 ms, so the run lasts
// at least its 16 jobs x 200 ms however fast this machine is. stdout and stderr go to files.
class CliProgress : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = testing::start_local_cluster("progress", "progress-secret", 2, dir_, "",
                                            {"--fault-delay-credits-ms", "200"});
    config_ = testing::write_cluster_file(dir_, cluster_.spec);
    ::chmod(config_.c_str(), 0600);  // else every run warns about the inline secret
  }

  struct Streams {
    int exit_code = -1;
    std::string out, err;
  };
  Streams multiply(const std::string& progress_flag) {
    const std::string out = dir_.file("out.txt"), err = dir_.file("err.txt");
    // n 256 with 16-row panels: 16 jobs per node under the even plan.
    const testing::CommandResult run = run_command("(" + std::string(TESSERA_CLI_BINARY) + " multiply " + config_ +
                                                   " --n 256 --policy even --panel-width 16 --fill integers "
                                                   "--verify exact " + progress_flag + " > " + out + " 2> " + err + ")");
    return {run.exit_code, testing::read_file(out), testing::read_file(err)};
  }

  testing::TempDir dir_;
  testing::LocalCluster cluster_;
  std::string config_;
};

TEST_F(CliProgress, AlwaysDrawsEachNodesShareInPlaceAndClearsItBeforeTheReport) {
  const Streams run = multiply("--progress always");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("verified: true"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find('\r'), std::string::npos) << "the report on stdout is untouched";
  // At least one line, redrawn in place, naming both nodes with their share and the ETA.
  const std::regex line("\rmultiply +[0-9]+%  [0-9.smh ]+  ETA [^|]+  \\|  a [0-9]+%  b [0-9]+%\x1b\\[K");
  const auto lines = std::distance(std::sregex_iterator(run.err.begin(), run.err.end(), line), std::sregex_iterator());
  EXPECT_GE(lines, 1) << run.err;
  // The last thing on stderr clears the line, so the report (or a shell prompt) starts clean.
  EXPECT_TRUE(run.err.ends_with("\r\x1b[K")) << run.err;
  EXPECT_EQ(run.err.find('\n'), std::string::npos) << "no line of its own: " << run.err;
}

TEST_F(CliProgress, AutoOnAFileAndNeverPrintNothing) {
  for (const char* flag : {"", "--progress auto", "--progress never"}) {
    SCOPED_TRACE(flag);
    const Streams run = multiply(flag);
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_NE(run.out.find("verified: true"), std::string::npos) << run.out;
    EXPECT_EQ(run.err, "") << "stderr is a file: the output is what it was without progress lines";
  }
  const Streams bad = multiply("--progress sometimes");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown --progress 'sometimes'; use auto"), std::string::npos) << bad.err;
}

// Ctrl-C of a multiply, caught in the middle of the run however fast or loaded this machine is:
// node b is the test twin that holds every CREDIT back kCreditDelayMs, so b's 16 jobs take at
// least 16 x kCreditDelayMs, and the multiply is interrupted once its progress line shows the run
// streaming (the line is first drawn a second into the run, long before b's last CREDIT).
class CliInterrupt : public ::testing::Test {
 protected:
  static constexpr int kCreditDelayMs = 1000;

  void SetUp() override {
    cluster_ = testing::start_local_cluster("interrupt", "interrupt-secret", 2, dir_, "",
                                            {"--fault-delay-credits-ms", std::to_string(kCreditDelayMs)});
    config_ = testing::write_cluster_file(dir_, cluster_.spec);
    ::chmod(config_.c_str(), 0600);  // else every run warns about the inline secret
  }

  // A multiply in a process of its own (stopped by pid when it goes, also after a failed
  // assertion), its stdout and stderr to `log`.
  std::unique_ptr<testing::ChildProcess> start_multiply(const std::vector<std::string>& flags, const std::string& log) {
    std::vector<std::string> args{TESSERA_CLI_BINARY, "multiply", config_};
    args.insert(args.end(), flags.begin(), flags.end());
    return std::make_unique<testing::ChildProcess>(std::move(args), log);
  }

  testing::TempDir dir_;
  testing::LocalCluster cluster_;
  std::string config_;
};

// Waits until `log` holds `marker`, for at most `timeout`; false if `child` exits first.
bool wait_for_output(testing::ChildProcess& child, const std::string& log, std::string_view marker,
                     std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (testing::read_file(log).find(marker) != std::string::npos) return true;
    (void)child.wait_exit(std::chrono::milliseconds(50));
    if (child.pid() == 0) return testing::read_file(log).find(marker) != std::string::npos;
  }
  return false;
}

TEST_F(CliInterrupt, CtrlCOfAMultiplyFreesTheWorkersForTheNextOne) {
  // n 256 in 16-row panels: 16 jobs per node under the even plan, and all 16 in flight, so b has
  // its whole share queued when the interrupt comes. Run to the end, that queue would keep b
  // busy for longer than a newcomer waits for a closing session (kClaimWait, 10 s), and the next
  // multiply would be told BUSY.
  const std::string log = dir_.file("interrupted.log");
  auto multiply = start_multiply({"--n", "256", "--panel-width", "16", "--panels-in-flight", "16", "--policy", "even",
                                  "--verify", "none", "--progress", "always"},
                                 log);
  // The bound only makes a run that never starts fail instead of hang.
  ASSERT_TRUE(wait_for_output(*multiply, log, "\rmultiply ", std::chrono::seconds(180)))
      << "no progress line from the multiply:\n" << testing::read_file(log);
  // By pid, as a terminal's Ctrl-C would.
  multiply->signal(SIGINT);
  const int code = multiply->wait_exit(std::chrono::seconds(60));
  const std::string output = testing::read_file(log);
  ASSERT_NE(code, 0) << "the multiply finished before the interrupt, though b's credits alone take "
                     << 16 * kCreditDelayMs << " ms:\n" << output;
  EXPECT_EQ(code, 130) << output;
  EXPECT_NE(output.find("interrupted"), std::string::npos) << output;

  // At once, not after the workers finish the abandoned jobs: no BUSY.
  const std::string next_log = dir_.file("next.log");
  auto next = start_multiply({"--n", "200", "--policy", "even"}, next_log);
  const int next_code = next->wait_exit(std::chrono::seconds(120));
  const std::string next_output = testing::read_file(next_log);
  EXPECT_EQ(next_code, 0) << next_output;
  EXPECT_NE(next_output.find("verified: true"), std::string::npos) << next_output;
  EXPECT_EQ(next_output.find("busy"), std::string::npos) << next_output;
}

}  // namespace
}  // namespace tessera::balance
