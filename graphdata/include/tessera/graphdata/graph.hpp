// Graph: an undirected graph in compressed sparse row form, the input of every graph partitioner.
//
// Vertex v's neighbours are adjncy[xadj[v] .. xadj[v+1]); every undirected edge {u,v} is stored
// twice (u's list holds v, v's list holds u) with the same weight, as METIS expects. Vertex and
// edge weights are optional: an empty vector means "every vertex (edge) weighs 1". Indices and
// weights are 32-bit because METIS (Debian's build: IDXTYPEWIDTH 32) is; build_graph refuses
// anything that would not fit rather than let METIS overflow.
//
// A Graph is only made by build_graph, so it is always symmetric, free of self-loops and of
// duplicate edges, with neighbour lists sorted. It owns its arrays; a value type, thread-compatible
// (share across threads as const).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::graphdata {

// The largest index and weight sum METIS' 32-bit idx_t holds.
inline constexpr int64_t kMaxGraphIndex = INT32_MAX;

class Graph {
 public:
  Graph() = default;  // no vertices

  int32_t vertex_count() const { return static_cast<int32_t>(xadj_.empty() ? 0 : xadj_.size() - 1); }
  // Undirected edges (each counted once).
  int64_t edge_count() const { return static_cast<int64_t>(adjncy_.size() / 2); }

  std::span<const int32_t> neighbours(int32_t v) const {
    return {adjncy_.data() + xadj_[static_cast<std::size_t>(v)],
            static_cast<std::size_t>(xadj_[static_cast<std::size_t>(v) + 1] - xadj_[static_cast<std::size_t>(v)])};
  }
  int64_t vertex_weight(int32_t v) const { return vertex_weights_.empty() ? 1 : vertex_weights_[static_cast<std::size_t>(v)]; }
  // Weight of the edge at position `index` of adjncy.
  int64_t edge_weight_at(std::size_t index) const { return edge_weights_.empty() ? 1 : edge_weights_[index]; }
  int64_t total_vertex_weight() const { return total_vertex_weight_; }

  bool has_vertex_weights() const { return !vertex_weights_.empty(); }
  bool has_edge_weights() const { return !edge_weights_.empty(); }

  const std::vector<int32_t>& xadj() const { return xadj_; }
  const std::vector<int32_t>& adjncy() const { return adjncy_; }
  const std::vector<int32_t>& vertex_weights() const { return vertex_weights_; }
  const std::vector<int32_t>& edge_weights() const { return edge_weights_; }

  bool operator==(const Graph&) const = default;

 private:
  friend struct GraphAccess;
  std::vector<int32_t> xadj_;
  std::vector<int32_t> adjncy_;
  std::vector<int32_t> vertex_weights_;
  std::vector<int32_t> edge_weights_;
  int64_t total_vertex_weight_ = 0;
};

struct Edge {
  int64_t u = 0;
  int64_t v = 0;
  int64_t weight = 1;
  bool operator==(const Edge&) const = default;
};

// What build_graph is given. Edges may come in any direction and any order.
struct GraphInput {
  int64_t vertex_count = 0;
  std::vector<Edge> edges = {};
  std::vector<int64_t> vertex_weights = {};  // empty: every vertex weighs 1; else one per vertex, >= 0
  bool weighted_edges = false;          // false: Edge::weight is ignored and the graph has none
};

// What build_graph cleaned up, for the user to see ("removed 3 self-loops").
struct GraphBuildStats {
  int64_t self_loops_removed = 0;
  // Edges listed more than once, counting (u,v) and (v,u) as the same edge. A graph written with
  // each edge in both directions (METIS .graph, a general .mtx of a symmetric matrix) reports one
  // merge per edge; that is the symmetrisation at work, not a fault of the input.
  int64_t duplicates_merged = 0;
};

// Builds the CSR graph: symmetrises (an edge (u,v) makes v a neighbour of u and u of v), drops
// self-loops and merges duplicates. A merged edge keeps the LARGEST weight, not the sum: duplicates
// are almost always the same edge written twice (both triangles of a symmetric matrix, both ends
// of a METIS adjacency list, a directed graph with u->v and v->u), and max makes symmetrising an
// already symmetric input change nothing, so one graph gives one partition however it was written.
// Fails (kInvalidArgument) on a negative vertex count, an endpoint outside [0, vertex_count), a
// negative vertex weight, an edge weight < 1 (METIS needs positive weights), a vertex_weights
// length != vertex_count; (kResourceExhausted) when vertices, adjacency entries (2 per edge), the
// vertex weight sum or the adjacency weight sum exceed METIS' 32-bit idx_t. `stats` is optional.
Result<Graph> build_graph(const GraphInput& input, GraphBuildStats* stats = nullptr);

// "62 vertices, 159 edges, vertex weights 1..12" for logs and test failures.
std::string describe(const Graph& graph);

}  // namespace tessera::graphdata
