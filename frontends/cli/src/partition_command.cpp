#include "tessera/cli/partition_command.hpp"

#include <chrono>
#include <fstream>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/graphdata/generators.hpp"
#include "tessera/graphdata/graph_io.hpp"
#include "tessera/partition/graph_partition.hpp"
#include "subcommands.hpp"

namespace tessera::cli {
namespace {

namespace tp = tessera::partition;


struct Parts {
  std::vector<std::string> names;
  std::vector<double> weights;
};

Result<Parts> part_weights(const PartitionCommand& command) {
  const bool from_flags = !command.weights.empty();
  const bool from_cluster = !command.config_path.empty();
  if (from_flags == from_cluster) {
    return invalid_argument("give the part weights with --weights w1,w2,.. or take them from a cluster's profile with "
                            "--cluster CONFIG (one of the two)");
  }
  if (!command.profile_path.empty() && !from_cluster) return invalid_argument("--profile needs --cluster CONFIG");
  Parts parts;
  if (from_flags) {
    parts.weights = command.weights;
    for (std::size_t i = 0; i < parts.weights.size(); ++i) parts.names.push_back(fmt::format("part{}", i));
    return parts;
  }
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return cluster.status();
  const std::string path =
      command.profile_path.empty() ? profile::default_profile_path(command.config_path) : command.profile_path;
  Result<profile::ClusterProfile> profile = profile::load_profile(path);
  if (!profile) {
    return profile.status().with_context("--cluster takes the weights from the nodes' measured speeds: ");
  }
  Result<std::vector<double>> weights = profile_weights(*profile, *cluster, path);
  if (!weights) return weights.status();
  parts.weights = std::move(*weights);
  for (const cluster::NodeSpec& node : cluster->nodes) parts.names.push_back(node.name);
  return parts;
}

Result<graphdata::Graph> load_input(const PartitionCommand& command, std::ostream& err) {
  if (command.input.empty()) return invalid_argument("give an INPUT: a graph file or a generator spec");
  if (graphdata::is_generator_spec(command.input)) return graphdata::generate_graph(command.input, command.settings.seed);
  graphdata::GraphBuildStats stats;
  Result<graphdata::Graph> graph = graphdata::read_graph_file(command.input, &stats);
  if (graph && stats.self_loops_removed > 0) {
    err << fmt::format("{}: removed {} self-loop(s)\n", command.input, stats.self_loops_removed);
  }
  if (graph && stats.duplicates_merged > 0) {
    err << fmt::format("{}: merged {} repeated edge(s) (both directions or duplicates; the heaviest kept)\n",
                       command.input, stats.duplicates_merged);
  }
  return graph;
}

Status write_parts(const std::string& path, const std::vector<int32_t>& part) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) return io_error(fmt::format("cannot write {}", path));
  std::string buffer;
  buffer.reserve(part.size() * 3);
  for (int32_t p : part) {
    buffer += std::to_string(p);
    buffer += '\n';
  }
  file << buffer;
  if (!file.flush()) return io_error(fmt::format("cannot write {}", path));
  return Status::ok();
}

Status write_report(const std::string& path, const PartitionCommand& command, const graphdata::Graph& graph,
                    const Parts& parts, const tp::Partition& partition, double seconds) {
  using nlohmann::json;
  const tp::PartitionQuality& quality = partition.quality;
  json part_list = json::array();
  for (std::size_t i = 0; i < quality.parts.size(); ++i) {
    const tp::PartQuality& pq = quality.parts[i];
    part_list.push_back({{"name", parts.names[i]},
                         {"weight", pq.weight},
                         {"target", pq.target},
                         {"target_weight", pq.target * static_cast<double>(quality.total_weight)},
                         {"vertices", pq.vertices}});
  }
  const json document = {{"input", command.input},
                         {"method", command.settings.method},
                         {"objective", command.settings.objective},
                         {"imbalance_tolerance", command.settings.imbalance},
                         {"seed", command.settings.seed},
                         {"vertices", graph.vertex_count()},
                         {"edges", graph.edge_count()},
                         {"total_weight", quality.total_weight},
                         {"imbalance", quality.imbalance},
                         {"max_target_deviation", quality.max_target_deviation},
                         {"edge_cut", quality.edge_cut},
                         {"comm_volume", quality.comm_volume},
                         {"seconds", seconds},
                         {"note", partition.note},
                         {"parts", std::move(part_list)}};
  std::ofstream file(path, std::ios::trunc);
  if (!file) return io_error(fmt::format("cannot write report {}", path));
  file << document.dump(2) << "\n";
  if (!file.flush()) return io_error(fmt::format("cannot write report {}", path));
  return Status::ok();
}

void print_table(std::ostream& out, const Parts& parts, const tp::Partition& partition) {
  const tp::PartitionQuality& quality = partition.quality;
  out << fmt::format("{:<16} {:>12} {:>12} {:>8} {:>10} {:>9}\n", "part", "weight", "target", "share", "vertices",
                     "w/target");
  for (std::size_t i = 0; i < quality.parts.size(); ++i) {
    const tp::PartQuality& pq = quality.parts[i];
    const double target_weight = pq.target * static_cast<double>(quality.total_weight);
    const std::string ratio =
        target_weight > 0 ? fmt::format("{:.4f}", static_cast<double>(pq.weight) / target_weight) : "-";
    out << fmt::format("{:<16} {:>12} {:>12.1f} {:>8.4f} {:>10} {:>9}\n", parts.names[i], pq.weight, target_weight,
                       pq.target, pq.vertices, ratio);
  }
  out << fmt::format("imbalance {:.4f}  max |weight-target|/target {:.4f}  edge cut {}  comm volume {}\n",
                     quality.imbalance, quality.max_target_deviation, quality.edge_cut, quality.comm_volume);
}

}  // namespace

int command_partition(const PartitionCommand& command, std::ostream& out, std::ostream& err) {
  Result<tp::PartitionOptions> options = session::resolve_partition_settings(command.settings, flag_spelling());
  if (!options) return report_failure(err, options.status());
  Result<Parts> parts = part_weights(command);
  if (!parts) return report_failure(err, parts.status());
  options->target_weights = parts->weights;

  Result<graphdata::Graph> graph = load_input(command, err);
  if (!graph) return report_failure(err, graph.status());
  const auto start = std::chrono::steady_clock::now();
  Result<tp::Partition> partition = tp::partition_graph(*graph, *options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!partition) return report_failure(err, partition.status());

  out << fmt::format("{}: {}\n", command.input, graphdata::describe(*graph));
  out << fmt::format("method {}, objective {}, imbalance tolerance {}, seed {}: {} parts in {:.3f} s\n", command.settings.method,
                     command.settings.objective, command.settings.imbalance, command.settings.seed, parts->weights.size(), seconds);
  if (!partition->note.empty()) err << "note: " << partition->note << "\n";
  print_table(out, *parts, *partition);
  if (!command.out_path.empty()) {
    if (Status written = write_parts(command.out_path, partition->part); !written) return report_failure(err, written);
    out << "parts written to " << command.out_path << "\n";
  }
  if (!command.report_path.empty()) {
    if (Status written = write_report(command.report_path, command, *graph, *parts, *partition, seconds); !written) {
      return report_failure(err, written);
    }
    out << "report written to " << command.report_path << "\n";
  }
  return kExitOk;
}

Subcommand add_partition_command(CLI::App& app) {
  auto command = std::make_shared<PartitionCommand>();
  CLI::App* sub = app.add_subcommand(
      "partition", "partition a graph, sparse matrix or generated instance by node weights (METIS); print its quality");
  sub->add_option("input", command->input,
                            "graph file (.mtx, .graph, .edges/.el/.txt) or generator: mesh2d:NXxNY, mesh3d:NXxNYxNZ, "
                            "rmat:SCALE[:EF], lognormal:N")
      ->required();
  CLI::Option* partition_weights_opt =
      sub->add_option("--weights", command->weights, "relative part weights (comma separated)")
          ->delimiter(',');
  sub->add_option("--cluster", command->config_path, "take the parts and weights from this cluster's profile")
      ->excludes(partition_weights_opt);
  sub->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");
  sub->add_option("--method", command->settings.method, "metis | contiguous | hash")->capture_default_str();
  sub->add_option("--imbalance", command->settings.imbalance, "allowed max part weight / target")
      ->capture_default_str();
  sub->add_option("--objective", command->settings.objective, "cut | volume (metis)")->capture_default_str();
  sub->add_option("--seed", command->settings.seed, "METIS seed, hash key, generator seed")->capture_default_str();
  sub->add_option("--out", command->out_path, "write one part number per vertex, one per line");
  sub->add_option("--report", command->report_path, "write the quality as JSON");

  return {sub, [command](const Invocation& call) { return command_partition(*command, call.out, call.err); }};
}

}  // namespace tessera::cli
