// Test support: real tessera-worker processes on loopback ports, stopped by pid when the owning
// object goes out of scope (also when an assertion fails), and small helpers for temp files.
// Not thread-safe; one owner per object.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tessera/balance/cluster/cluster_spec.hpp"

namespace tessera::testing {

// A port that was free a moment ago (the OS picks it; we close it again), and never one this
// process was given before: the OS may hand a closed port out again before the worker it was
// meant for has bound it (two of sixteen workers were once given the same port).
inline uint16_t free_loopback_port() {
  static std::mutex mutex;
  static std::set<uint16_t> given;
  const std::lock_guard<std::mutex> lock(mutex);
  for (;;) {
    asio::io_context context;
    asio::ip::tcp::acceptor acceptor(context, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const uint16_t port = acceptor.local_endpoint().port();
    if (given.insert(port).second) return port;
  }
}

// `count` distinct ports, each free a moment ago.
inline std::vector<uint16_t> free_loopback_ports(std::size_t count) {
  std::vector<uint16_t> ports;
  for (std::size_t i = 0; i < count; ++i) ports.push_back(free_loopback_port());
  return ports;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessera-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Mode 0600: tests write their secret files with this, and a secret others can read is refused.
inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}
// The cluster secret integration tests write for their workers (each test its own directory).
inline constexpr const char* kSecret = "integration-test-secret";

inline std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// Whether `path` holds a PNG image (gnuplot's output), by its signature and a plausible size.
inline bool is_png(const std::string& path) {
  const std::string bytes = read_file(path);
  return bytes.size() > 100 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// Alive means running: a zombie (exited, not yet reaped by whoever adopted it) is not.
inline bool process_alive(int pid) {
  if (pid <= 0) return false;
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return false;
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat_line;
  std::getline(stat_file, stat_line);
  const auto close_paren = stat_line.rfind(')');
  return !(close_paren != std::string::npos && close_paren + 2 < stat_line.size() && stat_line[close_paren + 2] == 'Z');
}

// Runs a program, stdout+stderr to `log_path`; the destructor stops it by pid.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> args, const std::string& log_path) {
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* log = std::fopen(log_path.c_str(), "w");
      if (log != nullptr) {
        ::dup2(fileno(log), STDOUT_FILENO);
        ::dup2(fileno(log), STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  int pid() const { return pid_; }
  // SIGTERM, then SIGKILL after a grace period; returns the exit status as waitpid reports it.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000)) {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        exit_status_ = status;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    exit_status_ = status;
    return status;
  }
  // Waits for the process to exit by itself; returns its exit code, or -1 on a timeout or signal.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        exit_status_ = status;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  void signal(int signal_number) {
    if (pid_ > 0) ::kill(pid_, signal_number);
  }
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &exit_status_, 0);
    pid_ = 0;
  }

 private:
  int pid_ = 0;
  int exit_status_ = 0;
};

// Runs a command to completion; returns exit code and captured stdout+stderr.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
inline CommandResult run_command(const std::string& command_line) {
  CommandResult result;
  FILE* pipe = ::popen((command_line + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, count);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Writes `spec` as dir/cluster.yaml (name, secret, nodes with one thread each); returns the path.
inline std::string write_cluster_file(const TempDir& dir, const balance::cluster::ClusterSpec& spec) {
  std::string yaml = "cluster: " + spec.name + "\nsecret: " + spec.secret + "\nnodes:\n";
  for (const balance::cluster::NodeSpec& node : spec.nodes) {
    yaml += "  - name: " + node.name + "\n    host: " + node.host + "\n    port: " + std::to_string(node.port) +
            "\n    threads: 1\n";
  }
  const std::string path = dir.file("cluster.yaml");
  write_file(path, yaml);
  return path;
}

// Polls until `node` accepts TCP connections (at most about 5 s); false if it never does.
inline bool wait_until_listening(const balance::cluster::NodeSpec& node) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    asio::io_context context;
    asio::ip::tcp::socket socket(context);
    asio::error_code error;
    socket.connect({asio::ip::make_address(node.host), node.port}, error);
    if (!error) {
      // A bare connect counts as a (short) session on the worker; let it notice the close.
      socket.close();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

// The port a worker started with --listen 127.0.0.1:0 says it listens on (its first line,
// "tessera-worker VERSION listening on 127.0.0.1:PORT ..."), waiting up to 10 s for it; 0 if it
// never says.
inline uint16_t listening_port(const std::string& log_path) {
  const std::string marker = "listening on 127.0.0.1:";
  for (int attempt = 0; attempt < 400; ++attempt) {
    std::ifstream log(log_path);
    std::string line;
    while (std::getline(log, line)) {
      const std::size_t at = line.find(marker);
      if (at == std::string::npos) continue;
      const unsigned long port = std::strtoul(line.c_str() + at + marker.size(), nullptr, 10);
      if (port > 0 && port <= 65535) return static_cast<uint16_t>(port);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return 0;
}

// Starts `count` real tessera-worker processes named a, b, c, ... on loopback ports they pick
// themselves (--listen 127.0.0.1:0, the port read back from the worker's "listening on" line, so
// two test binaries running at once never reach for the same port), one
// compute thread each, with the secret read from `secret_file`; waits until each says it listens
// (it prints the line once its socket listens, so connections are queued from then on). With `last_fault_flags`, the last one is the test twin tessera-worker-faulty
// started with those flags (worker/include/tessera/worker/fault_hooks.hpp); every worker also
// gets `worker_flags` (e.g. --wire encrypted). The returned processes stop their workers when
// destroyed.
struct LocalWorkers {
  std::vector<balance::cluster::NodeSpec> nodes;
  std::vector<std::unique_ptr<ChildProcess>> processes;
};
inline LocalWorkers start_local_workers(std::size_t count, const std::string& secret_file, const TempDir& dir,
                                        const std::vector<std::string>& last_fault_flags = {},
                                        const std::vector<std::string>& worker_flags = {}) {
  LocalWorkers workers;
  std::vector<std::string> logs;
  for (std::size_t i = 0; i < count; ++i) {
    balance::cluster::NodeSpec node;
    node.name = std::string(1, static_cast<char>('a' + i));
    node.host = "127.0.0.1";
    node.threads = 1;
    node.line = static_cast<int>(i + 1);
    const bool faulty = !last_fault_flags.empty() && i + 1 == count;
    std::vector<std::string> args{faulty ? TESSERA_FAULTY_WORKER_BINARY : TESSERA_WORKER_BINARY,
                                  "--listen", "127.0.0.1:0", "--threads", "1", "--secret-file", secret_file};
    if (faulty) args.insert(args.end(), last_fault_flags.begin(), last_fault_flags.end());
    // "{i}" in a flag is the worker's index: a folder of its own each (--store DIR{i}).
    for (std::string flag : worker_flags) {
      for (std::size_t at = flag.find("{i}"); at != std::string::npos; at = flag.find("{i}")) {
        flag.replace(at, 3, std::to_string(i));
      }
      args.push_back(std::move(flag));
    }
    logs.push_back(dir.file("worker" + std::to_string(i) + ".log"));
    // A log left by a worker started before in the same folder would name that worker's port.
    std::error_code ignored;
    std::filesystem::remove(logs.back(), ignored);
    workers.processes.push_back(std::make_unique<ChildProcess>(std::move(args), logs.back()));
    workers.nodes.push_back(node);
  }
  for (std::size_t i = 0; i < count; ++i) {
    balance::cluster::NodeSpec& node = workers.nodes[i];
    node.port = listening_port(logs[i]);
    if (node.port == 0) {
      ADD_FAILURE() << "worker " << node.name << " never said it listened (log " << logs[i] << ")";
    }
  }
  return workers;
}

// A cluster named `name` of `count` workers from start_local_workers (the last one faulty with
// `last_fault_flags`, if given). The workers read `worker_secret` (default: the cluster's
// `secret`) from dir/secret; the spec's source path is dir/cluster.yaml, so a profile it measures
// is saved in `dir` too. `worker_flags` go to every worker.
struct LocalCluster {
  balance::cluster::ClusterSpec spec;
  std::vector<std::unique_ptr<ChildProcess>> processes;
};
inline LocalCluster start_local_cluster(const std::string& name, const std::string& secret, std::size_t count,
                                        const TempDir& dir, const std::string& worker_secret = "",
                                        const std::vector<std::string>& last_fault_flags = {},
                                        const std::vector<std::string>& worker_flags = {}) {
  write_file(dir.file("secret"), worker_secret.empty() ? secret : worker_secret);
  LocalCluster cluster;
  cluster.spec.name = name;
  cluster.spec.secret = secret;
  cluster.spec.source_path = dir.file("cluster.yaml");
  LocalWorkers started = start_local_workers(count, dir.file("secret"), dir, last_fault_flags, worker_flags);
  cluster.spec.nodes = std::move(started.nodes);
  cluster.processes = std::move(started.processes);
  return cluster;
}

}  // namespace tessera::testing
