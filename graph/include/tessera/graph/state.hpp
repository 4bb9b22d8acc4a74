// Vertex state for the whole graph, as the coordinator holds it: where a run starts, and where it
// restarts after a worker was lost.
//
// initial_state gives v0 and dv0 of every vertex (algorithm.hpp's table). restart_state turns ANY
// vector of values x (the survivors' current values plus the lost part's last snapshot) into a
// state from which the same fixed point is reached: for the linear algorithms dv = b + A x - x
// (the residual; x + sum_k A^k dv is then the fixed point), for cc and sssp dv = b (+) relax(x),
// i.e. every vertex re-sends its value along its edges once ("re-propagation"; valid because
// every value x holds was reached along a real path, so it bounds the answer from the right side).
// Pure functions over the graph the algorithm runs on (for cc: the symmetrised graph); thread-safe.
#pragma once

#include <span>
#include <vector>

#include "tessera/graph/algorithm.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::graph {

struct VertexState {
  std::vector<double> value;  // v, one per vertex
  std::vector<double> delta;  // dv, one per vertex
  bool operator==(const VertexState&) const = default;
};

// REQUIRES: check_spec(spec) ok; source (if any) < vertex_count.
VertexState initial_state(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec);
// REQUIRES: as initial_state; x.size() == vertex_count.
VertexState restart_state(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec, std::span<const double> x);

// The edge factor g is applied with: pagerank d / outdeg(u) (per source vertex), katz beta *
// weight, sssp weight, cc none. Exposed so the engine, the sync baseline and the references
// share one definition. outdeg(u) > 0 when called for pagerank.
inline double propagate(const AlgorithmSpec& spec, double dv, uint64_t out_degree, double weight) {
  switch (spec.kind) {
    case AlgorithmKind::kPageRank: return spec.damping * dv / static_cast<double>(out_degree);
    case AlgorithmKind::kKatz: return spec.beta * dv * weight;
    case AlgorithmKind::kConnectedComponents: return dv;
    case AlgorithmKind::kShortestPaths: return dv + weight;
  }
  return dv;
}

// PageRank's final step: values scaled to sum 1 (nothing to do for an empty or all-zero vector).
void normalise_pagerank(std::vector<double>& values);

}  // namespace tessera::graph
