// `tessera up` and `tessera down`: start and stop the local workers of a cluster file.
#include "tessera/cli/commands.hpp"

#include <ostream>

#include <fmt/format.h>
#include "subcommands.hpp"


namespace tessera::cli {

int command_up(const LifecycleCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return report_failure(err, cluster.status());
  bool any_emulated = false;
  for (const cluster::NodeSpec& node : cluster->nodes) any_emulated |= node.emulate.has_value();
  if (command.local.no_emulation && any_emulated) {
    err << "WARNING: --no-emulation: the emulate: settings of " << command.config_path
        << " are IGNORED; every node runs UNTHROTTLED at this machine's full speed.\n";
  }
  print_warnings(err, emulation::secret_exposure_warnings(*cluster));
  Result<std::vector<emulation::NodeLifecycle>> nodes = emulation::local_cluster_up(*cluster, command.local);
  if (!nodes) return report_failure(err, nodes.status());
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    const emulation::NodeLifecycle& node = (*nodes)[i];
    out << fmt::format("{:<12} pid {:<8} {:<16} {}\n", node.name, node.pid, emulation::node_state_name(node.state),
                       node.detail);
  }
  out << fmt::format("cluster '{}' up: {} workers (logs in {}/{})\n", cluster->name, nodes->size(),
                     command.local.run_dir.empty() ? emulation::default_run_dir() : command.local.run_dir, cluster->name);
  return kExitOk;
}

int command_down(const LifecycleCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return report_failure(err, cluster.status());
  Result<std::vector<emulation::NodeLifecycle>> nodes = emulation::local_cluster_down(*cluster, command.local);
  if (!nodes) return report_failure(err, nodes.status());
  for (const emulation::NodeLifecycle& node : *nodes) {
    out << fmt::format("{:<12} {}{}\n", node.name, emulation::node_state_name(node.state),
                       node.pid != 0 ? fmt::format(" (pid {})", node.pid) : "");
  }
  return kExitOk;
}

void add_lifecycle_options(CLI::App* sub, LifecycleCommand& lifecycle) {
  sub->add_option("config", lifecycle.config_path, "cluster description (YAML)")->required();
  sub->add_option("--run-dir", lifecycle.local.run_dir, "where pid files and logs live, a private (0700) folder (default $TESSERA_RUN_DIR, else "
                                                        "$XDG_RUNTIME_DIR/tessera, else /tmp/tessera-UID)");
}

std::vector<Subcommand> add_lifecycle_commands(CLI::App& app) {
  auto up_command = std::make_shared<LifecycleCommand>();
  CLI::App* up = app.add_subcommand("up", "start one local worker process per node of CONFIG");
  add_lifecycle_options(up, *up_command);
  up->add_flag("--no-emulation", up_command->local.no_emulation,
               "ignore emulate: settings and run every node unthrottled (no root needed)");
  auto down_command = std::make_shared<LifecycleCommand>();
  CLI::App* down = app.add_subcommand("down", "stop the workers `tessera up` started for CONFIG");
  add_lifecycle_options(down, *down_command);
  return {{up, [up_command](const Invocation& call) { return command_up(*up_command, call.out, call.err); }},
          {down, [down_command](const Invocation& call) { return command_down(*down_command, call.out, call.err); }}};
}

}  // namespace tessera::cli
