// The graph study (graph_study.hpp): graph runs over clusters x graphs x algorithms, the nodes
// taking part, modes, placements and weights, warm-up passes then repetitions interleaved, and its
// tables, plots and report sections (the cluster against its best node among them).
// The loop, the clusters' lifecycle and report.md's frame are the study runner's (study_runner.hpp).
#include "tessera/experiment/graph_study.hpp"

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
#include "study_io.hpp"
#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/reference.hpp"
#include "tessera/graphdata/generators.hpp"

namespace tessera::experiment {

namespace fs = std::filesystem;

namespace {

using namespace steps;

// ---------------------------------------------------------------------------------------------
// Study file

const StudyFileSchema kGraphStudySchema{
    .kind = "a graph study",
    .workload = "graph",
    .name_example = "aau-vs-sync",
    .own_keys = {"graphs", "algorithms", "modes", "partitions", "nodes", "variants", "weights", "fast_shares", "tolerance",
                 "beta", "source", "warmup", "cache"}};
const std::vector<std::string> kVariantKeys = {"nodes", "mode", "partition"};
constexpr std::string_view kVariantsExample = "[{nodes: best, mode: async}, {nodes: auto, partition: auto}]";

// Node choices as labels and CSV cells: "all", "auto", "best", or the listed names joined by '+'
// (a comma would split the CSV cell).
std::string nodes_label(const graphs::NodeChoice& choice) {
  return choice.mode == graphs::NodeChoice::Mode::kListed ? join(choice.listed, "+") : graphs::describe(choice);
}

Result<graphs::NodeChoice> parse_study_nodes(const std::string& text) {
  Result<graphs::NodeChoice> choice = graphs::parse_node_choice(text);
  if (!choice) {
    // The driver words it for the command line ("--nodes ..."); a study file has the key nodes.
    std::string message = choice.status().message();
    if (message.rfind("--nodes", 0) == 0) message.erase(0, 2);
    return invalid_config(std::move(message));
  }
  return choice;
}

std::string variant_label(const GraphVariant& variant) {
  return fmt::format("{} {} {}", nodes_label(variant.nodes), graphs::graph_mode_name(variant.mode),
                     graph_partition_name(variant.partition));
}

// `variants:`: each item a mapping of nodes, mode and partition; a key left out takes `defaults`'.
std::vector<GraphVariant> parse_variants(const cluster::YamlMap& keys, const GraphVariant& defaults) {
  std::vector<GraphVariant> out;
  std::vector<int> lines;
  const std::optional<std::vector<cluster::YamlMap::Entry>> items = keys.list("variants", kVariantsExample);
  if (!items) return out;
  for (const cluster::YamlMap::Entry& item : *items) {
    const std::string where = fmt::format("variant {}", out.size() + 1);
    if (!item.value.IsMap()) {
      cluster::fail_at(item.line, fmt::format("{} is {}; each variant is a mapping of nodes, mode and partition, e.g. "
                                              "- {{nodes: best, mode: async, partition: auto}}",
                                              where, cluster::describe_yaml(item.value)));
    }
    const cluster::YamlMap fields(item.value, item.line, kVariantKeys, where);
    GraphVariant variant = defaults;
    if (std::optional<std::string> nodes = fields.text("nodes", "best")) {
      Result<graphs::NodeChoice> parsed = parse_study_nodes(*nodes);
      if (!parsed) cluster::fail_at(fields.find("nodes")->line, fmt::format("{}: {}", where, parsed.status().message()));
      variant.nodes = *parsed;
    }
    if (std::optional<std::string> mode = fields.text("mode", "async")) {
      Result<graphs::GraphMode> parsed = graphs::parse_graph_mode(*mode);
      if (!parsed) cluster::fail_at(fields.find("mode")->line, fmt::format("{}: {}", where, parsed.status().message()));
      variant.mode = *parsed;
    }
    if (std::optional<std::string> placement = fields.text("partition", "auto")) {
      Result<GraphPartition> parsed = parse_graph_partition(*placement);
      if (!parsed) cluster::fail_at(fields.find("partition")->line, fmt::format("{}: {}", where, parsed.status().message()));
      variant.partition = *parsed;
    }
    if (auto same = std::find(out.begin(), out.end(), variant); same != out.end()) {
      cluster::fail_at(item.line, fmt::format("{} ({}) is variant {} again (line {}); list each combination once", where,
                                              variant_label(variant), same - out.begin() + 1, lines[same - out.begin()]));
    }
    out.push_back(std::move(variant));
    lines.push_back(item.line);
  }
  return out;
}

// With variants, a list of nodes, modes or partitions only gives what a variant leaving the key
// out takes, so more than one value would be a product the study does not run.
void refuse_product_beside_variants(const cluster::YamlMap& keys, std::string_view key, std::size_t values,
                                    std::string_view example) {
  if (values > 1) {
    cluster::fail_at(keys.find(key)->line,
                     fmt::format("with variants, {} only gives the value a variant without it takes, so list one (e.g. "
                                 "{}: [{}]) or add the combinations as variants",
                                 key, key, example));
  }
}

template <typename T>
void refuse_repeats(const cluster::YamlMap& keys, std::string_view key, const std::vector<T>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (values[i] == values[j]) {
        cluster::fail_at(keys.find(key)->line, fmt::format("{} lists a value twice (items {} and {}); list each once", key,
                                                           j + 1, i + 1));
      }
    }
  }
}

GraphStudy parse_graph_study(const YAML::Node& root, const std::string& path) {
  const cluster::YamlMap keys = study_keys(root, kGraphStudySchema);
  GraphStudy study;
  study.cluster_paths = read_study_header_into(study, keys, path, kGraphStudySchema);
  const fs::path base = fs::path(path).parent_path();
  for (const std::string& graph : text_list(keys, "graphs", "[rmat:16]")) {
    study.graphs.push_back(graphdata::is_generator_spec(graph) ? graph : (base / graph).lexically_normal().string());
  }
  if (study.graphs.empty()) keys.fail_missing("graphs", "[rmat:16]");
  study.algorithms = parsed_list<graph::AlgorithmKind>(keys, "algorithms", "[pagerank, cc]", graph::parse_algorithm);
  if (study.algorithms.empty()) keys.fail_missing("algorithms", "[pagerank, cc]");
  if (keys.has("modes")) {
    study.modes = parsed_list<graphs::GraphMode>(keys, "modes", "[async, sync]", graphs::parse_graph_mode);
    refuse_repeats(keys, "modes", study.modes);
  }
  if (keys.has("partitions")) {
    study.partitions = parsed_list<GraphPartition>(keys, "partitions", "[metis, hash]", parse_graph_partition);
    refuse_repeats(keys, "partitions", study.partitions);
  }
  if (keys.has("nodes")) {
    study.nodes = parsed_list<graphs::NodeChoice>(keys, "nodes", "[best, auto, all]", parse_study_nodes);
    refuse_repeats(keys, "nodes", study.nodes);
  }
  if (keys.has("variants")) {
    refuse_product_beside_variants(keys, "nodes", study.nodes.size(), "all");
    refuse_product_beside_variants(keys, "modes", study.modes.size(), "async");
    refuse_product_beside_variants(keys, "partitions", study.partitions.size(), "auto");
    study.variants = parse_variants(keys, GraphVariant{study.nodes.front(), study.modes.front(), study.partitions.front()});
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
  if (std::optional<uint64_t> warmup = keys.integer("warmup", 0, 100, "1")) study.warmup = static_cast<uint32_t>(*warmup);
  if (std::optional<std::string> cache = keys.text("cache", "fresh")) {
    if (*cache == "fresh") {
      study.cache = GraphCache::kFresh;
    } else if (*cache == "none") {
      study.cache = GraphCache::kNone;
    } else {
      cluster::fail_at(keys.find("cache")->line,
                       fmt::format("cache {} unknown; write cache: fresh (placements and run memory kept in the output "
                                   "folder, emptied when the study starts) or cache: none",
                                   cluster::single_quoted(*cache)));
    }
  }
  return study;
}

// ---------------------------------------------------------------------------------------------
// Records

struct GraphRunRecord {
  std::size_t cluster = 0;
  std::string graph;
  graph::AlgorithmKind algorithm{};
  GraphVariant variant;
  std::string weights;     // "profile", "equal", "share 0.40"
  double fast_share = NAN;
  uint32_t repetition = 0;  // 1.. among the warm-ups, or among the timed runs
  bool warmup = false;      // untimed: in the CSV files, in no median
  graphs::GraphOutcome outcome;
};

// "desktop+pi1": the nodes that took part in a run.
std::string taking_part(const graphs::GraphOutcome& outcome) { return join(outcome.choice.taking_part, "+"); }

// Runs compared with each other: everything but the repetition. The nodes are the requested
// choice (auto may take different sets from run to run; GraphGroupStats::sets counts them).
using GraphGroupKey = std::tuple<std::size_t, std::string, graph::AlgorithmKind, std::string, graphs::GraphMode,
                                 GraphPartition, std::string>;
GraphGroupKey key_of(const GraphRunRecord& r) {
  return {r.cluster, r.graph, r.algorithm, nodes_label(r.variant.nodes), r.variant.mode, r.variant.partition, r.weights};
}
const std::string& key_nodes(const GraphGroupKey& key) { return std::get<3>(key); }
graphs::GraphMode key_mode(const GraphGroupKey& key) { return std::get<4>(key); }
const GraphPartition& key_partition(const GraphGroupKey& key) { return std::get<5>(key); }
const std::string& key_weights(const GraphGroupKey& key) { return std::get<6>(key); }

struct GraphGroupStats {
  std::vector<double> wall, total, placement, edge_updates;
  std::vector<double> forecast_error;   // |forecast - total| / total, runs with a forecast
  std::map<std::string, int> sets;      // nodes that took part -> runs
  std::map<std::string, int> methods;   // placement method used -> runs
  double fast_share = NAN;
  int64_t edge_cut = 0;
  bool all_verified = true;
  double wall_median() const { return median(wall); }
  double total_median() const { return median(total); }
  double updates_median() const { return median(edge_updates); }
  double forecast_error_median() const { return forecast_error.empty() ? NAN : median(forecast_error); }
};

std::map<GraphGroupKey, GraphGroupStats> summarise(const std::vector<GraphRunRecord>& records) {
  std::map<GraphGroupKey, GraphGroupStats> groups;
  for (const GraphRunRecord& record : records) {
    if (record.warmup) continue;
    const graphs::GraphOutcome& o = record.outcome;
    GraphGroupStats& stats = groups[key_of(record)];
    stats.wall.push_back(o.wall_s);
    stats.total.push_back(o.total_s());
    stats.placement.push_back(o.placement_s);
    stats.edge_updates.push_back(static_cast<double>(o.edge_updates));
    if (o.choice.forecast && o.total_s() > 0) {
      stats.forecast_error.push_back(std::abs(o.choice.forecast->total_s - o.total_s()) / o.total_s());
    }
    ++stats.sets[taking_part(o)];
    ++stats.methods[o.placing.method.empty() ? std::string(partition::method_name(o.method)) : o.placing.method];
    stats.fast_share = record.fast_share;
    stats.edge_cut = o.placement.quality.edge_cut;
    stats.all_verified &= o.verification && o.verification->passed;
  }
  return groups;
}

// "desktop+pi1 x2, desktop x1" (or just the set when every run took the same).
std::string counts_text(const std::map<std::string, int>& counts, std::string_view separator = "; ") {
  if (counts.size() == 1) return counts.begin()->first;
  std::vector<std::string> parts;
  for (const auto& [name, runs] : counts) parts.push_back(fmt::format("{} x{}", name, runs));
  return join(parts, separator);
}

// The placement column: the study's name for it, and for auto the methods it chose.
std::string placement_text(const GraphPartition& placement, const GraphGroupStats& stats) {
  return placement.automatic ? fmt::format("auto ({})", counts_text(stats.methods, ", ")) : graph_partition_name(placement);
}

std::string group_label(const GraphGroupKey& key) {
  return fmt::format("{} {} {} {} {}", algorithm_name(std::get<2>(key)), key_nodes(key),
                     graphs::graph_mode_name(key_mode(key)), graph_partition_name(key_partition(key)),
                     key_weights(key));
}

// File-name-safe form of a graph spec or path: "rmat:16" -> "rmat-16", "/a/b/web.txt" -> "web".
std::string file_stem(const std::string& graph) {
  std::string stem = graphdata::is_generator_spec(graph) ? graph : fs::path(graph).stem().string();
  for (char& c : stem) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  }
  return stem;
}

// ---------------------------------------------------------------------------------------------
// Output files

Status write_csvs(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                  const std::vector<GraphRunRecord>& records) {
  const std::string key_columns = "cluster,graph,algorithm,nodes,mode,partition,weights";
  std::string results = key_columns +
      ",fast_share,repetition,warmup,taking_part,placement_method,placement_cached,vertices,edges,total_s,"
      "placement_s,wall_s,forecast_s,edge_updates,edge_updates_per_s,residual,polls,steps,edge_cut,comm_volume,"
      "restarts,lost_nodes,verified,l1_error,mismatches\n";
  std::string nodes = key_columns +
      ",repetition,warmup,node,vertices,edges,updates,edge_updates,batches_sent,batches_received,peer_bytes_sent,"
      "peer_bytes_received,busy_s,idle_s,memory_bytes,bytes_per_edge,lost,left_out\n";
  std::string traces = "run," + key_columns + ",repetition,warmup,time_s,residual,edge_updates\n";
  std::size_t run = 0;
  for (const GraphRunRecord& r : records) {
    const graphs::GraphOutcome& o = r.outcome;
    const std::string prefix =
        fmt::format("{},{},{},{},{},{},{}", clusters[r.cluster].spec.name, r.graph, algorithm_name(r.algorithm),
                    nodes_label(r.variant.nodes), graphs::graph_mode_name(r.variant.mode),
                    graph_partition_name(r.variant.partition), r.weights);
    const char* warmup = r.warmup ? "yes" : "no";
    results += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", prefix,
                           csv_number(r.fast_share), r.repetition, warmup, taking_part(o), o.placing.method,
                           o.placing.cached ? "yes" : "no", o.vertices, o.edges, csv_number(o.total_s()),
                           csv_number(o.placement_s), csv_number(o.wall_s),
                           o.choice.forecast ? csv_number(o.choice.forecast->total_s) : "", o.edge_updates,
                           csv_number(o.edge_updates_per_s), csv_number(o.residual), o.polls, o.steps,
                           o.placement.quality.edge_cut, o.placement.quality.comm_volume, o.restarts,
                           join(o.lost_nodes, ";"), o.verification && o.verification->passed ? "yes" : "no",
                           o.verification ? csv_number(o.verification->l1_error) : "",
                           o.verification ? std::to_string(o.verification->mismatches) : "");
    for (const graphs::GraphNodeFigures& n : o.nodes) {
      nodes += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", prefix, r.repetition, warmup,
                           n.name, n.vertices, n.edges, n.updates, n.edge_updates, n.batches_sent, n.batches_received,
                           n.peer_bytes_sent, n.peer_bytes_received, csv_number(n.busy_s), csv_number(n.idle_s),
                           n.memory_bytes, csv_number(n.bytes_per_edge()), n.lost ? "yes" : "no",
                           n.left_out ? "yes" : "no");
    }
    for (const graphs::TracePoint& point : o.trace) {
      traces += fmt::format("{},{},{},{},{},{},{}\n", run, prefix, r.repetition, warmup, csv_number(point.time_s),
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
  std::string csv = "cluster,graph,algorithm,nodes,mode,partition,weights,runs,total_median_s,total_min_s,total_max_s,"
                    "wall_median_s,wall_min_s,wall_max_s,placement_median_s,forecast_error_median,taking_part,"
                    "placement_methods,edge_updates_median,edge_cut,all_verified\n";
  for (const auto& [key, stats] : groups) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", clusters[std::get<0>(key)].spec.name,
                       std::get<1>(key), algorithm_name(std::get<2>(key)), key_nodes(key),
                       graphs::graph_mode_name(key_mode(key)), graph_partition_name(key_partition(key)),
                       key_weights(key), stats.wall.size(), csv_number(stats.total_median()),
                       csv_number(minimum(stats.total)), csv_number(maximum(stats.total)),
                       csv_number(stats.wall_median()), csv_number(minimum(stats.wall)), csv_number(maximum(stats.wall)),
                       csv_number(median(stats.placement)), csv_number(stats.forecast_error_median()),
                       counts_text(stats.sets), counts_text(stats.methods), csv_number(stats.updates_median()),
                       stats.edge_cut, stats.all_verified ? "yes" : "no");
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
    if (!r.warmup && r.repetition == 1 && std::isnan(r.fast_share)) panels[{r.cluster, r.graph, r.algorithm}].push_back(&r);
  }
  for (const auto& [panel, runs] : panels) {
    std::set<graphs::GraphMode> modes;
    for (const GraphRunRecord* r : runs) modes.insert(r->variant.mode);
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
      for (const graphs::TracePoint& point : r->outcome.trace) {
        if (point.residual > 0) points += fmt::format("{:.6g} {:.6g}\n", point.time_s, point.residual);
      }
      if (points.empty()) {
        settled_before_polls.push_back(fmt::format("{} {}", variant_label(r->variant), r->weights));
        continue;
      }
      data += fmt::format("# {} {}\n", variant_label(r->variant), r->weights);
      data += points + "\n\n";
      plot_lines += fmt::format("{}'{}/{}.dat' index {} using 1:2 with linespoints title '{} {}'",
                                block == 0 ? "" : ", ", out_dir, stem, block, variant_label(r->variant), r->weights);
      ++block;
    }
    const std::string script = fmt::format(
        "set title 'Convergence: {} on {}, {}'\nset xlabel 'seconds since the parts were "
        "shipped'\nset ylabel 'residual (sum |pending delta|, or pending vertices)'\nset logscale y\nplot {}\n",
        algorithm_name(algorithm), file_stem(graph), clusters[cluster].spec.name, plot_lines);
    if (block == 0) continue;
    std::string caption = fmt::format("Residual over time of {} on {} ({}), first timed repetition, one line per combination.",
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
      const std::string label = fmt::format("{} {} {} {} {}", file_stem(std::get<1>(key)), algorithm_name(std::get<2>(key)),
                                            key_nodes(key), graphs::graph_mode_name(key_mode(key)),
                                            graph_partition_name(key_partition(key)));
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

// Total time (placing + run) per graph, one bar per nodes / mode / placement combination, one
// chart per cluster and algorithm: the cluster against its best node at a glance. Drawn when the
// study compares node choices.
void plot_totals(const std::string& out_dir, const std::vector<ClusterFacts>& clusters,
                 const std::map<GraphGroupKey, GraphGroupStats>& groups, Plots& plots) {
  std::set<std::string> node_choices;
  for (const auto& [key, stats] : groups) node_choices.insert(key_nodes(key));
  if (node_choices.size() < 2) return;
  std::set<std::pair<std::size_t, graph::AlgorithmKind>> panels;
  for (const auto& [key, stats] : groups) {
    if (std::isnan(stats.fast_share)) panels.insert({std::get<0>(key), std::get<2>(key)});
  }
  for (const auto& [cluster, algorithm] : panels) {
    // Series: the combinations besides graph; rows: the graphs, in the order they sort.
    std::vector<std::string> series;
    std::vector<std::string> graphs;
    std::map<std::pair<std::string, std::string>, const GraphGroupStats*> cells;  // (graph, series) -> stats
    for (const auto& [key, stats] : groups) {
      if (std::get<0>(key) != cluster || std::get<2>(key) != algorithm || !std::isnan(stats.fast_share)) continue;
      const std::string label = fmt::format("{} {} {} {}", key_nodes(key), graphs::graph_mode_name(key_mode(key)),
                                            graph_partition_name(key_partition(key)), key_weights(key));
      if (std::find(series.begin(), series.end(), label) == series.end()) series.push_back(label);
      if (std::find(graphs.begin(), graphs.end(), std::get<1>(key)) == graphs.end()) graphs.push_back(std::get<1>(key));
      cells[{std::get<1>(key), label}] = &stats;
    }
    // best first, then auto, all and the rest: the order the comparison reads in.
    auto rank = [](const std::string& label) {
      for (int i = 0; const char* prefix : {"best ", "auto ", "all "}) {
        if (label.rfind(prefix, 0) == 0) return i;
        ++i;
      }
      return 3;
    };
    std::stable_sort(series.begin(), series.end(), [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    const std::string stem = fmt::format("total-{}-{}", clusters[cluster].spec.name, algorithm_name(algorithm));
    std::string data = "# graph";
    for (const std::string& label : series) data += fmt::format(" | {} median min max", label);
    data += "\n";
    for (const std::string& graph : graphs) {
      data += file_stem(graph);
      for (const std::string& label : series) {
        auto found = cells.find({graph, label});
        data += found == cells.end() ? " - - -"
                                     : fmt::format(" {:.6g} {:.6g} {:.6g}", found->second->total_median(),
                                                   minimum(found->second->total), maximum(found->second->total));
      }
      data += "\n";
    }
    std::string plot_lines;
    for (std::size_t i = 0; i < series.size(); ++i) {
      plot_lines += fmt::format("{}'{}/{}.dat' using {}:{}:{}{} title '{}'", i == 0 ? "" : ", ", out_dir, stem, 2 + 3 * i,
                                3 + 3 * i, 4 + 3 * i, i == 0 ? ":xtic(1)" : "", series[i]);
    }
    const std::string script = fmt::format(
        "set title 'Total time (placing + run), {} on {} (median, min..max)'\n"
        "set ylabel 'seconds'\nset yrange [0:*]\nset datafile missing '-'\nset style data histogram\n"
        "set style histogram errorbars gap 2 lw 1\nset style fill solid 0.6 border -1\nset xtics rotate by -20\n"
        "plot {}\n",
        algorithm_name(algorithm), clusters[cluster].spec.name, plot_lines);
    draw_plot(out_dir, stem, data, script,
              fmt::format("Total time of {} on {} per graph: the best node alone against the cluster's choices "
                          "(median of the timed repetitions; bars span min..max).",
                          algorithm_name(algorithm), clusters[cluster].spec.name),
              plots);
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const GraphGroupStats* find_graph_group(const std::map<GraphGroupKey, GraphGroupStats>& groups, GraphGroupKey key) {
  auto found = groups.find(key);
  return found == groups.end() ? nullptr : &found->second;
}

// "1.234 (1.100..1.400)"
std::string spread_text(const std::vector<double>& values) {
  return fmt::format("{:.3f} ({:.3f}..{:.3f})", median(values), minimum(values), maximum(values));
}

// A run on the whole cluster (or the set auto chose) counts as slower than the best node alone
// past this: closer than 5% is within what the shared machine moves a median by.
constexpr double kSlowerMargin = 0.05;

// The verdict on auto (or all) against the best node alone (see the report's section). A set of
// one node that is not the best one happens when the run memory measured another node faster on
// this graph than the profile did; it is named, not counted as the best node.
std::string best_node_verdict(const GraphGroupStats& best, const GraphGroupStats& chosen) {
  const double best_s = best.total_median();
  const double worst = maximum(chosen.total);
  if (chosen.total_median() > (1.0 + kSlowerMargin) * best_s) {
    return fmt::format("slower by {:.0f}%", 100.0 * (chosen.total_median() / best_s - 1.0));
  }
  if (worst > (1.0 + kSlowerMargin) * best_s) {
    const auto slow_runs = std::count_if(chosen.total.begin(), chosen.total.end(),
                                         [&](double t) { return t > (1.0 + kSlowerMargin) * best_s; });
    return fmt::format("slower by {:.0f}% in {} of {} runs", 100.0 * (worst / best_s - 1.0), slow_runs, chosen.total.size());
  }
  const bool always_alone = std::all_of(chosen.sets.begin(), chosen.sets.end(),
                                        [](const auto& set) { return set.first.find('+') == std::string::npos; });
  const bool faster = chosen.total_median() < best_s;
  if (always_alone) {
    const bool same_node = chosen.sets.size() == 1 && best.sets.size() == 1 && chosen.sets.begin()->first == best.sets.begin()->first;
    if (same_node) return "best node alone chosen";
    return fmt::format("one node alone chosen ({}), {}", counts_text(chosen.sets, ", "), faster ? "faster" : "on par");
  }
  return faster ? "cluster faster" : "on par (within 5%)";
}

// "Cluster against its best node": per cluster, graph, algorithm, mode and weights, the best node
// alone against auto (each of its placements) and all.
std::string best_node_section(const std::vector<ClusterFacts>& clusters, const std::map<GraphGroupKey, GraphGroupStats>& groups) {
  using Row = std::tuple<std::size_t, std::string, graph::AlgorithmKind, graphs::GraphMode, std::string>;
  std::map<Row, std::map<std::string, std::vector<std::pair<GraphPartition, const GraphGroupStats*>>>> rows;
  for (const auto& [key, stats] : groups) {
    if (!std::isnan(stats.fast_share)) continue;
    rows[{std::get<0>(key), std::get<1>(key), std::get<2>(key), key_mode(key), key_weights(key)}][key_nodes(key)].push_back(
        {key_partition(key), &stats});
  }
  std::string table;
  for (const auto& [row, by_nodes] : rows) {
    const auto best = by_nodes.find("best");
    if (best == by_nodes.end() || by_nodes.size() < 2) continue;
    const auto& [cluster, graph, algorithm, mode, weights] = row;
    const GraphGroupStats& alone = *best->second.front().second;
    const auto all = by_nodes.find("all");
    const auto automatic = by_nodes.find("auto");
    // One line per placement auto ran with (usually one); without auto, one line for all.
    std::vector<std::pair<GraphPartition, const GraphGroupStats*>> chosen;
    if (automatic != by_nodes.end()) chosen = automatic->second;
    if (chosen.empty()) chosen.push_back({all != by_nodes.end() ? all->second.front().first : GraphPartition{}, nullptr});
    for (const auto& [placement, stats] : chosen) {
      const GraphGroupStats* whole = nullptr;
      if (all != by_nodes.end()) {
        whole = all->second.front().second;
        for (const auto& [all_placement, all_stats] : all->second) {
          if (all_placement == placement) whole = all_stats;
        }
      }
      const GraphGroupStats* judged = stats != nullptr ? stats : whole;
      table += fmt::format(
          "| {} | {} | {} | {} {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", clusters[cluster].spec.name, graph,
          algorithm_name(algorithm), graphs::graph_mode_name(mode), graph_partition_name(placement), weights,
          counts_text(alone.sets), spread_text(alone.total), stats ? spread_text(stats->total) : "-",
          stats ? ratio_text(alone.total_median() / stats->total_median()) : "-", stats ? counts_text(stats->sets) : "-",
          whole ? spread_text(whole->total) : "-", whole ? ratio_text(alone.total_median() / whole->total_median()) : "-",
          stats && std::isfinite(stats->forecast_error_median()) ? fmt::format("{:.0f}%", 100.0 * stats->forecast_error_median())
                                                                 : "-",
          judged ? best_node_verdict(alone, *judged) : "-");
    }
  }
  if (table.empty()) return "";
  return "\n### Cluster against its best node\n\n"
         "Total time is what the command took: choosing the nodes and placing the vertices, then running until every "
         "value is back (median (min..max) of the timed runs, seconds). `best` is the node with the most edge updates "
         "per second (by the profile's graph rates, or by what earlier runs on the graph measured when the run memory "
         "has it), alone; `auto` the set the placement model forecast soonest (the sets it chose, with their counts "
         "when they differ); `all` every node. `best / auto` above 1 means the cluster answered sooner. `forecast "
         "error` is the median of |forecast - total| / total of the auto runs. The verdict flags auto as slower when "
         "its median, or any run, took more than 5% longer than the best node's median, and names the node when auto "
         "ran one node alone that is not the best run's.\n\n"
         "| cluster | graph | algorithm | run | best node | best s | auto s | best / auto | auto chose | all s | best / all "
         "| forecast error | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" +
         table;
}

std::string comparisons(const std::vector<ClusterFacts>& clusters, const std::map<GraphGroupKey, GraphGroupStats>& groups) {
  std::string md = best_node_section(clusters, groups);
  std::string modes, placements, weights;
  for (const auto& [key, stats] : groups) {
    const auto& [cluster, graph, algorithm, nodes, mode, placement, weight] = key;
    const std::string name = clusters[cluster].spec.name;
    // Work is compared on the same nodes: auto's sets may differ between the modes.
    if (mode == graphs::GraphMode::kAsync && nodes == "all") {
      if (const GraphGroupStats* sync =
              find_graph_group(groups, {cluster, graph, algorithm, nodes, graphs::GraphMode::kSync, placement, weight})) {
        modes += fmt::format("| {} | {} | {} | {} {} | {:.3g} | {:.3g} | {:.2f} | {:.3f} | {:.3f} | {:.2f}x | {:.3f} | {:.3f} |\n",
                             name, graph, algorithm_name(algorithm), placement_text(placement, stats), weight,
                             stats.updates_median(), sync->updates_median(), stats.updates_median() / sync->updates_median(),
                             stats.wall_median(), sync->wall_median(), sync->wall_median() / stats.wall_median(),
                             stats.total_median(), sync->total_median());
      }
    }
    if (!placement.automatic && placement.method == partition::PartitionMethod::kMetis) {
      for (partition::PartitionMethod other : {partition::PartitionMethod::kHash, partition::PartitionMethod::kContiguous}) {
        if (const GraphGroupStats* base =
                find_graph_group(groups, {cluster, graph, algorithm, nodes, mode, GraphPartition{false, other}, weight})) {
          placements += fmt::format("| {} | {} | {} {} {} {} | metis vs {} | {} vs {} | {:.3f} vs {:.3f} | {:+.1f}% |\n",
                                    name, graph, algorithm_name(algorithm), nodes, graphs::graph_mode_name(mode),
                                    weight, partition::method_name(other), stats.edge_cut, base->edge_cut,
                                    stats.wall_median(), base->wall_median(),
                                    100.0 * (1.0 - stats.wall_median() / base->wall_median()));
        }
      }
    }
    if (weight == "profile") {
      if (const GraphGroupStats* equal = find_graph_group(groups, {cluster, graph, algorithm, nodes, mode, placement, "equal"})) {
        const std::vector<double>& speeds = clusters[cluster].speeds;
        const double total = std::accumulate(speeds.begin(), speeds.end(), 0.0);
        const double slowest = *std::min_element(speeds.begin(), speeds.end());
        const double ideal = total / (static_cast<double>(speeds.size()) * slowest);
        weights += fmt::format("| {} | {} | {} {} {} {} | {:.3f} | {:.3f} | {:.2f}x | {:.2f}x |\n", name, graph,
                               algorithm_name(algorithm), nodes, graphs::graph_mode_name(mode),
                               graph_partition_name(placement), stats.wall_median(), equal->wall_median(),
                               equal->wall_median() / stats.wall_median(), ideal);
      }
    }
  }
  if (!modes.empty()) {
    md += "\n### Asynchronous against synchronous work\n\nOn every node (`nodes: all`), same placement and weights. "
          "`ratio` is async edge updates over sync edge updates (below 0.5 meets the target); `speed-up` is sync wall "
          "time over async wall time; total adds choosing and placing (medians).\n\n"
          "| cluster | graph | algorithm | placement | async edge updates | sync edge updates | ratio | async s | sync s "
          "| speed-up | async total s | sync total s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|\n" + modes;
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
    std::map<std::tuple<std::string, graph::AlgorithmKind, std::string, graphs::GraphMode, GraphPartition>,
             std::vector<std::pair<double, const GraphGroupStats*>>>
        sweeps;
    for (const auto& [key, stats] : groups) {
      if (std::get<0>(key) == cluster && !std::isnan(stats.fast_share)) {
        sweeps[{std::get<1>(key), std::get<2>(key), key_nodes(key), key_mode(key), key_partition(key)}].push_back(
            {stats.fast_share, &stats});
      }
    }
    const std::vector<double>& speeds = clusters[cluster].speeds;
    const double total = std::accumulate(speeds.begin(), speeds.end(), 0.0);
    for (const auto& [sweep, points] : sweeps) {
      auto best = std::min_element(points.begin(), points.end(),
                                   [](const auto& a, const auto& b) { return a.second->wall_median() < b.second->wall_median(); });
      auto alone = std::find_if(points.begin(), points.end(), [](const auto& p) { return p.first >= 1.0; });
      shares += fmt::format("| {} | {} | {} {} {} {} | {:.2f} | {:.2f} ({:.3f} s) | {} |\n", clusters[cluster].spec.name,
                            std::get<0>(sweep), algorithm_name(std::get<1>(sweep)), std::get<2>(sweep),
                            graphs::graph_mode_name(std::get<3>(sweep)), graph_partition_name(std::get<4>(sweep)),
                            total > 0 ? speeds.front() / total : NAN, best->first, best->second->wall_median(),
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
  md += study.cache == GraphCache::kFresh
            ? "- Placement cache and run memory: `graph-cache/<cluster>` in the output folder, emptied when the study "
              "started, so later runs reuse placements and forecast from what earlier runs measured.\n"
            : "- No placement cache or run memory (`cache: none`): every run places afresh and forecasts from the "
              "profile alone.\n";
  if (study.warmup > 0) {
    md += fmt::format("- {} warm-up pass{} over every combination ran first; results.csv keeps them (`warmup` yes), "
                      "the tables and plots leave them out.\n",
                      study.warmup, study.warmup == 1 ? "" : "es");
  }
  for (const ClusterFacts& facts : clusters) md += "- " + cluster_facts_line(facts) + "\n";
  md += "\nTotal time is what the command took: choosing the nodes and placing the vertices, then wall time from "
        "shipping the parts to having every value back on the coordinator. Edge updates count every delta sent along "
        "an edge (the work), summed over nodes. `nodes` is what the study asked for, `taking part` the nodes that "
        "ran (with counts when they differ between runs).\n\n"
        "| cluster | graph | algorithm | nodes | mode | placement | weights | runs | total median (min..max) s | wall median s "
        "| taking part | edge updates (median) | edge cut | verified |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [key, stats] : groups) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3f} | {} | {:.4g} | {} | {} |\n",
                      clusters[std::get<0>(key)].spec.name, std::get<1>(key), algorithm_name(std::get<2>(key)),
                      key_nodes(key), graphs::graph_mode_name(key_mode(key)),
                      placement_text(key_partition(key), stats), key_weights(key), stats.wall.size(),
                      spread_text(stats.total), stats.wall_median(), counts_text(stats.sets, ", "),
                      stats.updates_median(), stats.edge_cut, stats.all_verified ? "all" : "NOT ALL");
  }
  return md + comparisons(clusters, groups);
}

// ---------------------------------------------------------------------------------------------
// Running

Result<graphdata::DirectedGraph> load_graph(const std::string& graph, uint64_t seed) {
  if (graphdata::is_generator_spec(graph)) return graphdata::generate_directed_graph(graph, seed);
  return graphdata::read_directed_graph_file(graph);
}

// The combinations one repetition runs, in the order they run.
struct Combination {
  graph::AlgorithmKind algorithm{};
  GraphVariant variant;
  std::string weights;
  double fast_share = NAN;
};

std::vector<Combination> combinations(const GraphStudy& study) {
  std::vector<Combination> out;
  for (graph::AlgorithmKind algorithm : study.algorithms) {
    for (const GraphVariant& variant : graph_variants(study)) {
      if (study.fast_shares.empty()) {
        for (const std::string& weights : study.weights) out.push_back({algorithm, variant, weights, NAN});
      }
      for (double share : study.fast_shares) {
        out.push_back({algorithm, variant, fmt::format("share {:.2f}", share), share});
      }
    }
  }
  return out;
}

// The first node gets `share` of the weight, the others split the rest evenly.
graphs::TargetWeights share_weights(double share, std::size_t nodes) {
  graphs::TargetWeights weights{graphs::TargetWeights::Source::kExplicit, std::vector<double>(nodes, 0.0)};
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

  Status prepare(const std::string& out_dir, std::ostream& progress) override {
    if (study_.cache == GraphCache::kFresh) {
      // Emptied so that a rerun starts as cold as the first run did: warm-ups and repetitions
      // then warm it the same way every time.
      cache_root_ = out_dir + "/graph-cache";
      std::error_code error;
      fs::remove_all(cache_root_, error);
      if (fs::create_directories(cache_root_, error); error) {
        return io_error(fmt::format("cannot create the placement cache {}: {}", cache_root_, error.message()));
      }
    }
    for (const std::string& spec : study_.graphs) {
      Result<graphdata::DirectedGraph> graph = load_graph(spec, 1);
      if (!graph) return graph.status();
      progress << fmt::format("graph {}: {}\n", spec, graphdata::describe(*graph));
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
    // best and auto rank the nodes by their graph rates. The runner profiles every cluster in
    // full (not --quick), which measures them on every worker with the graph service; a node
    // still without them would fail each best run, so say so once, before any run.
    const bool ranks_nodes = std::any_of(combos_.begin(), combos_.end(), [](const Combination& combo) {
      return combo.variant.nodes.mode == graphs::NodeChoice::Mode::kBest;
    });
    if (ranks_nodes) {
      for (const cluster::NodeSpec& node : cluster.spec().nodes) {
        const profile::NodeProfile* measured = cluster.profile().find(node.name);
        if (measured == nullptr || !measured->graph) {
          return invalid_config(fmt::format("nodes: best needs every node's graph rates, and the profile of cluster '{}' "
                                            "has none for {}; run `tessera profile --refresh {}` with a worker that "
                                            "offers the graph service",
                                            cluster.spec().name, node.name, study_.cluster_paths[index]));
        }
      }
    }
    // One cache per cluster: the run memory keeps edge rates by node name, and two clusters of
    // the study may name their nodes alike while their links differ.
    cache_dir_.clear();
    if (!cache_root_.empty()) {
      cache_dir_ = cache_root_ + "/" + cluster.spec().name;
      std::error_code error;
      if (fs::create_directories(cache_dir_, error); error) {
        return io_error(fmt::format("cannot create the placement cache {}: {}", cache_dir_, error.message()));
      }
    }
    return Status::ok();
  }

  std::size_t cells() const override { return study_.graphs.size() * combos_.size(); }

  Status run_cell(StudyCluster& cluster, std::size_t, std::size_t cell, uint32_t pass,
                  const session::RunControl& control, RunCounter& counter) override {
    const std::string& graph_spec = study_.graphs[cell / combos_.size()];
    const Combination& combo = combos_[cell % combos_.size()];
    const cluster::ClusterSpec& spec = cluster.spec();
    // The runner numbers the warm-up passes first (StudyOutline::warmup).
    const bool warmup = pass <= study_.warmup;
    const uint32_t repetition = warmup ? pass : pass - study_.warmup;
    graphs::GraphRunOptions run;
    run.algorithm.kind = combo.algorithm;
    if (combo.algorithm == graph::AlgorithmKind::kKatz) run.algorithm.beta = katz_betas_[graph_spec];
    if (combo.algorithm == graph::AlgorithmKind::kShortestPaths) run.algorithm.source = study_.source;
    run.mode = combo.variant.mode;
    run.choose_method = combo.variant.partition.automatic;
    run.method = combo.variant.partition.method;
    run.nodes = combo.variant.nodes;
    run.cache_dir = cache_dir_;
    run.tolerance = study_.tolerance;
    run.verify = true;
    if (!std::isnan(combo.fast_share)) {
      run.weights = share_weights(combo.fast_share, spec.nodes.size());
    } else {
      run.weights.source = combo.weights == "profile" ? graphs::TargetWeights::Source::kProfile
                                                      : graphs::TargetWeights::Source::kEqual;
    }
    const std::string what = fmt::format("{} {} {} {} {}", spec.name, graph_spec, algorithm_name(combo.algorithm),
                                         variant_label(combo.variant), combo.weights);
    Result<graphs::GraphOutcome> ran = cluster.session().graph(graphs_.at(graph_spec), run, control);
    if (!ran) return ran.status().with_context(what + ": ");
    counter.finished(fmt::format("{} {}{}: {:.3f} s ({:.3f} s placing) on {}, {} edge updates{}", what,
                                 warmup ? "warm-up " : "#", repetition, ran->total_s(), ran->placement_s, taking_part(*ran),
                                 ran->edge_updates, ran->verification && ran->verification->passed ? "" : " NOT VERIFIED"));
    records_.push_back({clusters_.size() - 1, graph_spec, combo.algorithm, combo.variant, combo.weights, combo.fast_share,
                        repetition, warmup, std::move(*ran)});
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
    plot_totals(out_dir, clusters_, groups_, plots);
  }

  std::string report_body() const override { return graph_study_report(study_, clusters_, groups_); }

 private:
  const GraphStudy& study_;
  const ExperimentOptions& options_;
  const std::vector<Combination> combos_;
  std::map<std::string, graphdata::DirectedGraph> graphs_;
  std::map<std::string, double> katz_betas_;
  std::vector<ClusterFacts> clusters_;
  std::string cache_root_;  // <out_dir>/graph-cache, or empty (cache: none)
  std::string cache_dir_;   // the current cluster's folder in it
  std::vector<GraphRunRecord> records_;
  std::map<GraphGroupKey, GraphGroupStats> groups_;
};

}  // namespace

Result<GraphPartition> parse_graph_partition(std::string_view text) {
  if (text == "auto") return GraphPartition{true, partition::PartitionMethod::kMetis};
  Result<partition::PartitionMethod> method = partition::parse_partition_method(text);
  if (!method) {
    return invalid_config(fmt::format("partition '{}' unknown; use auto (locality placement, METIS only where the "
                                      "forecast says it pays), metis, contiguous, hash, chunks or fennel",
                                      text));
  }
  return GraphPartition{false, *method};
}

std::string graph_partition_name(const GraphPartition& placement) {
  return placement.automatic ? "auto" : std::string(partition::method_name(placement.method));
}

std::vector<GraphVariant> graph_variants(const GraphStudy& study) {
  if (!study.variants.empty()) return study.variants;
  std::vector<GraphVariant> out;
  for (const graphs::NodeChoice& nodes : study.nodes) {
    for (graphs::GraphMode mode : study.modes) {
      for (const GraphPartition& placement : study.partitions) out.push_back({nodes, mode, placement});
    }
  }
  return out;
}

Result<GraphStudy> load_graph_study(const std::string& path) {
  return load_study_file<GraphStudy>(path, parse_graph_study);
}

Status run_graph_study(const GraphStudy& study, const ExperimentOptions& options, std::ostream& progress) {
  StudyOutline outline = outline_of(study);
  outline.warmup = study.warmup;
  outline.required_capabilities = transport::kCapabilityGemm | transport::kCapabilityGraph;
  outline.files_note =
      "Files: `results.csv` (one row per run, warm-ups marked), `nodes.csv` (one row per node and run), `traces.csv` "
      "(residual per poll or step), `summary.csv` (median, min, max per combination, timed runs only), the plots' "
      "data (`*.dat`) and gnuplot scripts (`*.gp`), and `graph-cache/` (placements and run memory, unless "
      "`cache: none`).\n";
  GraphStudyKind kind(study, std::move(outline), options);
  return run_study(kind, options, progress);
}

}  // namespace tessera::experiment
