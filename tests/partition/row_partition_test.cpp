#include "tessera/partition/row_partition.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::partition {
namespace {

const std::vector<uint64_t> kRowCounts = {0, 1, 2, 3, 7, 16, 97, 997, 1000, 1000003};

// Every row exactly once, contiguous, in node order.
void expect_covers(uint64_t n, const std::vector<RowBlock>& blocks, std::size_t parts) {
  ASSERT_EQ(blocks.size(), parts) << to_string(blocks);
  uint64_t next = 0;
  for (const RowBlock& block : blocks) {
    EXPECT_EQ(block.begin, next) << "n=" << n << " plan " << to_string(blocks);
    next = block.end();
  }
  EXPECT_EQ(next, n) << "plan " << to_string(blocks);
}

void expect_proportional(uint64_t n, const std::vector<double>& weights) {
  SCOPED_TRACE("n=" + std::to_string(n) + " parts=" + std::to_string(weights.size()));
  auto plan = proportional_rows(n, weights);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  expect_covers(n, *plan, weights.size());
  auto pw = normalise_weights(weights);
  ASSERT_TRUE(pw.is_ok());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double ideal = static_cast<double>(n) * (*pw)[i];
    EXPECT_LT(std::abs(static_cast<double>((*plan)[i].count) - ideal), 1.0)
        << "node " << i << " weight " << weights[i] << " plan " << to_string(*plan);
    if (weights[i] == 0) {
      EXPECT_EQ((*plan)[i].count, 0u) << "node " << i;
    }
  }
}

TEST(NormaliseWeights, SumsToOne) {
  auto pw = normalise_weights(std::vector<double>{1, 3, 4});
  ASSERT_TRUE(pw.is_ok());
  EXPECT_DOUBLE_EQ((*pw)[0], 0.125);
  EXPECT_DOUBLE_EQ((*pw)[1], 0.375);
  EXPECT_DOUBLE_EQ((*pw)[2], 0.5);
}

TEST(NormaliseWeights, HugeWeightsStayFinite) {
  const double big = std::numeric_limits<double>::max();
  auto pw = normalise_weights(std::vector<double>{big, big});
  ASSERT_TRUE(pw.is_ok());
  EXPECT_DOUBLE_EQ((*pw)[0], 0.5);
  EXPECT_DOUBLE_EQ((*pw)[1], 0.5);
}

struct BadWeights {
  std::vector<double> weights;
  std::vector<std::string> phrases;
};

TEST(NormaliseWeights, RejectsBadWeightsNamingIndexAndValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<BadWeights> cases = {
      {{1, -2, 3}, {"weight[1]", "-2", "negative"}},
      {{1, 2, nan}, {"weight[2]", "nan", "not finite"}},
      {{inf, 1}, {"weight[0]", "inf", "not finite"}},
      {{1, -inf}, {"weight[1]", "-inf", "not finite"}},
      {{0, 0, 0}, {"all 3 weights are zero"}},
      {{}, {"no weights"}},
  };
  for (const BadWeights& c : cases) {
    auto pw = normalise_weights(c.weights);
    ASSERT_FALSE(pw.is_ok());
    EXPECT_EQ(pw.status().code(), StatusCode::kInvalidArgument);
    for (const std::string& phrase : c.phrases) {
      EXPECT_NE(pw.status().message().find(phrase), std::string::npos)
          << "missing '" << phrase << "' in: " << pw.status().message();
    }
    auto plan = proportional_rows(10, c.weights);
    ASSERT_FALSE(plan.is_ok());
    EXPECT_EQ(plan.status().message(), pw.status().message());
  }
}

TEST(ProportionalRows, TinettiLuqueExample) {
  // Quotas 1.25, 3.75, 5.0: floors 1+3+5 = 9, the one leftover row goes to the 0.75 fraction.
  auto plan = proportional_rows(10, std::vector<double>{1, 3, 4});
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(to_string(*plan), "[0,1) [1,5) [5,10)");
}

TEST(ProportionalRows, TiesGoToTheLowerIndex) {
  auto plan = proportional_rows(7, std::vector<double>{1, 1, 1});
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(to_string(*plan), "[0,3) [3,5) [5,7)");
  auto small = proportional_rows(2, std::vector<double>{1, 1, 1, 1, 1});
  ASSERT_TRUE(small.is_ok());
  EXPECT_EQ(to_string(*small), "[0,1) [1,2) [2,2) [2,2) [2,2)");
}

TEST(ProportionalRows, EqualWeightsMatchEvenRows) {
  for (std::size_t parts = 1; parts <= 16; ++parts) {
    for (uint64_t n : kRowCounts) {
      auto plan = proportional_rows(n, std::vector<double>(parts, 2.5));
      ASSERT_TRUE(plan.is_ok());
      EXPECT_EQ(*plan, even_rows(n, parts)) << "n=" << n << " parts=" << parts;
    }
  }
}

TEST(ProportionalRows, SweepSpeedRatios) {
  for (std::size_t parts = 1; parts <= 16; ++parts) {
    for (double ratio : {1.0, 1.5, 2.0, 3.0, 4.0, 7.0, 16.0}) {
      // Speeds spread geometrically from 1 to `ratio`.
      std::vector<double> weights(parts);
      for (std::size_t i = 0; i < parts; ++i) {
        const double t = parts == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(parts - 1);
        weights[i] = std::pow(ratio, t);
      }
      for (uint64_t n : kRowCounts) expect_proportional(n, weights);
    }
  }
}

TEST(ProportionalRows, SweepRandomWeights) {
  std::mt19937_64 rng(20240607);
  std::uniform_int_distribution<int> spread(1, 16);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t parts = 1 + static_cast<std::size_t>(rng() % 16);
    std::vector<double> weights(parts);
    for (double& w : weights) {
      // Mix in exact zeros and tiny weights, keeping at least one positive.
      const uint64_t pick = rng() % 10;
      w = pick == 0 ? 0.0 : pick == 1 ? 1e-300 : static_cast<double>(rng() % 1000 + 1) / 16.0;
    }
    weights[rng() % parts] = spread(rng);
    for (uint64_t n : kRowCounts) expect_proportional(n, weights);
    expect_proportional(rng() % 100000, weights);
  }
}

TEST(ProportionalRows, FewerRowsThanNodes) {
  for (std::size_t parts = 2; parts <= 16; ++parts) {
    std::vector<double> weights(parts);
    for (std::size_t i = 0; i < parts; ++i) weights[i] = static_cast<double>(i + 1);
    for (uint64_t n = 0; n < parts; ++n) expect_proportional(n, weights);
  }
}

TEST(ProportionalRows, ZeroWeightsGetNoRows) {
  auto plan = proportional_rows(997, std::vector<double>{0, 3, 0, 1, 0});
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ((*plan)[0].count, 0u);
  EXPECT_EQ((*plan)[2].count, 0u);
  EXPECT_EQ((*plan)[4].count, 0u);
  EXPECT_EQ((*plan)[1].count + (*plan)[3].count, 997u);
  expect_proportional(1, std::vector<double>{0, 0, 1});
}

TEST(ProportionalRows, HugeRowCounts) {
  const uint64_t big = (uint64_t{1} << 62) + 12345;
  auto plan = proportional_rows(big, std::vector<double>{1, 2, 3, 5});
  ASSERT_TRUE(plan.is_ok());
  expect_covers(big, *plan, 4);
}

TEST(ProportionalRows, Deterministic) {
  const std::vector<double> weights = {0.3, 1.7, 2.2, 0.0, 16.0, 1.0, 1.0};
  auto first = proportional_rows(1000003, weights);
  ASSERT_TRUE(first.is_ok());
  for (int run = 0; run < 5; ++run) {
    auto again = proportional_rows(1000003, weights);
    ASSERT_TRUE(again.is_ok());
    EXPECT_EQ(*again, *first);
  }
}

TEST(EvenRows, Properties) {
  for (std::size_t parts : {1, 2, 3, 7, 16}) {
    for (uint64_t n : kRowCounts) {
      const std::vector<RowBlock> blocks = even_rows(n, parts);
      expect_covers(n, blocks, parts);
      for (std::size_t i = 0; i < parts; ++i) {
        const uint64_t expected = n / parts + (i < n % parts ? 1 : 0);
        EXPECT_EQ(blocks[i].count, expected) << "n=" << n << " parts=" << parts << " i=" << i;
      }
    }
  }
}

TEST(ToString, Format) {
  EXPECT_EQ(to_string(std::vector<RowBlock>{}), "");
  EXPECT_EQ(to_string(std::vector<RowBlock>{{0, 10}, {10, 15}, {25, 0}}), "[0,10) [10,25) [25,25)");
}

}  // namespace
}  // namespace tessera::partition
