// Block tilings: planning which node computes which box of the m x n x k iteration space of
// C = A x B (C is m x n, A is m x k, B is k x n). Splitting C into 2D rectangles, or the whole
// space into 3D boxes, lets each node receive less of A and B than full-width row blocks do.
// Plans are plain values the caller owns; nothing is kept between calls.
// Pure functions, thread-safe, no I/O.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::partition {

// A box of the m x n x k iteration space: C[row_begin.., col_begin..] += A[rows, k_begin..] * B[k_begin.., cols].
struct Block {
  uint64_t row_begin = 0, rows = 0;
  uint64_t col_begin = 0, cols = 0;
  uint64_t k_begin = 0, depth = 0;
  uint64_t volume() const { return rows * cols * depth; }  // multiply-adds
  bool operator==(const Block&) const = default;
};
// One entry per node (same order as the weights); a node may own zero, one or several blocks.
using NodeBlocks = std::vector<std::vector<Block>>;

enum class Layout { kRows, kColumnBased, kSquareCorner, kRecursive3d };

// "rows", "2d", "square-corner", "3d".
std::string_view layout_name(Layout layout);

// Accepts the names above; anything else fails (kInvalidArgument) listing the valid ones.
Result<Layout> parse_layout(std::string_view name);

// Splits the space among nodes in proportion to their weights (w_i below: normalised to sum 1).
// No block is empty; a node with weight 0 gets none. Volume bounds hold for every m, n, k.
// kRows: proportional_rows(m, weights); one full-width, full-depth block per node.
//   |volume_i - w_i*m*n*k| < n*k.
// kColumnBased: Beaumont, Boudet, Rastello and Robert's column-based 2D partition, full depth.
//   Nodes sorted by weight are grouped into contiguous columns; a column's width is proportional
//   to its weight, a node's height within it to the node's weight; a dynamic program picks the
//   grouping with the least sum of half-perimeters, sum over columns of (nodes * width + m)
//   with widths in columns of C (for m = n, n times the unit-square (nodes * width + 1)).
//   Widths and heights by proportional_rows. |volume_i - w_i*m*n*k| < (m + n)*k.
// kSquareCorner: one fast node (w > 1/2) and up to three slow ones: each slow node gets a square
//   of side round(sqrt(w_i*m*n)) in its own corner of C, the fast node the rest as a few
//   rectangles; full depth. Slow: |volume_i - w_i*m*n*k| <= (sqrt(w_i*m*n) + 1/4)*k; the fast
//   node's error is at most the sum of the slow ones'. Fails (kInvalidArgument, saying why) when
//   no node has more than half the weight, more than three others have weight > 0, a square is
//   wider than min(m, n), or the squares would overlap.
// kRecursive3d: CARMA-style recursive bisection, heterogeneous: the nodes, heaviest first, are
//   split into two contiguous groups with weight sums as equal as possible; the box is cut along
//   its largest dimension (ties: rows, cols, depth) in proportion to the groups' weights, rounded,
//   each side >= 1; each group recurses; one node gets the box (a 1x1x1 box goes to the heaviest
//   node of the group). Nodes may own the same C cells at different k ranges: they produce
//   partial sums the caller adds. |volume_i - w_i*m*n*k| < L*(m*n*k)^(2/3), L = bisection levels
//   above node i <= (nodes with weight > 0) - 1.
// All fail (kInvalidArgument) when m, n or k is 0, m*n*k overflows 64 bits, or as
// normalise_weights does (no weights, a negative, NaN or infinite weight, all zero).
Result<NodeBlocks> tile_blocks(Layout layout, uint64_t m, uint64_t n, uint64_t k, std::span<const double> weights);

// OK iff the blocks cover every (i, j, l) of [0,m) x [0,n) x [0,k) exactly once: every block
// non-empty and inside the space, no two overlapping, volumes summing to m*n*k. Otherwise
// kInvalidArgument naming the first offending block(s) by node and index (for a gap: how much
// is covered). O(blocks^2).
Status check_cover(const NodeBlocks& blocks, uint64_t m, uint64_t n, uint64_t k);

// Elements of A and B node i must receive: sum over its blocks of rows*depth + depth*cols, the
// communication volume that 2D and 3D layouts reduce. One entry per node.
std::vector<uint64_t> input_elements(const NodeBlocks& blocks);

}  // namespace tessera::partition
