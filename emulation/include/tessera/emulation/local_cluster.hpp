// Local clusters: starting and stopping tessera-worker processes for a cluster file whose nodes
// all live on this machine (loopback addresses).
//
// State lives in a run directory, by default $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera when
// XDG_RUNTIME_DIR is set, else /tmp/tessera-<uid>; one folder per cluster name: <node>.pid,
// <node>.log and the secret file handed to the workers (mode 0600; the secret never appears on a
// command line). The run directory and the cluster's folder must be private: real directories
// (not symlinks) owned by this user with no group or other permission bits. `up` creates them
// 0700 and refuses ones that are not (another user could have planted a symlink or read the
// secret); the secret is written to a new file (O_CREAT|O_EXCL|O_NOFOLLOW) and renamed into
// place, so it is never written through a link. Readers of the recorded state (status, profile,
// multiply, down) refuse a folder that is not private in the same words. A pid is only ever signalled after checking that
// /proc/<pid>/cmdline is a tessera-worker, so a stale pid file reused by another process is
// removed, not killed. Starting twice reports the running workers; stopping twice is a no-op.
// Functions are not synchronised: run one lifecycle command per cluster at a time.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::emulation {

namespace cluster = balance::cluster;

struct LocalClusterOptions {
  std::string run_dir;        // empty: default_run_dir()
  std::string worker_binary;  // empty: $TESSERA_WORKER_BIN or tessera-worker beside this program
  std::chrono::milliseconds start_timeout{10000};
  bool no_emulation = false;  // run emulated nodes unthrottled instead of refusing without root
};

std::string default_run_dir();

// core's check_private_path for a run directory: OK if `dir` is a directory (lstat: not a
// symlink) owned by this effective user (or root) whose mode has no group or other bits;
// otherwise InvalidConfig saying what is wrong and the command that fixes it (or --run-dir). A
// missing directory is NotFound.
Status check_private_dir(const std::string& dir);

// Sentences for the person running the tool when the cluster's secret is readable by other users:
// a cluster file holding an inline secret that others can read (a secret_file others can read is
// not a warning but refused, by ClusterSpec::resolve_secret). Empty when nothing is exposed (or nothing can be checked).
std::vector<std::string> secret_exposure_warnings(const cluster::ClusterSpec& cluster);
// <run_dir>/<cluster name>
std::string cluster_run_dir(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options);

// A cluster file as this machine reaches it, what every front end opens a session on.
struct ReachableCluster {
  // Nodes that `tessera up` put in a network namespace have the namespace's address.
  cluster::ClusterSpec spec;
  // How the workers reach each other (emulation.hpp's peer_hosts), hosts[receiver][peer], when
  // `tessera up` put some of them in network namespaces; empty when it put none there (each
  // worker then reaches the others at their YAML hosts).
  std::vector<std::vector<std::string>> peer_hosts;
  // secret_exposure_warnings(spec), for the front end to show.
  std::vector<std::string> warnings;
};

// Loads the YAML and applies the run directory's state (only a private run directory is
// trusted: check_private_dir). Fails naming the file, or a damaged state file.
Result<ReachableCluster> load_reachable_cluster(const std::string& config_path, const std::string& run_dir);

enum class NodeState { kStarted, kAlreadyRunning, kStopped, kNotRunning, kStaleRemoved };
std::string_view node_state_name(NodeState state);

struct NodeLifecycle {
  std::string name;
  NodeState state = NodeState::kNotRunning;
  int pid = 0;
  std::string detail;
};

// Starts a worker per node that is not already running, then waits until each answers a handshake.
// Nodes with `emulate:` are started inside their cgroup / network namespace (see emulation.hpp);
// when some node has a namespace, the others listen on 0.0.0.0 (still only answering the secret)
// so that namespaced workers can reach them for worker-to-worker traffic. Without the privileges
// for emulation, up refuses and says what is missing, unless no_emulation.
// Leftovers of a crashed earlier run (recorded in the run directory) are removed first.
// Fails if a node's host is not a loopback address, the binary is missing, or a worker does not
// come up in time (the message includes the tail of its log). On failure, workers started by
// this call are stopped again and the emulation it created is removed.
Result<std::vector<NodeLifecycle>> local_cluster_up(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options);

// Stops the workers recorded in the run directory (SIGTERM, then SIGKILL after 5 s) and removes
// the cgroups, namespaces and veths recorded there.
Result<std::vector<NodeLifecycle>> local_cluster_down(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options);

// Pids recorded for the cluster's nodes that belong to live tessera-worker processes.
std::vector<int> local_cluster_pids(const cluster::ClusterSpec& cluster, const LocalClusterOptions& options);

// What `tessera status` found at a node.
enum class Reach {
  kReachable,    // authenticated; ready for a run
  kBusy,         // up, but serving another coordinator's session (the worker answered BUSY)
  kRefused,      // up, but the handshake failed: wrong secret, another protocol version, a bad reply
  kUnreachable,  // no connection: down, wrong address, firewall, or silent past the deadline
};
std::string_view reach_name(Reach reach);  // "reachable", "BUSY", "REFUSED", "UNREACHABLE"

struct NodeReachability {
  std::string name;
  std::string endpoint;
  bool reachable = false;  // reach == kReachable
  // Up, but serving another coordinator's session (the worker answered BUSY); not reachable
  // for a run now, and not to be confused with a node that is down.
  bool busy = false;
  std::string detail;  // worker version/threads/cores, whom it is busy with, or why it is unreachable
  int local_pid = 0;   // from the run directory, 0 if none
  Reach reach = Reach::kUnreachable;
  std::optional<transport::Hello> hello;  // what a reachable worker said about itself
  double seconds = 0.0;                   // how long the check of this node took
  // How the check's link ran: "plain" or "TLSv1.3 TLS_AES_128_GCM_SHA256"; empty when unreached.
  std::string wire;
  // The host's 1-minute load average as its worker reported it; none when the node did not
  // answer or its worker predates the field.
  std::optional<double> load() const;
};

// Connects to every node (local or not) at once, each with `deadline` for the connection and the
// handshake, and reports each, in cluster order: absent hosts cost about one deadline together,
// not one each. Fails (kInvalidConfig, resolve_secret's message: a secret_file others can read,
// one that is missing or empty) before connecting when the cluster's secret cannot be had, since
// then no node can be checked; a run would fail with the same message.
Result<std::vector<NodeReachability>> cluster_status(
    const cluster::ClusterSpec& cluster, const LocalClusterOptions& options,
    std::chrono::milliseconds deadline = std::chrono::milliseconds(2000));

}  // namespace tessera::emulation
