// The emulated testbed for real: cgroup CPU quotas, network namespaces and tc-shaped veth links,
// set up by `tessera up` and measured through the workers. Needs root and cgroups; skips with
// the reason otherwise.
#include "tessera/emulation/emulation.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <memory>
#include <optional>
#include <thread>
#include <algorithm>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/gemm/wire_io.hpp"

#include <nlohmann/json.hpp>

namespace tessera::balance {
namespace {

using testing::run_command;

class EmulatedCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    const emulation::EmulationSupport support = emulation::detect_emulation_support();
    if (!support.missing.empty()) GTEST_SKIP() << "CPU emulation unavailable: " << support.missing;
    if (!support.link_missing.empty()) GTEST_SKIP() << "link emulation unavailable: " << support.link_missing;
    run_dir_ = dir_.file("run");
  }

  // Whatever happened, nothing of the cluster survives the test.
  void TearDown() override {
    if (config_.empty()) return;
    run("down");
    Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_);
    if (!cluster) return;
    for (int pid : emulation::local_cluster_pids(*cluster, {run_dir_, "", {}})) ::kill(pid, SIGKILL);
    Result<std::vector<emulation::NodeEmulation>> state = emulation::load_emulation_state(emulation::emulation_state_path(run_dir_ + "/" + cluster->name));
    if (state) {
      for (const emulation::NodeEmulation& node : *state) (void)emulation::remove_node_emulation(node);
      (void)emulation::remove_uplink(*state);
    }
  }

  void write_config(const std::string& cluster_name, const std::string& nodes_yaml, const std::string& top = "") {
    config_ = dir_.file("cluster.yaml");
    cluster_name_ = cluster_name;
    testing::write_file(config_, "cluster: " + cluster_name + "\nsecret: emulation-secret\n" + top + "nodes:\n" + nodes_yaml);
  }

  static std::string node_yaml(const std::string& name, const std::string& emulate) {
    return "  - name: " + name + "\n    host: 127.0.0.1\n    port: " + std::to_string(testing::free_loopback_port()) +
           "\n    threads: 1\n" + (emulate.empty() ? "" : "    emulate: " + emulate + "\n");
  }

  testing::CommandResult run(const std::string& subcommand, const std::string& extra = "") {
    return run_command(std::string(TESSERA_CLI_BINARY) + " " + subcommand + " " + config_ + " --run-dir " + run_dir_ +
                       " " + extra);
  }

  cluster::ClusterSpec reachable_cluster() {
    Result<emulation::ReachableCluster> cluster = emulation::load_reachable_cluster(config_, run_dir_);
    EXPECT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    return cluster.is_ok() ? cluster->spec : cluster::ClusterSpec{};
  }

  std::vector<emulation::NodeEmulation> recorded_emulation() {
    Result<std::vector<emulation::NodeEmulation>> state = emulation::load_emulation_state(emulation::emulation_state_path(run_dir_ + "/" + cluster_name_));
    EXPECT_TRUE(state.is_ok());
    return state.is_ok() ? *state : std::vector<emulation::NodeEmulation>{};
  }

  testing::TempDir dir_;
  std::string run_dir_;
  std::string config_;
  std::string cluster_name_;
};

// CPU time the cgroup's processes used, in seconds: cgroup v2 cpu.stat usage_usec, or v1
// cpuacct.usage (ns) in the same folder or in the cpuacct hierarchy beside it.
// CPU seconds (user + system, all threads) the process has used, from /proc/PID/stat. Read from
// the process rather than the cgroup because the cpu and cpuacct hierarchies may be mounted apart
// (cgroup v1), leaving a cpu-only cgroup with no usage counter.
std::optional<double> process_cpu_seconds(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // Fields after the parenthesised command name (which may hold spaces): state is field 3,
  // utime 14 and stime 15, in clock ticks.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  double ticks = 0.0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 14 || index == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The quota bounds the capped worker's CPU time against wall time whatever else the machine runs,
// so this holds on a loaded 2-core machine where comparing its speed with an uncapped worker's
// does not (the uncapped one shares the cores with everything else; a ratio of 2.48 was seen
// against the expected 4). A broken cap fails it: a busy single-thread worker without quota uses
// about a whole core, far above 0.25 + margin. The precise speed ratio belongs to a benchmark.
TEST_F(EmulatedCluster, QuarterCoreWorkerNeverGetsMoreThanAQuarterOfACore) {
  write_config("emu-cpu", node_yaml("uncapped", "") + node_yaml("quarter", "{cpu: 0.25}"));
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  std::string cgroup;
  for (const emulation::NodeEmulation& node : recorded_emulation()) {
    if (node.node == "quarter") cgroup = node.cgroup_path;
  }
  ASSERT_FALSE(cgroup.empty()) << "up should have put the quarter node in a cgroup";
  // Its weight against the other nodes follows the quota (a quarter of the default's).
  const bool v1 = std::filesystem::exists(cgroup + "/cpu.shares");
  EXPECT_EQ(testing::read_file(cgroup + (v1 ? "/cpu.shares" : "/cpu.weight")), v1 ? "256\n" : "25\n");
  Result<emulation::ReachableCluster> reachable = emulation::load_reachable_cluster(config_, run_dir_);
  ASSERT_TRUE(reachable.is_ok()) << reachable.status().to_string();
  const std::vector<int> pids = emulation::local_cluster_pids(reachable->spec, {run_dir_, "", {}});
  ASSERT_EQ(pids.size(), 2u);
  const int quarter_pid = pids[1];  // cluster order: uncapped, quarter
  const std::optional<double> before = process_cpu_seconds(quarter_pid);
  ASSERT_TRUE(before.has_value()) << "no /proc/" << quarter_pid << "/stat";

  // Only the capped node, kept busy with GEMM for a window of 2 s.
  cluster::ClusterSpec quarter_only = reachable_cluster();
  ASSERT_EQ(quarter_only.nodes.size(), 2u);
  quarter_only.nodes.erase(quarter_only.nodes.begin());
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(quarter_only);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  profile::ProfileOptions options;
  options.quick = true;
  options.quick_window_seconds = 2.0;
  const auto start = std::chrono::steady_clock::now();
  Result<profile::ClusterProfile> profile = profile::run_profile(*connection, quarter_only, std::nullopt, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(profile.is_ok()) << profile.status().to_string();
  const std::optional<double> after = process_cpu_seconds(quarter_pid);
  ASSERT_TRUE(after.has_value());
  const double cores = (*after - *before) / wall;
  std::printf("quarter-core worker: %.3f s of CPU in %.3f s of wall time = %.3f cores (%.2f GFLOP/s)\n",
              *after - *before, wall, cores, profile->nodes[0].gflops);
  EXPECT_GT(*after, *before) << "the worker should have computed";
  // CFS may run a task to the end of its slice past the quota at a period boundary; 20% covers
  // that over a hundred 20 ms periods.
  EXPECT_LE(cores, 0.25 * 1.2);
}

TEST_F(EmulatedCluster, ShapedLinkCarriesAbout100Mbit) {
  write_config("emu-link", node_yaml("pi", "{link: {rate: 100mbit}}"));
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const cluster::ClusterSpec cluster = reachable_cluster();
  ASSERT_EQ(cluster.nodes.size(), 1u);
  EXPECT_NE(cluster.nodes[0].host, "127.0.0.1") << "the node should be reached at its namespace address";

  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  transport::FrameConnection& link = *connection->links()[0].connection;
  // The echo crosses the link once each way; each direction is shaped to 100 Mbit/s on its own.
  gemm::Probe probe;
  probe.kind = gemm::ProbeKind::kEcho;
  probe.echo.assign(6u << 20, 0x5a);
  const auto start = std::chrono::steady_clock::now();
  Result<gemm::ProbeResult> echoed = gemm::request_reply<gemm::ProbeResult>(link, probe);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(echoed.is_ok()) << echoed.status().to_string();
  ASSERT_EQ(echoed->echo.size(), probe.echo.size());
  const double mbit_per_s = 2.0 * static_cast<double>(probe.echo.size()) * 8.0 / seconds / 1e6;
  std::printf("echo of %zu bytes took %.3f s: %.1f Mbit/s per direction\n", probe.echo.size(), seconds, mbit_per_s);
  EXPECT_NEAR(mbit_per_s, 100.0, 15.0);
}

// Two nodes on gigabit links behind a 100 Mbit/s switch uplink: what both receive at once is the
// uplink's, not the sum of their links'. Only a ceiling is asserted: load can slow the transfer,
// never speed it past the uplink; without the shared bottleneck the two would together far exceed it.
TEST_F(EmulatedCluster, NodesBehindASwitchShareItsUplinkAndDownRemovesIt) {
  write_config("emu-switch", node_yaml("pa", "{link: {rate: 1gbit}}") + node_yaml("pb", "{link: {rate: 1gbit}}"),
               "switch: {uplink: 100mbit}\n");
  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("behind the switch (uplink 100mbit)"), std::string::npos) << up.output;
  const std::vector<emulation::NodeEmulation> state = recorded_emulation();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].uplink_to_nodes_ifb, state[1].uplink_to_nodes_ifb) << "one uplink for both";
  const std::vector<std::string> leftovers = emulation::leftover_emulation(state);
  EXPECT_EQ(std::count_if(leftovers.begin(), leftovers.end(), [](const std::string& item) { return item.starts_with("ifb "); }), 2);

  const cluster::ClusterSpec cluster = reachable_cluster();
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  constexpr std::size_t kBytes = 3u << 20;
  std::vector<Result<double>> seconds(2, Result<double>(0.0));
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> echoes;
    for (std::size_t i = 0; i < 2; ++i) {
      echoes.emplace_back([&, i] {
        transport::FrameConnection& link = *connection->links()[i].connection;
        gemm::Probe probe;
        probe.kind = gemm::ProbeKind::kEcho;
        probe.echo.assign(kBytes, 0x5a);
        Result<gemm::ProbeResult> reply = gemm::request_reply<gemm::ProbeResult>(link, probe);
        if (!reply) {
          seconds[i] = reply.status();
          return;
        }
        seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
  }
  ASSERT_TRUE(seconds[0].is_ok() && seconds[1].is_ok());
  const double last = std::max(*seconds[0], *seconds[1]);
  // Both echoes cross the uplink toward the nodes, then (each once whole) back: 2 x kBytes each
  // way, one direction after the other, each held to 100 Mbit/s. The rate read this way can
  // exceed the uplink's only by the little that one echo's return overlaps the other's send.
  const double mbit_per_s = 4.0 * static_cast<double>(kBytes) * 8.0 / last / 1e6;
  std::printf("two echoes of %zu bytes through the uplink took %.3f s: %.1f Mbit/s per direction together\n", kBytes, last,
              mbit_per_s);
  EXPECT_LT(mbit_per_s, 130.0);
  connection->close();

  testing::CommandResult down = run("down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_TRUE(emulation::leftover_emulation(state).empty());
}

// Workers in UTS namespaces of their own name distinct hosts, as machines of a lab do: the
// profile measures the nodes of distinct hosts at once (their own probes; links one at a time) and
// records each node's host. That they overlap in time is a benchmark's to show (the time is
// printed); here, that the grouping by host measures every node in full and names its host.
TEST(ProfileByHost, NodesOfDistinctHostsAreMeasuredAndNamedByTheirHost) {
  if (::geteuid() != 0) GTEST_SKIP() << "UTS namespaces need root";
  testing::TempDir dir;
  testing::write_file(dir.file("secret"), testing::kSecret);
  std::vector<std::unique_ptr<testing::ChildProcess>> workers;
  cluster::ClusterSpec spec;
  spec.name = "by-host";
  spec.secret = testing::kSecret;
  spec.source_path = dir.file("cluster.yaml");
  const std::vector<std::string> hosts = {"lab-a", "lab-b", "lab-a", "lab-c"};
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    cluster::NodeSpec node;
    node.name = "n" + std::to_string(i);
    node.host = "127.0.0.1";
    node.port = testing::free_loopback_port();
    node.line = static_cast<int>(i + 1);
    const std::string worker = std::string(TESSERA_WORKER_BINARY) + " --listen " + node.endpoint() +
                               " --threads 1 --secret-file " + dir.file("secret");
    workers.push_back(std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{"/usr/bin/unshare", "--uts", "/bin/sh", "-c", "hostname " + hosts[i] + " && exec " + worker},
        dir.file("worker" + std::to_string(i) + ".log")));
    spec.nodes.push_back(node);
  }
  for (const cluster::NodeSpec& node : spec.nodes) ASSERT_TRUE(testing::wait_until_listening(node)) << node.name;
  const std::string config = testing::write_cluster_file(dir, spec);
  const auto start = std::chrono::steady_clock::now();
  const testing::CommandResult profile =
      run_command("timeout 240 " + std::string(TESSERA_CLI_BINARY) + " profile " + config + " --quick");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(profile.exit_code, 0) << profile.output;
  std::printf("profiling 4 nodes on 3 hosts took %.1f s\n", seconds);
  Result<profile::ClusterProfile> saved = profile::load_profile(dir.file("cluster.profile.yaml"));
  ASSERT_TRUE(saved.is_ok()) << saved.status().to_string();
  ASSERT_EQ(saved->nodes.size(), hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    EXPECT_EQ(saved->nodes[i].hostname, hosts[i]);
    EXPECT_GT(saved->nodes[i].gflops, 0.0) << saved->nodes[i].name;
    EXPECT_TRUE(saved->nodes[i].has_link) << saved->nodes[i].name;
    EXPECT_GT(saved->nodes[i].link.to_node_bytes_per_s, 0.0) << saved->nodes[i].name;
  }
}

TEST_F(EmulatedCluster, DownRemovesProcessesCgroupsNamespacesAndVeths) {
  write_config("emu-down", node_yaml("desk", "{cpu: 0.5}") + node_yaml("pi", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::vector<emulation::NodeEmulation> state = recorded_emulation();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(emulation::leftover_emulation(state).size(), 4u);  // 2 cgroups, 1 namespace, 1 veth
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_);
  ASSERT_TRUE(cluster.is_ok());
  const std::vector<int> pids = emulation::local_cluster_pids(*cluster, {run_dir_, "", {}});
  ASSERT_EQ(pids.size(), 2u);

  testing::CommandResult down = run("down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_TRUE(emulation::leftover_emulation(state).empty());
  for (int pid : pids) EXPECT_FALSE(testing::process_alive(pid)) << pid;
  EXPECT_TRUE(recorded_emulation().empty());
}

TEST_F(EmulatedCluster, DownCleansUpAfterTheCoordinatorIsKilledMidRun) {
  write_config("emu-kill", node_yaml("desk", "{cpu: 0.5}") + node_yaml("pi", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::vector<emulation::NodeEmulation> state = recorded_emulation();
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_);
  ASSERT_TRUE(cluster.is_ok());
  const std::vector<int> pids = emulation::local_cluster_pids(*cluster, {run_dir_, "", {}});
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
  EXPECT_TRUE(emulation::leftover_emulation(state).empty());
  for (int pid : pids) EXPECT_FALSE(testing::process_alive(pid)) << pid;
}

TEST_F(EmulatedCluster, UpCleansWhatACrashedRunLeftBehind) {
  write_config("emu-crash", node_yaml("pi", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::vector<emulation::NodeEmulation> state = recorded_emulation();
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_);
  ASSERT_TRUE(cluster.is_ok());
  // A crash: the worker dies, its namespace and cgroup stay.
  for (int pid : emulation::local_cluster_pids(*cluster, {run_dir_, "", {}})) ::kill(pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(emulation::leftover_emulation(state).empty());

  testing::CommandResult up = run("up");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("started"), std::string::npos) << up.output;
  testing::CommandResult status = run("status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  ASSERT_EQ(run("down").exit_code, 0);
  EXPECT_TRUE(emulation::leftover_emulation(state).empty());
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

namespace tessera::balance {
namespace {

// The full profiler on a copy of the emulated mixed cluster: curves and links measured, the
// saved profile reused, --refresh and --node re-measuring, and the model policy run for real.
TEST_F(EmulatedCluster, ProfileIsMeasuredSavedReusedAndDrivesTheModelPolicy) {
  write_config("emu-profile", node_yaml("desktop", "{cpu: 1.0}") + node_yaml("pi1", "{cpu: 0.25, link: {rate: 100mbit}}") +
                                  node_yaml("pi2", "{cpu: 0.25, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  const std::string profile_path = dir_.file("cluster.profile.yaml");

  testing::CommandResult first = run("profile");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("measured 3 of 3 nodes"), std::string::npos) << first.output;
  Result<profile::ClusterProfile> profile = profile::load_profile(profile_path);
  ASSERT_TRUE(profile.is_ok()) << profile.status().to_string();
  ASSERT_EQ(profile->nodes.size(), 3u);
  for (const profile::NodeProfile& node : profile->nodes) {
    EXPECT_GE(node.speed.size(), 3u) << node.name;
    EXPECT_TRUE(node.has_link) << node.name;
    EXPECT_GT(node.link.latency_s, 0.0) << node.name;
  }
  // The shaped links measure near 100 Mbit/s (12.5 MB/s) each way; loopback far above.
  for (const char* pi : {"pi1", "pi2"}) {
    EXPECT_NEAR(profile->find(pi)->link.to_node_bytes_per_s / 12.5e6, 1.0, 0.15) << pi;
    EXPECT_NEAR(profile->find(pi)->link.from_node_bytes_per_s / 12.5e6, 1.0, 0.15) << pi;
  }
  EXPECT_GT(profile->find("desktop")->link.to_node_bytes_per_s, 100e6);
  EXPECT_GT(profile->coordinator_send_bytes_per_s, 0.0);

  testing::CommandResult second = run("profile");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("measured 0 of 3 nodes"), std::string::npos) << second.output;
  EXPECT_EQ(*profile::load_profile(profile_path), *profile) << "a reused profile must be unchanged";

  testing::CommandResult one = run("profile", "--node pi2 --quick");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("measured 1 of 3 nodes"), std::string::npos) << one.output;

  testing::CommandResult refreshed = run("profile", "--refresh --quick");
  ASSERT_EQ(refreshed.exit_code, 0) << refreshed.output;
  EXPECT_NE(refreshed.output.find("measured 3 of 3 nodes"), std::string::npos) << refreshed.output;

  testing::CommandResult unknown = run("profile", "--node nosuch");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("--node nosuch: no such node"), std::string::npos) << unknown.output;

  testing::CommandResult model = run_command(std::string(TESSERA_CLI_BINARY) + " model " + config_ + " --n 512");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  for (const char* policy : {"plan even", "plan proportional", "plan model"}) {
    EXPECT_NE(model.output.find(policy), std::string::npos) << model.output;
  }

  const std::string report_path = dir_.file("model.json");
  testing::CommandResult multiply = run("multiply", "--n 512 --policy model --verify exact --report " + report_path);
  ASSERT_EQ(multiply.exit_code, 0) << multiply.output;
  const nlohmann::json report = nlohmann::json::parse(testing::read_file(report_path));
  EXPECT_EQ(report["policy"], "model");
  EXPECT_EQ(report["verified"], true);
  EXPECT_GT(report["predicted_makespan_s"].get<double>(), 0.0);
  EXPECT_GE(report["prediction_error"].get<double>(), 0.0);
  uint64_t rows = 0;
  for (const auto& node : report["nodes"]) {
    EXPECT_TRUE(node["predicted_finish_s"].is_number()) << node;
    rows += node["rows"].get<uint64_t>();
  }
  EXPECT_EQ(rows, 512u);
}

}  // namespace
}  // namespace tessera::balance

#include "tessera/balance/multiply/multiply.hpp"
#include "reference_product.hpp"

namespace tessera::balance {
namespace {

// Two equal nodes; one's CPU quota is cut to a tenth while the multiply runs. The dynamic policy
// must finish with the exact product and give the slowed node much less.
TEST_F(EmulatedCluster, DynamicGivesLessToANodeSlowedMidRun) {
  write_config("emu-slow", node_yaml("steady", "{cpu: 0.5}") + node_yaml("slowed", "{cpu: 0.5}"));
  ASSERT_EQ(run("up").exit_code, 0);
  std::string quota_file;
  for (const emulation::NodeEmulation& node : recorded_emulation()) {
    if (node.node == "slowed") {
      quota_file = std::filesystem::exists(node.cgroup_path + "/cpu.cfs_quota_us") ? node.cgroup_path + "/cpu.cfs_quota_us"
                                                                                   : node.cgroup_path + "/cpu.max";
    }
  }
  ASSERT_FALSE(quota_file.empty());
  const cluster::ClusterSpec cluster = reachable_cluster();
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();

  plan::PlanRequest request;
  request.policy = plan::Policy::kDynamic;
  request.m = request.n = request.k = 1536;
  request.tile_rows = 64;
  request.node_names = {"steady", "slowed"};
  Result<plan::Plan> plan = plan::make_plan(request);
  ASSERT_TRUE(plan.is_ok());
  const linalg::Matrix a = linalg::random_matrix(1536, 1536, 3, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(1536, 1536, 4, linalg::FillKind::kIntegers);
  std::atomic<bool> slowed{false};
  multiply::MultiplyHooks hooks;
  hooks.on_credit = [&](std::size_t node, uint64_t) {
    if (node == 1 && !slowed.exchange(true)) {
      const bool v1 = quota_file.ends_with("cfs_quota_us");
      testing::write_file(quota_file, v1 ? "2000" : "2000 20000");  // 0.1 core of the 20 ms periods up set
    }
  };
  linalg::Matrix c;
  Result<multiply::MultiplyRun> result = multiply::run_multiply(*connection, *plan, a, b, c, hooks);
  ASSERT_TRUE(slowed.load());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(c, reference_product(a, b));
  std::printf("rows: steady %llu, slowed %llu\n", static_cast<unsigned long long>(result->nodes[0].rows),
              static_cast<unsigned long long>(result->nodes[1].rows));
  EXPECT_LT(result->nodes[1].rows * 2, result->nodes[0].rows) << "the slowed node should have pulled far less";
}


// Worker-to-worker deltas in an emulated cluster: two workers in network namespaces behind shaped
// links and one in the root namespace must all reach each other (namespaced peers at their
// namespace addresses, the root one through each namespace's own veth). Every algorithm's answer
// must verify, and every worker must have sent and received peer bytes, which fails if the
// routes, forwarding or the root worker's listen address are missing (the links would not come up).
TEST_F(EmulatedCluster, GraphDeltasFlowBetweenNamespacedAndRootWorkers) {
  write_config("emu-graph", node_yaml("desk", "") + node_yaml("pia", "{cpu: 0.5, link: {rate: 100mbit}}") +
                                node_yaml("pib", "{cpu: 0.5, link: {rate: 100mbit}}"));
  ASSERT_EQ(run("up").exit_code, 0);
  for (const std::string algorithm : {"pagerank", "cc", "sssp --source 0"}) {
    const std::string report = dir_.file("graph.json");
    testing::CommandResult graph = run("graph", "--algorithm " + algorithm + " --generate rmat:12 --weights equal "
                                                "--verify --report " + report);
    ASSERT_EQ(graph.exit_code, 0) << algorithm << ": " << graph.output;
    const nlohmann::json json = nlohmann::json::parse(testing::read_file(report));
    ASSERT_EQ(json["nodes"].size(), 3u);
    for (const nlohmann::json& node : json["nodes"]) {
      EXPECT_GT(node["peer_bytes_sent"].get<uint64_t>(), 0u) << algorithm << " " << node.dump();
      EXPECT_GT(node["peer_bytes_received"].get<uint64_t>(), 0u) << algorithm << " " << node.dump();
    }
  }
}

}  // namespace
}  // namespace tessera::balance
