// Work: what the multiply driver hands out, built from a Plan before anything is sent. A plan
// becomes tiles (boxes of the m x n x k space, each owned by a node under a static plan, or
// pulled by whoever asks under the dynamic one) and the pieces of B they read, each encoded once.
// Static tiles carry spare row pieces, dormant unless their node is lost. Values; build_work is a
// pure function (no sockets), so plans' work can be checked in unit tests.
// A Work's full-width B pieces point into B's memory: the caller keeps B alive and unchanged
// while the Work is used.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/balance/plan/plan.hpp"
#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/partition/block_tiling.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/gemm/client.hpp"

namespace tessera::balance::multiply {

// Tile ids on the worker: B pieces from kFirstPieceId, then A of tile t and its C above
// kTileIdBase (kept apart from the profiler's ids).
inline constexpr uint32_t kFirstPieceId = 16;
inline constexpr uint32_t kTileIdBase = 0x100000;

inline uint32_t a_tile_id(uint64_t tile) { return static_cast<uint32_t>(kTileIdBase + 2 * tile); }
inline uint32_t c_tile_id(uint64_t tile) { return static_cast<uint32_t>(kTileIdBase + 2 * tile + 1); }

// A slab of B: rows [k_begin, k_begin + depth) of one panel, columns [col_begin, col_begin + cols).
// Encoded once and written to every node that needs it from the same bytes; full-width pieces
// point into B itself, narrower ones into one packed copy made up front.
struct BPiece {
  uint64_t k_begin = 0, depth = 0, col_begin = 0, cols = 0;
  gemm::EncodedStore store;  // its STORE, encoded once for every node that reads it
  std::vector<double> packed;
  const double* data = nullptr;
  std::size_t bytes() const { return depth * cols * sizeof(double); }
};

// One unit of work: a box of the m x n x k space, C[box rows, box cols] += A[rows, ks] * B[ks, cols].
struct WorkTile {
  partition::Block block;
  int assigned = -1;                // static plans: the node it belongs to (a spare: the node
                                    // that redoes it); -1: whoever asks
  bool delta = false;               // covers part of k: the result is a partial sum added into C
  std::vector<double> a_packed;     // A[rows, ks] when the box covers part of k; else sent from A
  std::vector<std::size_t> pieces;  // the B pieces it reads, in k order (one job each)
  // Static plans: a spare row piece of that tile, dormant unless the tile's node is lost. A
  // tile's spares cut its rows in order, one per other node with a share, sized by the shares.
  std::optional<std::size_t> parent;
};

struct Work {
  std::vector<WorkTile> tiles;
  std::vector<BPiece> pieces;
  bool keep_pieces = false;  // dynamic: a node keeps B's pieces for the tiles it pulls later
  bool speculate = false;    // dynamic: idle nodes copy running tiles near the end
};

// The jobs a Work takes when no node is lost: one per tile and B piece it reads (each returns one
// credit). per_node[i] counts the tiles a static plan gives node i; a dynamic plan's tiles go to
// whoever asks, so its per_node are all 0 and only total is known. Spare pieces are not counted:
// they run only in place of a lost node's tile, which then needs more jobs than planned.
struct JobCounts {
  std::vector<uint64_t> per_node;
  uint64_t total = 0;
  bool operator==(const JobCounts&) const = default;
};
JobCounts count_jobs(const Work& work, std::size_t nodes);

// The tiles of a plan and the B pieces they read. k is cut at the plan's panel boundaries, so
// boxes that split k anywhere still share whole pieces with their neighbours where they can.
// REQUIRES: a is m x k and b is k x n, both contiguous. Fails when the plan does not cover C
// exactly once or needs more tiles or pieces than the worker's tile ids can name.
Result<Work> build_work(const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b);

}  // namespace tessera::balance::multiply
