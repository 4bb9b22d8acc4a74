// Emulation: making a local worker behave like a slower machine, with the operating system doing
// the slowing so that every measurement (ours or another program's) sees the same limits.
//
// CPU: a worker runs in its own cgroup whose CPU quota is `emulate.cpu` cores (cgroup v1
// cpu.cfs_quota_us / cfs_period_us, or v2 cpu.max) over `emulate.cpu_period` (default 20 ms,
// not the kernel's 100 ms): a quarter core runs 5 ms of every 20 ms, so even a short job runs at
// its quota. scripts/bench-cpu-period.sh measures the choice.
// Link: a worker with `emulate.link` runs in its own network namespace joined to the host by a
// veth pair on a /30 from 198.18.0.0/15 (RFC 2544's benchmarking range, never routed), with a
// tbf qdisc limiting the rate on both ends, and netem adding delay/loss where the kernel has it.
// Switch: the members of a cluster's switch also share its uplink: two ifb devices held to the
// uplink's rate by tbf (one per direction), to which each member's host end redirects (tc clsact
// + mirred) the packets between it and the host's own address, so that what the coordinator and
// root-namespace workers exchange with all members at once shares one bottleneck, while traffic
// the host forwards between two members, as a switch would, does not cross it.
// The coordinator then reaches the node at the namespace's address instead of the YAML host.
// Workers also reach each other (graph runs send deltas worker to worker, through the same shaped
// veths): each namespace has a default route via the host end of its veth, and the host end
// forwards IPv4 (per interface, /proc/sys/net/ipv4/conf/<host_veth>/forwarding; nothing global),
// so namespaced nodes reach each other at their node addresses. A root-namespace worker of such a
// cluster listens on 0.0.0.0 and is reached from a namespace at the host address of that
// namespace's own veth (peer_hosts below).
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

namespace tessera::emulation {

namespace cluster = balance::cluster;

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
  uint32_t cpu_period_us = 20000;  // the quota's CFS period (EmulationSpec's default)
  std::string cgroup_path;
  std::string netns;
  std::string host_veth, node_veth;
  std::string host_address, node_address;  // IPv4, /30
  std::string rate, delay;
  double loss_percent = 0.0;
  // IPv4 forwarding turned on for host_veth (and off again by teardown); set with the namespace.
  bool host_forwarding = false;
  // Behind the cluster's switch: the ifb devices that hold its uplink to uplink_rate, toward the
  // nodes and from them, shared by every member (made by the first, removed by remove_uplink).
  std::string uplink_rate;
  std::string uplink_to_nodes_ifb, uplink_from_nodes_ifb;
  bool operator==(const NodeEmulation&) const = default;
};

// The names and addresses a node's emulation would use (pure; deterministic from cluster name,
// node name and node index).
NodeEmulation plan_node_emulation(const cluster::ClusterSpec& cluster, std::size_t node_index, const EmulationSupport& support);

// A node's CPU weight against the other emulated nodes, in proportion to its quota (`cpu` cores):
// the kernel's default weight (cgroup v1 shares 1024, v2 weight 100) for one core. Competing for
// the machine's cores, each node then gets its quota whenever the quotas fit in them.
struct CgroupWeight {
  uint64_t v1_shares = 1024;  // cpu.shares, 2..262144
  uint64_t v2_weight = 100;   // cpu.weight, 1..10000
  bool operator==(const CgroupWeight&) const = default;
};
CgroupWeight cgroup_weight(double cpu);

// Creates the cgroup / namespace / veth / qdiscs of `plan`. On failure, what was created is
// removed again and the message says which step failed and why.
Status create_node_emulation(const NodeEmulation& plan);
// Removes whatever of `emulation` exists; missing pieces are not errors. Processes still in the
// cgroup are killed first (SIGKILL), since a cgroup with members cannot be removed.
Status remove_node_emulation(const NodeEmulation& emulation);

// Removes the switch's uplink devices any of `emulation` names; run after every member's
// remove_node_emulation (a member's own removal leaves them for the others).
Status remove_uplink(const std::vector<NodeEmulation>& emulation);

// The emulation state file of a cluster's run directory.
std::string emulation_state_path(const std::string& cluster_run_dir);
Status save_emulation_state(const std::string& path, const std::vector<NodeEmulation>& nodes);
Result<std::vector<NodeEmulation>> load_emulation_state(const std::string& path);  // empty if no file

// Nodes of `cluster` that run in a network namespace get the namespace's address as host.
// No-op without a state file.
void apply_emulated_endpoints(cluster::ClusterSpec& cluster, const std::string& cluster_run_dir);
// The same from a state already loaded.
void apply_emulated_endpoints(cluster::ClusterSpec& cluster, const std::vector<NodeEmulation>& state);

// True when a node of `state` runs in a network namespace: the cluster's root-namespace workers
// then listen on 0.0.0.0 so that the namespaced ones can reach them.
bool has_namespaced_nodes(const std::vector<NodeEmulation>& state);

// How each node's worker reaches each other node's worker, hosts[receiver][peer] (cluster
// order; the port is always the peer's own):
//   peer in a namespace                    its node_address, from anywhere;
//   peer in the root namespace, receiver   the host_address of the RECEIVER's own veth, the host
//     in a namespace                       itself as seen from that namespace;
//   both in the root namespace             the peer's host in `cluster`.
// `state` as `tessera up` saved it; nodes it does not list (or lists without a namespace) are in
// the root namespace. Pure.
std::vector<std::vector<std::string>> peer_hosts(const cluster::ClusterSpec& cluster, const std::vector<NodeEmulation>& state);

// Names of everything of this cluster that still exists: cgroups, namespaces, veths. For tests and
// `tessera status`.
std::vector<std::string> leftover_emulation(const std::vector<NodeEmulation>& nodes);

}  // namespace tessera::emulation
