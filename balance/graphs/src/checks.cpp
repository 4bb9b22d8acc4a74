// Checks against the graph: the spec before a run, and --verify's comparison with the reference
// after it, with the error bounds graph_run.hpp derives.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/reference.hpp"

namespace tessera::balance::graphs {

Status check_graph_run(const graphdata::DirectedGraph& graph, const graph::AlgorithmSpec& spec,
                       std::string_view graph_name) {
  TESSERA_RETURN_IF_ERROR(graph::check_spec(spec));
  if (graph.vertex_count <= 0) {
    return invalid_argument(fmt::format("{} has no vertices, so there is nothing to compute; give a graph with at "
                                        "least one edge (a line 'U V' in an edge list)",
                                        printable(graph_name)));
  }
  if (spec.source && *spec.source >= graph.vertex_count) {
    return invalid_argument(fmt::format("--source {} is out of range; the graph's vertices are 0..{}", *spec.source,
                                        graph.vertex_count - 1));
  }
  if (spec.kind == graph::AlgorithmKind::kShortestPaths && graph.weighted()) {
    for (int64_t u = 0; u < graph.vertex_count; ++u) {
      for (uint64_t e = graph.offsets[static_cast<std::size_t>(u)]; e < graph.offsets[static_cast<std::size_t>(u) + 1];
           ++e) {
        if (graph.weights[e] < 0.0) {
          return invalid_argument(fmt::format("sssp needs non-negative weights; edge {} -> {} has weight {:g}", u,
                                              graph.targets[e], graph.weights[e]));
        }
      }
    }
  }
  if (spec.kind == graph::AlgorithmKind::kKatz) TESSERA_RETURN_IF_ERROR(graph::check_katz_beta(graph, spec.beta));
  return Status::ok();
}

std::optional<double> katz_error_amplification(const graphdata::DirectedGraph& graph, double beta,
                                               int max_iterations) {
  const auto n = static_cast<std::size_t>(graph.vertex_count);
  // z_{k+1} = 1 + beta |A| z_k from z_0 = 1 climbs monotonically to z; |weights| keep the bound
  // valid for signed weights (|(I - M)^{-1}| <= (I - |M|)^{-1} entrywise).
  std::vector<double> z(n, 1.0), next(n, 0.0);
  for (int iteration = 0; iteration < max_iterations; ++iteration) {
    double change = 0.0, size = 0.0;
    for (std::size_t u = 0; u < n; ++u) {
      double sum = 0.0;
      for (uint64_t e = graph.offsets[u]; e < graph.offsets[u + 1]; ++e) {
        sum += (graph.weighted() ? std::abs(graph.weights[e]) : 1.0) * z[graph.targets[e]];
      }
      next[u] = 1.0 + beta * sum;
      change = std::max(change, next[u] - z[u]);
      size = std::max(size, next[u]);
    }
    z.swap(next);
    if (!std::isfinite(size)) return std::nullopt;
    // The iteration stops short of z from below; at a relative step of 1e-9 the remaining tail
    // is far inside the 1% added for it.
    if (change <= 1e-9 * size) return size * 1.01;
  }
  return std::nullopt;
}

Result<GraphVerification> verify_graph(const graphdata::DirectedGraph& graph, const graph::AlgorithmSpec& spec,
                                       std::span<const double> values, double tolerance) {
  Result<std::vector<double>> reference = graph::reference_values(graph, spec);
  if (!reference) return reference.status().with_context("--verify: the reference failed: ");
  if (reference->size() != values.size()) {
    return internal_error(fmt::format("--verify: {} values for {} vertices", values.size(), reference->size()));
  }
  const graph::Comparison comparison = graph::compare_values(spec, values, *reference);
  GraphVerification verification;
  verification.l1_error = comparison.l1_error;
  verification.max_error = comparison.max_error;
  verification.mismatches = comparison.mismatches;
  verification.first_mismatch = comparison.first_mismatch;
  if (!graph::is_linear(spec)) {
    verification.passed = comparison.mismatches == 0;
    verification.detail =
        verification.passed
            ? fmt::format("verified: all {} {} equal the reference", values.size(),
                          spec.kind == graph::AlgorithmKind::kShortestPaths ? "distances" : "labels")
            : fmt::format("FAILED: {} of {} differ from the reference; first: {}", comparison.mismatches, values.size(),
                          comparison.first_mismatch);
    return verification;
  }
  double reference_l1 = 0.0;
  for (double x : *reference) reference_l1 += std::abs(x);
  double amplification = 0.0;
  if (spec.kind == graph::AlgorithmKind::kPageRank) {
    amplification = 2.0 / ((1.0 - spec.damping) * (1.0 - spec.damping));
  } else {
    std::optional<double> katz = katz_error_amplification(graph, spec.beta);
    if (!katz) {
      return internal_error(fmt::format("--verify: the Katz error bound did not settle for --beta {}; beta is too "
                                        "close to 1/lambda_max to verify",
                                        spec.beta));
    }
    amplification = *katz;
  }
  verification.l1_bound = tolerance * amplification + 1e-9 * std::max(1.0, reference_l1);
  // A NaN anywhere makes the L1 error NaN, which fails this comparison too.
  verification.passed = comparison.l1_error <= verification.l1_bound;
  verification.detail = fmt::format("{}: L1 error {:.3g} (bound {:.3g} from tolerance {:g}), max error {:.3g}",
                                    verification.passed ? "verified" : "FAILED", comparison.l1_error,
                                    verification.l1_bound, tolerance, comparison.max_error);
  return verification;
}

}  // namespace tessera::balance::graphs
