// Graph studies: a study file with `workload: graph` replays graph runs (balance/graphs) over one
// or more local clusters and compares modes (async vs sync), placements (metis | contiguous |
// hash | chunks | fennel | auto), the nodes taking part (the whole cluster, the set the placement
// model picks, the best node alone), target weights (profile vs equal) or the share given to the
// fastest node, with every run verified against the reference. It writes results.csv, nodes.csv,
// traces.csv, summary.csv, PNG plots and report.md like the multiply studies (multiply_study.hpp).
//
// Schema (YAML, strict; paths relative to the study file):
//   study: NAME                        required
//   workload: graph                    required for a graph study
//   description: TEXT                  optional
//   clusters: [PATH, ...]              required, cluster files
//   graphs: [rmat:16, PATH, ...]       required: generator specs (see graphdata/digraph.hpp) or files
//   algorithms: [pagerank, cc, ...]    required: pagerank | katz | cc | sssp
//   modes: [async, sync]               default [async]
//   partitions: [metis, hash]          default [metis]: metis | contiguous | hash | chunks | fennel |
//                                      auto (locality placement, METIS only where the forecast says it pays)
//   nodes: [all, best, auto]           default [all]: which nodes take part (graph_run.hpp NodeChoice):
//                                      all | best (the fastest node alone by the profile's graph rates) |
//                                      auto (the set the placement model forecasts soonest) |
//                                      "a,b" (those nodes; quoted inside [...])
//   variants:                          optional, instead of the product modes x partitions x nodes:
//     - {nodes: best, mode: async}     one combination each; a key left out takes the first value
//     - {nodes: auto, partition: auto} of nodes / modes / partitions (which then list one value)
//   weights: [profile, equal]          default [profile]
//   fast_shares: [0.2, 0.4, 1.0]       optional: instead of weights, the first node's share of the
//                                      vertex weight, the rest split evenly (1.0: the first node alone)
//   tolerance: 1e-6                    default 1e-6 (pagerank, katz)
//   beta: 0.01                         katz; default 0.5 / (the graph's lambda_max upper bound)
//   source: 0                          katz single-source / sssp; default 0
//   warmup: 1                          default 0: untimed passes over every combination before the
//                                      timed ones (results.csv marks them; no median counts them)
//   cache: fresh                       default fresh: placements and run memory kept in
//                                      OUT/graph-cache/<cluster>, emptied when the study starts; none: no cache
//   repeat: 3                          default 3 (--repeat overrides)
// Runs are interleaved: each repetition runs every combination once, so a slow spell of the
// shared machine hits all of them alike. A combination is cluster x graph x algorithm x (nodes,
// mode, partition) x weights; `nodes` auto may pick a different set from run to run, so each run
// records the names that took part. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::experiment {


// A placement as a study names it: one method, or auto (GraphRunOptions::choose_method).
struct GraphPartition {
  bool automatic = false;
  partition::PartitionMethod method = partition::PartitionMethod::kMetis;  // unless automatic
  auto operator<=>(const GraphPartition&) const = default;
};
// "auto" or a partitioner method; fails (kInvalidConfig) listing them all.
Result<GraphPartition> parse_graph_partition(std::string_view text);
std::string graph_partition_name(const GraphPartition& partition);

// Whether the placement cache and run memory are kept across a study's runs.
enum class GraphCache { kFresh, kNone };

// One combination of nodes, mode and placement (a `variants:` item, or one of the product).
struct GraphVariant {
  graphs::NodeChoice nodes{graphs::NodeChoice::Mode::kAll, {}};
  graphs::GraphMode mode = graphs::GraphMode::kAsync;
  GraphPartition partition;
  bool operator==(const GraphVariant&) const = default;
};

struct GraphStudy {
  std::string name;
  std::string description;
  std::string source_path;
  std::vector<std::string> cluster_paths;  // resolved
  std::vector<std::string> graphs;         // generator specs, or resolved file paths
  std::vector<graph::AlgorithmKind> algorithms;
  std::vector<graphs::GraphMode> modes = {graphs::GraphMode::kAsync};
  std::vector<GraphPartition> partitions = {GraphPartition{}};
  std::vector<graphs::NodeChoice> nodes = {graphs::NodeChoice{graphs::NodeChoice::Mode::kAll, {}}};
  std::vector<GraphVariant> variants;              // non-empty: replaces nodes x modes x partitions
  std::vector<std::string> weights = {"profile"};  // "profile" | "equal"
  std::vector<double> fast_shares;                 // non-empty: replaces weights
  double tolerance = graphs::kDefaultGraphTolerance;
  std::optional<double> beta;
  int64_t source = 0;
  uint32_t warmup = 0;
  GraphCache cache = GraphCache::kFresh;
  uint32_t repeat = 3;
  bool operator==(const GraphStudy&) const = default;
};

// The (nodes, mode, partition) combinations a study runs, in order: its variants, or the product
// nodes x modes x partitions.
std::vector<GraphVariant> graph_variants(const GraphStudy& study);

Result<GraphStudy> load_graph_study(const std::string& path);
// Runs the study; progress lines go to `progress`. Partial results are written when a run fails
// or the study is interrupted (which fails it).
Status run_graph_study(const GraphStudy& study, const ExperimentOptions& options, std::ostream& progress);

}  // namespace tessera::experiment
