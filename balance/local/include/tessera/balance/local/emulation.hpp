// Emulation: making a local worker behave like a slower machine, with the operating system doing
// the slowing so that every measurement (ours or another program's) sees the same limits.
//
// CPU: a worker runs in its own cgroup whose CPU quota is `emulate.cpu` cores (cgroup v1
// cpu.cfs_quota_us / cfs_period_us, or v2 cpu.max) with the kernel's 100 ms period: a quarter
// core runs 25 ms of every 100 ms. Shorter periods were measured to over-throttle GEMM.
// Link: a worker with `emulate.link` runs in its own network namespace joined to the host by a
// veth pair on a /30 from 198.18.0.0/15 (RFC 2544's benchmarking range, never routed), with a
// tbf qdisc limiting the rate on both ends, and netem adding delay/loss where the kernel has it.
// The coordinator then reaches the node at the namespace's address instead of the YAML host.
//
// Everything created is first recorded in the run directory (emulation.json), so teardown can
// undo exactly that, also after a crash, and nothing else. Functions run `ip` and `tc` as child
// processes and write cgroup files; they need root. Not synchronised: one lifecycle command per
// cluster at a time.
#pragma once

#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance {

enum class CgroupVersion { kNone, kV1, kV2 };

struct EmulationSupport {
  CgroupVersion cgroup = CgroupVersion::kNone;
  std::string cgroup_root;  // /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)
  bool is_root = false;
  bool has_ip = false;      // iproute2's `ip` and `tc`
  std::string missing;      // empty when CPU emulation can be set up; else what is missing
  std::string link_missing; // empty when link emulation can be set up
};
EmulationSupport detect_emulation_support();

// What `up` creates for one node. Empty fields: not created.
struct NodeEmulation {
  std::string node;
  double cpu = 0.0;
  std::string cgroup_path;
  std::string netns;
  std::string host_veth, node_veth;
  std::string host_address, node_address;  // IPv4, /30
  std::string rate, delay;
  double loss_percent = 0.0;
  bool operator==(const NodeEmulation&) const = default;
};

// The names and addresses a node's emulation would use (pure; deterministic from cluster name,
// node name and node index).
NodeEmulation plan_node_emulation(const ClusterSpec& cluster, std::size_t node_index, const EmulationSupport& support);

// Creates the cgroup / namespace / veth / qdiscs of `plan`. On failure, what was created is
// removed again and the message says which step failed and why.
Status create_node_emulation(const NodeEmulation& plan);
// Removes whatever of `emulation` exists; missing pieces are not errors. Processes still in the
// cgroup are killed first (SIGKILL), since a cgroup with members cannot be removed.
Status remove_node_emulation(const NodeEmulation& emulation);

// The emulation state file of a cluster's run directory.
std::string emulation_state_path(const std::string& cluster_run_dir);
Status save_emulation_state(const std::string& path, const std::vector<NodeEmulation>& nodes);
Result<std::vector<NodeEmulation>> load_emulation_state(const std::string& path);  // empty if no file

// Nodes of `cluster` that run in a network namespace get the namespace's address as host.
// No-op without a state file.
void apply_emulated_endpoints(ClusterSpec& cluster, const std::string& cluster_run_dir);

// Names of everything of this cluster that still exists: cgroups, namespaces, veths. For tests and
// `tessera status`.
std::vector<std::string> leftover_emulation(const std::vector<NodeEmulation>& nodes);

}  // namespace tessera::balance
