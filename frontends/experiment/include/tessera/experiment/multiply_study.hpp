// Multiply studies (`tessera experiment` on a study file without `workload:`): a study names a
// cluster, policies, sizes, overlap modes, repetitions and optional variants of the cluster (the
// first k nodes; a CPU quota swept over the nodes of one kind); the runner brings each variant
// up, profiles it once, runs every combination and writes results.csv, nodes.csv, summary.csv,
// PNG plots (gnuplot) and report.md.
//
// Study schema (YAML, strict like the cluster file; paths relative to the study file):
//   study: NAME                   required
//   description: TEXT             optional
//   workload: multiply            optional (the default)
//   cluster: PATH                 required, a cluster description
//   policies: [even, ...]         required: even | proportional | model | dynamic, a static one
//                                 optionally with a layout: proportional/2d, even/3d, ..., or
//                                 with how B travels: proportional/chain, model/star, ...
//   sizes: [2048, ...]            required, square n
//   repeat: 3                     default 3 (--repeat overrides)
//   overlap: [on, off]            default [on] = 4 panels in flight; off = 1 (SeqMsg)
//   panels_in_flight: [1, 4, 40]  optional instead of overlap: the credit windows to compare
//   node_counts: [1, 2, 3, 4]     optional: variants using the first k nodes of the cluster
//   sweep: {kind: pi, cpu: [...]} optional: variants giving every node of that kind that CPU quota
//   verify: freivalds             default freivalds (freivalds | exact | none)
// The runner stops everything it started, also when interrupted (SIGINT / SIGTERM). Not
// thread-safe.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/plan/plan.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/core/status.hpp"

namespace tessera::experiment {


struct CpuSweep {
  std::string kind;
  std::vector<double> cpu;
  bool operator==(const CpuSweep&) const = default;
};

// A policy as a study compares it: the policy and the layout of its shares ("proportional/2d"),
// or rows with a chosen distribution of B ("proportional/chain"; unset: the policy's own choice).
struct StudyPolicy {
  plan::Policy policy = plan::Policy::kEven;
  partition::Layout layout = partition::Layout::kRows;
  std::optional<plan::Distribution> distribution;
  auto operator<=>(const StudyPolicy&) const = default;
  std::string name() const;  // "even", "proportional/2d", "model/chain"
};
inline constexpr StudyPolicy kEvenRows{};
// "even", "dynamic", "proportional/2d", "proportional/chain"; the error lists the valid names.
Result<StudyPolicy> parse_study_policy(std::string_view text);

struct Study {
  std::string name;
  std::string description;
  std::string cluster_path;  // resolved
  std::vector<StudyPolicy> policies;
  std::vector<uint64_t> sizes;
  uint32_t repeat = 3;
  std::vector<uint32_t> windows = {4};  // panels in flight per run; 1 = no overlap (SeqMsg)
  std::vector<uint32_t> node_counts;  // empty: all nodes
  std::optional<CpuSweep> sweep;
  std::string verify = "freivalds";
  std::string source_path;
  bool operator==(const Study&) const = default;
};

Result<Study> load_study(const std::string& path);

// Runs the study; progress lines go to `progress`. Fails (after cleaning up) if a run fails or
// the study is interrupted; partial results are still written.
Status run_experiment(const Study& study, const ExperimentOptions& options, std::ostream& progress);

}  // namespace tessera::experiment
