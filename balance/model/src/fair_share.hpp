// What the parts of the performance model share about dividing a resource: max-min fair rates,
// and the coordinator's host's cores divided between the nodes there and the coordinator.
// Implemented in host_sharing.cpp; private to the model library. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "tessera/balance/model/cluster_model.hpp"

namespace tessera::balance::model::detail {

// Sizing the model plan again with the host's cores shared as the last plan left them: the second
// pass sizes rows for the sharing the first plan causes, after which the sharing moves little, and
// the plan forecast to end soonest is kept (model_policy.hpp); the pull replay is replayed as many
// times. scripts/bench-model.sh measures the model on shared hosts.
inline constexpr int kHostSharingPasses = 2;

// Max-min fair (water-filling) rates for flows with the given caps sharing `capacity`; a capacity
// <= 0 or infinite means the shared resource is no bottleneck. Caps may be infinite.
std::vector<double> max_min_fair(std::span<const double> caps, double capacity);

// Rates of transfers between the coordinator and nodes at once, capped by their links: those of
// nodes behind the switch (behind[i]) share its uplink, and all share `capacity` (the
// coordinator's; <= 0: no limit), both max-min fairly. With one group nested in the whole,
// sharing the uplink first and then the capacity among the capped rates is the joint water-fill.
std::vector<double> shared_transfer_rates(std::span<const double> caps, const std::vector<bool>& behind, double uplink,
                                          double capacity);

// Max-min fair (progressive filling) rates for transfers that each cross several shared links at
// once: flow_links[f] lists the links (indices into `capacities`) transfer f crosses. Every
// transfer's rate rises together until a link it crosses is full; transfers crossing no full link
// rise on. A capacity is a real limit (0: nothing passes; +inf: none); leave a resource that is
// no bottleneck out of a transfer's links. A transfer crossing no link gets +inf. Used where one
// node's link carries more than one transfer (B forwarded along a chain, replay.hpp); for
// transfers that all start at the coordinator, shared_transfer_rates is the same division.
std::vector<double> max_min_fair_flows(std::span<const std::vector<std::size_t>> flow_links,
                                       std::span<const double> capacities);

// A HostModel's crowded_share, read as 1 when it is not a share.
double crowded_share(const HostModel& host);

// Whether the node competes for the coordinator's host's cores (on that host, both core counts known).
bool shares_coordinator_host(const HostModel& host);

// The coordinator's host's cores divided max-min fairly (as the kernel's fair scheduler divides
// them between cgroups and processes) among the nodes there, each wanting wants[i] cores, and the
// coordinator, wanting coordinator_wants. Each node's share is what it gets over what it wants (1
// for one wanting nothing), capped at crowded[i] while another node there wants cores too; the
// coordinator's likewise, uncapped.
struct CoreDivision {
  std::vector<double> node_share;
  double coordinator_share = 1.0;
};

CoreDivision divide_host_cores(std::vector<double> wants, const std::vector<double>& crowded, double coordinator_wants,
                               double cores);

}  // namespace tessera::balance::model::detail
