// Building a run's work from a plan, without sockets: tiles cover the m x n x k space exactly
// once, B pieces are shared where boxes meet, spare pieces split each static tile, and dynamic
// row tiles start and end small.
#include "tessera/balance/multiply/plan_work.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "tessera/balance/plan/plan.hpp"

namespace tessera::balance {
namespace {

using partition::Block;
using partition::Layout;

plan::Plan plan_of(plan::Policy policy, Layout layout, uint64_t m, uint64_t n, uint64_t k, std::vector<double> weights,
             uint64_t tile_rows = 0) {
  plan::PlanRequest request;
  request.policy = policy;
  request.layout = layout;
  request.m = m;
  request.n = n;
  request.k = k;
  request.panel_width = 16;
  request.tile_rows = tile_rows;
  request.weights = weights;
  for (std::size_t i = 0; i < weights.size(); ++i) request.node_names.push_back("n" + std::to_string(i));
  Result<plan::Plan> plan = plan::make_plan(request);
  EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
  return plan.is_ok() ? *plan : plan::Plan{};
}

// How often each (row, col, k) cell is covered by the tiles that are live at the start (no spares).
std::vector<int> coverage(const multiply::Work& work, const plan::Plan& plan) {
  std::vector<int> count(plan.m * plan.n * plan.k, 0);
  for (const multiply::WorkTile& tile : work.tiles) {
    if (tile.parent) continue;
    const Block& b = tile.block;
    for (uint64_t r = b.row_begin; r < b.row_begin + b.rows; ++r)
      for (uint64_t c = b.col_begin; c < b.col_begin + b.cols; ++c)
        for (uint64_t k = b.k_begin; k < b.k_begin + b.depth; ++k) ++count[(r * plan.n + c) * plan.k + k];
  }
  return count;
}

class WorkTest : public ::testing::TestWithParam<Layout> {};

TEST_P(WorkTest, StaticTilesCoverEveryCellOnceAndReadWholePieces) {
  const uint64_t m = 37, n = 29, k = 41;  // divisible by nothing useful
  const linalg::Matrix a = linalg::random_matrix(m, k, 3), b = linalg::random_matrix(k, n, 4);
  const plan::Plan plan = plan_of(plan::Policy::kProportional, GetParam(), m, n, k, {0.6, 0.25, 0.15});  // square-corner needs a node over half
  Result<multiply::Work> work = multiply::build_work(plan, a, b);
  ASSERT_TRUE(work.is_ok()) << work.status().to_string();
  for (int covered : coverage(*work, plan)) ASSERT_EQ(covered, 1);
  EXPECT_FALSE(work->keep_pieces);
  EXPECT_FALSE(work->speculate);

  // Every piece is used, distinct, within one panel, and its data is B's (straight or packed).
  std::set<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>> keys;
  for (const multiply::BPiece& piece : work->pieces) {
    EXPECT_TRUE(keys.emplace(piece.k_begin, piece.depth, piece.col_begin, piece.cols).second);
    EXPECT_EQ(piece.k_begin / plan.panel_width, (piece.k_begin + piece.depth - 1) / plan.panel_width);
    ASSERT_NE(piece.data, nullptr);
    for (uint64_t r = 0; r < piece.depth; ++r)
      for (uint64_t c = 0; c < piece.cols; ++c)
        ASSERT_EQ(piece.data[r * piece.cols + c], b.at(piece.k_begin + r, piece.col_begin + c));
    if (piece.cols == n) {
      EXPECT_EQ(piece.data, b.row(piece.k_begin)) << "full-width pieces are not copied";
    }
  }
  // A tile's pieces walk its k range in order, without gaps.
  for (const multiply::WorkTile& tile : work->tiles) {
    uint64_t k_next = tile.block.k_begin;
    for (std::size_t p : tile.pieces) {
      const multiply::BPiece& piece = work->pieces[p];
      EXPECT_EQ(piece.k_begin, k_next);
      EXPECT_EQ(piece.col_begin, tile.block.col_begin);
      EXPECT_EQ(piece.cols, tile.block.cols);
      k_next += piece.depth;
    }
    EXPECT_EQ(k_next, tile.block.k_begin + tile.block.depth);
    EXPECT_EQ(tile.delta, tile.block.depth != k);
  }
}

TEST_P(WorkTest, EachStaticTileHasASparePieceForEveryOtherNodeSizedByItsShare) {
  const std::vector<double> weights{0.55, 0.2, 0.15, 0.1};
  const plan::Plan plan = plan_of(plan::Policy::kProportional, GetParam(), 64, 48, 40, weights);
  const linalg::Matrix a(64, 40), b(40, 48);
  Result<multiply::Work> work = multiply::build_work(plan, a, b);
  ASSERT_TRUE(work.is_ok()) << work.status().to_string();
  std::map<std::size_t, std::vector<const multiply::WorkTile*>> spares;
  for (const multiply::WorkTile& tile : work->tiles) {
    if (tile.parent) spares[*tile.parent].push_back(&tile);
  }
  std::size_t checked = 0;
  for (std::size_t t = 0; t < work->tiles.size(); ++t) {
    const multiply::WorkTile& tile = work->tiles[t];
    if (tile.parent) continue;
    ASSERT_GE(tile.assigned, 0);
    const std::vector<const multiply::WorkTile*>& pieces = spares[t];
    uint64_t row = tile.block.row_begin;
    double others_weight = 0.0;
    for (std::size_t j = 0; j < weights.size(); ++j) others_weight += static_cast<int>(j) == tile.assigned ? 0.0 : plan.shares[j].weight;
    for (const multiply::WorkTile* piece : pieces) {  // the spares cut the tile's rows in order, all columns and ks kept
      EXPECT_NE(piece->assigned, tile.assigned) << "a spare is for another node";
      ASSERT_GE(piece->assigned, 0) << "each spare is cut for a node";
      EXPECT_EQ(piece->block.row_begin, row);
      EXPECT_EQ(piece->block.col_begin, tile.block.col_begin);
      EXPECT_EQ(piece->block.cols, tile.block.cols);
      EXPECT_EQ(piece->block.k_begin, tile.block.k_begin);
      EXPECT_EQ(piece->block.depth, tile.block.depth);
      // Its rows follow its node's share of the others' (within the rounding of a row either side).
      const double wanted = static_cast<double>(tile.block.rows) * plan.shares[piece->assigned].weight / others_weight;
      EXPECT_NEAR(static_cast<double>(piece->block.rows), wanted, 1.0) << "tile " << t << " node " << piece->assigned;
      row += piece->block.rows;
    }
    if (!pieces.empty()) {
      EXPECT_EQ(row, tile.block.row_begin + tile.block.rows);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
  // The node with the largest share gets the largest piece of a tile of the smallest.
  for (std::size_t t = 0; t < work->tiles.size(); ++t) {
    if (work->tiles[t].parent || work->tiles[t].assigned != 3 || work->tiles[t].block.rows < 20) continue;
    const auto& pieces = spares[t];
    ASSERT_EQ(pieces.size(), 3u);
    EXPECT_GT(pieces[0]->block.rows, pieces[1]->block.rows + pieces[2]->block.rows) << "0.55 against 0.2 + 0.15";
  }
}

// A node the plan gives no work (the model policy leaves a node out) gets no spare either.
TEST(Work, ANodeWithoutAShareGetsNoSparePieces) {
  const plan::Plan plan = plan_of(plan::Policy::kProportional, Layout::kRows, 60, 16, 16, {0.5, 0.5, 0.0});
  const linalg::Matrix a(60, 16), b(16, 16);
  Result<multiply::Work> work = multiply::build_work(plan, a, b);
  ASSERT_TRUE(work.is_ok()) << work.status().to_string();
  for (const multiply::WorkTile& tile : work->tiles) EXPECT_NE(tile.assigned, 2);
  for (const multiply::WorkTile& tile : work->tiles) EXPECT_FALSE(tile.parent) << "one other node with a share takes a tile whole";
}

std::string layout_test_name(const ::testing::TestParamInfo<Layout>& info) {
  std::string name(partition::layout_name(info.param));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return "layout_" + name;
}

INSTANTIATE_TEST_SUITE_P(Layouts, WorkTest,
                         ::testing::Values(Layout::kRows, Layout::kColumnBased, Layout::kSquareCorner,
                                           Layout::kRecursive3d),
                         layout_test_name);

TEST(WorkDynamic, RowTilesStartAndEndSmallAndCoverEveryRowOnce) {
  for (uint64_t m : {1u, 15u, 100u, 1001u}) {
    for (std::size_t nodes : {1u, 2u, 3u, 7u}) {
      std::vector<double> weights(nodes, 1.0);
      const plan::Plan plan = plan_of(plan::Policy::kDynamic, Layout::kRows, m, 8, 8, weights, 64);
      const std::vector<Block> tiles = plan::cut_row_tiles(plan, nodes);
      ASSERT_FALSE(tiles.empty());
      uint64_t row = 0;
      for (const Block& tile : tiles) {
        EXPECT_EQ(tile.row_begin, row);
        EXPECT_GE(tile.rows, 1u);
        EXPECT_LE(tile.rows, 64u);
        EXPECT_EQ(tile.cols, 8u);
        EXPECT_EQ(tile.depth, 8u);
        row += tile.rows;
      }
      EXPECT_EQ(row, m) << "m " << m << " nodes " << nodes;
      if (m >= 64 * (nodes + 2)) {
        EXPECT_EQ(tiles.front().rows, 16u) << "a quarter tile first";
        EXPECT_EQ(tiles.back().rows, 16u) << "and last";
      }
    }
  }
}

TEST(WorkDynamic, DynamicWorkIsPulledAndSpeculative) {
  const plan::Plan plan = plan_of(plan::Policy::kDynamic, Layout::kRows, 200, 30, 50, {1, 1}, 32);
  const linalg::Matrix a(200, 50), b(50, 30);
  Result<multiply::Work> work = multiply::build_work(plan, a, b);
  ASSERT_TRUE(work.is_ok()) << work.status().to_string();
  EXPECT_TRUE(work->keep_pieces);
  EXPECT_TRUE(work->speculate);
  for (const multiply::WorkTile& tile : work->tiles) {
    EXPECT_EQ(tile.assigned, -1);
    EXPECT_FALSE(tile.parent.has_value());
    EXPECT_EQ(tile.pieces.size(), 4u);  // ceil(50 / 16) panels, shared by every tile
  }
  EXPECT_EQ(work->pieces.size(), 4u);
}

TEST_P(WorkTest, JobCountsAreEachNodesTilesTimesTheirPieces) {
  const plan::Plan plan = plan_of(plan::Policy::kProportional, GetParam(), 64, 48, 40, {0.55, 0.2, 0.15, 0.1});
  const linalg::Matrix a(64, 40), b(40, 48);
  Result<multiply::Work> work = multiply::build_work(plan, a, b);
  ASSERT_TRUE(work.is_ok()) << work.status().to_string();
  const multiply::JobCounts counts = multiply::count_jobs(*work, plan.shares.size());
  ASSERT_EQ(counts.per_node.size(), 4u);
  uint64_t summed = 0;
  for (std::size_t node = 0; node < counts.per_node.size(); ++node) {
    uint64_t expected = 0;
    for (const multiply::WorkTile& tile : work->tiles) {
      if (!tile.parent && tile.assigned == static_cast<int>(node)) expected += tile.pieces.size();
    }
    EXPECT_EQ(counts.per_node[node], expected) << "node " << node;
    EXPECT_GT(counts.per_node[node], 0u) << "every node has a share";
    summed += counts.per_node[node];
  }
  EXPECT_EQ(counts.total, summed) << "spares are not counted: they run only for a lost node";
}

TEST(WorkDynamic, DynamicJobsAreKnownOnlyInTotal) {
  const plan::Plan plan = plan_of(plan::Policy::kDynamic, Layout::kRows, 200, 30, 50, {1, 1, 1}, 32);
  const linalg::Matrix a(200, 50), b(50, 30);
  Result<multiply::Work> work = multiply::build_work(plan, a, b);
  ASSERT_TRUE(work.is_ok()) << work.status().to_string();
  const multiply::JobCounts counts = multiply::count_jobs(*work, 3);
  EXPECT_EQ(counts.per_node, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(counts.total, 4u * work->tiles.size());  // ceil(50 / 16) pieces per tile
}

TEST(WorkIds, TileIdsNeverCollideWithPieces) {
  for (uint64_t t : {0u, 1u, 1000u}) {
    EXPECT_GT(multiply::a_tile_id(t), multiply::kFirstPieceId);
    EXPECT_NE(multiply::a_tile_id(t), multiply::c_tile_id(t));
    EXPECT_EQ(multiply::c_tile_id(t), multiply::a_tile_id(t) + 1);
  }
}

}  // namespace
}  // namespace tessera::balance
