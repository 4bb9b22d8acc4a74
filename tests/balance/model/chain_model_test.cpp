// B forwarded along a chain of nodes (plan::Distribution::kChain): predict()'s replay of it, the
// model policy's choice between star and chain, the chain's order, and the plan's refusals.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "tessera/balance/model/model.hpp"
#include "tessera/balance/plan/plan.hpp"

// A namespace of its own: the test sources are compiled as one unity batch, beside model_test's
// helpers of the same names.
namespace tessera::balance::chain_model_test {
namespace {

model::SpeedCurve flat_curve(double gflops) { return model::SpeedCurve({{64, gflops}, {4096, gflops}}); }

model::NodeModel node_model(std::string name, double gflops, double link_bytes_per_s, bool behind_switch = false) {
  model::NodeModel node{std::move(name), flat_curve(gflops), {1e-4, link_bytes_per_s, link_bytes_per_s}, {}, {}};
  node.link.behind_switch = behind_switch;
  return node;
}

// Six equal nodes (1 GFLOP/s) on 100 MB/s links behind a switch whose 20 MB/s uplink to the
// coordinator is the bottleneck: in a star, B (33.5 MB at n = k = 2048) crosses the uplink once per
// node taking rows, and one node alone needs 10 s for 1200 rows.
model::ClusterModel six_behind_a_slow_uplink() {
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = 1e9;
  model.switch_uplink_bytes_per_s = 20e6;
  for (int i = 0; i < 6; ++i) model.nodes.push_back(node_model("pi" + std::to_string(i), 1.0, 100e6, true));
  return model;
}

// Four equal nodes, no switch, the coordinator fast (1 GB/s) and each node's link slow (10 MB/s):
// a star already feeds every node at its link's rate, and a chain only adds hops and makes each
// node's link out carry B as well as its C.
model::ClusterModel fast_coordinator_slow_workers() {
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = 1e9;
  for (int i = 0; i < 4; ++i) model.nodes.push_back(node_model("box" + std::to_string(i), 10.0, 10e6));
  return model;
}

constexpr uint64_t kSide = 2048;
constexpr double kBBytes = 8.0 * kSide * kSide;

plan::Plan plan_with_rows(const model::ClusterModel& model, const std::vector<uint64_t>& rows) {
  plan::Plan plan;
  plan.policy = plan::Policy::kModel;
  plan.m = std::accumulate(rows.begin(), rows.end(), uint64_t{0});
  plan.n = kSide;
  plan.k = kSide;
  plan.panel_width = 256;
  plan.panels_in_flight = 4;
  uint64_t begin = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    plan.shares.push_back({model.nodes[i].name, 0.0, {begin, rows[i]}, {}});
    begin += rows[i];
  }
  return plan;
}

plan::Plan chained(plan::Plan plan) {
  EXPECT_TRUE(plan::set_chain(plan).is_ok());
  return plan;
}

plan::PlanRequest request_for(const model::ClusterModel& model, uint64_t m) {
  plan::PlanRequest request;
  request.policy = plan::Policy::kModel;
  request.m = m;
  request.n = kSide;
  request.k = kSide;
  request.panel_width = 256;
  request.panels_in_flight = 4;
  for (const model::NodeModel& node : model.nodes) request.node_names.push_back(node.name);
  return request;
}

TEST(ChainPredictTest, BehindASlowUplinkTheChainSendsBOnceAndFinishesWellBeforeTheStar) {
  const model::ClusterModel model = six_behind_a_slow_uplink();
  const plan::Plan star = plan_with_rows(model, {200, 200, 200, 200, 200, 200});
  const double star_s = model::predict(model, star).makespan_s;
  const model::Prediction chain = model::predict(model, chained(star));
  EXPECT_LT(chain.makespan_s, 0.7 * star_s) << "chain " << chain.makespan_s << " s, star " << star_s << " s";
  // The star cannot beat six copies of B through the uplink; the chain cannot beat one copy plus
  // every node's A, all through the uplink.
  EXPECT_GT(star_s, 6.0 * kBBytes / 20e6);
  const double a_bytes = 8.0 * 1200.0 * kSide;
  EXPECT_GT(chain.makespan_s, (kBBytes + a_bytes) / 20e6);
  for (double finish : chain.finish_s) EXPECT_TRUE(std::isfinite(finish));
}

TEST(ChainPredictTest, AForwardRunsAtTheSlowerOfTheSendersLinkOutAndTheReceiversLinkIn) {
  model::ClusterModel model = six_behind_a_slow_uplink();
  const plan::Plan plan = chained(plan_with_rows(model, {200, 200, 200, 200, 200, 200}));
  const double fast_s = model::predict(model, plan).makespan_s;
  // The fourth node's link in at 2 MB/s: all of B reaches it (and so the two after it) no sooner
  // than B over 2 MB/s, although the uplink and every other link are faster.
  model.nodes[3].link.to_node_bytes_per_s = 2e6;
  const model::Prediction slow_in = model::predict(model, plan);
  EXPECT_GT(slow_in.finish_s[3], kBBytes / 2e6);
  EXPECT_GT(slow_in.finish_s[5], kBBytes / 2e6);
  EXPECT_LT(slow_in.finish_s[0], kBBytes / 2e6);  // the nodes before it are not held up
  // The same slow link out of the third node instead, the one that feeds the fourth.
  model = six_behind_a_slow_uplink();
  model.nodes[2].link.from_node_bytes_per_s = 2e6;
  const model::Prediction slow_out = model::predict(model, plan);
  EXPECT_GT(slow_out.finish_s[3], kBBytes / 2e6);
  EXPECT_GT(slow_out.makespan_s, 2.0 * fast_s);
}

TEST(ChainPredictTest, AForwardBetweenTwoNodesBehindTheSwitchDoesNotCrossItsUplink) {
  model::ClusterModel model = six_behind_a_slow_uplink();
  const plan::Plan plan = chained(plan_with_rows(model, {200, 200, 200, 200, 200, 200}));
  const double all_behind_s = model::predict(model, plan).makespan_s;
  // The same chain with the nodes off the switch but the coordinator's own capacity at the
  // uplink's 20 MB/s: B and A cross 20 MB/s once either way, so the forecasts stay within about
  // a second (the switched cluster also returns C, 20 MB, through the uplink); were the five
  // forwards charged to the uplink, 168 MB more would cross it, 8 s more.
  model::ClusterModel direct = model;
  direct.switch_uplink_bytes_per_s = 0.0;
  direct.coordinator_send_bytes_per_s = 20e6;
  const double direct_s = model::predict(direct, plan).makespan_s;
  EXPECT_GE(all_behind_s, direct_s);
  EXPECT_LT(all_behind_s, direct_s + 2.0);
  // The head off the switch, the second node behind a 5 MB/s uplink: the forward between them
  // crosses the uplink, so B reaches the second node no sooner than over 5 MB/s; with nobody
  // behind the switch it gets B over the 100 MB/s links, long before.
  model::ClusterModel none_behind = direct;
  none_behind.coordinator_send_bytes_per_s = 1e9;
  none_behind.switch_uplink_bytes_per_s = 5e6;
  for (model::NodeModel& node : none_behind.nodes) node.link.behind_switch = false;
  model::ClusterModel one_behind = none_behind;
  one_behind.nodes[1].link.behind_switch = true;
  EXPECT_GT(model::predict(one_behind, plan).finish_s[1], kBBytes / 5e6);
  EXPECT_LT(model::predict(none_behind, plan).finish_s[1], 0.3 * kBBytes / 5e6);
}

TEST(ChainPredictTest, AForwardingNodePaysTheCpuOfTheBytesItSends) {
  model::ClusterModel model = six_behind_a_slow_uplink();
  model.switch_uplink_bytes_per_s = 0.0;  // links fast enough that CPU is what shows
  model.coordinator_send_bytes_per_s = 0.0;
  for (model::NodeModel& node : model.nodes) {
    node.link.to_node_bytes_per_s = node.link.from_node_bytes_per_s = 1e12;
    node.cpu.receive_s_per_byte = 1e-8;  // 0.34 s per copy of B
  }
  const plan::Plan star = plan_with_rows(model, {200, 200, 200, 200, 200, 200});
  const model::Prediction star_forecast = model::predict(model, star);
  const model::Prediction chain_forecast = model::predict(model, chained(star));
  // The last node of the chain only receives, as in a star; every other node also sends B on.
  const double copy_s = kBBytes * 1e-8;
  EXPECT_NEAR(chain_forecast.finish_s[5], star_forecast.finish_s[5], 0.1 * copy_s);
  EXPECT_GT(chain_forecast.finish_s[0], star_forecast.finish_s[0] + 0.9 * copy_s);
}

TEST(ChainPredictTest, NoNodeHoldsMoreUnfinishedPanelsThanTheCreditsAllow) {
  // With one credit, the head may take panel p + 2 only once the slowest node (five hops down:
  // one extra panel for the way, at most the window) finished job p: a chain whose last node is
  // 10x slower paces everyone, so the head finishes near the slow node.
  model::ClusterModel model = six_behind_a_slow_uplink();
  model.switch_uplink_bytes_per_s = 0.0;
  model.nodes[5].speed = flat_curve(0.1);
  plan::Plan plan = chained(plan_with_rows(model, {200, 200, 200, 200, 200, 200}));
  plan.panels_in_flight = 1;
  const model::Prediction paced = model::predict(model, plan);
  plan.panels_in_flight = 8;  // every panel may be out at once: the head runs ahead
  const model::Prediction free_running = model::predict(model, plan);
  EXPECT_GT(paced.finish_s[0], 0.7 * paced.finish_s[5]);
  EXPECT_LT(free_running.finish_s[0], 0.5 * free_running.finish_s[5]);
}

TEST(ChainPredictTest, AFastCoordinatorAndSlowWorkerLinksGainNothingFromAChain) {
  const model::ClusterModel model = fast_coordinator_slow_workers();
  const plan::Plan star = plan_with_rows(model, {256, 256, 256, 256});
  const double star_s = model::predict(model, star).makespan_s;
  const double chain_s = model::predict(model, chained(star)).makespan_s;
  EXPECT_GE(chain_s, star_s);
}

TEST(ChainModelPlanTest, UnaskedTheModelPolicyTakesTheChainBehindASlowUplink) {
  const model::ClusterModel model = six_behind_a_slow_uplink();
  Result<model::ModelPlanResult> made = model::make_model_plan(request_for(model, 1200), model);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_EQ(made->plan.distribution, plan::Distribution::kChain);
  EXPECT_FALSE(made->plan.chain.empty());
  EXPECT_LE(made->chain_makespan_s, (1.0 - model::kChainMargin) * made->star_makespan_s);
  EXPECT_DOUBLE_EQ(model::predict(model, made->plan).makespan_s, made->chain_makespan_s);
  const std::string& why = made->distribution_reason;
  EXPECT_NE(why.find(fmt::format("chain of {} nodes", made->plan.chain.size())), std::string::npos) << why;
  EXPECT_NE(why.find("20 MB/s uplink"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

TEST(ChainModelPlanTest, UnaskedTheModelPolicyKeepsTheStarWhenTheCoordinatorIsFast) {
  const model::ClusterModel model = fast_coordinator_slow_workers();
  Result<model::ModelPlanResult> made = model::make_model_plan(request_for(model, 1024), model);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_EQ(made->plan.distribution, plan::Distribution::kStar);
  EXPECT_TRUE(made->plan.chain.empty());
  EXPECT_GE(made->chain_makespan_s, made->star_makespan_s);
  EXPECT_DOUBLE_EQ(model::predict(model, made->plan).makespan_s, made->star_makespan_s);
  EXPECT_NE(made->distribution_reason.find("B sent to each node"), std::string::npos) << made->distribution_reason;
}

TEST(ChainModelPlanTest, AnExplicitDistributionIsObeyed) {
  const model::ClusterModel slow_uplink = six_behind_a_slow_uplink();
  plan::PlanRequest star_request = request_for(slow_uplink, 1200);
  star_request.distribution = plan::Distribution::kStar;
  Result<model::ModelPlanResult> star = model::make_model_plan(star_request, slow_uplink);
  ASSERT_TRUE(star.is_ok()) << star.status().to_string();
  EXPECT_EQ(star->plan.distribution, plan::Distribution::kStar);
  EXPECT_NE(star->distribution_reason.find("as asked"), std::string::npos) << star->distribution_reason;

  const model::ClusterModel fast = fast_coordinator_slow_workers();
  plan::PlanRequest chain_request = request_for(fast, 1024);
  chain_request.distribution = plan::Distribution::kChain;
  Result<model::ModelPlanResult> chain = model::make_model_plan(chain_request, fast);
  ASSERT_TRUE(chain.is_ok()) << chain.status().to_string();
  EXPECT_EQ(chain->plan.distribution, plan::Distribution::kChain);
  std::size_t taking = 0;
  for (const plan::NodeShare& share : chain->plan.shares) taking += share.rows.count > 0 ? 1 : 0;
  EXPECT_EQ(chain->plan.chain.size(), taking);
  EXPECT_NE(chain->distribution_reason.find("as asked"), std::string::npos) << chain->distribution_reason;
}

TEST(ChainOrderTest, FastestLinkToTheNodeFirstTiesInClusterOrderNodesWithoutRowsLeftOut) {
  model::ClusterModel model;
  const double rates[] = {10e6, 50e6, 50e6, 30e6, 90e6};
  for (int i = 0; i < 5; ++i) model.nodes.push_back(node_model("n" + std::to_string(i), 10.0, rates[i]));
  plan::Plan plan = chained(plan_with_rows(model, {10, 10, 10, 10, 0}));
  model::order_chain_by_links(plan, model);
  EXPECT_EQ(plan.chain, (std::vector<uint32_t>{1, 2, 3, 0}));
  // A star plan is left alone.
  plan::Plan star = plan_with_rows(model, {10, 10, 10, 10, 0});
  model::order_chain_by_links(star, model);
  EXPECT_TRUE(star.chain.empty());

  // The model policy asked for a chain orders it so too.
  plan::PlanRequest request = request_for(model, 400);
  request.distribution = plan::Distribution::kChain;
  Result<model::ModelPlanResult> made = model::make_model_plan(request, model);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  for (std::size_t c = 1; c < made->plan.chain.size(); ++c) {
    EXPECT_GE(model.nodes[made->plan.chain[c - 1]].link.to_node_bytes_per_s,
              model.nodes[made->plan.chain[c]].link.to_node_bytes_per_s);
  }
}

TEST(ChainPlanTest, UnknownDistributionsAndChainsWithoutFixedRowsAreRefusedNamingTheFix) {
  Result<plan::Distribution> ring = plan::parse_distribution("ring");
  ASSERT_FALSE(ring.is_ok());
  EXPECT_NE(ring.status().message().find("use one of: star, chain"), std::string::npos) << ring.status().to_string();
  EXPECT_EQ(*plan::parse_distribution("chain"), plan::Distribution::kChain);
  EXPECT_EQ(*plan::parse_distribution("star"), plan::Distribution::kStar);

  plan::PlanRequest request;
  request.m = request.n = request.k = 64;
  request.panel_width = 16;
  request.node_names = {"a", "b"};
  request.distribution = plan::Distribution::kChain;

  request.policy = plan::Policy::kDynamic;
  Result<plan::Plan> dynamic = plan::make_plan(request);
  ASSERT_FALSE(dynamic.is_ok());
  EXPECT_EQ(dynamic.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dynamic.status().message().find("use distribution 'star'"), std::string::npos) << dynamic.status().to_string();

  request.policy = plan::Policy::kEven;
  request.layout = partition::Layout::kRecursive3d;
  Result<plan::Plan> three_d = plan::make_plan(request);
  ASSERT_FALSE(three_d.is_ok());
  EXPECT_NE(three_d.status().message().find("use distribution 'star'"), std::string::npos) << three_d.status().to_string();

  // set_chain on a plan already made refuses the same way and leaves it a star.
  request.distribution.reset();
  Result<plan::Plan> star_3d = plan::make_plan(request);
  ASSERT_TRUE(star_3d.is_ok()) << star_3d.status().to_string();
  plan::Plan plan = *star_3d;
  EXPECT_FALSE(plan::set_chain(plan).is_ok());
  EXPECT_EQ(plan.distribution, plan::Distribution::kStar);
  EXPECT_TRUE(plan.chain.empty());

  request.layout = partition::Layout::kRows;
  request.distribution = plan::Distribution::kChain;
  Result<plan::Plan> rows = plan::make_plan(request);
  ASSERT_TRUE(rows.is_ok()) << rows.status().to_string();
  EXPECT_EQ(rows->chain, (std::vector<uint32_t>{0, 1}));
}

TEST(ChainPlanTest, AnEditedChainThatMissesANodeOrNamesOneTwiceIsRefused) {
  plan::PlanRequest request;
  request.policy = plan::Policy::kEven;
  request.m = request.n = request.k = 64;
  request.node_names = {"a", "b", "c"};
  request.distribution = plan::Distribution::kChain;
  Result<plan::Plan> made = plan::make_plan(request);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_TRUE(plan::check_distribution(*made).is_ok());
  const auto refused = [](plan::Plan plan, const std::string& text) {
    const Status status = plan::check_distribution(plan);
    return !status.is_ok() && status.message().find(text) != std::string::npos;
  };
  plan::Plan edited = *made;
  edited.chain = {0, 2};
  EXPECT_TRUE(refused(edited, "'b' has work but is not in the plan's chain"));
  edited.chain = {0, 1, 1, 2};
  EXPECT_TRUE(refused(edited, "lists 'b' twice"));
  edited.chain = {0, 1, 7};
  EXPECT_TRUE(refused(edited, "names node 7"));
  edited = *made;
  edited.distribution = plan::Distribution::kStar;
  EXPECT_TRUE(refused(edited, "lists a chain"));
  edited.chain.clear();
  EXPECT_TRUE(plan::check_distribution(edited).is_ok());
}

// The 2d layout: one chain per group of columns, the groups one after another; each starts with a
// node the coordinator feeds, and an edited chain that splits a group is refused.
TEST(ChainPlanTest, A2dPlanChainsEachGroupOfColumns) {
  plan::PlanRequest request;
  request.policy = plan::Policy::kEven;
  request.layout = partition::Layout::kColumnBased;
  request.m = request.n = request.k = 256;
  request.panel_width = 64;
  request.node_names = {"a", "b", "c", "d"};
  request.distribution = plan::Distribution::kChain;
  Result<plan::Plan> made = plan::make_plan(request);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  EXPECT_TRUE(plan::check_distribution(*made).is_ok());
  ASSERT_EQ(made->chain.size(), 4u);
  // Members of one chain read the same columns; a head reads columns the node before it does not.
  const std::vector<std::size_t> heads = plan::chain_heads(*made);
  ASSERT_GE(heads.size(), 2u) << made->to_string();
  EXPECT_EQ(heads.front(), 0u);
  const auto columns = [&](std::size_t position) {
    const partition::Block& box = made->shares[made->chain[position]].blocks.at(0);
    return std::pair{box.col_begin, box.cols};
  };
  for (std::size_t position = 1; position < made->chain.size(); ++position) {
    const bool head = std::find(heads.begin(), heads.end(), position) != heads.end();
    EXPECT_EQ(head, columns(position) != columns(position - 1)) << position;
  }
  EXPECT_NE(made->to_string().find(" | coordinator -> "), std::string::npos) << made->to_string();
  // Four equal nodes: two groups of two, a -> b and c -> d.
  EXPECT_EQ(made->chain, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(heads, (std::vector<std::size_t>{0, 2}));
  // A chain that returns to a group of columns after another is refused.
  plan::Plan edited = *made;
  edited.chain = {0, 2, 1, 3};
  const Status split = plan::check_distribution(edited);
  ASSERT_FALSE(split.is_ok());
  EXPECT_NE(split.message().find("returns to the columns of 'b'"), std::string::npos) << split.to_string();
}

}  // namespace
}  // namespace tessera::balance::chain_model_test
