// `tessera profile`: measure the nodes, save the profile, print it.
#include "tessera/cli/commands.hpp"

#include <chrono>
#include <ostream>

#include <fmt/format.h>

#include "command_output.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/balance/session/settings.hpp"
#include "tessera/core/strings.hpp"
#include "subcommands.hpp"

namespace tessera::cli {

namespace {

void print_profile(std::ostream& out, const profile::ClusterProfile& profile, const std::string& path) {
  const std::vector<double> powers = profile.relative_powers();
  out << fmt::format("{:<12} {:>9} {:>7} {:>8} {:>22} {:>10} {:>10} {:>10} {:>10}\n", "node", "GFLOP/s", "pw", "threads",
                     "speed curve (size:GF)", "latency", "when busy", "MB/s to", "MB/s from");
  for (std::size_t i = 0; i < profile.nodes.size(); ++i) {
    const profile::NodeProfile& node = profile.nodes[i];
    std::string curve;
    for (const model::SpeedPoint& point : node.speed) curve += fmt::format("{}{:g}:{:.0f}", curve.empty() ? "" : " ", point.size, point.gflops);
    if (curve.size() > 22) curve = fmt::format("{} points {:g}..{:g}", node.speed.size(), node.speed.front().size, node.speed.back().size);
    const std::string busy =
        node.link.busy_latency_s > 0.0 ? fmt::format("{:.3f}ms", node.link.busy_latency_s * 1e3) : std::string("-");
    out << fmt::format("{:<12} {:>9.2f} {:>7.4f} {:>8} {:>22} {:>8.3f}ms {:>10} {:>10.1f} {:>10.1f}\n", node.name,
                       node.gflops, powers[i], node.threads, curve, node.link.latency_s * 1e3, busy,
                       node.link.to_node_bytes_per_s / 1e6, node.link.from_node_bytes_per_s / 1e6);
  }
  out << profile::graph_rates_table(profile);
  out << fmt::format("coordinator sends {:.1f} MB/s to all nodes at once\n", profile.coordinator_send_bytes_per_s / 1e6);
  if (profile.switch_uplink_bytes_per_s > 0.0) {
    out << fmt::format("switch uplink carries {:.1f} MB/s to its nodes at once\n", profile.switch_uplink_bytes_per_s / 1e6);
  }
  out << "saved " << path << "\n";
}


}  // namespace

int command_profile(const ProfileCommand& command, std::ostream& out, std::ostream& err) {
  Result<emulation::ReachableCluster> cluster = emulation::load_reachable_cluster(command.config_path, command.run_dir);
  if (!cluster) return report_failure(err, cluster.status());
  if (Status checked = session::check_profile_options(command.measure, cluster->spec, command.config_path, flag_spelling());
      !checked) {
    return report_failure(err, checked);
  }
  session::SessionOptions session_options;
  session_options.profile_path = command.profile_path;
  session_options.damaged_profile_is_error = false;
  session_options.require_all = command.require_all;
  const std::string cluster_name = cluster->spec.name;
  Result<session::Session> session = session::Session::open(std::move(*cluster), session_options);
  if (!session) return report_failure(err, session.status());
  print_left_out(err, *session);
  const std::size_t node_count = session->cluster().nodes.size();
  if (std::optional<Status> problem = session->ignored_profile_problem()) {
    err << "tessera: ignoring the saved profile: " << problem->message() << "\n";
  }

  err << fmt::format("profiling {} nodes of '{}' (one at a time per host, hosts at once; links one at a time){}\n",
                     node_count, cluster_name, command.measure.quick ? " (quick)" : "");
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> measured;
  Result<profile::ClusterProfile> profile = session->measure_profile(command.measure, profile_progress_printer(err), &measured);
  if (!profile) return report_failure(err, profile.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_profile(out, *profile, session->profile_path());
  // Nodes left out at the start stay in the saved profile but were neither measured nor reused.
  out << fmt::format("measured {} of {} nodes in {:.1f} s{}\n", measured.size(), node_count, seconds,
                     measured.size() < node_count ? " (the others reused; --refresh re-measures all)" : "");
  return kExitOk;
}

Subcommand add_profile_command(CLI::App& app) {
  auto command = std::make_shared<ProfileCommand>();
  CLI::App* sub = app.add_subcommand(
      "profile", "measure every node: GEMM speed curve, link latency and bandwidth; saved and reused");
  sub->add_option("config", command->config_path, "cluster description (YAML)")->required();
  sub->add_option("--run-dir", command->run_dir, "run directory of `tessera up` (for emulated endpoints)");
  sub->add_option("--out", command->profile_path, "profile file (default: CONFIG with .command->yaml)");
  sub->add_flag("--refresh", command->measure.refresh, "re-measure every node, even unchanged ones");
  sub->add_flag("--require-all", command->require_all, kRequireAllHelp);
  sub->add_flag("--quick", command->measure.quick, "one GEMM size in one window, small link transfers");
  sub->add_option("--node", command->measure.only_nodes, "re-measure only this node (repeatable)");
  sub->add_option("--probe-size", command->measure.reference_size, "reference GEMM size (its rate gives pw_i)")
      ->capture_default_str();
  sub->add_option("--window-seconds", command->measure.window_seconds,
                          "timed window per GEMM measurement (0.05 to 30)")
      ->capture_default_str();

  return {sub, [command](const Invocation& call) { return command_profile(*command, call.out, call.err); }};
}

}  // namespace tessera::cli
