// The graph study (graph_study.hpp): graph runs over clusters x graphs x algorithms, modes,
// placements and weights, repetitions interleaved, and its tables, plots and report sections.
// The loop, the clusters' lifecycle and report.md's frame are the study runner's (study_runner.hpp).
#include "tessera/balance/study/graph_study.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "study_runner.hpp"
#include "study_support.hpp"
#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/balance/local/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/reference.hpp"
#include "tessera/partition/generators.hpp"

namespace tessera::balance::study {

namespace fs = std::filesystem;

namespace {

using namespace support;

// ---------------------------------------------------------------------------------------------
// Study file

const StudyFileSchema kGraphStudySchema{
    .kind = "a graph study",
    .workload = "graph",
    .name_example = "aau-vs-sync",
    .own_keys = {"graphs", "algorithms", "modes", "partitions", "weights", "fast_shares", "tolerance", "beta", "source"}};

GraphStudy parse_graph_study(const YAML::Node& root, const std::string& path) {
  const cluster::YamlMap keys = study_keys(root, kGraphStudySchema);
  GraphStudy study;
  study.cluster_paths = read_study_header_into(study, keys, path, kGraphStudySchema);
  const fs::path base = fs::path(path).parent_path();
  for (const std::string& graph : text_list(keys, "graphs", "[rmat:16]")) {
    study.graphs.push_back(partition::is_generator_spec(graph) ? graph : (base / graph).lexically_normal().string());
  }
  if (study.graphs.empty()) keys.fail_missing("graphs", "[rmat:16]");
  study.algorithms = parsed_list<graph::AlgorithmKind>(keys, "algorithms", "[pagerank, cc]", graph::parse_algorithm);
  if (study.algorithms.empty()) keys.fail_missing("algorithms", "[pagerank, cc]");
  if (keys.has("modes")) study.modes = parsed_list<graph_driver::GraphMode>(keys, "modes", "[async, sync]", graph_driver::parse_graph_mode);
  if (keys.has("partitions")) {
    study.partitions = parsed_list<partition::PartitionMethod>(keys, "partitions", "[metis, hash]",
                                                               partition::parse_partition_method);
  }
  if (keys.has("weights")) {
    study.weights = parsed_list<std::string>(keys, "weights", "[profile, equal]", [](const std::string& text) -> Result<std::string> {
      if (text == "profile" || text == "equal") return text;
      return invalid_config(fmt::format("weights '{}' unknown; use profile or equal", text));
    });
  }
  if (keys.has("fast_shares")) {
    if (keys.has("weights")) cluster::fail_at(keys.find("fast_shares")->line, "give weights or fast_shares, not both");
    study.fast_shares = *keys.number_list("fast_shares", cluster::NumberRange{0.0, 1.0, false, true}, "[0.25, 0.5, 1.0]");
  }
  if (std::optional<double> tolerance = keys.number("tolerance", cluster::NumberRange{0.0, 1.0, false, false}, "1e-6")) {
    study.tolerance = *tolerance;
  }
  study.beta = keys.number("beta", cluster::NumberRange{0.0, 1.0, false, false}, "0.01");
  if (std::optional<uint64_t> source = keys.integer("source", 0, INT32_MAX, "0")) study.source = static_cast<int64_t>(*source);
  return study;
}

// ---------------------------------------------------------------------------------------------
// Records

struct GraphRunRecord {
  std::size_t cluster = 0;
  std::string graph;
  graph::AlgorithmKind algorithm{};
  graph_driver::GraphMode mode{};
  partition::PartitionMethod method{};
  std::string weights;     // "profile", "equal", "share 0.40"
  double fast_share = NAN;
  uint32_t repetition = 0;
  graph_driver::GraphOutcome outcome;
};

// Runs compared with each other: everything but the repetition.
using GraphGroupKey = std::tuple<std::size_t, std::string, graph::AlgorithmKind, graph_driver::GraphMode, partition::PartitionMethod, std::string>;
GraphGroupKey key_of(const GraphRunRecord& r) { return {r.cluster, r.graph, r.algorithm, r.mode, r.method, r.weights}; }

struct GraphGroupStats {
  std::vector<double> wall, edge_updates;
  double fast_share = NAN;
  int64_t edge_cut = 0;
  bool all_verified = true;
  double wall_median() const { return median(wall); }
  double updates_median() const { return median(edge_updates); }
};

std::map<GraphGroupKey, GraphGroupStats> summarise(const std::vector<GraphRunRecord>& records) {
  std::map<GraphGroupKey, GraphGroupStats> groups;
  for (const GraphRunRecord& record : records) {
    GraphGroupStats& stats = groups[key_of(record)];
    stats.wall.push_back(record.outcome.wall_s);
    stats.edge_updates.push_back(static_cast<double>(record.outcome.edge_updates));
    stats.fast_share = record.fast_share;
    stats.edge_cut = record.outcome.placement.quality.edge_cut;
    stats.all_verified &= record.outcome.verification && record.outcome.verification->passed;
  }
  return groups;
}

std::string group_label(const GraphGroupKey& key) {
  return fmt::format("{} {} {} {}", algorithm_name(std::get<2>(key)), graph_driver::graph_mode_name(std::get<3>(key)),
                     partition::method_name(std::get<4>(key)), std::get<5>(key));
}

// File-name-safe form of a graph spec or path: "rmat:16" -> "rmat-16", "/a/b/web.txt" -> "web".
std::string file_stem(const std::string& graph) {
  std::string stem = partition::is_generator_spec(graph) ? graph : fs::path(graph).stem().string();
  for (char& c : stem) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  }
  return stem;
}

// ---------------------------------------------------------------------------------------------
// Output files

Status write_csvs(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                  const std::vector<GraphRunRecord>& records) {
  std::string results =
      "cluster,graph,algorithm,mode,partition,weights,fast_share,repetition,vertices,edges,wall_s,edge_updates,"
      "edge_updates_per_s,residual,polls,steps,edge_cut,comm_volume,restarts,lost_nodes,verified,l1_error,mismatches\n";
  std::string nodes = "cluster,graph,algorithm,mode,partition,weights,repetition,node,vertices,edges,updates,edge_updates,"
                      "batches_sent,batches_received,peer_bytes_sent,peer_bytes_received,busy_s,idle_s,memory_bytes,"
                      "bytes_per_edge,lost\n";
  std::string traces = "run,cluster,graph,algorithm,mode,partition,weights,repetition,time_s,residual,edge_updates\n";
  std::size_t run = 0;
  for (const GraphRunRecord& r : records) {
    const graph_driver::GraphOutcome& o = r.outcome;
    const std::string prefix = fmt::format("{},{},{},{},{},{}", clusters[r.cluster].spec.name, r.graph,
                                           algorithm_name(r.algorithm), graph_driver::graph_mode_name(r.mode),
                                           partition::method_name(r.method), r.weights);
    results += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", prefix, csv_number(r.fast_share),
                           r.repetition, o.vertices, o.edges, csv_number(o.wall_s), o.edge_updates,
                           csv_number(o.edge_updates_per_s), csv_number(o.residual), o.polls, o.steps,
                           o.placement.quality.edge_cut, o.placement.quality.comm_volume, o.restarts,
                           join(o.lost_nodes, ";"), o.verification && o.verification->passed ? "yes" : "no",
                           o.verification ? csv_number(o.verification->l1_error) : "",
                           o.verification ? std::to_string(o.verification->mismatches) : "");
    for (const graph_driver::GraphNodeFigures& n : o.nodes) {
      nodes += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", prefix, r.repetition, n.name, n.vertices,
                           n.edges, n.updates, n.edge_updates, n.batches_sent, n.batches_received, n.peer_bytes_sent,
                           n.peer_bytes_received, csv_number(n.busy_s), csv_number(n.idle_s), n.memory_bytes,
                           csv_number(n.bytes_per_edge()), n.lost ? "yes" : "no");
    }
    for (const graph_driver::TracePoint& point : o.trace) {
      traces += fmt::format("{},{},{},{},{},{}\n", run, prefix, r.repetition, csv_number(point.time_s),
                            csv_number(point.residual), point.edge_updates);
    }
    ++run;
  }
  TESSERA_RETURN_IF_ERROR(write_text_file(out_dir + "/results.csv", results));
  TESSERA_RETURN_IF_ERROR(write_text_file(out_dir + "/nodes.csv", nodes));
  return write_text_file(out_dir + "/traces.csv", traces);
}

Status write_summary(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                     const std::map<GraphGroupKey, GraphGroupStats>& groups) {
  std::string csv = "cluster,graph,algorithm,mode,partition,weights,runs,wall_median_s,wall_min_s,wall_max_s,"
                    "edge_updates_median,edge_cut,all_verified\n";
  for (const auto& [key, stats] : groups) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", clusters[std::get<0>(key)].spec.name, std::get<1>(key),
                       algorithm_name(std::get<2>(key)), graph_driver::graph_mode_name(std::get<3>(key)),
                       partition::method_name(std::get<4>(key)), std::get<5>(key), stats.wall.size(),
                       csv_number(stats.wall_median()), csv_number(minimum(stats.wall)), csv_number(maximum(stats.wall)),
                       csv_number(stats.updates_median()), stats.edge_cut, stats.all_verified ? "yes" : "no");
  }
  return write_text_file(out_dir + "/summary.csv", csv);
}

// One bar chart per cluster and graph: median wall time per combination, min..max as error bars.
void plot_walls(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                const std::map<GraphGroupKey, GraphGroupStats>& groups, Plots& plots) {
  std::set<std::pair<std::size_t, std::string>> panels;
  for (const auto& [key, stats] : groups) {
    if (std::isnan(stats.fast_share)) panels.insert({std::get<0>(key), std::get<1>(key)});
  }
  for (const auto& [cluster, graph] : panels) {
    const std::string stem = fmt::format("wall-{}-{}", clusters[cluster].spec.name, file_stem(graph));
    std::string data;
    int index = 0;
    for (const auto& [key, stats] : groups) {
      if (std::get<0>(key) != cluster || std::get<1>(key) != graph || !std::isnan(stats.fast_share)) continue;
      data += fmt::format("{} \"{}\" {:.6g} {:.6g} {:.6g}\n", index++, group_label(key), stats.wall_median(),
                          minimum(stats.wall), maximum(stats.wall));
    }
    const std::string script = fmt::format(
        "set title 'Wall time to the tolerance, {} on {} (median, min..max)'\n"
        "set ylabel 'seconds'\nset yrange [0:*]\nset style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -30\n"
        "unset key\nplot '{}/{}.dat' using 1:3:4:5:xtic(2) with boxerrorbars lc rgb '#4472c4'\n",
        file_stem(graph), clusters[cluster].spec.name, out_dir, stem);
    draw_plot(out_dir, stem, data, script,
         fmt::format("Wall time per combination on {} with {} (median of the repetitions; bars span min..max).",
                     clusters[cluster].spec.name, graph),
         plots);
  }
}

// Residual against time, one line per mode, for the first repetition of each cluster, graph and
// algorithm that ran in more than one mode.
void plot_traces(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                 const std::vector<GraphRunRecord>& records, Plots& plots) {
  std::map<std::tuple<std::size_t, std::string, graph::AlgorithmKind>, std::vector<const GraphRunRecord*>> panels;
  for (const GraphRunRecord& r : records) {
    if (r.repetition == 1 && std::isnan(r.fast_share)) panels[{r.cluster, r.graph, r.algorithm}].push_back(&r);
  }
  for (const auto& [panel, runs] : panels) {
    std::set<graph_driver::GraphMode> modes;
    for (const GraphRunRecord* r : runs) modes.insert(r->mode);
    if (modes.size() < 2) continue;
    const auto& [cluster, graph, algorithm] = panel;
    const std::string stem =
        fmt::format("trace-{}-{}-{}", clusters[cluster].spec.name, file_stem(graph), algorithm_name(algorithm));
    std::string data;
    std::string plot_lines;
    std::vector<std::string> settled_before_polls;  // every poll read 0: nothing to draw on a log scale
    int block = 0;
    for (const GraphRunRecord* r : runs) {
      std::string points;
      for (const graph_driver::TracePoint& point : r->outcome.trace) {
        if (point.residual > 0) points += fmt::format("{:.6g} {:.6g}\n", point.time_s, point.residual);
      }
      if (points.empty()) {
        settled_before_polls.push_back(fmt::format("{} {} {}", graph_driver::graph_mode_name(r->mode), partition::method_name(r->method),
                                                   r->weights));
        continue;
      }
      data += fmt::format("# {} {} {}\n", graph_driver::graph_mode_name(r->mode), partition::method_name(r->method), r->weights);
      data += points + "\n\n";
      plot_lines += fmt::format("{}'{}/{}.dat' index {} using 1:2 with linespoints title '{} {} {}'",
                                block == 0 ? "" : ", ", out_dir, stem, block, graph_driver::graph_mode_name(r->mode),
                                partition::method_name(r->method), r->weights);
      ++block;
    }
    const std::string script = fmt::format(
        "set title 'Convergence: {} on {}, {}'\nset xlabel 'seconds since the parts were "
        "shipped'\nset ylabel 'residual (sum |pending delta|, or pending vertices)'\nset logscale y\nplot {}\n",
        algorithm_name(algorithm), file_stem(graph), clusters[cluster].spec.name, plot_lines);
    if (block == 0) continue;
    std::string caption = fmt::format("Residual over time of {} on {} ({}), first repetition, one line per mode.",
                                      algorithm_name(algorithm), graph, clusters[cluster].spec.name);
    if (!settled_before_polls.empty()) {
      caption += fmt::format(" Not drawn: {} (every poll read a residual of 0: it had converged by the first poll).",
                             join(settled_before_polls, ", "));
    }
    draw_plot(out_dir, stem, data, script, caption, plots);
  }
}

// The first node's share of the vertex weight against wall time; the profile's share marked.
void plot_load_ratio(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                     const std::map<GraphGroupKey, GraphGroupStats>& groups, Plots& plots) {
  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    std::map<std::string, std::string> series;  // label -> rows
    for (const auto& [key, stats] : groups) {
      if (std::get<0>(key) != cluster || std::isnan(stats.fast_share)) continue;
      const std::string label = fmt::format("{} {} {} {}", file_stem(std::get<1>(key)), algorithm_name(std::get<2>(key)),
                                            graph_driver::graph_mode_name(std::get<3>(key)), partition::method_name(std::get<4>(key)));
      series[label] += fmt::format("{:.6g} {:.6g} {:.6g} {:.6g}\n", stats.fast_share, stats.wall_median(),
                                   minimum(stats.wall), maximum(stats.wall));
    }
    if (series.empty()) continue;
    const ClusterFacts& facts = clusters[cluster];
    const double total = std::accumulate(facts.speeds.begin(), facts.speeds.end(), 0.0);
    const double profile_share = total > 0 ? facts.speeds.front() / total : NAN;
    const std::string stem = "load-ratio-" + facts.spec.name;
    std::string data;
    std::string plot_lines;
    int block = 0;
    for (const auto& [label, rows] : series) {
      data += "# " + label + "\n" + rows + "\n\n";
      plot_lines += fmt::format("{}'{}/{}.dat' index {} using 1:2:3:4 with yerrorlines title '{}'", block == 0 ? "" : ", ",
                                out_dir, stem, block, label);
      ++block;
    }
    const std::string script = fmt::format(
        "set title 'Share of the graph on {} ({}) against wall time'\n"
        "set xlabel 'share of the vertex weight on {}'\nset ylabel 'seconds (median, min..max)'\nset yrange [0:*]\n"
        "set xrange [0:1.05]\nset arrow from {:.4f}, graph 0 to {:.4f}, graph 1 nohead dt 2 lc rgb '#c00000'\n"
        "set label 'profile' at {:.4f}, graph 0.95 offset 0.5,0 tc rgb '#c00000'\nplot {}\n",
        facts.spec.nodes.front().name, facts.spec.name, facts.spec.nodes.front().name,
        profile_share, profile_share, profile_share, plot_lines);
    draw_plot(out_dir, stem, data, script,
         fmt::format("Wall time against the share of the vertex weight given to {} on {}; the dashed line is the "
                     "share its profiled speed earns ({:.2f}).",
                     facts.spec.nodes.front().name, facts.spec.name, profile_share),
         plots);
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const GraphGroupStats* find_graph_group(const std::map<GraphGroupKey, GraphGroupStats>& groups, GraphGroupKey key) {
  auto found = groups.find(key);
  return found == groups.end() ? nullptr : &found->second;
}

std::string comparisons(const std::vector<ClusterFacts>& clusters, const std::map<GraphGroupKey, GraphGroupStats>& groups) {
  std::string md;
  std::string modes, placements, weights;
  for (const auto& [key, stats] : groups) {
    const auto& [cluster, graph, algorithm, mode, method, weight] = key;
    const std::string name = clusters[cluster].spec.name;
    if (mode == graph_driver::GraphMode::kAsync) {
      if (const GraphGroupStats* sync = find_graph_group(groups, {cluster, graph, algorithm, graph_driver::GraphMode::kSync, method, weight})) {
        modes += fmt::format("| {} | {} | {} | {} {} | {:.3g} | {:.3g} | {:.2f} | {:.3f} | {:.3f} | {:.2f}x |\n", name, graph,
                             algorithm_name(algorithm), partition::method_name(method), weight, stats.updates_median(),
                             sync->updates_median(), stats.updates_median() / sync->updates_median(),
                             stats.wall_median(), sync->wall_median(), sync->wall_median() / stats.wall_median());
      }
    }
    if (method == partition::PartitionMethod::kMetis) {
      for (partition::PartitionMethod other : {partition::PartitionMethod::kHash, partition::PartitionMethod::kContiguous}) {
        if (const GraphGroupStats* base = find_graph_group(groups, {cluster, graph, algorithm, mode, other, weight})) {
          placements += fmt::format("| {} | {} | {} {} {} | metis vs {} | {} vs {} | {:.3f} vs {:.3f} | {:+.1f}% |\n",
                                    name, graph, algorithm_name(algorithm), graph_driver::graph_mode_name(mode), weight,
                                    partition::method_name(other), stats.edge_cut, base->edge_cut, stats.wall_median(),
                                    base->wall_median(), 100.0 * (1.0 - stats.wall_median() / base->wall_median()));
        }
      }
    }
    if (weight == "profile") {
      if (const GraphGroupStats* equal = find_graph_group(groups, {cluster, graph, algorithm, mode, method, "equal"})) {
        const std::vector<double>& speeds = clusters[cluster].speeds;
        const double total = std::accumulate(speeds.begin(), speeds.end(), 0.0);
        const double slowest = *std::min_element(speeds.begin(), speeds.end());
        const double ideal = total / (static_cast<double>(speeds.size()) * slowest);
        weights += fmt::format("| {} | {} | {} {} {} | {:.3f} | {:.3f} | {:.2f}x | {:.2f}x |\n", name, graph,
                               algorithm_name(algorithm), graph_driver::graph_mode_name(mode), partition::method_name(method),
                               stats.wall_median(), equal->wall_median(), equal->wall_median() / stats.wall_median(), ideal);
      }
    }
  }
  if (!modes.empty()) {
    md += "\n### Asynchronous vs synchronous\n\n`ratio` is async edge updates over sync edge updates (below 0.5 meets "
          "the target); `speed-up` is sync wall time over async wall time (medians).\n\n"
          "| cluster | graph | algorithm | placement | async edge updates | sync edge updates | ratio | async s | sync s | speed-up |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n" + modes;
  }
  if (!placements.empty()) {
    md += "\n### Placement\n\n`improvement` is 1 - metis wall time / the other method's (medians); edge cut of the "
          "placement graph.\n\n| cluster | graph | run | methods | edge cut | wall s | improvement |\n|---|---|---|---|---|---|---|\n" +
          placements;
  }
  if (!weights.empty()) {
    md += "\n### Profile-weighted vs equal-weighted\n\n`equal / profile` is the equal-weight median wall time over the "
          "profile-weighted one; `ideal` is what the profiled speeds predict with no communication (sum of speeds over "
          "node count times the slowest).\n\n| cluster | graph | run | profile s | equal s | equal / profile | ideal |\n"
          "|---|---|---|---|---|---|---|\n" + weights;
  }
  // Load ratio: best share against the profile's, and the cluster against its fastest node alone.
  std::string shares;
  for (std::size_t cluster = 0; cluster < clusters.size(); ++cluster) {
    std::map<std::tuple<std::string, graph::AlgorithmKind, graph_driver::GraphMode, partition::PartitionMethod>, std::vector<std::pair<double, const GraphGroupStats*>>> sweeps;
    for (const auto& [key, stats] : groups) {
      if (std::get<0>(key) == cluster && !std::isnan(stats.fast_share)) {
        sweeps[{std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)}].push_back({stats.fast_share, &stats});
      }
    }
    const std::vector<double>& speeds = clusters[cluster].speeds;
    const double total = std::accumulate(speeds.begin(), speeds.end(), 0.0);
    for (const auto& [sweep, points] : sweeps) {
      auto best = std::min_element(points.begin(), points.end(),
                                   [](const auto& a, const auto& b) { return a.second->wall_median() < b.second->wall_median(); });
      auto alone = std::find_if(points.begin(), points.end(), [](const auto& p) { return p.first >= 1.0; });
      shares += fmt::format("| {} | {} | {} {} {} | {:.2f} | {:.2f} ({:.3f} s) | {} |\n", clusters[cluster].spec.name,
                            std::get<0>(sweep), algorithm_name(std::get<1>(sweep)), graph_driver::graph_mode_name(std::get<2>(sweep)),
                            partition::method_name(std::get<3>(sweep)), total > 0 ? speeds.front() / total : NAN,
                            best->first, best->second->wall_median(),
                            alone == points.end() ? std::string("-")
                                                  : fmt::format("{:.3f} s ({:.2f}x)", alone->second->wall_median(),
                                                                alone->second->wall_median() / best->second->wall_median()));
    }
  }
  if (!shares.empty()) {
    md += "\n### Load ratio\n\n`profile share` is the first node's share of the summed profiled speed; `best share` the "
          "swept share with the lowest median wall time; `first node alone` is share 1.0 (the fastest node alone) and how "
          "much slower it is than the best share.\n\n| cluster | graph | run | profile share | best share | first node alone |\n"
          "|---|---|---|---|---|---|\n" + shares;
  }
  return md;
}

std::string graph_study_report(const GraphStudy& study, const std::vector<ClusterFacts>& clusters,
                        const std::map<GraphGroupKey, GraphGroupStats>& groups) {
  std::string md = fmt::format("- Tolerance {:g} (pagerank, katz); cc and sssp run until nothing is pending. Every run "
                               "verified against the reference computed on the coordinator.\n",
                               study.tolerance);
  for (const ClusterFacts& facts : clusters) md += "- " + cluster_facts_line(facts) + "\n";
  md += "\nWall time runs from shipping the parts to having every value back on the coordinator; edge updates count "
        "every delta sent along an edge (the work), summed over nodes.\n\n"
        "| cluster | graph | algorithm | mode | placement | weights | runs | wall median (min..max) s | edge updates (median) | edge cut | verified |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [key, stats] : groups) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.3f} ({:.3f}..{:.3f}) | {:.4g} | {} | {} |\n",
                      clusters[std::get<0>(key)].spec.name, std::get<1>(key), algorithm_name(std::get<2>(key)),
                      graph_driver::graph_mode_name(std::get<3>(key)), partition::method_name(std::get<4>(key)), std::get<5>(key),
                      stats.wall.size(), stats.wall_median(), minimum(stats.wall), maximum(stats.wall),
                      stats.updates_median(), stats.edge_cut, stats.all_verified ? "all" : "NOT ALL");
  }
  return md + comparisons(clusters, groups);
}

// ---------------------------------------------------------------------------------------------
// Running

Result<partition::DirectedGraph> load_graph(const std::string& graph, uint64_t seed) {
  if (partition::is_generator_spec(graph)) return partition::generate_directed_graph(graph, seed);
  return partition::read_directed_graph_file(graph);
}

// The combinations one repetition runs, in the order they run.
struct Combination {
  graph::AlgorithmKind algorithm{};
  graph_driver::GraphMode mode{};
  partition::PartitionMethod method{};
  std::string weights;
  double fast_share = NAN;
};

std::vector<Combination> combinations(const GraphStudy& study) {
  std::vector<Combination> out;
  for (graph::AlgorithmKind algorithm : study.algorithms) {
    for (graph_driver::GraphMode mode : study.modes) {
      for (partition::PartitionMethod method : study.partitions) {
        if (study.fast_shares.empty()) {
          for (const std::string& weights : study.weights) out.push_back({algorithm, mode, method, weights, NAN});
        }
        for (double share : study.fast_shares) {
          out.push_back({algorithm, mode, method, fmt::format("share {:.2f}", share), share});
        }
      }
    }
  }
  return out;
}

// The first node gets `share` of the weight, the others split the rest evenly.
graph_driver::TargetWeights share_weights(double share, std::size_t nodes) {
  graph_driver::TargetWeights weights{graph_driver::TargetWeights::Source::kExplicit, std::vector<double>(nodes, 0.0)};
  weights.weights[0] = share;
  for (std::size_t i = 1; i < nodes; ++i) weights.weights[i] = (1.0 - share) / static_cast<double>(nodes - 1);
  return weights;
}

// The graph study as the study runner runs it: each cell is one graph under one combination.
class GraphStudyKind final : public StudyKind {
 public:
  GraphStudyKind(const GraphStudy& study, StudyOutline outline, const ExperimentOptions& options)
      : StudyKind(std::move(outline)),
        study_(study),
        options_(options),
        combos_(combinations(study)) {}

  Status prepare(const std::string&, std::ostream& progress) override {
    for (const std::string& spec : study_.graphs) {
      Result<partition::DirectedGraph> graph = load_graph(spec, 1);
      if (!graph) return graph.status();
      progress << fmt::format("graph {}: {}\n", spec, partition::describe(*graph));
      if (std::count(study_.algorithms.begin(), study_.algorithms.end(), graph::AlgorithmKind::kKatz) > 0) {
        // Half the largest beta that provably converges, unless the study fixes one.
        katz_betas_[spec] = study_.beta.value_or(0.5 / std::max(1.0, graph::spectral_radius_bounds(*graph).upper));
      }
      graphs_.emplace(spec, std::move(*graph));
    }
    return Status::ok();
  }

  Status use_cluster(StudyCluster& cluster, std::size_t index) override {
    clusters_.push_back(ClusterFacts{study_.cluster_paths[index], cluster.spec(), cluster.speeds()});
    Result<graph_driver::PeerHosts> peer_hosts = local::load_peer_hosts(cluster.spec(), options_.run_dir);
    if (!peer_hosts) return peer_hosts.status();
    peer_hosts_ = std::move(*peer_hosts);
    return Status::ok();
  }

  std::size_t cells() const override { return study_.graphs.size() * combos_.size(); }

  Status run_cell(StudyCluster& cluster, std::size_t, std::size_t cell, uint32_t repetition,
                  const session::RunControl& control, RunCounter& counter) override {
    const std::string& graph_spec = study_.graphs[cell / combos_.size()];
    const Combination& combo = combos_[cell % combos_.size()];
    const cluster::ClusterSpec& spec = cluster.spec();
    graph_driver::GraphRunOptions run;
    run.algorithm.kind = combo.algorithm;
    if (combo.algorithm == graph::AlgorithmKind::kKatz) run.algorithm.beta = katz_betas_[graph_spec];
    if (combo.algorithm == graph::AlgorithmKind::kShortestPaths) run.algorithm.source = study_.source;
    run.mode = combo.mode;
    run.method = combo.method;
    // The study compares modes, placements and weights on the whole cluster.
    run.nodes.mode = graph_driver::NodeChoice::Mode::kAll;
    run.tolerance = study_.tolerance;
    run.verify = true;
    run.peer_hosts = peer_hosts_;
    if (!std::isnan(combo.fast_share)) {
      run.weights = share_weights(combo.fast_share, spec.nodes.size());
    } else {
      run.weights.source = combo.weights == "profile" ? graph_driver::TargetWeights::Source::kProfile
                                                      : graph_driver::TargetWeights::Source::kEqual;
    }
    Result<graph_driver::GraphOutcome> ran = cluster.session().graph(graphs_.at(graph_spec), run, control);
    if (!ran) {
      return ran.status().with_context(fmt::format("{} {} on {}: ", algorithm_name(combo.algorithm), combo.weights, spec.name));
    }
    counter.finished(fmt::format("{} {} {} {} {} {} #{}: {:.3f} s, {} edge updates{}", spec.name, graph_spec,
                                 algorithm_name(combo.algorithm), graph_driver::graph_mode_name(combo.mode),
                                 partition::method_name(combo.method), combo.weights, repetition, ran->wall_s,
                                 ran->edge_updates, ran->verification && ran->verification->passed ? "" : " NOT VERIFIED"));
    records_.push_back({clusters_.size() - 1, graph_spec, combo.algorithm, combo.mode, combo.method, combo.weights,
                        combo.fast_share, repetition, std::move(*ran)});
    return Status::ok();
  }

  Status write_tables(const std::string& out_dir) override {
    groups_ = summarise(records_);
    TESSERA_RETURN_IF_ERROR(write_csvs(out_dir, clusters_, records_));
    return write_summary(out_dir, clusters_, groups_);
  }

  void draw_plots(const std::string& out_dir, Plots& plots) override {
    plot_walls(out_dir, clusters_, groups_, plots);
    plot_traces(out_dir, clusters_, records_, plots);
    plot_load_ratio(out_dir, clusters_, groups_, plots);
  }

  std::string report_body() const override { return graph_study_report(study_, clusters_, groups_); }

 private:
  const GraphStudy& study_;
  const ExperimentOptions& options_;
  const std::vector<Combination> combos_;
  std::map<std::string, partition::DirectedGraph> graphs_;
  std::map<std::string, double> katz_betas_;
  std::vector<ClusterFacts> clusters_;
  graph_driver::PeerHosts peer_hosts_;
  std::vector<GraphRunRecord> records_;
  std::map<GraphGroupKey, GraphGroupStats> groups_;
};

}  // namespace

Result<GraphStudy> load_graph_study(const std::string& path) {
  return load_study_file<GraphStudy>(path, parse_graph_study);
}

Status run_graph_study(const GraphStudy& study, const ExperimentOptions& options, std::ostream& progress) {
  StudyOutline outline = outline_of(study);
  outline.required_capabilities = transport::kCapabilityGemm | transport::kCapabilityGraph;
  outline.files_note =
      "Files: `results.csv` (one row per run), `nodes.csv` (one row per node and run), `traces.csv` (residual per "
      "poll or step), `summary.csv` (median, min, max per combination), the plots' data (`*.dat`) and gnuplot "
      "scripts (`*.gp`).\n";
  GraphStudyKind kind(study, std::move(outline), options);
  return run_study(kind, options, progress);
}

}  // namespace tessera::balance::study
