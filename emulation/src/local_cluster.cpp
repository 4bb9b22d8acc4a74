#include "tessera/emulation/local_cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/emulation/emulation.hpp"
#include "tessera/core/files.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/core/subprocess.hpp"

namespace tessera::emulation {

namespace fs = std::filesystem;

namespace {

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string cluster_dir(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options) {
  return cluster_run_dir(cluster, options);
}

std::string pid_path(const std::string& dir, const cluster::NodeSpec& node) { return dir + "/" + node.name + ".pid"; }
std::string log_path(const std::string& dir, const cluster::NodeSpec& node) { return dir + "/" + node.name + ".log"; }
// Each emulated worker's block store: resident blocks kept there outlive a session and a restart
// of the cluster (`tessera down` leaves them; the run directory holds them).
std::string store_path(const std::string& dir, const cluster::NodeSpec& node) { return dir + "/" + node.name + ".store"; }

int read_pid(const std::string& path) {
  std::ifstream file(path);
  long pid = 0;
  if (!(file >> pid) || pid <= 1 || pid > 1 << 30) return 0;
  return static_cast<int>(pid);
}

// True only for a live process whose command line is a tessera-worker: pids are reused, and a
// stale file must never get an unrelated process killed.
bool is_live_worker(int pid) {
  if (pid <= 1) return false;
  std::ifstream file(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (cmdline.find("tessera-worker") == std::string::npos) return false;
  std::ifstream stat_file(fmt::format("/proc/{}/stat", pid));
  std::string stat_line;
  std::getline(stat_file, stat_line);
  const auto close_paren = stat_line.rfind(')');
  // A zombie has exited; it only waits to be reaped by its parent.
  return !(close_paren != std::string::npos && close_paren + 2 < stat_line.size() && stat_line[close_paren + 2] == 'Z');
}

std::string tail_of(const std::string& path, std::size_t max_lines) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) {
    out += "    " + lines[i] + "\n";
  }
  return out.empty() ? "    (empty log)\n" : out;
}

std::string find_worker_binary(const LocalClusterOptions& options) {
  if (!options.worker_binary.empty()) return options.worker_binary;
  if (const char* env = std::getenv("TESSERA_WORKER_BIN"); env != nullptr && *env != '\0') return env;
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) return (self.parent_path() / "tessera-worker").string();
  return "tessera-worker";
}

// Creates `dir` private if it is missing, then insists it is private whoever created it.
Status make_private_dir(const std::string& dir) {
  TESSERA_RETURN_IF_ERROR(create_private_folder(dir, "run directory"));
  return check_private_dir(dir);
}

// The run directory and the cluster's folder in it, each checked when present (readers) or
// created private (writers).
Status check_run_dirs(const std::string& base, const std::string& cluster_dir, bool create) {
  for (const std::string& dir : {base, cluster_dir}) {
    if (create) {
      TESSERA_RETURN_IF_ERROR(make_private_dir(dir));
    } else if (Status checked = check_private_dir(dir); !checked && checked.code() != StatusCode::kNotFound) {
      return checked;
    }
  }
  return Status::ok();
}

// Writes the secret to a fresh file in `dir` and renames it over `dir`/secret. O_EXCL|O_NOFOLLOW
// on a name nobody else can create (the folder is private) means the bytes never go through a
// link someone planted, and rename replaces a planted link instead of following it.
Status write_secret_file(const std::string& dir, const std::string& secret) {
  return write_private_file(dir + "/secret", secret, PrivateWrite::kReplace, "secret file");
}

// `node` carries the endpoint the worker listens on (inside its namespace when it has one).
Result<int> spawn_worker(const std::string& binary, const cluster::NodeSpec& node, const std::string& secret_path,
                         const std::string& log, const std::string& store, const NodeEmulation& emulation) {
  std::vector<std::string> args = {binary,        "--listen",      node.endpoint(), "--threads", std::to_string(node.threads),
                                   "--secret-file", secret_path, "--store",       store};
  // A cluster meant to be encrypted gets workers that refuse plain links, not merely allow TLS.
  if (node.wire == transport::WireMode::kEncrypted) args.insert(args.end(), {"--wire", "encrypted"});
  ProcessOptions options;
  // Its own session, so the worker outlives the `tessera up` that started it and a Ctrl-C in the
  // user's terminal does not reach it.
  options.new_session = true;
  options.stdout_to = OutputTarget::append_to_file(log);
  options.stderr_to = OutputTarget::same_as_stdout();
  options.stdin_from_null = true;
  // The cgroup and namespace are joined before exec, so the worker never runs a moment unthrottled.
  options.cgroup_dir = emulation.cgroup_path;
  options.network_namespace = emulation.netns.empty() ? "" : "/run/netns/" + emulation.netns;
  // The binary is a path we chose (find_worker_binary), never looked up in PATH.
  options.search_path = false;
  Result<int> pid = spawn_detached(args, options);
  if (!pid) return pid.status().with_context(fmt::format("node '{}': ", node.name));
  return pid;
}

// Reaps `pid` if it is our child; harmless otherwise.
void reap_if_child(int pid) {
  int status = 0;
  ::waitpid(pid, &status, WNOHANG);
}

// For a child we just forked: until exec its cmdline is ours, so is_live_worker cannot tell yet.
bool child_has_exited(int pid) {
  int status = 0;
  const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
  return reaped == pid || (reaped < 0 && errno == ECHILD && ::kill(pid, 0) != 0);
}

bool stop_process(int pid, std::chrono::milliseconds grace) {
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    reap_if_child(pid);
    if (!is_live_worker(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 100 && is_live_worker(pid); ++i) {
    reap_if_child(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !is_live_worker(pid);
}

}  // namespace

std::string default_run_dir() {
  if (const char* env = std::getenv("TESSERA_RUN_DIR"); env != nullptr && *env != '\0') return env;
  // The per-user runtime directory (systemd: /run/user/UID, 0700, emptied at logout) is private
  // by construction; /tmp is shared and only safe because the checks below refuse what others made.
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime != nullptr && *runtime == '/') {
    return (fs::path(runtime) / "tessera").string();
  }
  return fmt::format("/tmp/tessera-{}", ::getuid());
}

Status check_private_dir(const std::string& dir) {
  Status checked = check_private_path(dir, PrivateKind::kFolder, "run directory");
  if (checked.code() != StatusCode::kInvalidConfig) return checked;
  return invalid_config(checked.message() + "; or choose another run directory with --run-dir (or TESSERA_RUN_DIR)");
}

std::vector<std::string> secret_exposure_warnings(const cluster::ClusterSpec& cluster) {
  std::vector<std::string> warnings;
  const auto readable_by = [](const std::string& path) -> std::string {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return "";
    if ((info.st_mode & S_IROTH) != 0) return "every user";
    if ((info.st_mode & S_IRGRP) != 0) return "its group";
    return "";
  };
  // A secret_file that others can read is refused where it is read (ClusterSpec::resolve_secret);
  // an inline secret cannot be moved by Tessera, so its cluster file only earns a warning.
  if (cluster.secret_file.empty() && !cluster.secret.empty() && !cluster.source_path.empty()) {
    if (const std::string who = readable_by(cluster.source_path); !who.empty()) {
      warnings.push_back(fmt::format("{} holds the secret inline and is readable by {}; chmod 600 {}, or move the "
                                     "secret to a secret_file only you can read",
                                     cluster.source_path, who, cluster.source_path));
    }
  }
  return warnings;
}

std::string cluster_run_dir(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options) {
  return (fs::path(options.run_dir.empty() ? default_run_dir() : options.run_dir) / cluster.name).string();
}

Result<ReachableCluster> load_reachable_cluster(const std::string& config_path, const std::string& run_dir) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(config_path);
  if (!cluster) return cluster.status();
  LocalClusterOptions options;
  options.run_dir = run_dir;
  const std::string dir = cluster_run_dir(*cluster, options);
  // The recorded endpoints decide where the coordinator connects: only a private folder is trusted.
  TESSERA_RETURN_IF_ERROR(check_run_dirs(run_dir.empty() ? default_run_dir() : run_dir, dir, false));
  ReachableCluster reachable;
  reachable.warnings = secret_exposure_warnings(*cluster);
  Result<std::vector<NodeEmulation>> state = load_emulation_state(emulation_state_path(dir));
  if (!state) return state.status();
  if (has_namespaced_nodes(*state)) reachable.peer_hosts = peer_hosts(*cluster, *state);
  apply_emulated_endpoints(*cluster, *state);
  reachable.spec = std::move(*cluster);
  return reachable;
}

std::string_view node_state_name(NodeState state) {
  switch (state) {
    case NodeState::kStarted: return "started";
    case NodeState::kAlreadyRunning: return "already running";
    case NodeState::kStopped: return "stopped";
    case NodeState::kNotRunning: return "not running";
    case NodeState::kStaleRemoved: return "not running (stale pid file removed)";
  }
  return "unknown";
}

Result<std::vector<NodeLifecycle>> local_cluster_up(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options) {
  for (const cluster::NodeSpec& node : cluster.nodes) {
    if (!is_loopback_host(node.host)) {
      return invalid_argument(fmt::format(
          "{}:{}: node '{}' is at {}, not on this machine; `tessera up` starts local workers only. "
          "Run tessera-worker on that machine (deploy/tessera-worker.service) and use profile/multiply directly",
          cluster.source_path, node.line, node.name, node.host));
    }
  }
  const std::string binary = find_worker_binary(options);
  if (::access(binary.c_str(), X_OK) != 0) {
    return not_found(fmt::format("worker program {} not found or not executable; build it (cmake --build build) "
                                 "or set TESSERA_WORKER_BIN",
                                 binary));
  }
  Result<std::string> secret = cluster.resolve_secret();
  if (!secret) return secret.status();

  // Emulation: check privileges before anything is started, so a refusal leaves no trace.
  const EmulationSupport support = detect_emulation_support();
  std::vector<NodeEmulation> plans;
  std::vector<std::string> cpu_nodes, link_nodes;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    NodeEmulation unthrottled;
    unthrottled.node = cluster.nodes[i].name;
    plans.push_back(options.no_emulation ? unthrottled : plan_node_emulation(cluster, i, support));
    if (!plans.back().cgroup_path.empty()) cpu_nodes.push_back(cluster.nodes[i].name);
    if (!plans.back().netns.empty()) link_nodes.push_back(cluster.nodes[i].name);
  }
  auto refuse = [](const std::vector<std::string>& nodes, const std::string& what, const std::string& missing) {
    return invalid_argument(fmt::format("cannot emulate the {} of {}: {}. Run as root on Linux with cgroups and "
                                        "iproute2, or pass --no-emulation to run every node unthrottled",
                                        what, join(nodes, ", "), missing));
  };
  if (!cpu_nodes.empty() && !support.missing.empty()) return refuse(cpu_nodes, "CPU limits", support.missing);
  if (!link_nodes.empty() && !support.link_missing.empty()) return refuse(link_nodes, "links", support.link_missing);

  const std::string dir = cluster_dir(cluster, options);
  std::error_code error;
  TESSERA_RETURN_IF_ERROR(check_run_dirs(options.run_dir.empty() ? default_run_dir() : options.run_dir, dir, true));
  const std::string secret_path = dir + "/secret";
  TESSERA_RETURN_IF_ERROR(write_secret_file(dir, *secret));

  const std::string state_path = emulation_state_path(dir);
  Result<std::vector<NodeEmulation>> previous = load_emulation_state(state_path);
  if (!previous) return previous.status();
  auto previous_entry = [&](const std::string& name) -> const NodeEmulation* {
    for (const NodeEmulation& entry : *previous) {
      if (entry.node == name) return &entry;
    }
    return nullptr;
  };

  // Decide per node: keep a running worker (and its emulation), or start one afresh.
  std::vector<NodeLifecycle> outcome;
  std::vector<NodeEmulation> state;
  std::vector<bool> starting(cluster.nodes.size(), false);
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    const cluster::NodeSpec& node = cluster.nodes[i];
    const int recorded = read_pid(pid_path(dir, node));
    if (recorded != 0 && is_live_worker(recorded)) {
      outcome.push_back({node.name, NodeState::kAlreadyRunning, recorded, ""});
      if (const NodeEmulation* kept = previous_entry(node.name)) state.push_back(*kept);
      continue;
    }
    // A crashed earlier run may have left this node's cgroup or namespace behind.
    if (const NodeEmulation* stale = previous_entry(node.name)) TESSERA_RETURN_IF_ERROR(remove_node_emulation(*stale));
    starting[i] = true;
    outcome.push_back({node.name, NodeState::kStarted, 0, options.no_emulation && node.emulate ? "UNTHROTTLED" : ""});
    state.push_back(plans[i]);
  }
  // Recorded before anything is created: a crash from here on leaves a state that `down` can undo.
  TESSERA_RETURN_IF_ERROR(save_emulation_state(state_path, state));

  std::vector<int> started;
  auto undo = [&](Status failure) -> Status {
    for (int pid : started) stop_process(pid, std::chrono::milliseconds(2000));
    for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
      if (!starting[i]) continue;
      (void)remove_node_emulation(plans[i]);
      fs::remove(pid_path(dir, cluster.nodes[i]), error);
    }
    std::vector<NodeEmulation> kept;
    for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
      if (!starting[i]) {
        if (const NodeEmulation* entry = previous_entry(cluster.nodes[i].name)) kept.push_back(*entry);
      }
    }
    // The switch's uplink goes too when no member that keeps running uses it.
    if (std::none_of(kept.begin(), kept.end(), [](const NodeEmulation& node) { return !node.uplink_rate.empty(); })) {
      (void)remove_uplink(plans);
    }
    (void)save_emulation_state(state_path, kept);
    return failure;
  };

  const bool namespaced = has_namespaced_nodes(state);
  std::vector<cluster::NodeSpec> reachable = cluster.nodes;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    if (!starting[i]) {
      if (const NodeEmulation* kept = previous_entry(cluster.nodes[i].name); kept && !kept->netns.empty()) {
        reachable[i].host = kept->node_address;
      }
      continue;
    }
    if (Status created = create_node_emulation(plans[i]); !created) return undo(created);
    if (!plans[i].netns.empty()) reachable[i].host = plans[i].node_address;
    cluster::NodeSpec listen = reachable[i];
    // Namespaced peers reach a root-namespace worker through their own veth's host address.
    if (plans[i].netns.empty() && namespaced) listen.host = "0.0.0.0";
    Result<int> pid = spawn_worker(binary, listen, secret_path, log_path(dir, cluster.nodes[i]),
                                   store_path(dir, cluster.nodes[i]), plans[i]);
    if (!pid) return undo(pid.status());
    started.push_back(*pid);
    std::ofstream(pid_path(dir, cluster.nodes[i]), std::ios::trunc) << *pid << "\n";
    outcome[i].pid = *pid;
  }

  // Wait for every worker to answer a full handshake: it proves the port is ours and the secret
  // matches, not just that something listens.
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    const cluster::NodeSpec& node = reachable[i];
    const auto deadline = std::chrono::steady_clock::now() + options.start_timeout;
    Status last = Status::ok();
    bool up = false;
    while (std::chrono::steady_clock::now() < deadline) {
      Result<cluster::NodeLink> link = cluster::connect_node(node, *secret, std::chrono::milliseconds(1000));
      if (link) {
        cluster::say_goodbye(*link);
        up = true;
        break;
      }
      last = link.status();
      if (starting[i] && child_has_exited(outcome[i].pid)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!up) {
      return undo(network_error(fmt::format("worker for node '{}' ({}) did not come up: {}\n  log {}:\n{}", node.name,
                                            node.endpoint(), last.is_ok() ? "it exited" : last.message(),
                                            log_path(dir, node), tail_of(log_path(dir, node), 8))));
    }
    if (!plans[i].cgroup_path.empty() && starting[i]) {
      outcome[i].detail = fmt::format("cpu {:g} core", plans[i].cpu);
    }
    if (!plans[i].netns.empty() && starting[i]) {
      outcome[i].detail += fmt::format("{}link {} at {}", outcome[i].detail.empty() ? "" : ", ", plans[i].rate,
                                       node.endpoint());
      if (!plans[i].uplink_rate.empty()) outcome[i].detail += fmt::format(", behind the switch (uplink {})", plans[i].uplink_rate);
    }
  }
  return outcome;
}

Result<std::vector<NodeLifecycle>> local_cluster_down(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options) {
  const std::string dir = cluster_dir(cluster, options);
  // Pid files decide what gets signalled: only a private folder's are believed.
  TESSERA_RETURN_IF_ERROR(check_run_dirs(options.run_dir.empty() ? default_run_dir() : options.run_dir, dir, false));
  std::vector<NodeLifecycle> outcome;
  std::error_code error;
  for (const cluster::NodeSpec& node : cluster.nodes) {
    NodeLifecycle entry{node.name, NodeState::kNotRunning, 0, ""};
    const std::string path = pid_path(dir, node);
    if (fs::exists(path)) {
      const int pid = read_pid(path);
      entry.pid = pid;
      if (pid != 0 && is_live_worker(pid)) {
        if (!stop_process(pid, std::chrono::milliseconds(5000))) {
          return internal_error(fmt::format("could not stop worker '{}' (pid {})", node.name, pid));
        }
        entry.state = NodeState::kStopped;
      } else {
        entry.state = NodeState::kStaleRemoved;
      }
      fs::remove(path, error);
    }
    outcome.push_back(entry);
  }

  const std::string state_path = emulation_state_path(dir);
  Result<std::vector<NodeEmulation>> state = load_emulation_state(state_path);
  if (!state) return state.status();
  std::vector<NodeEmulation> not_removed;
  std::string problems;
  for (const NodeEmulation& emulation : *state) {
    if (Status removed = remove_node_emulation(emulation); !removed) {
      not_removed.push_back(emulation);
      problems += "\n  " + removed.message();
    }
  }
  if (Status removed = remove_uplink(*state); !removed) {
    problems += "\n  " + removed.message();
    for (const NodeEmulation& emulation : *state) {
      if (!emulation.uplink_rate.empty()) not_removed.push_back(emulation);
    }
  }
  if (!not_removed.empty()) {
    (void)save_emulation_state(state_path, not_removed);
    return internal_error("could not remove all emulation:" + problems);
  }
  fs::remove(state_path, error);

  bool any_pid_left = false;
  for (const cluster::NodeSpec& node : cluster.nodes) any_pid_left |= fs::exists(pid_path(dir, node));
  if (!any_pid_left) fs::remove(dir + "/secret", error);
  return outcome;
}

std::vector<int> local_cluster_pids(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options) {
  const std::string dir = cluster_dir(cluster, options);
  std::vector<int> pids;
  for (const cluster::NodeSpec& node : cluster.nodes) {
    const int pid = read_pid(pid_path(dir, node));
    if (pid != 0 && is_live_worker(pid)) pids.push_back(pid);
  }
  return pids;
}

std::string_view reach_name(Reach reach) {
  switch (reach) {
    case Reach::kReachable: return "reachable";
    case Reach::kBusy: return "BUSY";
    case Reach::kRefused: return "REFUSED";
    case Reach::kUnreachable: return "UNREACHABLE";
  }
  return "UNREACHABLE";
}

std::optional<double> NodeReachability::load() const {
  if (!hello || !hello->load_milli) return std::nullopt;
  return static_cast<double>(*hello->load_milli) / 1000.0;
}

namespace {

NodeReachability check_node(const cluster::NodeSpec& node, const std::string& secret, const std::string& dir,
                            std::chrono::milliseconds deadline) {
  const auto begun = std::chrono::steady_clock::now();
  NodeReachability entry;
  entry.name = node.name;
  entry.endpoint = node.endpoint();
  const int pid = read_pid(pid_path(dir, node));
  if (pid != 0 && is_live_worker(pid)) entry.local_pid = pid;
  if (Result<cluster::NodeLink> link = cluster::connect_node(node, secret, deadline); link) {
    entry.reachable = true;
    entry.reach = Reach::kReachable;
    entry.hello = link->hello;
    entry.wire = link->connection->wire_description();
    entry.detail = fmt::format("tessera-worker {}, {} threads, {} cores, {}, {:.1f} GiB{}", link->hello.worker_version,
                               link->hello.threads, link->hello.cores, link->hello.arch,
                               static_cast<double>(link->hello.memory_bytes) / 1073741824.0,
                               link->connection->encrypted() ? ", encrypted (" + entry.wire + ")" : "");
    cluster::say_goodbye(*link);
  } else if (link.status().code() == StatusCode::kBusy) {
    // The worker's refusal names the session's peer ("worker busy with a session from H:P").
    entry.busy = true;
    entry.reach = Reach::kBusy;
    const std::string why = link.status().message();
    constexpr std::string_view kFrom = "session from ";
    const std::size_t from = why.find(kFrom);
    entry.detail = why;
    if (from != std::string::npos) entry.detail = "serving another coordinator: " + why.substr(from + kFrom.size());
  } else {
    // A wrong secret or another protocol version means a worker answered: it is up but refuses
    // us, which needs a different fix than a node that is down.
    const StatusCode code = link.status().code();
    entry.reach = code == StatusCode::kAuthFailed || code == StatusCode::kProtocolError ? Reach::kRefused
                                                                                         : Reach::kUnreachable;
    entry.detail = link.status().message();
  }
  entry.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  return entry;
}

}  // namespace

Result<std::vector<NodeReachability>> cluster_status(const cluster::ClusterSpec& cluster,
                                                     const LocalClusterOptions& options,
                                                     std::chrono::milliseconds deadline) {
  // Without the secret no handshake can be tried: the reason is the cluster file's, not any
  // node's (each shown UNREACHABLE with it would send someone to look at the network).
  const Result<std::string> secret = cluster.resolve_secret();
  if (!secret) return secret.status();
  const std::string dir = cluster_dir(cluster, options);
  std::vector<NodeReachability> report(cluster.nodes.size());
  {
    // One thread per node: a lab's absent hosts are waited for together. Each check is bounded
    // by `deadline` (connect_node), so the joins are too.
    std::vector<std::jthread> checks;
    checks.reserve(cluster.nodes.size());
    for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
      checks.emplace_back([&, i] { report[i] = check_node(cluster.nodes[i], *secret, dir, deadline); });
    }
  }
  return report;
}

}  // namespace tessera::emulation
