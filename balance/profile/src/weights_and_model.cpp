// Turning a profile into what the planners use: Tinetti weights (each node's rate at the reference
// size) or the performance model (speed curves, links, CPU per byte, shared hosts).
#include "tessera/balance/profile/profile.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tessera::balance::profile {

std::vector<double> ClusterProfile::relative_powers() const {
  double total = 0.0;
  for (const NodeProfile& node : nodes) total += node.gflops;
  std::vector<double> powers;
  for (const NodeProfile& node : nodes) powers.push_back(total > 0.0 ? node.gflops / total : 0.0);
  return powers;
}

const NodeProfile* ClusterProfile::find(const std::string& node_name) const {
  auto found = std::find_if(nodes.begin(), nodes.end(), [&](const NodeProfile& node) { return node.name == node_name; });
  return found == nodes.end() ? nullptr : &*found;
}

Result<std::vector<double>> profile_weights(const ClusterProfile& profile, const cluster::ClusterSpec& cluster,
                                            const std::string& profile_path) {
  std::vector<double> weights;
  for (const cluster::NodeSpec& node : cluster.nodes) {
    const NodeProfile* measured = profile.find(node.name);
    if (measured == nullptr) {
      return not_found(fmt::format("profile {} has no measurement for node '{}'; run `tessera profile {}`",
                                   profile_path, node.name, cluster.source_path));
    }
    weights.push_back(measured->gflops);
  }
  return weights;
}

Result<model::ClusterModel> profile_model(const ClusterProfile& profile, const cluster::ClusterSpec& cluster,
                                   const std::string& profile_path) {
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = profile.coordinator_send_bytes_per_s;
  model.coordinator_cpu_s_per_byte = profile.coordinator_cpu_s_per_byte;
  // The uplink as measured, or as the cluster file gives it until a profile has measured it.
  if (cluster.network_switch) {
    model.switch_uplink_bytes_per_s = profile.switch_uplink_bytes_per_s > 0.0 ? profile.switch_uplink_bytes_per_s
                                                                               : cluster.network_switch->uplink_bytes_per_s;
  }
  struct utsname names {};
  const std::string coordinator_host = ::uname(&names) == 0 ? std::string(names.nodename) : std::string();
  for (const cluster::NodeSpec& node : cluster.nodes) {
    const NodeProfile* measured = profile.find(node.name);
    if (measured == nullptr) {
      return not_found(fmt::format("profile {} has no measurement for node '{}'; run `tessera profile {}`",
                                   profile_path, node.name, cluster.source_path));
    }
    if (!measured->has_link || measured->speed.empty()) {
      return not_found(fmt::format("profile {} has no speed curve or link measurement for node '{}' (an older "
                                   "profile); run `tessera profile {} --refresh`",
                                   profile_path, node.name, cluster.source_path));
    }
    model::NodeModel entry;
    entry.name = node.name;
    // The curve measured alone, charged for the CPU its received bytes take (CpuModel; left out
    // when the profile predates the measurement).
    // The vector-matrix rate joins the curve at its square-equivalent size (a square GEMM of the
    // same flops per byte, 3 mnk / (mk + kn + mn): about 3), below every square probe.
    std::vector<model::SpeedPoint> points = measured->speed;
    if (measured->vector_gflops > 0.0) points.push_back({model::kVectorEquivalentSize, measured->vector_gflops});
    entry.speed = model::SpeedCurve(std::move(points));
    if (measured->compute_cores > 0.0) {
      entry.cpu.receive_s_per_byte = measured->receive_cpu_s_per_byte / measured->compute_cores;
    }
    entry.cpu.job_overhead_s = measured->job_overhead_s;
    entry.link = {measured->link.latency_s, measured->link.to_node_bytes_per_s, measured->link.from_node_bytes_per_s,
                  measured->link.busy_latency_s};
    entry.link.behind_switch = cluster.behind_switch(static_cast<std::size_t>(&node - cluster.nodes.data()));
    // A worker reporting the coordinator's host name runs beside it and shares its cores.
    entry.host.with_coordinator = !coordinator_host.empty() && measured->hostname == coordinator_host;
    entry.host.cores = measured->cores;
    entry.host.node_cores = measured->compute_cores;
    // What it kept with every node multiplying at once (measure_concurrent_rates: the mean of its
    // rounds but the slowest, as single rounds scatter with where the kernel puts the threads).
    if (measured->gflops > 0.0 && measured->concurrent_gflops > 0.0) {
      entry.host.crowded_share = std::min(measured->concurrent_gflops / measured->gflops, 1.0);
    }
    model.nodes.push_back(std::move(entry));
  }
  return model;
}

}  // namespace tessera::balance::profile
