#include "tessera/balance/plan.hpp"

#include <gtest/gtest.h>

namespace tessera::balance {
namespace {

PlanRequest request_for(Policy policy, uint64_t m, std::vector<double> weights) {
  PlanRequest request;
  request.policy = policy;
  request.m = m;
  request.n = 64;
  request.k = 100;
  request.panel_width = 32;
  request.weights = std::move(weights);
  for (std::size_t i = 0; i < std::max<std::size_t>(request.weights.size(), 3); ++i) {
    request.node_names.push_back("node" + std::to_string(i));
  }
  return request;
}

TEST(PlanTest, ProportionalFollowsTinettiShares) {
  Result<Plan> plan = make_plan(request_for(Policy::kProportional, 300, {0.5, 0.3, 0.2}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->shares[0].rows, (partition::RowBlock{0, 150}));
  EXPECT_EQ(plan->shares[1].rows, (partition::RowBlock{150, 90}));
  EXPECT_EQ(plan->shares[2].rows, (partition::RowBlock{240, 60}));
  EXPECT_EQ(plan->panel_count(), 4u);  // ceil(100 / 32)
  EXPECT_NE(plan->to_string().find("node1"), std::string::npos);
}

TEST(PlanTest, EvenIgnoresSpeedAndSpreadsTheRemainder) {
  Result<Plan> plan = make_plan(request_for(Policy::kEven, 10, {}));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->shares[0].rows.count, 4u);
  EXPECT_EQ(plan->shares[1].rows.count, 3u);
  EXPECT_EQ(plan->shares[2].rows.count, 3u);
  for (const NodeShare& share : plan->shares) EXPECT_NEAR(share.weight, 1.0 / 3, 1e-12);
}

TEST(PlanTest, SamePlanEveryTime) {
  const PlanRequest request = request_for(Policy::kProportional, 1000003, {0.37, 0.21, 0.42});
  const Result<Plan> first = make_plan(request);
  ASSERT_TRUE(first.is_ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*make_plan(request), *first);
}

TEST(PlanTest, PanelWidthIsClippedToK) {
  PlanRequest request = request_for(Policy::kEven, 10, {});
  request.panel_width = 1000;
  Result<Plan> plan = make_plan(request);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->panel_width, 100u);
  EXPECT_EQ(plan->panel_count(), 1u);
}

TEST(PlanTest, BadRequestsAreRefusedWithReasons) {
  EXPECT_EQ(make_plan(request_for(Policy::kProportional, 10, {1, 2})).status().code(),
            StatusCode::kInvalidArgument);  // 2 weights, 3 nodes
  PlanRequest wrong_weights = request_for(Policy::kProportional, 10, {1, -1, 1});
  EXPECT_FALSE(make_plan(wrong_weights).is_ok());
  PlanRequest zero = request_for(Policy::kEven, 0, {});
  EXPECT_NE(make_plan(zero).status().message().find("m=0"), std::string::npos);
  PlanRequest no_nodes = request_for(Policy::kEven, 10, {});
  no_nodes.node_names.clear();
  EXPECT_FALSE(make_plan(no_nodes).is_ok());
}

TEST(PlanTest, PolicyNamesParseAndUnknownNamesListTheValidOnes) {
  EXPECT_EQ(*parse_policy("even"), Policy::kEven);
  EXPECT_EQ(*parse_policy("proportional"), Policy::kProportional);
  Result<Policy> unknown = parse_policy("fastest");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("even, proportional, model"), std::string::npos);
}

}  // namespace
}  // namespace tessera::balance
