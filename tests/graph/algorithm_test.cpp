#include "tessera/graph/algorithm.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace tessera::graph {
namespace {

TEST(Algorithm, ParsesEveryNameAndRefusesOthersListingThem) {
  for (AlgorithmKind kind : {AlgorithmKind::kPageRank, AlgorithmKind::kKatz, AlgorithmKind::kConnectedComponents,
                             AlgorithmKind::kShortestPaths}) {
    auto parsed = parse_algorithm(algorithm_name(kind));
    ASSERT_TRUE(parsed.is_ok());
    EXPECT_EQ(*parsed, kind);
  }
  auto bad = parse_algorithm("bfs");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("pagerank, katz, cc or sssp"), std::string::npos);
}

TEST(Algorithm, AccumulateOperatorsAndIdentities) {
  AlgorithmSpec cc{.kind = AlgorithmKind::kConnectedComponents};
  EXPECT_EQ(accumulate_of(cc), Accumulate::kMax);
  cc.max_label = false;
  EXPECT_EQ(accumulate_of(cc), Accumulate::kMin);
  EXPECT_TRUE(is_linear(AlgorithmSpec{.kind = AlgorithmKind::kKatz, .beta = 0.1}));
  EXPECT_FALSE(is_linear(AlgorithmSpec{.kind = AlgorithmKind::kShortestPaths, .source = 0}));
  EXPECT_EQ(accumulate(Accumulate::kMin, identity_of(Accumulate::kMin), 3.0), 3.0);
  EXPECT_EQ(accumulate(Accumulate::kMax, identity_of(Accumulate::kMax), -3.0), -3.0);
  EXPECT_EQ(accumulate(Accumulate::kSum, identity_of(Accumulate::kSum), 2.5), 2.5);
}

TEST(Algorithm, CheckSpecNamesTheFlagToFix) {
  EXPECT_TRUE(check_spec(AlgorithmSpec{}).is_ok());
  Status damping = check_spec(AlgorithmSpec{.damping = 1.0});
  EXPECT_NE(damping.message().find("--damping"), std::string::npos);
  Status beta = check_spec(AlgorithmSpec{.kind = AlgorithmKind::kKatz, .beta = 0.0});
  EXPECT_NE(beta.message().find("--beta"), std::string::npos);
  Status source = check_spec(AlgorithmSpec{.kind = AlgorithmKind::kShortestPaths});
  EXPECT_NE(source.message().find("--source"), std::string::npos);
  Status negative = check_spec(AlgorithmSpec{.kind = AlgorithmKind::kShortestPaths, .source = -1});
  EXPECT_FALSE(negative.is_ok());
}

}  // namespace
}  // namespace tessera::graph
