// Expression studies: a study file with `workload: expressions` evaluates matrix expressions
// (Markov chains, powers, HITS, Leontief series, chains of products) on one or more local
// clusters and compares how they run: scheduled (the tiled task DAG placed by HEFT with tile
// caches), as the naive sequence of verified multiplies, and scheduled on the cluster's fastest
// node alone. Every run is verified; one that fails verification fails the study naming it. It
// writes results.csv, summary.csv, PNG plots and report.md like the other studies (study.hpp).
//
// Schema (YAML, strict; paths relative to the study file):
//   study: NAME                        required; names the output folder
//   workload: expressions              required for an expression study
//   description: TEXT                  optional
//   clusters: [PATH, ...]              required, cluster files
//   benchmarks:                        required, each with a unique name:
//     - {name: markov, expression: "u * P^16", inputs: {u: "random:1x4096", P: "random:4096x4096"}}
//                                      expression as `tessera eval` reads it (expr/parse.hpp); every
//                                      input random:RxC or integers:RxC, seeded by its name as
//                                      `tessera eval --input` seeds it, and used by the expression
//   modes: [scheduled, sequence, fastest-alone]   default these three; also direct, via-coordinator
//   repeat: 3                          default 3 (--repeat overrides)
// Runs are interleaved: each repetition runs every benchmark in every mode once, so a slow spell
// of the shared machine hits all of them alike. Not thread-safe.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/experiment/study.hpp"
#include "tessera/core/status.hpp"

namespace tessera::experiment {


// scheduled: Session::evaluate's scheduled mode on every node (tiles between nodes by the route
// the schedule forecasts sooner); sequence: its sequence mode; fastest-alone: the scheduled mode
// on the node with the highest profiled GFLOP/s alone; direct and via-coordinator: scheduled with
// every tile between nodes worker to worker, or through the coordinator (TileRoute).
enum class ExpressionMode { kScheduled, kSequence, kFastestAlone, kDirect, kViaCoordinator };
std::string_view expression_mode_name(ExpressionMode mode);
Result<ExpressionMode> parse_expression_mode(std::string_view name);  // the error lists the valid names

struct ExpressionBenchmark {
  std::string name;
  std::string expression;
  std::vector<std::pair<std::string, std::string>> inputs;  // (input name, "random:RxC"), file order
  bool operator==(const ExpressionBenchmark&) const = default;
};

struct ExpressionStudy {
  std::string name;
  std::string description;
  std::string source_path;
  std::vector<std::string> cluster_paths;  // resolved
  std::vector<ExpressionBenchmark> benchmarks;
  std::vector<ExpressionMode> modes = {ExpressionMode::kScheduled, ExpressionMode::kSequence,
                                       ExpressionMode::kFastestAlone};
  uint32_t repeat = 3;
  bool operator==(const ExpressionStudy&) const = default;
};

// Fails with kInvalidConfig "FILE:LINE: ..." on the first problem, including an expression that
// does not parse against its inputs' shapes or an input it does not use.
Result<ExpressionStudy> load_expression_study(const std::string& path);
// Runs the study; progress lines go to `progress`. Partial results are written when a run fails
// (an error, or a value that fails verification) or the study is interrupted (which fails it).
Status run_expression_study(const ExpressionStudy& study, const ExperimentOptions& options, std::ostream& progress);

}  // namespace tessera::experiment
