#include "tessera/balance/plan/plan.hpp"

#include <gtest/gtest.h>


namespace tessera::balance {
namespace {

plan::PlanRequest request_for(plan::Policy policy, uint64_t m, std::vector<double> weights) {
  plan::PlanRequest request;
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
  Result<plan::Plan> plan = plan::make_plan(request_for(plan::Policy::kProportional, 300, {0.5, 0.3, 0.2}));
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->shares[0].rows, (partition::RowBlock{0, 150}));
  EXPECT_EQ(plan->shares[1].rows, (partition::RowBlock{150, 90}));
  EXPECT_EQ(plan->shares[2].rows, (partition::RowBlock{240, 60}));
  EXPECT_EQ(plan->panel_count(), 4u);  // ceil(100 / 32)
  EXPECT_NE(plan->to_string().find("node1"), std::string::npos);
}

TEST(PlanTest, EvenIgnoresSpeedAndSpreadsTheRemainder) {
  Result<plan::Plan> plan = plan::make_plan(request_for(plan::Policy::kEven, 10, {}));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->shares[0].rows.count, 4u);
  EXPECT_EQ(plan->shares[1].rows.count, 3u);
  EXPECT_EQ(plan->shares[2].rows.count, 3u);
  for (const plan::NodeShare& share : plan->shares) EXPECT_NEAR(share.weight, 1.0 / 3, 1e-12);
}

TEST(PlanTest, SamePlanEveryTime) {
  const plan::PlanRequest request = request_for(plan::Policy::kProportional, 1000003, {0.37, 0.21, 0.42});
  const Result<plan::Plan> first = plan::make_plan(request);
  ASSERT_TRUE(first.is_ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*plan::make_plan(request), *first);
}

TEST(PlanTest, PanelWidthIsClippedToK) {
  plan::PlanRequest request = request_for(plan::Policy::kEven, 10, {});
  request.panel_width = 1000;
  Result<plan::Plan> plan = plan::make_plan(request);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->panel_width, 100u);
  EXPECT_EQ(plan->panel_count(), 1u);
}

TEST(PlanTest, BadRequestsAreRefusedWithReasons) {
  EXPECT_EQ(plan::make_plan(request_for(plan::Policy::kProportional, 10, {1, 2})).status().code(),
            StatusCode::kInvalidArgument);  // 2 weights, 3 nodes
  plan::PlanRequest wrong_weights = request_for(plan::Policy::kProportional, 10, {1, -1, 1});
  EXPECT_FALSE(plan::make_plan(wrong_weights).is_ok());
  plan::PlanRequest zero = request_for(plan::Policy::kEven, 0, {});
  EXPECT_NE(plan::make_plan(zero).status().message().find("m=0"), std::string::npos);
  plan::PlanRequest no_nodes = request_for(plan::Policy::kEven, 10, {});
  no_nodes.node_names.clear();
  EXPECT_FALSE(plan::make_plan(no_nodes).is_ok());
}

TEST(PlanTest, PolicyNamesParseAndUnknownNamesListTheValidOnes) {
  EXPECT_EQ(*plan::parse_policy("even"), plan::Policy::kEven);
  EXPECT_EQ(*plan::parse_policy("proportional"), plan::Policy::kProportional);
  Result<plan::Policy> unknown = plan::parse_policy("fastest");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("even, proportional, model"), std::string::npos);
}

TEST(PlanTest, RowLayoutPlansAreOneFullBoxPerNode) {
  Result<plan::Plan> plan = plan::make_plan(request_for(plan::Policy::kProportional, 300, {0.5, 0.3, 0.2}));
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->layout, partition::Layout::kRows);
  EXPECT_EQ(plan->blocks_of(1), (std::vector<partition::Block>{{150, 90, 0, 64, 0, 100}}));
  plan::PlanRequest zero = request_for(plan::Policy::kProportional, 300, {1, 0, 1});
  Result<plan::Plan> with_idle = plan::make_plan(zero);
  ASSERT_TRUE(with_idle.is_ok());
  EXPECT_TRUE(with_idle->blocks_of(1).empty());
}

TEST(PlanTest, TwoAndThreeDimensionalLayoutsCoverTheProductOnce) {
  for (partition::Layout layout :
       {partition::Layout::kColumnBased, partition::Layout::kSquareCorner, partition::Layout::kRecursive3d}) {
    SCOPED_TRACE(std::string(partition::layout_name(layout)));
    plan::PlanRequest request = request_for(plan::Policy::kProportional, 300, {6, 1, 1});
    request.layout = layout;
    Result<plan::Plan> plan = plan::make_plan(request);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    partition::NodeBlocks boxes;
    for (std::size_t i = 0; i < plan->shares.size(); ++i) boxes.push_back(plan->blocks_of(i));
    EXPECT_TRUE(partition::check_cover(boxes, 300, 64, 100).is_ok());
    EXPECT_NE(plan->to_string().find(std::string(partition::layout_name(layout)) + " layout"), std::string::npos)
        << plan->to_string();
    EXPECT_NE(plan->to_string().find("cols ["), std::string::npos) << plan->to_string();
  }
}

TEST(PlanTest, LayoutsAndRefillThresholdsThePolicyCannotUseAreRefused) {
  plan::PlanRequest dynamic = request_for(plan::Policy::kDynamic, 300, {});
  dynamic.layout = partition::Layout::kColumnBased;
  Result<plan::Plan> refused = plan::make_plan(dynamic);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("row tiles"), std::string::npos) << refused.status().message();

  plan::PlanRequest refill = request_for(plan::Policy::kEven, 300, {});
  refill.panels_in_flight = 4;
  refill.refill_threshold = 5;
  Result<plan::Plan> too_high = plan::make_plan(refill);
  ASSERT_FALSE(too_high.is_ok());
  EXPECT_NE(too_high.status().message().find("between 1 and the queue depth 4"), std::string::npos);
  refill.refill_threshold = 4;
  Result<plan::Plan> accepted = plan::make_plan(refill);
  ASSERT_TRUE(accepted.is_ok());
  EXPECT_EQ(accepted->refill_threshold, 4u);
}

TEST(PolicyChoiceTest, EachPolicyIsAValueWithItsOwnOptions) {
  for (plan::Policy policy : {plan::Policy::kEven, plan::Policy::kProportional, plan::Policy::kModel, plan::Policy::kDynamic}) {
    EXPECT_EQ(plan::policy_kind(plan::default_choice(policy)), policy);
  }
  EXPECT_TRUE(plan::needs_profile(plan::ProportionalPolicy{}));
  EXPECT_FALSE(plan::needs_profile(plan::ProportionalPolicy{{2.0, 1.0}})) << "explicit weights need no measurement";
  EXPECT_TRUE(plan::needs_profile(plan::ModelPolicy{}));
  EXPECT_FALSE(plan::needs_profile(plan::EvenPolicy{}));
  EXPECT_FALSE(plan::needs_profile(plan::DynamicPolicy{64}));
  EXPECT_EQ(plan::PolicyChoice(plan::DynamicPolicy{64}), plan::PolicyChoice(plan::DynamicPolicy{64}));
  EXPECT_NE(plan::PolicyChoice(plan::DynamicPolicy{64}), plan::PolicyChoice(plan::DynamicPolicy{32}));
}

}  // namespace
}  // namespace tessera::balance
