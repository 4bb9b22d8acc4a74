#include "tessera/core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Median, OddCountIsTheMiddleValue) {
  EXPECT_EQ(median({7.0}), 7.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({5.0, -1.0, 9.0, 9.0, 0.5}), 5.0);
}

TEST(Median, EvenCountIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_EQ(median({1.0, 2.0}), 1.5);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({2.0, 2.0, 2.0, 10.0}), 2.0);
}

TEST(Median, NoValuesIsNotANumber) { EXPECT_TRUE(std::isnan(median({}))); }

// Against the definition (sort, take the middle) on random data of many lengths.
TEST(Median, AgreesWithSortingOnRandomData) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> value(-100.0, 100.0);
  for (std::size_t count = 1; count <= 40; ++count) {
    std::vector<double> values(count);
    for (double& v : values) v = value(rng);
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t mid = count / 2;
    const double expected = count % 2 == 1 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
    EXPECT_EQ(median(values), expected) << count << " values";
  }
}

TEST(MeanWithoutSlowest, LeavesOutOneSmallestValue) {
  EXPECT_TRUE(std::isnan(mean_without_slowest({})));
  EXPECT_EQ(mean_without_slowest({5.0}), 5.0);
  EXPECT_EQ(mean_without_slowest({1.0, 3.0}), 3.0);
  EXPECT_EQ(mean_without_slowest({4.0, 0.5, 2.0, 6.0}), 4.0);
  EXPECT_EQ(mean_without_slowest({2.0, 2.0, 5.0}), 3.5);  // one of the equal smallest goes
}

}  // namespace
}  // namespace tessera
