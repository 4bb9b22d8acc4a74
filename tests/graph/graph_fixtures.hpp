// Small directed graphs and a naive fixed-point iteration for the graph engine's tests (part,
// state, engine). The iteration is deliberately plain synchronous code that shares only the
// definitions of algorithm.hpp/state.hpp with the engine. Header-only; pure functions.
#pragma once

#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/state.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::graph::fixtures {

struct Edge {
  uint32_t from = 0;
  uint32_t to = 0;
  double weight = 1.0;
};

// The graph of `edges` through graphdata::build_directed_graph (the CSR every input takes).
// REQUIRES: endpoints < vertex_count and finite weights (a fixture bug otherwise).
inline graphdata::DirectedGraph make_graph(int64_t vertex_count, const std::vector<Edge>& edges, bool weighted = false) {
  std::vector<graphdata::DirectedEdge> directed;
  directed.reserve(edges.size());
  for (const Edge& edge : edges) directed.push_back({edge.from, edge.to, edge.weight});
  Result<graphdata::DirectedGraph> graph = graphdata::build_directed_graph(vertex_count, std::move(directed), weighted);
  if (!graph.is_ok()) std::abort();  // a fixture bug, not a test outcome
  return std::move(*graph);
}

inline graphdata::DirectedGraph directed_cycle(uint32_t n) {
  std::vector<Edge> edges;
  for (uint32_t v = 0; v < n; ++v) edges.push_back({v, (v + 1) % n});
  return make_graph(n, edges);
}

inline graphdata::DirectedGraph directed_path(uint32_t n) {
  std::vector<Edge> edges;
  for (uint32_t v = 0; v + 1 < n; ++v) edges.push_back({v, v + 1});
  return make_graph(n, edges);
}

// nx * ny grid, edges both ways; the weight of an edge is 1 + (x + y) % 3 when weighted (integers,
// so sums of weights are exact and distances compare with ==).
inline graphdata::DirectedGraph grid(uint32_t nx, uint32_t ny, bool weighted) {
  std::vector<Edge> edges;
  const auto id = [&](uint32_t x, uint32_t y) { return x + nx * y; };
  for (uint32_t y = 0; y < ny; ++y) {
    for (uint32_t x = 0; x < nx; ++x) {
      const double w = weighted ? 1.0 + (x + y) % 3 : 1.0;
      if (x + 1 < nx) {
        edges.push_back({id(x, y), id(x + 1, y), w});
        edges.push_back({id(x + 1, y), id(x, y), w});
      }
      if (y + 1 < ny) {
        edges.push_back({id(x, y), id(x, y + 1), w});
        edges.push_back({id(x, y + 1), id(x, y), w});
      }
    }
  }
  return make_graph(static_cast<int64_t>(nx) * ny, edges, weighted);
}

// Everything awkward at once, 14 vertices: dangling vertices (3, 7, 12), self-loops (1, 5),
// isolated vertices (10, 13), three weakly connected components plus the isolated ones, a
// parallel edge (0->1 twice), zero-weight edges, and a cycle.
inline graphdata::DirectedGraph awkward_graph() {
  return make_graph(14,
                    {{0, 1, 2},  {0, 1, 1},  {1, 1, 1},  {1, 2, 0},  {2, 0, 3},  {2, 3, 1},  {4, 2, 2},
                     {5, 5, 1},  {5, 6, 0},  {6, 7, 1},  {6, 8, 2},  {8, 5, 1},  {8, 9, 1},  {9, 6, 4},
                     {11, 12, 1}, {11, 12, 2}, {2, 4, 1}},
                    /*weighted=*/true);
}

// Deterministic random multigraph with a few hubs (self-loops and repeats allowed); weights are
// small integers (0 included) when weighted.
inline graphdata::DirectedGraph random_graph(uint32_t n, uint32_t m, uint64_t seed, bool weighted) {
  uint64_t state = seed;
  const auto next = [&] {
    uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  std::vector<Edge> edges;
  for (uint32_t i = 0; i < m; ++i) {
    // Squaring a uniform number skews sources and targets towards low ids: hubs.
    const double a = static_cast<double>(next() % 1000000) / 1e6;
    const double b = static_cast<double>(next() % 1000000) / 1e6;
    const auto from = static_cast<uint32_t>(a * a * n);
    const auto to = static_cast<uint32_t>(b * n);
    edges.push_back({from, to, static_cast<double>(next() % 4)});
  }
  return make_graph(n, edges, weighted);
}

// Synchronous iteration from `state` until no delta is pending (min/max) or sum |dv| < 1e-15
// (sum): the fixed point every schedule must reach.
inline std::vector<double> iterate_to_fixed_point(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec,
                                                  VertexState state) {
  const Accumulate op = accumulate_of(spec);
  const auto n = static_cast<std::size_t>(graph.vertex_count);
  std::vector<double> x = state.value;
  std::vector<double> dv = state.delta;
  for (int iteration = 0; iteration < 100000; ++iteration) {
    std::vector<double> next(n, identity_of(op));
    bool changed = false;
    double residual = 0.0;
    for (std::size_t u = 0; u < n; ++u) {
      const bool pending = op == Accumulate::kSum ? dv[u] != 0.0 : accumulate(op, x[u], dv[u]) != x[u];
      if (!pending) continue;
      changed = true;
      x[u] = accumulate(op, x[u], dv[u]);
      for (uint64_t e = graph.offsets[u]; e < graph.offsets[u + 1]; ++e) {
        const double w = graph.weighted() ? graph.weights[e] : 1.0;
        double& target = next[graph.targets[e]];
        target = accumulate(op, target, propagate(spec, dv[u], graph.out_degree(static_cast<int64_t>(u)), w));
      }
    }
    dv = std::move(next);
    for (double d : dv) residual += op == Accumulate::kSum ? std::abs(d) : 0.0;
    if (!changed || (op == Accumulate::kSum && residual < 1e-15)) break;
  }
  return x;
}

inline std::vector<double> fixed_point(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec) {
  return iterate_to_fixed_point(graph, spec, initial_state(graph, spec));
}

// Vertex -> part: round-robin with a stride, so every part gets vertices from everywhere and
// most edges cross parts (the hard case for the engine).
inline std::vector<int32_t> scattered_placement(int64_t vertex_count, uint32_t parts) {
  std::vector<int32_t> part_of(static_cast<std::size_t>(vertex_count));
  for (std::size_t v = 0; v < part_of.size(); ++v) part_of[v] = static_cast<int32_t>((v * 5 + v / 3) % parts);
  return part_of;
}

}  // namespace tessera::graph::fixtures
