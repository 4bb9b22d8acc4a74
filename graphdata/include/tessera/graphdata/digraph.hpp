// DirectedGraph: a directed graph in compressed sparse row form of OUT-edges, the input of the
// graph algorithms (PageRank, Katz, connected components, shortest paths).
//
// Vertex v's out-edges are targets[offsets[v] .. offsets[v+1]), sorted by target; weights, when
// present, run parallel to targets. Unlike graphdata::Graph (undirected, cleaned for METIS), a
// DirectedGraph keeps its input as given: self-loops stay, and an edge listed twice is two
// parallel edges (an adjacency matrix entry of 2), so every algorithm and its reference see the
// same multigraph. Vertex ids are 0 .. vertex_count-1 and fit 32 bits; edge counts are 64-bit.
// A value type that owns its arrays; thread-compatible (share across threads as const).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::graphdata {

struct DirectedGraph {
  int64_t vertex_count = 0;
  std::vector<uint64_t> offsets;  // vertex_count + 1 entries (empty only when vertex_count == 0)
  std::vector<uint32_t> targets;  // one per edge
  std::vector<double> weights;    // empty: unweighted (every weight 1); else one per edge, finite

  int64_t edge_count() const { return static_cast<int64_t>(targets.size()); }
  uint64_t out_degree(int64_t v) const {
    return offsets[static_cast<std::size_t>(v) + 1] - offsets[static_cast<std::size_t>(v)];
  }
  bool weighted() const { return !weights.empty(); }
  bool operator==(const DirectedGraph&) const = default;
};

struct DirectedEdge {
  int64_t source = 0;
  int64_t target = 0;
  double weight = 1.0;
  bool operator==(const DirectedEdge&) const = default;
};

// Builds the CSR: edges grouped by source, each group sorted by target (stable for equal
// targets). Fails (kInvalidArgument) on a negative vertex count, an endpoint outside
// [0, vertex_count), a weight that is not finite; (kResourceExhausted) when vertex_count exceeds
// 2^31 - 1. `weighted` false ignores DirectedEdge::weight and leaves weights empty.
Result<DirectedGraph> build_directed_graph(int64_t vertex_count, std::vector<DirectedEdge> edges, bool weighted);

// Every edge u->v also as v->u (weights copied), self-loops kept once: the graph whose connected
// components are the weakly connected components of `graph`.
DirectedGraph symmetrised(const DirectedGraph& graph);

// The undirected graph METIS partitions: an edge {u,v} wherever u->v or v->u (self-loops and
// repeats dropped, unit edge weights), vertex weight = out-degree + 1 (an update's work is one
// visit plus one unit per out-edge). Fails (kResourceExhausted) beyond METIS' 32-bit limits.
Result<Graph> placement_graph(const DirectedGraph& graph);

// "1048576 vertices, 16777216 edges (weighted), 12034 dangling, 3 self-loops" for logs.
std::string describe(const DirectedGraph& graph);

// --- Reading -----------------------------------------------------------------------------------
// Strict like graph_io.hpp: a malformed file fails with kInvalidArgument "FILE:LINE: what is
// wrong; what to write instead"; an unreadable one with kIoError naming it.
//   .mtx                Matrix Market coordinate (real | integer | pattern; general | symmetric);
//                       entry (i, j) is the edge i->j (1-based), its value the weight for real or
//                       integer fields; a symmetric file gives both i->j and j->i.
//   .graph / .metis     METIS graph format: each vertex's list gives its out-edges (so an
//                       undirected METIS graph becomes both directions); edge weights kept.
//                       The lists hold 2m entries (undirected, as METIS writes) or m (one per arc).
//   .edges / .el / .txt / .snap / .edgelist
//                       SNAP-style edge list: "u v" or "u v w" per line, whitespace-separated,
//                       0-based ids, '#' or '%' comment lines; vertex count = largest id + 1.
//                       Either every line has a weight or none does.
Result<DirectedGraph> parse_directed_edge_list(std::string_view text, const std::string& source_name);
Result<DirectedGraph> parse_directed_matrix_market(std::string_view text, const std::string& source_name);
Result<DirectedGraph> parse_directed_metis_graph(std::string_view text, const std::string& source_name);
// Picks the parser by extension; another extension fails naming the accepted ones.
Result<DirectedGraph> read_directed_graph_file(const std::string& path);

// --- Generating ----------------------------------------------------------------------------------
// Deterministic like generators.hpp (same spec and seed, same graph everywhere); the same specs:
//   rmat:SCALE[:EF]   directed R-MAT edges as generated (self-loops and repeats kept, no
//                     symmetrisation), labels permuted as Graph500 does
//   lognormal:N       the AAU thesis' PageRank graphs: in-degrees log-normal (mu 2.3, sigma 0.5),
//                     sources uniform, no self-loops
//   mesh2d:NXxNY, mesh3d:NXxNYxNZ   grids with edges in both directions
// A malformed spec fails (kInvalidArgument) quoting the syntax.
Result<DirectedGraph> generate_directed_graph(std::string_view spec, uint64_t seed);

}  // namespace tessera::graphdata
