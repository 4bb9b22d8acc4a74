#include "tessera/balance/multiply/plan_work.hpp"
#include "tessera/gemm/wire_io.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace tessera::balance::multiply {

namespace tp = tessera::transport;
using partition::Block;

JobCounts count_jobs(const Work& work, std::size_t nodes) {
  JobCounts counts{std::vector<uint64_t>(nodes, 0), 0};
  for (const WorkTile& tile : work.tiles) {
    if (tile.parent) continue;
    counts.total += tile.pieces.size();
    if (tile.assigned >= 0 && static_cast<std::size_t>(tile.assigned) < nodes) {
      counts.per_node[static_cast<std::size_t>(tile.assigned)] += tile.pieces.size();
    }
  }
  return counts;
}

Result<Work> build_work(const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b) {
  Work work;
  const std::size_t nodes = plan.shares.size();
  if (plan.policy == plan::Policy::kDynamic) {
    work.keep_pieces = true;
    work.speculate = true;
    for (const Block& block : plan::cut_row_tiles(plan, nodes)) work.tiles.push_back({block, -1, false, {}, {}, {}});
  } else {
    for (std::size_t i = 0; i < nodes; ++i) {
      for (const Block& block : plan.blocks_of(i)) {
        work.tiles.push_back({block, static_cast<int>(i), block.depth != plan.k, {}, {}, {}});
      }
    }
    partition::NodeBlocks boxes(nodes);
    for (std::size_t i = 0; i < nodes; ++i) boxes[i] = plan.blocks_of(i);
    if (Status cover = partition::check_cover(boxes, plan.m, plan.n, plan.k); !cover.is_ok()) {
      return cover.with_context("the plan does not cover C exactly once: ");
    }
    // Spare row pieces of every tile, one for each other node the plan gives work, sized by the
    // shares the policy aimed for: if the tile's node is lost, each survivor redoes the part of it
    // that its share says it can, so they finish together (and each gets B once for it) instead
    // of a slow node taking as many rows as a fast one.
    const std::size_t planned = work.tiles.size();
    for (std::size_t t = 0; t < planned; ++t) {
      const Block block = work.tiles[t].block;
      const int owner = work.tiles[t].assigned;
      std::vector<std::size_t> others;
      double others_weight = 0.0;
      for (std::size_t j = 0; j < nodes; ++j) {
        if (static_cast<int>(j) == owner || plan.shares[j].weight <= 0.0) continue;
        others.push_back(j);
        others_weight += plan.shares[j].weight;
      }
      if (others.size() < 2) continue;  // one survivor (or none) takes the tile whole
      double weight_before = 0.0;
      uint64_t row = block.row_begin;
      for (std::size_t j : others) {
        weight_before += plan.shares[j].weight;
        const auto end = block.row_begin + static_cast<uint64_t>(std::llround(static_cast<double>(block.rows) *
                                                                              weight_before / others_weight));
        if (end <= row) continue;  // a share too small for a whole row of this tile
        Block piece = block;
        piece.row_begin = row;
        piece.rows = end - row;
        work.tiles.push_back({piece, static_cast<int>(j), work.tiles[t].delta, {}, {}, t});
        row = end;
      }
    }
  }

  std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>, std::size_t> piece_index;
  for (WorkTile& tile : work.tiles) {
    const Block& box = tile.block;
    if (tile.delta && !tile.parent) {  // spare pieces send rows of their parent's packed A
      tile.a_packed.resize(box.rows * box.depth);
      for (uint64_t r = 0; r < box.rows; ++r) {
        std::copy_n(a.row(box.row_begin + r) + box.k_begin, box.depth, tile.a_packed.data() + r * box.depth);
      }
    }
    for (uint64_t k = box.k_begin; k < box.k_begin + box.depth;) {
      const uint64_t panel_end = (k / plan.panel_width + 1) * plan.panel_width;
      const uint64_t end = std::min(panel_end, box.k_begin + box.depth);
      const auto key = std::make_tuple(k, end - k, box.col_begin, box.cols);
      auto [it, inserted] = piece_index.emplace(key, work.pieces.size());
      if (inserted) work.pieces.push_back(BPiece{k, end - k, box.col_begin, box.cols, {}, {}, nullptr});
      tile.pieces.push_back(it->second);
      k = end;
    }
  }
  if (work.pieces.size() >= kTileIdBase - kFirstPieceId || work.tiles.size() >= (UINT32_MAX - kTileIdBase) / 2) {
    return invalid_argument(fmt::format("the plan needs {} pieces of B and {} tiles; use wider panels or fewer tiles",
                                        work.pieces.size(), work.tiles.size()));
  }
  for (std::size_t p = 0; p < work.pieces.size(); ++p) {
    BPiece& piece = work.pieces[p];
    if (piece.cols == plan.n) {
      piece.data = b.row(piece.k_begin);
    } else {
      piece.packed.resize(piece.depth * piece.cols);
      for (uint64_t r = 0; r < piece.depth; ++r) {
        std::copy_n(b.row(piece.k_begin + r) + piece.col_begin, piece.cols, piece.packed.data() + r * piece.cols);
      }
      piece.data = piece.packed.data();
    }
    piece.store = gemm::encode_store(static_cast<uint32_t>(kFirstPieceId + p), static_cast<uint32_t>(piece.depth),
                                     static_cast<uint32_t>(piece.cols),
                                     std::span<const double>(piece.data, piece.depth * piece.cols));
  }
  return work;
}

}  // namespace tessera::balance::multiply
