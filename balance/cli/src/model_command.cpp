// `tessera model`: each policy's plan and predicted finish times, without running anything.
#include "tessera/balance/cli/commands.hpp"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/balance/model/model.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/session/session.hpp"

namespace tessera::balance::cli {

namespace {

Result<uint64_t> dimension(const std::optional<uint64_t>& value, const char* flag) {
  if (!value) return invalid_argument(fmt::format("give {}", flag));
  if (*value == 0 || *value > (1u << 20)) return invalid_argument(fmt::format("{} must be within 1..1048576", flag));
  return *value;
}

// The first `count` nodes of `cluster` (cluster order), the switch kept for those behind it.
cluster::ClusterSpec first_nodes(const cluster::ClusterSpec& cluster, std::size_t count) {
  cluster::ClusterSpec part = cluster;
  part.nodes.resize(count);
  if (part.network_switch) {
    std::erase_if(part.network_switch->nodes, [&](const std::string& name) { return part.find_node(name) < 0; });
    if (part.network_switch->nodes.empty()) part.network_switch.reset();
  }
  return part;
}

// The model policy's forecast against the number of nodes, star distribution: the coordinator
// sends each node taking rows its rows of A and all of B (`sends` counts those bytes) and reads
// its block of C back.
int print_scale(const cluster::ClusterSpec& cluster, const profile::ClusterProfile& profile, const std::string& path,
                uint64_t m, uint64_t n, uint64_t k, const session::MultiplyOptions& options, std::ostream& out,
                std::ostream& err) {
  std::vector<std::size_t> counts;
  for (std::size_t count = 1; count < cluster.nodes.size(); count *= 2) counts.push_back(count);
  counts.push_back(cluster.nodes.size());
  out << fmt::format("model policy, rows layout, star (the coordinator sends each node its rows of A and all of B), "
                     "C {}x{} = A {}x{} * B {}x{}{}\n",
                     m, n, m, k, k, n,
                     cluster.network_switch ? fmt::format("; switch uplink {}", cluster.network_switch->uplink_rate) : "");
  out << fmt::format("{:>6} {:>12} {:>12} {:>18}\n", "nodes", "makespan s", "taking rows", "coordinator sends");
  for (std::size_t count : counts) {
    const cluster::ClusterSpec part = first_nodes(cluster, count);
    Result<model::ClusterModel> model = profile::profile_model(profile, part, path);
    if (!model) return report_failure(err, model.status());
    Result<session::PlannedMultiply> planned = session::plan_policy(part, profile, path, m, n, k, options);
    if (!planned) return report_failure(err, planned.status());
    const model::Prediction prediction = model::predict(*model, planned->plan);
    std::size_t taking = 0;
    double bytes = 0.0;
    for (const plan::NodeShare& share : planned->plan.shares) {
      if (share.rows.count == 0) continue;
      ++taking;
      bytes += 8.0 * (static_cast<double>(share.rows.count) * static_cast<double>(k) + static_cast<double>(k) * static_cast<double>(n));
    }
    out << fmt::format("{:>6} {:>12.3f} {:>12} {:>15.2f} GB\n", count, prediction.makespan_s, taking, bytes / 1e9);
  }
  return kExitOk;
}

}  // namespace

int command_model(const ModelCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return report_failure(err, cluster.status());
  const std::string path = command.profile_path.empty() ? profile::default_profile_path(command.config_path) : command.profile_path;
  Result<profile::ClusterProfile> profile = profile::load_profile(path);
  if (!profile) return report_failure(err, profile.status());
  Result<model::ClusterModel> model = profile::profile_model(*profile, *cluster, path);
  if (!model) return report_failure(err, model.status());
  Result<uint64_t> n = dimension(command.n ? command.n : command.m, "--n");
  if (!n) return report_failure(err, n.status());
  const uint64_t m = command.m.value_or(*n);
  const uint64_t k = command.k.value_or(*n);
  session::MultiplyOptions options;
  options.panel_width = command.panel_width;
  options.panels_in_flight = command.panels_in_flight;
  out << fmt::format("model of '{}' from {} (measured {})\n", cluster->name, path, profile->measured_at);
  if (command.scale) {
    options.policy = plan::default_choice(plan::Policy::kModel);
    return print_scale(*cluster, *profile, path, m, *n, k, options, out, err);
  }
  for (plan::Policy policy : {plan::Policy::kEven, plan::Policy::kProportional, plan::Policy::kModel}) {
    options.policy = plan::default_choice(policy);
    Result<session::PlannedMultiply> planned = session::plan_policy(*cluster, *profile, path, m, *n, k, options);
    if (!planned) return report_failure(err, planned.status());
    for (const std::string& warning : planned->warnings) err << "warning: " << warning << "\n";
    const plan::Plan& plan = planned->plan;
    const model::Prediction prediction = model::predict(*model, plan);
    out << "\n" << plan.to_string();
    for (std::size_t i = 0; i < plan.shares.size(); ++i) {
      // The share of its cores a node keeps is said only where the model took some away.
      const double share = i < prediction.host_share.size() ? prediction.host_share[i] : 1.0;
      out << fmt::format("  {:<16} predicted finish {:.3f} s{}\n", plan.shares[i].node_name, prediction.finish_s[i],
                         model::host_share_reduced(share) ? fmt::format(" (keeping {:.0f}% of its cores on a shared host)", 100.0 * share)
                                       : "");
    }
    out << fmt::format("  predicted makespan {:.3f} s\n", prediction.makespan_s);
  }
  return kExitOk;
}

}  // namespace tessera::balance::cli
