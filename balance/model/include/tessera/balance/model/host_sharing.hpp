// Host-core sharing: nodes on the coordinator's own machine (emulated nodes, or a worker beside
// the coordinator) share its cores with each other while they multiply and with the coordinator
// while it moves bytes. These functions say what share of its cores each such node keeps, and give
// a model with that share applied. Pure functions of values; thread-safe.
#pragma once

#include <vector>

#include "tessera/balance/model/cluster_model.hpp"

namespace tessera::balance::model {

// The same cluster with each node's availability multiplied by its share of its host's cores
// (host_availability, Prediction::host_share). REQUIRES: a share per node.
ClusterModel with_host_shares(const ClusterModel& model, const std::vector<double>& shares);

// Whether a forecast share of a node's cores is worth saying: below what rounds to 100%.
inline bool host_share_reduced(double share) { return share < 0.995; }

// The share of its compute each node keeps on the coordinator's host during a run, in (0, 1]:
// the host's cores divided max-min fairly (as the kernel's fair scheduler divides them between
// cgroups and processes) among the nodes there, each wanting node_cores x busy_fraction[i], and
// the coordinator, wanting coordinator_cpu_s / span_s; no more than its crowded_share for a busy
// node while another node there is busy too. 1 for every node elsewhere, for a host with room for
// all, and when the cores are unknown. REQUIRES: busy_fraction has a value per node.
std::vector<double> host_availability(const ClusterModel& model, const std::vector<double>& busy_fraction,
                                      double coordinator_cpu_s, double span_s);

}  // namespace tessera::balance::model
