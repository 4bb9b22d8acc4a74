// Resident studies: a study file with `workload: resident` runs work people repeat on matrices
// kept on the nodes (Session::place_rows) and compares, per iteration, the whole cluster with its
// shares balanced and measured, the fastest node alone with the same code, an even split (every
// node the same rows, as tools that split by count do) and the same steps with BLAS on one core
// of the coordinator (the library call numpy makes for A @ x). Placement is paid once per matrix
// and variant and reported with the break-even count against the fastest node alone. Every
// product is checked; a run that fails a check fails the study. It writes results.csv,
// summary.csv, PNG plots and report.md like the other studies (study.hpp).
//
// Schema (YAML, strict; paths relative to the study file):
//   study: NAME                        required; names the output folder
//   workload: resident                 required
//   description: TEXT                  optional
//   clusters: [PATH, ...]              required, cluster files
//   workloads:                         required, each once:
//     - {name: power, n: 16384, iterations: 34}            power iteration steps on an SPD n x n A
//     - {name: thin-products, n: 16384, columns: 64, iterations: 17}   A @ X, X n x columns
//     - {name: cg, n: 16384, tol: 1e-10}                   conjugate gradient on the same A
//     - {name: layer-stack, n: 4096, layers: 16, iterations: 8}  tokens through y = relu(W_i y)
//   variants: [cluster, desktop-alone, even, blas-1core]   default these four
//   repeat: 3                          default 3 (--repeat overrides)
// `iterations` are per repetition (steps, products or tokens). Workloads run one after the
// other, each repetition running every variant once in turn, so a slow spell of the shared
// machine hits the variants alike; a placement lives until the last workload using it is done.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/experiment/study.hpp"

namespace tessera::experiment {

enum class ResidentWorkload { kPower, kThinProducts, kCg, kLayerStack };
std::string_view resident_workload_name(ResidentWorkload workload);

// cluster: every node, shares balanced by the profile and then measured (PlacementOptions{});
// desktop-alone: the node with the highest profiled GFLOP/s alone; even: every node the same rows;
// blas-1core: the same steps with BLAS on one thread here, nothing placed.
enum class ResidentVariant { kCluster, kDesktopAlone, kEven, kBlasOneCore };
std::string_view resident_variant_name(ResidentVariant variant);

struct ResidentWorkloadSpec {
  ResidentWorkload workload{};
  uint64_t n = 0;
  uint64_t columns = 1;     // thin-products
  uint32_t iterations = 0;  // per repetition; cg: 0 (it runs to tol)
  uint32_t layers = 0;      // layer-stack
  double tol = 1e-10;       // cg
  bool operator==(const ResidentWorkloadSpec&) const = default;
};

struct ResidentStudy {
  std::string name;
  std::string description;
  std::string source_path;
  std::vector<std::string> cluster_paths;  // resolved
  std::vector<ResidentWorkloadSpec> workloads;
  std::vector<ResidentVariant> variants = {ResidentVariant::kCluster, ResidentVariant::kDesktopAlone,
                                           ResidentVariant::kEven, ResidentVariant::kBlasOneCore};
  uint32_t repeat = 3;
  bool operator==(const ResidentStudy&) const = default;
};

// Fails with kInvalidConfig "FILE:LINE: ..." on the first problem.
Result<ResidentStudy> load_resident_study(const std::string& path);
// Runs the study; progress lines go to `progress`. Partial results are written when a run fails
// or the study is interrupted (which fails it).
Status run_resident_study(const ResidentStudy& study, const ExperimentOptions& options, std::ostream& progress);

}  // namespace tessera::experiment
