// Graph studies: a study file with `workload: graph` replays graph runs (balance/graph_driver) over one
// or more local clusters and compares modes (async vs sync), placements (metis | contiguous |
// hash), target weights (profile vs equal) or the share given to the fastest node, with every
// run verified against the reference. It writes results.csv, nodes.csv, traces.csv,
// summary.csv, PNG plots and report.md like the multiply studies (multiply_study.hpp).
//
// Schema (YAML, strict; paths relative to the study file):
//   study: NAME                        required
//   workload: graph                    required for a graph study
//   description: TEXT                  optional
//   clusters: [PATH, ...]              required, cluster files
//   graphs: [rmat:16, PATH, ...]       required: generator specs (see partition/digraph.hpp) or files
//   algorithms: [pagerank, cc, ...]    required: pagerank | katz | cc | sssp
//   modes: [async, sync]               default [async]
//   partitions: [metis, hash]          default [metis]
//   weights: [profile, equal]          default [profile]
//   fast_shares: [0.2, 0.4, 1.0]       optional: instead of weights, the first node's share of the
//                                      vertex weight, the rest split evenly (1.0: the first node alone)
//   tolerance: 1e-6                    default 1e-6 (pagerank, katz)
//   beta: 0.01                         katz; default 0.5 / (the graph's lambda_max upper bound)
//   source: 0                          katz single-source / sssp; default 0
//   repeat: 3                          default 3 (--repeat overrides)
// Runs are interleaved: each repetition runs every combination once, so a slow spell of the
// shared machine hits all of them alike. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/balance/graph_driver/graph_run.hpp"
#include "tessera/balance/study/study_common.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"

namespace tessera::balance::study {

struct GraphStudy {
  std::string name;
  std::string description;
  std::string source_path;
  std::vector<std::string> cluster_paths;  // resolved
  std::vector<std::string> graphs;         // generator specs, or resolved file paths
  std::vector<graph::AlgorithmKind> algorithms;
  std::vector<graph_driver::GraphMode> modes = {graph_driver::GraphMode::kAsync};
  std::vector<partition::PartitionMethod> partitions = {partition::PartitionMethod::kMetis};
  std::vector<std::string> weights = {"profile"};  // "profile" | "equal"
  std::vector<double> fast_shares;                 // non-empty: replaces weights
  double tolerance = graph_driver::kDefaultGraphTolerance;
  std::optional<double> beta;
  int64_t source = 0;
  uint32_t repeat = 3;
  bool operator==(const GraphStudy&) const = default;
};

Result<GraphStudy> load_graph_study(const std::string& path);
// Runs the study; progress lines go to `progress`. Partial results are written when a run fails
// or the study is interrupted (which fails it).
Status run_graph_study(const GraphStudy& study, const ExperimentOptions& options, std::ostream& progress);

}  // namespace tessera::balance::study
