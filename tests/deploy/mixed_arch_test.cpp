// A real mixed-architecture cluster on one machine: the arm64 tessera-worker from
// scripts/cross-arm64.sh runs under qemu-aarch64-static (user-mode emulation, no binfmt
// registration) next to a native x86 worker, and the x86 coordinator multiplies on both at once
// with integer-filled inputs, so the product must be bit-exact: every byte-order, alignment or
// size assumption in the frames, tiles and BLAS calls between the two architectures is checked
// for real. Skips, saying why, when the arm64 worker or qemu is absent.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../integration/process_fixture.hpp"

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

std::string arm64_worker_path() {
  if (const char* env = std::getenv("TESSERA_ARM64_WORKER"); env != nullptr && *env != '\0') return env;
  return TESSERA_ARM64_WORKER_DEFAULT;
}

// qemu-aarch64-static from PATH (Debian: qemu-user-static), or empty.
std::string find_qemu() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / "qemu-aarch64-static";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

// Where qemu finds the arm64 dynamic loader (-L): "/" when dpkg's arm64 architecture holds
// libc6:arm64 (pulled in by libssl-dev:arm64 and friends, scripts/cross-arm64.sh), so the loader,
// libc and the multiarch libraries in /usr/lib/aarch64-linux-gnu all come from one glibc build.
// The cross sysroot /usr/aarch64-linux-gnu (crossbuild-essential-arm64) has a loader of its own
// that must not be mixed with the multiarch libc: that mix hung at start.
std::string arm64_sysroot() {
  if (fs::exists("/lib/aarch64-linux-gnu/libc.so.6") && fs::exists("/lib/ld-linux-aarch64.so.1")) return "/";
  return "/usr/aarch64-linux-gnu";
}

// qemu-user 7.2 (Debian 12) never finished the dynamic loader's lazy symbol binding in this
// program: the worker spun in ld.so's symbol lookup for 10 minutes before its first line, also
// with --version when OpenBLAS starts its thread pool. LD_BIND_NOW=1 binds every symbol at start
// and the emulated worker comes up in well under a second. A real arm64 machine needs nothing.
std::vector<std::string> qemu_launcher(const std::string& qemu) {
  return {"/usr/bin/env", "LD_BIND_NOW=1", qemu, "-L", arm64_sysroot()};
}

class MixedArchitecture : public ::testing::Test {
 protected:
  void SetUp() override {
    worker_ = arm64_worker_path();
    qemu_ = find_qemu();
    if (::access(worker_.c_str(), X_OK) != 0) {
      GTEST_SKIP() << "no arm64 worker at " << worker_
                   << "; build it with scripts/cross-arm64.sh (or set TESSERA_ARM64_WORKER)";
    }
    if (qemu_.empty()) GTEST_SKIP() << "qemu-aarch64-static not found in PATH; install qemu-user-static";
    if (!fs::exists(arm64_sysroot() + "/lib/ld-linux-aarch64.so.1")) {
      GTEST_SKIP() << "no arm64 C library (libc6:arm64 or crossbuild-essential-arm64); run scripts/cross-arm64.sh";
    }
    ASSERT_FALSE(dir_.path().empty());
    // mkdtemp made the folder 0700; the secret inside is 0600 like keygen writes it.
    secret_file_ = dir_.file("secret");
    testing::write_file(secret_file_, "mixed-architecture-secret\n");
    ASSERT_EQ(::chmod(secret_file_.c_str(), 0600), 0);
  }

  // Starts `program` (a worker, maybe behind qemu) on a free loopback port; true once it listens.
  bool start(const std::string& name, std::vector<std::string> launcher, const std::string& binary) {
    cluster::NodeSpec node;
    node.name = name;
    node.host = "127.0.0.1";
    node.port = testing::free_loopback_port();
    node.threads = 1;
    std::vector<std::string> args = std::move(launcher);
    args.insert(args.end(), {binary, "--listen", node.endpoint(), "--threads", "1", "--secret-file", secret_file_});
    processes_.push_back(std::make_unique<testing::ChildProcess>(args, dir_.file(name + ".log")));
    nodes_.push_back(node);
    // An emulated worker takes longer to start: a few tries of wait_until_listening's 5 s.
    for (int attempt = 0; attempt < 6; ++attempt) {
      if (testing::wait_until_listening(node)) return true;
      if (!testing::process_alive(processes_.back()->pid())) break;
    }
    return false;
  }

  std::string write_cluster(const std::string& wire = "plain") {
    std::string yaml = "cluster: mixed-arch\nwire: " + wire + "\nsecret_file: " + secret_file_ + "\nnodes:\n";
    for (const cluster::NodeSpec& node : nodes_) {
      yaml += "  - name: " + node.name + "\n    host: 127.0.0.1\n    port: " + std::to_string(node.port) +
              "\n    threads: 1\n";
    }
    const std::string path = dir_.file("cluster-" + wire + ".yaml");
    testing::write_file(path, yaml);
    return path;
  }

  std::string log_of(const std::string& name) { return testing::read_file(dir_.file(name + ".log")); }

  testing::TempDir dir_;
  std::string worker_, qemu_, secret_file_;
  std::vector<cluster::NodeSpec> nodes_;
  // Stopped by pid (SIGTERM, then SIGKILL) when the test ends, also when an assertion fails.
  std::vector<std::unique_ptr<testing::ChildProcess>> processes_;
};

TEST_F(MixedArchitecture, Arm64UnderQemuAndNativeWorkerMultiplyBitExact) {
  ASSERT_TRUE(start("arm64", qemu_launcher(qemu_), worker_)) << log_of("arm64");
  ASSERT_TRUE(start("x86", {}, TESSERA_WORKER_BINARY)) << log_of("x86");
  const std::string config = write_cluster();

  // The emulated worker really is the arm64 program, run by qemu.
  const std::string cmdline = testing::read_file("/proc/" + std::to_string(processes_[0]->pid()) + "/cmdline");
  EXPECT_NE(cmdline.find(worker_), std::string::npos);

  const std::string cli = TESSERA_CLI_BINARY;
  testing::CommandResult status = testing::run_command(cli + " status " + config);
  EXPECT_EQ(status.exit_code, 0) << status.output;

  // Sizes divisible by nothing in particular; integers in [-8, 8] so float64 sums are exact in any
  // order and the product is compared value for value (--verify exact). Both policies give both
  // nodes rows: even halves, proportional 1:2 (the emulated node gets a third).
  for (const std::string policy : {"even", "proportional --weights 1,2"}) {
    const std::string report_path = dir_.file(policy.substr(0, policy.find(' ')) + ".json");
    testing::CommandResult multiply =
        testing::run_command(cli + " multiply " + config + " --m 203 --n 97 --k 151 --fill integers --verify exact" +
                             " --policy " + policy + " --report " + report_path);
    ASSERT_EQ(multiply.exit_code, 0) << policy << ":\n" << multiply.output << "\narm64 log:\n" << log_of("arm64");
    EXPECT_NE(multiply.output.find("verified: true"), std::string::npos) << multiply.output;
    const nlohmann::json report = nlohmann::json::parse(testing::read_file(report_path));
    EXPECT_EQ(report["verified"], true);
    EXPECT_EQ(report["verification"]["mode"], "exact");
    EXPECT_EQ(report["verification"]["max_abs_error"], 0.0);
    ASSERT_EQ(report["nodes"].size(), 2u);
    uint64_t rows = 0;
    for (const auto& node : report["nodes"]) {
      EXPECT_GT(node["rows"].get<uint64_t>(), 0u) << policy << ": node " << node["name"] << " did no work";
      rows += node["rows"].get<uint64_t>();
    }
    EXPECT_EQ(rows, 203u) << policy;
  }

  // Worker-to-worker traffic too: connected components with deltas crossing between the two
  // architectures, compared with the coordinator's reference answer.
  testing::CommandResult graph = testing::run_command(cli + " graph " + config +
                                                      " --algorithm cc --generate mesh2d:24x24 --partition contiguous"
                                                      " --weights equal --verify --max-seconds 120");
  EXPECT_EQ(graph.exit_code, 0) << graph.output << "\narm64 log:\n" << log_of("arm64");

  // The same over TLS 1.3: records sealed on one architecture and opened on the other, both ways,
  // coordinator to worker and worker to worker.
  const std::string sealed = write_cluster("encrypted");
  testing::CommandResult sealed_multiply =
      testing::run_command(cli + " multiply " + sealed + " --m 203 --n 97 --k 151 --fill integers --verify exact --policy even");
  EXPECT_EQ(sealed_multiply.exit_code, 0) << sealed_multiply.output << "\narm64 log:\n" << log_of("arm64");
  EXPECT_NE(sealed_multiply.output.find("verified: true"), std::string::npos) << sealed_multiply.output;
  testing::CommandResult sealed_graph = testing::run_command(
      cli + " graph " + sealed + " --algorithm cc --generate mesh2d:24x24 --partition contiguous --weights equal --verify"
                                 " --max-seconds 120");
  EXPECT_EQ(sealed_graph.exit_code, 0) << sealed_graph.output << "\narm64 log:\n" << log_of("arm64");
  EXPECT_NE(log_of("arm64").find("(TLSv1.3 TLS_"), std::string::npos) << log_of("arm64");

  for (auto& process : processes_) EXPECT_TRUE(testing::process_alive(process->pid()));
}

}  // namespace
}  // namespace tessera::balance
