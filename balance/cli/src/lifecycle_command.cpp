// `tessera up` and `tessera down`: start and stop the local workers of a cluster file.
#include "tessera/balance/cli/commands.hpp"

#include <ostream>

#include <fmt/format.h>


namespace tessera::balance::cli {

int command_up(const LifecycleCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return report_failure(err, cluster.status());
  bool any_emulated = false;
  for (const cluster::NodeSpec& node : cluster->nodes) any_emulated |= node.emulate.has_value();
  if (command.local.no_emulation && any_emulated) {
    err << "WARNING: --no-emulation: the emulate: settings of " << command.config_path
        << " are IGNORED; every node runs UNTHROTTLED at this machine's full speed.\n";
  }
  for (const std::string& warning : emulation::secret_exposure_warnings(*cluster)) err << "warning: " << warning << "\n";
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

}  // namespace tessera::balance::cli
