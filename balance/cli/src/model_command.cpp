// `tessera model`: each policy's plan and predicted finish times, without running anything.
#include "tessera/balance/cli/commands.hpp"

#include <optional>
#include <ostream>

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
