// `tessera model`: each policy's plan and predicted finish times, without running anything.
#include "tessera/cli/commands.hpp"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/balance/model/model.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/session/session.hpp"
#include "subcommands.hpp"

namespace tessera::cli {

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

// The model policy's plan against the number of nodes (the first of the file), asked for with B
// sent to each node (star: the coordinator sends each node taking rows its rows of A and all of
// B) and with B forwarded along a chain (the coordinator sends B once; the rows may differ,
// model_policy.hpp), each forecast also as a speed-up against the first node alone. `sends`
// counts the coordinator's bytes out.
int print_scale(const cluster::ClusterSpec& cluster, const profile::ClusterProfile& profile, const std::string& path,
                uint64_t m, uint64_t n, uint64_t k, const session::MultiplyOptions& options, std::ostream& out,
                std::ostream& err) {
  std::vector<std::size_t> counts;
  for (std::size_t count = 1; count < cluster.nodes.size(); count *= 2) counts.push_back(count);
  counts.push_back(cluster.nodes.size());
  out << fmt::format("model policy, rows layout, C {}x{} = A {}x{} * B {}x{}{}; star: the coordinator sends each node "
                     "its rows of A and all of B; chain: it sends B once, forwarded node to node; speed-up against "
                     "'{}' alone\n",
                     m, n, m, k, k, n,
                     cluster.network_switch ? fmt::format("; switch uplink {}", cluster.network_switch->uplink_rate) : "",
                     cluster.nodes.front().name);
  out << fmt::format("{:>6} {:>10} {:>8} {:>6} {:>10} {:>8} {:>6} {:>11} {:>11}\n", "nodes", "star s", "speed-up",
                     "rows", "chain s", "speed-up", "rows", "star sends", "chain sends");
  const double b_bytes = 8.0 * static_cast<double>(k) * static_cast<double>(n);
  double alone_s = 0.0;
  for (std::size_t count : counts) {
    const cluster::ClusterSpec part = first_nodes(cluster, count);
    Result<model::ClusterModel> model = profile::profile_model(profile, part, path);
    if (!model) return report_failure(err, model.status());
    session::MultiplyOptions asked = options;
    asked.policy = plan::ModelPolicy{};
    asked.layout = partition::Layout::kRows;
    struct Forecast {
      double makespan_s = 0.0;
      std::size_t taking = 0;
      double sends = 0.0;  // bytes out of the coordinator
    };
    Forecast forecasts[2];
    const plan::Distribution distributions[2] = {plan::Distribution::kStar, plan::Distribution::kChain};
    for (int d = 0; d < 2; ++d) {
      asked.distribution = distributions[d];
      Result<session::PlannedMultiply> made = session::plan_policy(part, profile, path, m, n, k, asked);
      if (!made) return report_failure(err, made.status());
      Forecast& forecast = forecasts[d];
      forecast.makespan_s = model::predict(*model, made->plan).makespan_s;
      for (const plan::NodeShare& share : made->plan.shares) {
        if (share.rows.count == 0) continue;
        ++forecast.taking;
        forecast.sends += 8.0 * static_cast<double>(share.rows.count) * static_cast<double>(k);
      }
      forecast.sends += distributions[d] == plan::Distribution::kStar ? static_cast<double>(forecast.taking) * b_bytes : b_bytes;
    }
    if (count == 1) alone_s = forecasts[0].makespan_s;
    out << fmt::format("{:>6} {:>10.3f} {:>7.2f}x {:>6} {:>10.3f} {:>7.2f}x {:>6} {:>8.2f} GB {:>8.2f} GB\n", count,
                       forecasts[0].makespan_s, alone_s / forecasts[0].makespan_s, forecasts[0].taking,
                       forecasts[1].makespan_s, alone_s / forecasts[1].makespan_s, forecasts[1].taking,
                       forecasts[0].sends / 1e9, forecasts[1].sends / 1e9);
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
    print_warnings(err, planned->warnings);
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

Subcommand add_model_command(CLI::App& app) {
  auto command = std::make_shared<ModelCommand>();
  auto sizes = std::make_shared<MatrixSizeFlags>();
  CLI::App* sub = app.add_subcommand("model", "print each policy's plan and predicted finish times (runs nothing)");
  sub->add_option("config", command->config_path, "cluster description (YAML)")->required();
  sub->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");
  CLI::Option* n_opt = sub->add_option("--n", sizes->n, "columns of C (and rows/inner size unless --m/--k)");
  CLI::Option* m_opt = sub->add_option("--m", sizes->m, "rows of A and C");
  CLI::Option* k_opt = sub->add_option("--k", sizes->k, "columns of A, rows of B");
  sub->add_option("--panel-width", command->panel_width, "rows of B per panel")->capture_default_str();
  sub->add_option("--panels-in-flight", command->panels_in_flight, "panels a node may hold unacknowledged")
      ->capture_default_str();
  sub->add_flag("--scale", command->scale,
                      "instead: the model policy's makespan against the number of nodes (the first 1, 2, 4, ... of the file)");

  return {sub, [command, sizes, n_opt, m_opt, k_opt](const Invocation& call) {
            if (*n_opt) command->n = sizes->n;
            if (*m_opt) command->m = sizes->m;
            if (*k_opt) command->k = sizes->k;
            return command_model(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
