#include "tessera/graphdata/graph.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

namespace tessera::graphdata {

struct GraphAccess {
  static Graph make(std::vector<int32_t> xadj, std::vector<int32_t> adjncy, std::vector<int32_t> vertex_weights,
                    std::vector<int32_t> edge_weights, int64_t total_vertex_weight) {
    Graph graph;
    graph.xadj_ = std::move(xadj);
    graph.adjncy_ = std::move(adjncy);
    graph.vertex_weights_ = std::move(vertex_weights);
    graph.edge_weights_ = std::move(edge_weights);
    graph.total_vertex_weight_ = total_vertex_weight;
    return graph;
  }
};

namespace {

struct Arc {
  int32_t from = 0;
  int32_t to = 0;
  int32_t weight = 1;
};

Status too_big(const std::string& what, int64_t value) {
  return resource_exhausted(fmt::format("{} is {}, above METIS' 32-bit limit of {}; partition a smaller graph "
                                        "or a coarser model of it",
                                        what, value, kMaxGraphIndex));
}

}  // namespace

Result<Graph> build_graph(const GraphInput& input, GraphBuildStats* stats) {
  const int64_t n = input.vertex_count;
  if (n < 0) return invalid_argument(fmt::format("vertex count {} is negative", n));
  if (n > kMaxGraphIndex) return too_big("the vertex count", n);
  if (!input.vertex_weights.empty() && static_cast<int64_t>(input.vertex_weights.size()) != n) {
    return invalid_argument(fmt::format("{} vertex weights for {} vertices; give one per vertex or none",
                                        input.vertex_weights.size(), n));
  }
  int64_t total_vertex_weight = input.vertex_weights.empty() ? n : 0;
  for (std::size_t v = 0; v < input.vertex_weights.size(); ++v) {
    const int64_t w = input.vertex_weights[v];
    if (w < 0) return invalid_argument(fmt::format("vertex {} has weight {}; use a weight >= 0", v, w));
    if (w > kMaxGraphIndex) return too_big(fmt::format("vertex {}'s weight", v), w);
    total_vertex_weight += w;
    if (total_vertex_weight > kMaxGraphIndex) return too_big("the sum of vertex weights", total_vertex_weight);
  }

  GraphBuildStats local_stats;
  // Each undirected edge once, as (smaller, larger); sorting then merges duplicates in one pass.
  std::vector<Arc> arcs;
  arcs.reserve(input.edges.size());
  for (std::size_t i = 0; i < input.edges.size(); ++i) {
    const Edge& edge = input.edges[i];
    if (edge.u < 0 || edge.u >= n || edge.v < 0 || edge.v >= n) {
      return invalid_argument(fmt::format("edge {} ({}, {}) has an endpoint outside 0..{}", i, edge.u, edge.v, n - 1));
    }
    const int64_t w = input.weighted_edges ? edge.weight : 1;
    if (w < 1) return invalid_argument(fmt::format("edge {} ({}, {}) has weight {}; METIS needs weights >= 1", i, edge.u, edge.v, w));
    if (w > kMaxGraphIndex) return too_big(fmt::format("edge {}'s weight", i), w);
    if (edge.u == edge.v) {
      ++local_stats.self_loops_removed;
      continue;
    }
    arcs.push_back({static_cast<int32_t>(std::min(edge.u, edge.v)), static_cast<int32_t>(std::max(edge.u, edge.v)),
                    static_cast<int32_t>(w)});
  }
  std::sort(arcs.begin(), arcs.end(), [](const Arc& a, const Arc& b) {
    return std::tie(a.from, a.to, b.weight) < std::tie(b.from, b.to, a.weight);  // heaviest first
  });
  std::size_t unique = 0;
  for (std::size_t i = 0; i < arcs.size(); ++i) {
    if (unique > 0 && arcs[unique - 1].from == arcs[i].from && arcs[unique - 1].to == arcs[i].to) {
      ++local_stats.duplicates_merged;  // the kept copy is the heaviest: sorted first
      continue;
    }
    arcs[unique++] = arcs[i];
  }
  arcs.resize(unique);

  const int64_t adjacency_entries = 2 * static_cast<int64_t>(arcs.size());
  if (adjacency_entries > kMaxGraphIndex) {
    return too_big(fmt::format("the adjacency size (2 x {} edges)", arcs.size()), adjacency_entries);
  }
  int64_t adjacency_weight = 0;
  for (const Arc& arc : arcs) adjacency_weight += 2 * static_cast<int64_t>(arc.weight);
  if (adjacency_weight > kMaxGraphIndex) return too_big("twice the sum of edge weights", adjacency_weight);

  const std::size_t vertices = static_cast<std::size_t>(n);
  std::vector<int32_t> xadj(vertices + 1, 0);
  for (const Arc& arc : arcs) {
    ++xadj[static_cast<std::size_t>(arc.from) + 1];
    ++xadj[static_cast<std::size_t>(arc.to) + 1];
  }
  for (std::size_t v = 0; v < vertices; ++v) xadj[v + 1] += xadj[v];
  std::vector<int32_t> adjncy(static_cast<std::size_t>(adjacency_entries));
  std::vector<int32_t> edge_weights(input.weighted_edges ? adjncy.size() : 0);
  std::vector<int32_t> fill(xadj.begin(), xadj.end() - 1);
  // Arcs are sorted by (from, to): a vertex first receives its smaller neighbours (as `to` of
  // earlier arcs), then its larger ones in order, so every list comes out sorted without a sort.
  for (const Arc& arc : arcs) {
    for (const auto& [at, other] : {std::pair{arc.from, arc.to}, std::pair{arc.to, arc.from}}) {
      const std::size_t slot = static_cast<std::size_t>(fill[static_cast<std::size_t>(at)]++);
      adjncy[slot] = other;
      if (!edge_weights.empty()) edge_weights[slot] = arc.weight;
    }
  }
  std::vector<int32_t> vertex_weights(input.vertex_weights.size());
  for (std::size_t v = 0; v < vertex_weights.size(); ++v) vertex_weights[v] = static_cast<int32_t>(input.vertex_weights[v]);

  if (stats != nullptr) *stats = local_stats;
  return GraphAccess::make(std::move(xadj), std::move(adjncy), std::move(vertex_weights), std::move(edge_weights),
                           total_vertex_weight);
}

std::string describe(const Graph& graph) {
  std::string text = fmt::format("{} vertices, {} edges", graph.vertex_count(), graph.edge_count());
  if (graph.has_vertex_weights() && graph.vertex_count() > 0) {
    const auto [lo, hi] = std::minmax_element(graph.vertex_weights().begin(), graph.vertex_weights().end());
    text += fmt::format(", vertex weights {}..{} (total {})", *lo, *hi, graph.total_vertex_weight());
  }
  if (graph.has_edge_weights() && graph.edge_count() > 0) {
    const auto [lo, hi] = std::minmax_element(graph.edge_weights().begin(), graph.edge_weights().end());
    text += fmt::format(", edge weights {}..{}", *lo, *hi);
  }
  return text;
}

}  // namespace tessera::graphdata
