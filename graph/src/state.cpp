#include "tessera/graph/state.hpp"

#include <cmath>
#include <utility>

namespace tessera::graph {
namespace {

std::size_t vertex_total(const graphdata::DirectedGraph& graph) { return static_cast<std::size_t>(graph.vertex_count); }

double edge_weight(const graphdata::DirectedGraph& graph, uint64_t e) { return graph.weighted() ? graph.weights[e] : 1.0; }

// b: the initial delta, which for every algorithm is also the constant term of the fixed point
// x = b (+) g(A, x).
std::vector<double> constant_term(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec) {
  const std::size_t n = vertex_total(graph);
  switch (spec.kind) {
    case AlgorithmKind::kPageRank: return std::vector<double>(n, (1.0 - spec.damping) / static_cast<double>(n));
    case AlgorithmKind::kKatz: {
      if (!spec.source) return std::vector<double>(n, 1.0);
      std::vector<double> b(n, 0.0);
      b[static_cast<std::size_t>(*spec.source)] = 1.0;
      return b;
    }
    case AlgorithmKind::kConnectedComponents: {
      std::vector<double> b(n);
      for (std::size_t v = 0; v < n; ++v) b[v] = static_cast<double>(v);
      return b;
    }
    case AlgorithmKind::kShortestPaths: {
      std::vector<double> b(n, identity_of(Accumulate::kMin));
      b[static_cast<std::size_t>(*spec.source)] = 0.0;
      return b;
    }
  }
  return std::vector<double>(n, 0.0);
}

// Neumaier's compensated sum: restart residuals are differences of nearly equal numbers near the
// fixed point, where plain summation would leave noise of the order of the values themselves.
struct CompensatedSum {
  double sum = 0.0;
  double compensation = 0.0;
  void add(double term) {
    const double t = sum + term;
    compensation += std::abs(sum) >= std::abs(term) ? (sum - t) + term : (term - t) + sum;
    sum = t;
  }
  double total() const { return sum + compensation; }
};

}  // namespace

VertexState initial_state(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec) {
  VertexState state;
  state.value.assign(vertex_total(graph), identity_of(accumulate_of(spec)));
  state.delta = constant_term(graph, spec);
  return state;
}

VertexState restart_state(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec, std::span<const double> x) {
  const std::size_t n = vertex_total(graph);
  const Accumulate op = accumulate_of(spec);
  VertexState state;
  state.value.assign(x.begin(), x.end());
  std::vector<double> b = constant_term(graph, spec);
  if (op == Accumulate::kSum) {
    // dv = b + A x - x, with (A x)_w = sum over edges u->w of g(x_u, edge) (dangling u: no edges,
    // so nothing, as the iteration drops their mass).
    std::vector<CompensatedSum> sums(n);
    for (std::size_t v = 0; v < n; ++v) {
      sums[v].add(b[v]);
      sums[v].add(-x[v]);
    }
    for (std::size_t u = 0; u < n; ++u) {
      const uint64_t degree = graph.out_degree(static_cast<int64_t>(u));
      for (uint64_t e = graph.offsets[u]; e < graph.offsets[u + 1]; ++e) {
        sums[graph.targets[e]].add(propagate(spec, x[u], degree, edge_weight(graph, e)));
      }
    }
    state.delta.resize(n);
    for (std::size_t v = 0; v < n; ++v) state.delta[v] = sums[v].total();
    return state;
  }
  // dv_w = b_w (+) (+) over in-edges u->w of g(x_u, edge), gathered by scanning out-edges.
  state.delta = std::move(b);
  for (std::size_t u = 0; u < n; ++u) {
    const uint64_t degree = graph.out_degree(static_cast<int64_t>(u));
    for (uint64_t e = graph.offsets[u]; e < graph.offsets[u + 1]; ++e) {
      double& dv = state.delta[graph.targets[e]];
      dv = accumulate(op, dv, propagate(spec, x[u], degree, edge_weight(graph, e)));
    }
  }
  return state;
}

void normalise_pagerank(std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  if (!(sum > 0.0) || !std::isfinite(sum)) return;
  for (double& v : values) v /= sum;
}

}  // namespace tessera::graph
