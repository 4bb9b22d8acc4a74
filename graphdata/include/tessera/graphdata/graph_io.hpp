// Reading graphs from files: Matrix Market, METIS .graph and plain edge lists.
//
// Every reader is strict: a bad header, an index out of range, a count that disagrees with the
// header or a stray token fails with kInvalidArgument and "FILE:LINE: what is wrong; what to write
// instead". An unreadable file fails with kIoError naming it. The text is parsed in full before
// build_graph cleans it (symmetrise, drop self-loops, merge duplicates; see graph.hpp), whose
// GraphBuildStats the caller may ask for. `source_name` is only used in messages. Pure functions
// (files are read, nothing else); thread-safe.
#pragma once

#include <string>
#include <vector>
#include <utility>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::graphdata {

// The graph of a sparse matrix's pattern, as parse_matrix_market builds it from a .mtx file (so a
// matrix in memory and its .mtx give one graph): a square matrix gives its symmetrised pattern
// (rows are vertices weighted by their nonzeros; the diagonal only adds weight), a rectangular
// one the graph of its row tiles that share columns (tile_graph). Repeated coordinates count once.
// REQUIRES: every entry inside rows x cols.
Result<Graph> graph_of_pattern(int64_t rows, int64_t cols, std::vector<std::pair<int64_t, int64_t>> entries,
                               GraphBuildStats* stats = nullptr);

// Matrix Market, coordinate format only: field real | integer | pattern (complex is refused),
// symmetry general | symmetric | skew-symmetric (symmetric files must store only the lower
// triangle, i >= j, as the format requires). Indices are 1-based.
// The graph is the row-net model of the matrix, so that partitioning it partitions rows:
//   - square M x M: vertices are rows, {i, j} is an edge when A(i,j) or A(j,i) is nonzero and
//     i != j (the symmetrised pattern); diagonal entries only add weight;
//   - rectangular M x N: rows i and j are adjacent when they share a column, edge weight = number
//     of shared columns (rows as tiles, columns as panels; see tiling.hpp).
// Vertex weight = nonzeros in the row (both triangles for symmetric files), i.e. the row's work in
// a sparse matrix-vector product. Values are checked for syntax and otherwise ignored.
Result<Graph> parse_matrix_market(std::string_view text, const std::string& source_name,
                                  GraphBuildStats* stats = nullptr);

// METIS' graph format (METIS 5 manual, section 4.1.1): header "n m [fmt [ncon]]", then one line
// per vertex (blank for an isolated vertex) with 1-based neighbours; '%' lines are comments.
// fmt is three digits "sve": s = a vertex size first on each line (read and ignored), v = a vertex
// weight, e = a weight after each neighbour; 0, 1, 10, 11, 100, 101, 110, 111 are accepted. ncon > 1
// (multi-constraint) is refused. The adjacency lists must hold exactly 2m entries.
Result<Graph> parse_metis_graph(std::string_view text, const std::string& source_name,
                                GraphBuildStats* stats = nullptr);

// One edge per line: "u v" or "u v w" (w >= 1; either every line has a weight or none does),
// 0-based ids >= 0, separated by spaces or tabs. '#' and '%' start comment lines. The vertex count
// is the largest id + 1 (an id never mentioned is an isolated vertex). Edges may be directed; they
// are symmetrised.
Result<Graph> parse_edge_list(std::string_view text, const std::string& source_name,
                              GraphBuildStats* stats = nullptr);

// Reads `path` and picks the parser by extension: .mtx -> Matrix Market, .graph / .metis -> METIS,
// .edges / .el / .txt -> edge list. Another extension fails naming the accepted ones.
Result<Graph> read_graph_file(const std::string& path, GraphBuildStats* stats = nullptr);

}  // namespace tessera::graphdata
