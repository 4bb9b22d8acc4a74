#include "tessera/graph/algorithm.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tessera::graph {

Result<AlgorithmKind> parse_algorithm(std::string_view name) {
  if (name == "pagerank") return AlgorithmKind::kPageRank;
  if (name == "katz") return AlgorithmKind::kKatz;
  if (name == "cc") return AlgorithmKind::kConnectedComponents;
  if (name == "sssp") return AlgorithmKind::kShortestPaths;
  return invalid_argument(fmt::format("unknown algorithm \"{}\"; use pagerank, katz, cc or sssp", name));
}

std::string_view algorithm_name(AlgorithmKind kind) {
  switch (kind) {
    case AlgorithmKind::kPageRank: return "pagerank";
    case AlgorithmKind::kKatz: return "katz";
    case AlgorithmKind::kConnectedComponents: return "cc";
    case AlgorithmKind::kShortestPaths: return "sssp";
  }
  return "unknown";
}

Accumulate accumulate_of(const AlgorithmSpec& spec) {
  switch (spec.kind) {
    case AlgorithmKind::kPageRank:
    case AlgorithmKind::kKatz: return Accumulate::kSum;
    case AlgorithmKind::kConnectedComponents: return spec.max_label ? Accumulate::kMax : Accumulate::kMin;
    case AlgorithmKind::kShortestPaths: return Accumulate::kMin;
  }
  return Accumulate::kSum;
}

bool is_linear(const AlgorithmSpec& spec) { return accumulate_of(spec) == Accumulate::kSum; }

std::string describe(const AlgorithmSpec& spec) {
  switch (spec.kind) {
    case AlgorithmKind::kPageRank: return fmt::format("pagerank (d = {})", spec.damping);
    case AlgorithmKind::kKatz:
      return spec.source ? fmt::format("katz from {} (beta = {})", *spec.source, spec.beta)
                         : fmt::format("katz, all sources (beta = {})", spec.beta);
    case AlgorithmKind::kConnectedComponents:
      return fmt::format("cc (weakly connected, {} label)", spec.max_label ? "largest" : "smallest");
    case AlgorithmKind::kShortestPaths:
      return spec.source ? fmt::format("sssp from {}", *spec.source) : "sssp (no source)";
  }
  return "unknown";
}

Status check_spec(const AlgorithmSpec& spec) {
  switch (spec.kind) {
    case AlgorithmKind::kPageRank:
      if (!(spec.damping > 0.0 && spec.damping < 1.0)) {
        return invalid_argument(fmt::format("--damping {} is out of range; use a value between 0 and 1, e.g. 0.85",
                                            spec.damping));
      }
      break;
    case AlgorithmKind::kKatz:
      if (!(spec.beta > 0.0) || !std::isfinite(spec.beta)) {
        return invalid_argument(fmt::format("--beta {} is out of range; katz needs 0 < beta < 1/lambda_max", spec.beta));
      }
      break;
    case AlgorithmKind::kConnectedComponents: break;
    case AlgorithmKind::kShortestPaths:
      if (!spec.source) return invalid_argument("sssp needs a source vertex; give --source V");
      break;
  }
  if (spec.source && *spec.source < 0) {
    return invalid_argument(fmt::format("--source {} is negative; vertex ids start at 0", *spec.source));
  }
  return Status::ok();
}

double identity_of(Accumulate op) {
  switch (op) {
    case Accumulate::kSum: return 0.0;
    case Accumulate::kMax: return -std::numeric_limits<double>::infinity();
    case Accumulate::kMin: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

}  // namespace tessera::graph
