#include "tessera/partition/block_tiling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/partition/row_partition.hpp"

namespace tessera::partition {
namespace {

constexpr Layout kAllLayouts[] = {Layout::kRows, Layout::kColumnBased, Layout::kSquareCorner, Layout::kRecursive3d};

struct Space {
  uint64_t m, n, k;
};

std::string describe(const NodeBlocks& blocks) {
  std::string out;
  for (std::size_t node = 0; node < blocks.size(); ++node) {
    out += "\n  node " + std::to_string(node) + ":";
    for (const Block& b : blocks[node]) {
      out += " [" + std::to_string(b.row_begin) + "+" + std::to_string(b.rows) + ", " + std::to_string(b.col_begin) +
             "+" + std::to_string(b.cols) + ", " + std::to_string(b.k_begin) + "+" + std::to_string(b.depth) + "]";
    }
  }
  return out;
}

uint64_t node_volume(const std::vector<Block>& blocks) {
  uint64_t volume = 0;
  for (const Block& b : blocks) volume += b.volume();
  return volume;
}

uint64_t total(const std::vector<uint64_t>& values) { return std::accumulate(values.begin(), values.end(), uint64_t{0}); }

// The per-node bounds stated in block_tiling.hpp on |volume_i - w_i*m*n*k|.
std::vector<double> volume_bounds(Layout layout, const Space& s, const std::vector<double>& pw) {
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  const auto positive = static_cast<double>(std::count_if(pw.begin(), pw.end(), [](double w) { return w > 0; }));
  std::vector<double> bounds(pw.size());
  double slow_sum = 0;
  for (std::size_t i = 0; i < pw.size(); ++i) {
    switch (layout) {
      case Layout::kRows: bounds[i] = n * k; break;
      case Layout::kColumnBased: bounds[i] = (m + n) * k; break;
      case Layout::kSquareCorner:
        bounds[i] = (std::sqrt(pw[i] * m * n) + 0.25) * k;
        if (pw[i] <= 0.5) slow_sum += bounds[i];
        break;
      case Layout::kRecursive3d: bounds[i] = (positive - 1) * std::pow(m * n * k, 2.0 / 3.0); break;
    }
  }
  if (layout == Layout::kSquareCorner) {
    for (std::size_t i = 0; i < pw.size(); ++i) {
      if (pw[i] > 0.5) bounds[i] = slow_sum;
    }
  }
  return bounds;
}

// Exact cover, one entry per node, nothing for zero weights, each volume within its bound.
void expect_valid_plan(Layout layout, const Space& s, const std::vector<double>& weights, const NodeBlocks& blocks) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
               " k=" + std::to_string(s.k) + " plan:" + describe(blocks));
  ASSERT_EQ(blocks.size(), weights.size());
  const Status cover = check_cover(blocks, s.m, s.n, s.k);
  EXPECT_TRUE(cover.is_ok()) << cover.to_string();
  auto pw = normalise_weights(weights);
  ASSERT_TRUE(pw.is_ok());
  const std::vector<double> bounds = volume_bounds(layout, s, *pw);
  const double space = static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0) {
      EXPECT_TRUE(blocks[i].empty()) << "node " << i << " has weight 0";
    }
    const double error = std::abs(static_cast<double>(node_volume(blocks[i])) - (*pw)[i] * space);
    EXPECT_LE(error, bounds[i] + 1e-9 * space) << "node " << i << " weight " << (*pw)[i];
  }
}

std::vector<double> random_weights(std::mt19937& rng) {
  const std::size_t parts = 1 + rng() % 9;
  std::vector<double> weights(parts);
  for (double& w : weights) w = rng() % 4 == 0 ? 0.0 : static_cast<double>(rng() % 1000 + 1) / 100.0;
  // Every third vector has one node heavier than all others together, so square-corner applies.
  const std::size_t boss = rng() % parts;
  if (rng() % 3 == 0) {
    weights[boss] = 0;
    weights[boss] = std::accumulate(weights.begin(), weights.end(), 0.0) + 1.0 + static_cast<double>(rng() % 20);
  } else if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) {
    weights[boss] = 1;
  }
  return weights;
}

TEST(BlockTiling, EveryLayoutCoversExactlyOnceWithinTheVolumeBound) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<uint64_t> tiny(1, 7);
  int square_corner_plans = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<double> weights = random_weights(rng);
    std::vector<Space> spaces = {{tiny(rng), tiny(rng), tiny(rng)}, {1001, 517, 77}, {77, 1001, 517}};
    if (trial % 10 == 0) spaces.push_back({517, 77, 1001});
    for (const Space& s : spaces) {
      for (Layout layout : kAllLayouts) {
        auto plan = tile_blocks(layout, s.m, s.n, s.k, weights);
        if (layout == Layout::kSquareCorner && !plan.is_ok()) {
          EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
          EXPECT_NE(plan.status().message().find("square"), std::string::npos) << plan.status().message();
          continue;
        }
        ASSERT_TRUE(plan.is_ok()) << layout_name(layout) << ": " << plan.status().to_string();
        if (layout == Layout::kSquareCorner) ++square_corner_plans;
        expect_valid_plan(layout, s, weights, *plan);
      }
    }
  }
  EXPECT_GT(square_corner_plans, 100);
}

TEST(BlockTiling, TinySpacesWithManyNodes) {
  // More nodes than cells: most get nothing, the cover must still be exact.
  const std::vector<double> weights = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (uint64_t m = 1; m <= 3; ++m) {
    for (uint64_t n = 1; n <= 3; ++n) {
      for (uint64_t k = 1; k <= 3; ++k) {
        for (Layout layout : {Layout::kRows, Layout::kColumnBased, Layout::kRecursive3d}) {
          auto plan = tile_blocks(layout, m, n, k, weights);
          ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
          expect_valid_plan(layout, {m, n, k}, weights, *plan);
        }
      }
    }
  }
}

TEST(BlockTiling, RejectsBadInputsForEveryLayout) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> good = {1, 2};
  struct Case {
    Space space;
    std::vector<double> weights;
    std::string phrase;
  };
  const uint64_t big = uint64_t{1} << 22;
  const std::vector<Case> cases = {
      {{0, 5, 5}, good, "m=0"},        {{5, 0, 5}, good, "n=0"},          {{5, 5, 0}, good, "k=0"},
      {{big, big, big}, good, "overflows"}, {{5, 5, 5}, {}, "no weights"}, {{5, 5, 5}, {1, -1}, "negative"},
      {{5, 5, 5}, {nan, 1}, "not finite"}, {{5, 5, 5}, {0, 0}, "all 2 weights are zero"},
  };
  for (Layout layout : kAllLayouts) {
    for (const Case& c : cases) {
      auto plan = tile_blocks(layout, c.space.m, c.space.n, c.space.k, c.weights);
      ASSERT_FALSE(plan.is_ok()) << layout_name(layout) << " expected failure with '" << c.phrase << "'";
      EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(plan.status().message().find(c.phrase), std::string::npos) << plan.status().message();
    }
  }
}

TEST(BlockTiling, RowsAreProportionalRows) {
  const std::vector<double> weights = {1, 0, 3, 4};
  auto plan = tile_blocks(Layout::kRows, 10, 7, 5, weights);
  ASSERT_TRUE(plan.is_ok());
  const NodeBlocks expected = {{{0, 1, 0, 7, 0, 5}}, {}, {{1, 4, 0, 7, 0, 5}}, {{5, 5, 0, 7, 0, 5}}};
  EXPECT_EQ(*plan, expected) << describe(*plan);
}

TEST(ColumnBased, FourEqualNodesMakeATwoByTwoGridAndMoveLessThanRows) {
  const uint64_t size = 2048;
  const std::vector<double> weights(4, 1.0);
  auto grid = tile_blocks(Layout::kColumnBased, size, size, size, weights);
  auto rows = tile_blocks(Layout::kRows, size, size, size, weights);
  ASSERT_TRUE(grid.is_ok() && rows.is_ok());
  for (const std::vector<Block>& node : *grid) {
    ASSERT_EQ(node.size(), 1u) << describe(*grid);
    EXPECT_EQ(node[0].rows, 1024u);
    EXPECT_EQ(node[0].cols, 1024u);
    EXPECT_EQ(node[0].depth, size);
  }
  // 4 * 2048 * (1024 + 1024) against 4 * 2048 * (512 + 2048).
  EXPECT_EQ(total(input_elements(*grid)), 4 * size * 2048);
  EXPECT_EQ(total(input_elements(*rows)), 4 * size * 2560);
}

TEST(ColumnBased, OneFastThreeSlowMovesLessThanRows) {
  const uint64_t size = 2048;
  const std::vector<double> weights = {1, 0.25, 0.25, 0.25};
  auto grid = tile_blocks(Layout::kColumnBased, size, size, size, weights);
  auto rows = tile_blocks(Layout::kRows, size, size, size, weights);
  ASSERT_TRUE(grid.is_ok() && rows.is_ok());
  expect_valid_plan(Layout::kColumnBased, {size, size, size}, weights, *grid);
  EXPECT_LT(total(input_elements(*grid)), total(input_elements(*rows))) << describe(*grid);
}

TEST(ColumnBased, FlatMatrixIsSplitAlongItsColumns) {
  // Half-perimeters weighted by m and n: on a 1 x 1000 C the best grouping is one column each.
  auto plan = tile_blocks(Layout::kColumnBased, 1, 1000, 8, std::vector<double>(4, 1.0));
  ASSERT_TRUE(plan.is_ok());
  for (const std::vector<Block>& node : *plan) {
    ASSERT_EQ(node.size(), 1u) << describe(*plan);
    EXPECT_EQ(node[0].rows, 1u);
    EXPECT_EQ(node[0].cols, 250u);
  }
}

TEST(SquareCorner, OneFastTwoSlowGetSquaresInOppositeCorners) {
  const std::vector<double> weights = {1, 0.1, 0.1};
  auto plan = tile_blocks(Layout::kSquareCorner, 1000, 1000, 10, weights);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  expect_valid_plan(Layout::kSquareCorner, {1000, 1000, 10}, weights, *plan);
  // side = round(sqrt(1e6 / 12)) = round(288.68).
  const NodeBlocks& blocks = *plan;
  ASSERT_EQ(blocks[1].size(), 1u);
  ASSERT_EQ(blocks[2].size(), 1u);
  EXPECT_EQ(blocks[1][0], (Block{711, 289, 711, 289, 0, 10}));
  EXPECT_EQ(blocks[2][0], (Block{0, 289, 0, 289, 0, 10}));
  EXPECT_GE(blocks[0].size(), 2u);
  EXPECT_LE(blocks[0].size(), 4u);
}

TEST(SquareCorner, RefusesWhenItDoesNotApply) {
  struct Case {
    Space space;
    std::vector<double> weights;
    std::string phrase;
  };
  const std::vector<Case> cases = {
      {{100, 100, 1}, {1, 1}, "square-corner needs one node with more than half the weight"},
      {{100, 100, 1}, {5, 1, 1, 1, 1}, "at most 3 slow ones"},
      {{10, 1000, 1}, {1, 0.5}, "does not fit"},
      {{100, 400, 1}, {1, 0.3, 0.3, 0.3}, "the squares would overlap"},
  };
  for (const Case& c : cases) {
    auto plan = tile_blocks(Layout::kSquareCorner, c.space.m, c.space.n, c.space.k, c.weights);
    ASSERT_FALSE(plan.is_ok()) << describe(*plan);
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(c.phrase), std::string::npos) << plan.status().message();
  }
}

bool splits_depth(const NodeBlocks& blocks, uint64_t k) {
  for (const std::vector<Block>& node : blocks) {
    for (const Block& b : node) {
      if (b.depth < k) return true;
    }
  }
  return false;
}

TEST(Recursive3d, SplitsDepthOnlyWhenItIsTheLargestDimension) {
  const std::vector<double> weights(4, 1.0);
  auto deep = tile_blocks(Layout::kRecursive3d, 64, 64, 4096, weights);
  ASSERT_TRUE(deep.is_ok());
  expect_valid_plan(Layout::kRecursive3d, {64, 64, 4096}, weights, *deep);
  EXPECT_TRUE(splits_depth(*deep, 4096)) << describe(*deep);

  auto wide = tile_blocks(Layout::kRecursive3d, 4096, 4096, 64, weights);
  ASSERT_TRUE(wide.is_ok());
  expect_valid_plan(Layout::kRecursive3d, {4096, 4096, 64}, weights, *wide);
  EXPECT_FALSE(splits_depth(*wide, 64)) << describe(*wide);
}

TEST(Recursive3d, EightEqualNodesOnACubeGetOctants) {
  auto plan = tile_blocks(Layout::kRecursive3d, 64, 64, 64, std::vector<double>(8, 1.0));
  ASSERT_TRUE(plan.is_ok());
  for (const std::vector<Block>& node : *plan) {
    ASSERT_EQ(node.size(), 1u) << describe(*plan);
    EXPECT_EQ(node[0].rows, 32u);
    EXPECT_EQ(node[0].cols, 32u);
    EXPECT_EQ(node[0].depth, 32u);
  }
  // Each node receives 32*(32+32) elements instead of the 2D grid's larger panels.
  EXPECT_EQ(total(input_elements(*plan)), 8u * 32 * 64);
}

TEST(BlockTiling, Deterministic) {
  const std::vector<double> weights = {0.3, 1.7, 9.0, 0.0, 1.0, 1.0};
  for (Layout layout : {Layout::kRows, Layout::kColumnBased, Layout::kRecursive3d}) {
    auto first = tile_blocks(layout, 1001, 517, 77, weights);
    ASSERT_TRUE(first.is_ok());
    for (int run = 0; run < 5; ++run) {
      auto again = tile_blocks(layout, 1001, 517, 77, weights);
      ASSERT_TRUE(again.is_ok());
      EXPECT_EQ(*again, *first) << layout_name(layout);
    }
  }
}

TEST(CheckCover, AcceptsAnExactCover) {
  const NodeBlocks blocks = {{{0, 2, 0, 3, 0, 1}, {0, 2, 0, 3, 1, 3}}, {}, {{2, 1, 0, 3, 0, 4}}};
  EXPECT_TRUE(check_cover(blocks, 3, 3, 4).is_ok()) << check_cover(blocks, 3, 3, 4).to_string();
}

TEST(CheckCover, RejectsOverlapGapOutOfRangeAndEmptyBlocks) {
  struct Case {
    NodeBlocks blocks;
    std::vector<std::string> phrases;
  };
  const std::vector<Case> cases = {
      {{{{0, 2, 0, 3, 0, 4}}, {{1, 2, 0, 3, 0, 4}}},
       {"node 0 block 0 (rows [0,2) cols [0,3) k [0,4))", "node 1 block 0 (rows [1,3)", "overlap"}},
      {{{{0, 2, 0, 3, 0, 4}}, {{2, 1, 0, 3, 0, 3}}}, {"cover 33 of the 36 multiply-adds"}},
      {{{{0, 3, 0, 3, 0, 4}}, {{0, 3, 3, 1, 0, 4}}}, {"node 1 block 0", "cols [3,4)", "outside the 3 x 3 x 4 space"}},
      {{{{0, 3, 0, 3, 0, 4}, {1, 0, 0, 3, 0, 4}}}, {"node 0 block 1", "is empty"}},
  };
  for (const Case& c : cases) {
    const Status status = check_cover(c.blocks, 3, 3, 4);
    ASSERT_FALSE(status.is_ok()) << describe(c.blocks);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    for (const std::string& phrase : c.phrases) {
      EXPECT_NE(status.message().find(phrase), std::string::npos) << "missing '" << phrase << "' in " << status.message();
    }
  }
}

TEST(InputElements, SumsPanelsOfAAndB) {
  const NodeBlocks blocks = {{{0, 2, 0, 3, 0, 4}, {0, 2, 0, 3, 4, 1}}, {}, {{2, 1, 0, 3, 0, 5}}};
  EXPECT_EQ(input_elements(blocks), (std::vector<uint64_t>{4 * (2 + 3) + 1 * (2 + 3), 0, 5 * (1 + 3)}));
}

TEST(Layout, NamesRoundTripAndUnknownNamesListValidOnes) {
  for (Layout layout : kAllLayouts) {
    auto parsed = parse_layout(layout_name(layout));
    ASSERT_TRUE(parsed.is_ok()) << layout_name(layout);
    EXPECT_EQ(*parsed, layout);
  }
  EXPECT_EQ(layout_name(Layout::kColumnBased), "2d");
  auto bad = parse_layout("diagonal");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown layout \"diagonal\"; valid layouts: rows, 2d, square-corner, 3d");
}

}  // namespace
}  // namespace tessera::partition
