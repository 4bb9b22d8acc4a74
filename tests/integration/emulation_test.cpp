// The emulated testbed for real: cgroup CPU quotas, network namespaces and tc-shaped veth links,
// set up by `tessera up` and measured through the workers. Needs root and cgroups; skips with
// the reason otherwise.
#include "tessera/balance/emulation.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "process_fixture.hpp"
#include "tessera/balance/cluster_connection.hpp"
#include "tessera/balance/local_cluster.hpp"
#include "tessera/balance/profile.hpp"

namespace tessera::balance {
namespace {

using testing::run_command;

class EmulatedCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    const EmulationSupport support = detect_emulation_support();
    if (!support.missing.empty()) GTEST_SKIP() << "CPU emulation unavailable: " << support.missing;
    if (!support.link_missing.empty()) GTEST_SKIP() << "link emulation unavailable: " << support.link_missing;
    run_dir_ = dir_.file("run");
  }

  // Whatever happened, nothing of the cluster survives the test.
  void TearDown() override {
    if (config_.empty()) return;
    run("down");
    Result<ClusterSpec> cluster = load_cluster_spec(config_);
    if (!cluster) return;
    for (int pid : local_cluster_pids(*cluster, {run_dir_, "", {}})) ::kill(pid, SIGKILL);
    Result<std::vector<NodeEmulation>> state = load_emulation_state(emulation_state_path(run_dir_ + "/" + cluster->name));
    if (state) {
      for (const NodeEmulation& node : *state) (void)remove_node_emulation(node);
    }
  }

  void write_config(const std::string& cluster_name, const std::string& nodes_yaml) {
    config_ = dir_.file("cluster.yaml");
    cluster_name_ = cluster_name;
    testing::write_file(config_, "cluster: " + cluster_name + "\nsecret: emulation-secret\nnodes:\n" + nodes_yaml);
  }

  static std::string node_yaml(const std::string& name, const std::string& emulate) {
    return "  - name: " + name + "\n    host: 127.0.0.1\n    port: " + std::to_string(testing::free_loopback_port()) +
           "\n    threads: 1\n" + (emulate.empty() ? "" : "    emulate: " + emulate + "\n");
  }

  testing::CommandResult run(const std::string& subcommand, const std::string& extra = "") {
    return run_command(std::string(TESSERA_CLI_BINARY) + " " + subcommand + " " + config_ + " --run-dir " + run_dir_ +
                       " " + extra);
  }

  ClusterSpec reachable_cluster() {
    Result<ClusterSpec> cluster = load_reachable_cluster(config_, run_dir_);
    EXPECT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    return cluster.is_ok() ? *cluster : ClusterSpec{};
  }

  std::vector<NodeEmulation> recorded_emulation() {
    Result<std::vector<NodeEmulation>> state = load_emulation_state(emulation_state_path(run_dir_ + "/" + cluster_name_));
    EXPECT_TRUE(state.is_ok());
    return state.is_ok() ? *state : std::vector<NodeEmulation>{};
  }

  testing::TempDir dir_;
  std::string run_dir_;
  std::string config_;
  std::string cluster_name_;
};

TEST_F(EmulatedCluster, QuarterCoreMeasuresAQuarterOfAnUncappedWorker) {
  write_config("emu-cpu", node_yaml("uncapped", "") + node_yaml("quarter", "{cpu: 0.25}"));
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;

  Result<ClusterConnection> connection = ClusterConnection::connect(reachable_cluster());
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  // Nodes are probed one at a time, so they never compete for the machine's cores.
  Result<ClusterProfile> profile = run_quick_profile(*connection, "emu-cpu", {1024, 1.0});
  ASSERT_TRUE(profile.is_ok()) << profile.status().to_string();
  const double ratio = profile->nodes[0].gflops / profile->nodes[1].gflops;
  std::printf("uncapped %.2f GFLOP/s, quarter core %.2f GFLOP/s, ratio %.3f\n", profile->nodes[0].gflops,
              profile->nodes[1].gflops, ratio);
  EXPECT_NEAR(ratio, 4.0, 0.15 * 4.0);
}

TEST_F(EmulatedCluster, ShapedLinkCarriesAbout100Mbit) {
  write_config("emu-link", node_yaml("pi", "{link: {rate: 100mbit}}"));
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const ClusterSpec cluster = reachable_cluster();
  ASSERT_EQ(cluster.nodes.size(), 1u);
  EXPECT_NE(cluster.nodes[0].host, "127.0.0.1") << "the node should be reached at its namespace address";

  Result<ClusterConnection> connection = ClusterConnection::connect(cluster);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  transport::FrameConnection& link = *connection->links()[0].connection;
  // The echo crosses the link once each way; each direction is shaped to 100 Mbit/s on its own.
  transport::Probe probe;
  probe.kind = transport::ProbeKind::kEcho;
  probe.echo.assign(6u << 20, 0x5a);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(link.write_message(probe).is_ok());
  Result<transport::IncomingFrame> reply = link.read_frame();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  const auto* echoed = std::get_if<transport::ProbeResult>(&reply->message);
  ASSERT_NE(echoed, nullptr);
  ASSERT_EQ(echoed->echo.size(), probe.echo.size());
  const double mbit_per_s = 2.0 * static_cast<double>(probe.echo.size()) * 8.0 / seconds / 1e6;
  std::printf("echo of %zu bytes took %.3f s: %.1f Mbit/s per direction\n", probe.echo.size(), seconds, mbit_per_s);
  EXPECT_NEAR(mbit_per_s, 100.0, 15.0);
}

TEST_F(EmulatedCluster, DownRemovesProcessesCgroupsNamespacesAndVeths) {
  write_config("emu-down", node_yaml("desk", "{cpu: 0.5}") + node_yaml("pi", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::vector<NodeEmulation> state = recorded_emulation();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(leftover_emulation(state).size(), 4u);  // 2 cgroups, 1 namespace, 1 veth
  Result<ClusterSpec> cluster = load_cluster_spec(config_);
  ASSERT_TRUE(cluster.is_ok());
  const std::vector<int> pids = local_cluster_pids(*cluster, {run_dir_, "", {}});
  ASSERT_EQ(pids.size(), 2u);

  testing::CommandResult down = run("down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_TRUE(leftover_emulation(state).empty());
  for (int pid : pids) EXPECT_FALSE(testing::process_alive(pid)) << pid;
  EXPECT_TRUE(recorded_emulation().empty());
}

TEST_F(EmulatedCluster, DownCleansUpAfterTheCoordinatorIsKilledMidRun) {
  write_config("emu-kill", node_yaml("desk", "{cpu: 0.5}") + node_yaml("pi", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::vector<NodeEmulation> state = recorded_emulation();
  Result<ClusterSpec> cluster = load_cluster_spec(config_);
  ASSERT_TRUE(cluster.is_ok());
  const std::vector<int> pids = local_cluster_pids(*cluster, {run_dir_, "", {}});
  {
    testing::ChildProcess coordinator({TESSERA_CLI_BINARY, "multiply", config_, "--run-dir", run_dir_, "--n", "2048",
                                       "--policy", "even"},
                                      dir_.file("coordinator.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    ASSERT_TRUE(testing::process_alive(coordinator.pid())) << testing::read_file(dir_.file("coordinator.log"));
    coordinator.kill_now();
  }
  testing::CommandResult down = run("down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_TRUE(leftover_emulation(state).empty());
  for (int pid : pids) EXPECT_FALSE(testing::process_alive(pid)) << pid;
}

TEST_F(EmulatedCluster, UpCleansWhatACrashedRunLeftBehind) {
  write_config("emu-crash", node_yaml("pi", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::vector<NodeEmulation> state = recorded_emulation();
  Result<ClusterSpec> cluster = load_cluster_spec(config_);
  ASSERT_TRUE(cluster.is_ok());
  // A crash: the worker dies, its namespace and cgroup stay.
  for (int pid : local_cluster_pids(*cluster, {run_dir_, "", {}})) ::kill(pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(leftover_emulation(state).empty());

  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("started"), std::string::npos) << up.output;
  testing::CommandResult status = run("status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  ASSERT_EQ(run("down").exit_code, 0);
  EXPECT_TRUE(leftover_emulation(state).empty());
}

TEST_F(EmulatedCluster, WithoutPrivilegesUpRefusesUnlessToldToRunUnthrottled) {
  write_config("emu-noroot", node_yaml("pi", "{cpu: 0.25}"));
  // The unprivileged user must be able to read the config and write the run directory.
  ::chmod(dir_.path().c_str(), 0777);
  ::chmod(config_.c_str(), 0644);
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  testing::CommandResult refused =
      run_command(as_nobody + TESSERA_CLI_BINARY + " up " + config_ + " --run-dir " + run_dir_);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("cannot emulate the CPU limits of pi"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--no-emulation"), std::string::npos) << refused.output;

  testing::CommandResult unthrottled =
      run_command(as_nobody + TESSERA_CLI_BINARY + " up " + config_ + " --run-dir " + run_dir_ + " --no-emulation");
  EXPECT_EQ(unthrottled.exit_code, 0) << unthrottled.output;
  EXPECT_NE(unthrottled.output.find("UNTHROTTLED"), std::string::npos) << unthrottled.output;
  testing::CommandResult down =
      run_command(as_nobody + TESSERA_CLI_BINARY + " down " + config_ + " --run-dir " + run_dir_);
  EXPECT_EQ(down.exit_code, 0) << down.output;
}

}  // namespace
}  // namespace tessera::balance
