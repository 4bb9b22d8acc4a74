// The graph placement model on hand-made costs (forecast arithmetic, the choice of nodes and the
// sentences for nodes left out), the part shapes a placement implies, and the run memory's file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tessera/balance/graphs/node_selection.hpp"
#include "tessera/balance/graphs/run_memory.hpp"
#include "tessera/balance/graphs/graph_placement.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance {
namespace {

using graphs::GraphCandidate;
using graphs::GraphNodeCosts;
using graphs::GraphPartShape;
using graphs::GraphWorkload;

GraphNodeCosts node(std::string name, double edges_per_s, double link_bytes_per_s = 1e9, double per_delta = 1e-8) {
  GraphNodeCosts costs;
  costs.name = std::move(name);
  costs.rates.edge_updates_per_s = edges_per_s;
  costs.rates.send_s_per_delta = per_delta;
  costs.rates.receive_s_per_delta = per_delta;
  costs.to_node_bytes_per_s = link_bytes_per_s;
  costs.from_node_bytes_per_s = link_bytes_per_s;
  return costs;
}

GraphWorkload workload(int64_t edges, double sweeps, double spread = 0.0) {
  GraphWorkload w;
  w.vertices = edges / 10;
  w.edges = edges;
  w.updates_per_edge_alone = sweeps;
  w.spread_per_cut = spread;
  w.poll_interval_s = 0.1;
  return w;
}

GraphCandidate alone(std::size_t index, int64_t vertices, int64_t edges) {
  GraphCandidate candidate;
  candidate.nodes = {index};
  candidate.parts = {GraphPartShape{vertices, edges, 0, 0, 0, 0}};
  return candidate;
}

TEST(GraphPlacementModel, AloneTheForecastIsSweepsTimesEdgesOverTheRatePlusShippingAndOnePoll) {
  const std::vector<GraphNodeCosts> costs{node("desktop", 1e8, 1e9)};
  const graphs::GraphForecast forecast = graphs::forecast_graph_run(costs, workload(1'000'000, 40), alone(0, 100'000, 1'000'000));
  EXPECT_DOUBLE_EQ(forecast.updates_per_edge, 40.0);
  ASSERT_EQ(forecast.nodes.size(), 1u);
  EXPECT_DOUBLE_EQ(forecast.nodes[0].edges_s, 0.4);
  EXPECT_DOUBLE_EQ(forecast.nodes[0].send_s, 0.0);
  const double ship = graphs::graph_part_bytes(GraphPartShape{100'000, 1'000'000, 0, 0, 0, 0}) / 1e9;
  EXPECT_DOUBLE_EQ(forecast.nodes[0].ship_s, ship);
  const double slowest = 0.4 + ship + 8.0 * 100'000 / 1e9;
  EXPECT_NEAR(forecast.total_s, slowest + 0.75 * graphs::poll_gap_s(slowest, 0.1) + 0.005, 1e-12)
      << "the end noticed within three quarters of the poll gap at the run's end";
}

// The driver's polls are at most an eighth of the run so far apart, from 5 ms up to the interval.
TEST(GraphPlacementModel, ThePollGapGrowsWithTheRunUpToTheInterval) {
  EXPECT_DOUBLE_EQ(graphs::poll_gap_s(0.0, 0.1), 0.005);
  EXPECT_DOUBLE_EQ(graphs::poll_gap_s(0.01, 0.1), 0.005);
  EXPECT_DOUBLE_EQ(graphs::poll_gap_s(0.4, 0.1), 0.05);
  EXPECT_DOUBLE_EQ(graphs::poll_gap_s(2.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(graphs::poll_gap_s(2.0, 0.002), 0.002) << "a shorter interval asked for wins";
}

TEST(GraphPlacementModel, RemoteDeltasCostBothEndsAndTheCutAddsSweeps) {
  const std::vector<GraphNodeCosts> costs{node("a", 1e8, 0.0, 1e-7), node("b", 1e8, 0.0, 2e-7)};
  GraphCandidate pair;
  pair.nodes = {0, 1};
  pair.parts = {GraphPartShape{50, 500'000, 1000, 2000, 1, 1}, GraphPartShape{50, 500'000, 2000, 1000, 1, 1}};
  pair.cut_edges = 250'000;  // a quarter of the edges
  const graphs::GraphForecast forecast = graphs::forecast_graph_run(costs, workload(1'000'000, 40, 2.0), pair);
  EXPECT_DOUBLE_EQ(forecast.updates_per_edge, 40.0 * 1.5);
  EXPECT_DOUBLE_EQ(forecast.nodes[0].edges_s, 60.0 * 500'000 / 1e8);
  EXPECT_DOUBLE_EQ(forecast.nodes[0].send_s, 60.0 * 1000 * 1e-7) << "no link figure: CPU only";
  EXPECT_DOUBLE_EQ(forecast.nodes[0].receive_s, 60.0 * 2000 * 1e-7);
  EXPECT_DOUBLE_EQ(forecast.nodes[1].send_s, 60.0 * 2000 * 2e-7);
  std::vector<GraphNodeCosts> linked = costs;
  linked[0].from_node_bytes_per_s = 1.2e6;  // a slow link out
  const graphs::GraphForecast slow = graphs::forecast_graph_run(linked, workload(1'000'000, 40, 2.0), pair);
  EXPECT_DOUBLE_EQ(slow.nodes[0].send_s, 60.0 * 1000 * 1e-7 + 60.0 * 1000 * 12.0 / 1.2e6) << "and the deltas' bytes over it";
  EXPECT_EQ(forecast.slowest, 1u) << "b pays twice per delta";

  // A rate measured beside others is what several nodes are forecast with; alone, the node's own.
  std::vector<GraphNodeCosts> measured = costs;
  measured[0].edge_updates_per_s_with_others = 0.5e8;
  EXPECT_DOUBLE_EQ(graphs::forecast_graph_run(measured, workload(1'000'000, 40, 2.0), pair).nodes[0].edges_s,
                   60.0 * 500'000 / 0.5e8);
  EXPECT_DOUBLE_EQ(graphs::forecast_graph_run(measured, workload(1'000'000, 40), alone(0, 100, 1'000'000)).nodes[0].edges_s,
                   40.0 * 1'000'000 / 1e8);
}

// Two Pis behind a switch and a desktop off it: the uplink carries both Pis' parts and values and
// the deltas they exchange with the desktop (half their peers' edges are the desktop's), not what
// they exchange with each other; at 1 MB/s that takes longer than any node, and bounds the run.
TEST(GraphPlacementModel, NodesBehindASwitchAreBoundByTheBytesOfItsUplink) {
  std::vector<GraphNodeCosts> costs{node("desktop", 1e9), node("pi1", 1e8), node("pi2", 1e8)};
  GraphCandidate three;
  three.nodes = {0, 1, 2};
  three.parts = {GraphPartShape{100, 1'000'000, 0, 0, 0, 0}, GraphPartShape{100, 1'000'000, 0, 0, 0, 0},
                 GraphPartShape{100, 1'000'000, 0, 0, 0, 0}};
  const GraphWorkload w = workload(3'000'000, 1.0);
  const graphs::GraphForecast free = graphs::forecast_graph_run(costs, w, three);
  EXPECT_DOUBLE_EQ(free.uplink_s, 0.0);
  costs[1].switch_uplink_bytes_per_s = costs[2].switch_uplink_bytes_per_s = 1e6;
  const graphs::GraphForecast bound = graphs::forecast_graph_run(costs, w, three);
  const double part_bytes = graphs::graph_part_bytes(three.parts[1]) + 8.0 * 100;  // shipped and values back
  EXPECT_NEAR(bound.uplink_s, 2.0 * part_bytes / 1e6, 1e-9) << "no ghosts: no deltas cross";
  EXPECT_DOUBLE_EQ(bound.slowest_node_s, bound.uplink_s);
  EXPECT_GT(bound.total_s, free.total_s);
  EXPECT_NE(graphs::forecast_bound(bound).find("the switch's uplink"), std::string::npos) << graphs::forecast_bound(bound);
}

TEST(GraphPlacementModel, AFastPairWithACheapCutIsChosenOverTheBestNodeAlone) {
  const std::vector<GraphNodeCosts> costs{node("desktop", 2e8), node("board", 1e8)};
  GraphCandidate pair;
  pair.nodes = {0, 1};
  pair.parts = {GraphPartShape{667, 666'667, 100, 100, 1, 1}, GraphPartShape{333, 333'333, 100, 100, 1, 1}};
  pair.cut_edges = 100;
  const graphs::GraphNodeChoice choice =
      graphs::choose_graph_nodes(costs, workload(1'000'000, 40, 2.0), {alone(0, 1000, 1'000'000), pair});
  EXPECT_EQ(choice.chosen, 1u);
  EXPECT_TRUE(choice.left_out.empty());
  EXPECT_LT(choice.forecasts[1].total_s, choice.forecasts[0].total_s);
}

TEST(GraphPlacementModel, ANodeWhoseDeltasCostMoreThanItsEdgesSaveIsLeftOutAndToldWhy) {
  // The board computes a third of the edges but every one of its edges is cut, and its deltas are
  // dear: with it the run is slower than the desktop alone.
  const std::vector<GraphNodeCosts> costs{node("desktop", 2e8, 1e9, 1e-8), node("board", 1e8, 1e9, 5e-6)};
  GraphCandidate pair;
  pair.nodes = {0, 1};
  pair.parts = {GraphPartShape{667, 666'667, 300'000, 300'000, 1, 1}, GraphPartShape{333, 333'333, 300'000, 300'000, 1, 1}};
  pair.cut_edges = 600'000;
  const graphs::GraphNodeChoice choice =
      graphs::choose_graph_nodes(costs, workload(1'000'000, 40, 2.0), {alone(0, 1000, 1'000'000), pair});
  EXPECT_EQ(choice.chosen, 0u);
  ASSERT_EQ(choice.left_out.size(), 1u);
  EXPECT_NE(choice.left_out[0].find("board left out"), std::string::npos) << choice.left_out[0];
  EXPECT_NE(choice.left_out[0].find("deltas"), std::string::npos) << "names the cost that bounds it: " << choice.left_out[0];
}

TEST(GraphPlacementModel, ALargerSetMustBeatASmallerOneByTheMargin) {
  const std::vector<GraphNodeCosts> costs{node("desktop", 2e8), node("board", 1e6)};
  GraphCandidate pair;
  pair.nodes = {0, 1};
  pair.parts = {GraphPartShape{995, 995'000, 0, 0, 0, 0}, GraphPartShape{5, 5'000, 0, 0, 0, 0}};
  const GraphWorkload w = workload(1'000'000, 40);
  const graphs::GraphNodeChoice choice = graphs::choose_graph_nodes(costs, w, {alone(0, 1000, 1'000'000), pair});
  ASSERT_LT(choice.forecasts[1].total_s, choice.forecasts[0].total_s) << "the pair is a little faster on paper";
  ASSERT_GT(choice.forecasts[1].total_s, 0.97 * choice.forecasts[0].total_s);
  EXPECT_EQ(choice.chosen, 0u) << "but not by the 3% margin";
}

TEST(GraphPlacementModel, NodesGrowFromTheFastestAndSharesFollowTheRates) {
  const std::vector<GraphNodeCosts> costs{node("pi1", 1e8), node("desktop", 5e8), node("pi0", 1e8)};
  EXPECT_EQ(graphs::nodes_by_graph_speed(costs), (std::vector<std::size_t>{1, 2, 0})) << "ties broken by name";
  EXPECT_EQ(graphs::graph_share_weights(costs, {1, 0}), (std::vector<double>{5e8, 1e8}));
  std::vector<GraphNodeCosts> unmeasured{node("a", 0.0), node("b", 0.0)};
  EXPECT_EQ(graphs::graph_share_weights(unmeasured, {0, 1}), (std::vector<double>{1.0, 1.0}));
  const std::vector<std::vector<std::size_t>> sets = graphs::candidate_sets(costs, {0, 1, 2});
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(sets[0], (std::vector<std::size_t>{1}));
  EXPECT_EQ(sets[1], (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(sets[2], (std::vector<std::size_t>{0, 1, 2}));
}

TEST(GraphPlacementShape, CountsEachRemoteTargetOncePerPartAndThePartsThatTalk) {
  // 0 -> 2, 1 -> 2, 1 -> 3, 2 -> 0, 3 -> 3; parts {0, 1} and {2, 3}.
  Result<graphdata::DirectedGraph> graph =
      graphdata::build_directed_graph(4, {{0, 2}, {1, 2}, {1, 3}, {2, 0}, {3, 3}}, false);
  ASSERT_TRUE(graph.is_ok());
  const std::vector<int32_t> part_of{0, 0, 1, 1};
  const graphs::PlacementShape shape = graphs::placement_shape(*graph, part_of, 2);
  EXPECT_EQ(shape.cut_edges, 4);
  ASSERT_EQ(shape.parts.size(), 2u);
  EXPECT_EQ(shape.parts[0].edges, 3);
  EXPECT_EQ(shape.parts[0].ghosts_out, 2) << "vertex 2 once, though two edges reach it";
  EXPECT_EQ(shape.parts[0].ghosts_in, 1);
  EXPECT_EQ(shape.parts[1].ghosts_out, 1);
  EXPECT_EQ(shape.parts[1].ghosts_in, 2);
  EXPECT_EQ(shape.parts[0].peers_out, 1);
  EXPECT_EQ(shape.parts[1].peers_in, 1);
}

TEST(GraphPlacementShape, DefaultSweepsFollowTheToleranceForPageRank) {
  Result<graphdata::DirectedGraph> graph = graphdata::build_directed_graph(2, {{0, 1}, {1, 0}}, false);
  ASSERT_TRUE(graph.is_ok());
  graph::AlgorithmSpec spec;
  const double loose = graphs::default_workload(spec, 1e-3, *graph, 0.1).updates_per_edge_alone;
  const double tight = graphs::default_workload(spec, 1e-9, *graph, 0.1).updates_per_edge_alone;
  EXPECT_GT(loose, 0.0);
  EXPECT_GT(tight, 2.0 * loose);
}

class RunMemoryTest : public ::testing::Test {
 protected:
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("tessera-run-memory-" + std::to_string(::getpid()));
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path() const {
    return graphs::run_memory_path(dir_.string(), 0x1234, graph::AlgorithmSpec{}, 1e-6, "async");
  }
};

TEST_F(RunMemoryTest, AMissingFileIsAnEmptyMemoryAndASavedOneReadsBack) {
  EXPECT_NE(path(), graphs::run_memory_path(dir_.string(), 0x1234, graph::AlgorithmSpec{}, 1e-6, "sync"))
      << "a sync run's figures are not an async run's";
  EXPECT_EQ(graphs::load_run_memory(path()), graphs::RunMemory{});
  graphs::RunMeasurement alone;
  alone.parts = 1;
  alone.updates_per_edge = 35.0;
  alone.edge_updates_per_s["desktop"] = 4e8;
  graphs::RunMemory memory = graphs::remember({}, alone);
  graphs::RunMeasurement spread;
  spread.parts = 4;
  spread.updates_per_edge = 70.0;
  spread.cut_fraction = 0.5;
  spread.delta_fraction = 0.8;
  EXPECT_EQ(graphs::shape_key("chunks", {"a", "b"}), "chunks|a|b");
  spread.shapes["chunks|a|b"] = {10, {GraphPartShape{100, 200, 30, 40, 1, 1}, GraphPartShape{100, 200, 40, 30, 1, 1}}, {0.5, 0.5}};
  const graphs::RunMemory::Shape moved = spread.shapes["chunks|a|b"].rescaled({0.6, 0.4});
  EXPECT_EQ(moved.parts[0].edges, 240) << "a larger share, proportionally more edges";
  EXPECT_EQ(moved.parts[1].vertices, 80);
  EXPECT_EQ(moved.cut_edges, 10);
  spread.set_key = graphs::set_key({"a", "b"});
  spread.next_shares = {0.7, 0.3};
  memory = graphs::remember(memory, spread);
  EXPECT_EQ(memory.shares_by_set.at(spread.set_key), (std::vector<double>{0.7, 0.3}));
  ASSERT_TRUE(memory.spread_per_cut);
  EXPECT_DOUBLE_EQ(*memory.spread_per_cut, 2.0) << "70 = 35 x (1 + 2 x 0.5)";
  ASSERT_TRUE(graphs::save_run_memory(path(), memory).is_ok());
  EXPECT_EQ(graphs::load_run_memory(path()), memory);

  std::string source = "estimated";
  const GraphWorkload remembered = graphs::remembered_workload(workload(100, 44, 3.0), memory, source);
  EXPECT_DOUBLE_EQ(remembered.updates_per_edge_alone, 35.0);
  EXPECT_DOUBLE_EQ(remembered.spread_per_cut, 2.0);
  EXPECT_NE(source.find("measured by past runs"), std::string::npos) << source;
  const std::vector<GraphNodeCosts> costs = graphs::remembered_costs({node("desktop", 5e8), node("pi", 1e8)}, memory);
  EXPECT_DOUBLE_EQ(costs[0].rates.edge_updates_per_s, 4e8);
  EXPECT_DOUBLE_EQ(graphs::remembered_costs({node("desktop", 1e8)}, memory)[0].rates.edge_updates_per_s, 1.25e8)
      << "a burst rate above the profile's is capped";
  EXPECT_DOUBLE_EQ(graphs::remembered_costs({node("desktop", 4e9)}, memory)[0].rates.edge_updates_per_s, 4e8)
      << "a rate below it is what this graph's edges cost (connected components' queue: a tenth)";
  EXPECT_DOUBLE_EQ(costs[1].rates.edge_updates_per_s, 0.8e8)
      << "no memory for pi: its profile rate, scaled as the desktop's was on this graph (4e8 of 5e8)";
}

// Nodes that ran the graph alone set its cost factor by their median; each keeps its own rate
// between half its scaled profile and 1.25x its profile, and the others take the scaled profile, so that a
// graph ten times dearer than the probe does not make an unmeasured node look ten times faster.
TEST_F(RunMemoryTest, AGraphDearerThanTheProbeScalesEveryNodeAlike) {
  graphs::RunMemory memory;
  memory.edge_updates_per_s["desktop"] = 5e7;  // a tenth of its 5e8 profile
  memory.edge_updates_per_s["pi2"] = 0.2e7;    // a fiftieth of its 1e8
  memory.edge_updates_per_s["pi3"] = 1.5e8;    // above 1.25x its profile: a burst
  const std::vector<GraphNodeCosts> costs = graphs::remembered_costs(
      {node("desktop", 5e8), node("pi1", 1e8), node("pi2", 1e8), node("pi3", 1e8)}, memory);
  // Ratios 0.1, 0.02, 1.5: median 0.1.
  EXPECT_DOUBLE_EQ(costs[0].rates.edge_updates_per_s, 5e7);
  EXPECT_DOUBLE_EQ(costs[1].rates.edge_updates_per_s, 1e7) << "unmeasured: profile x 0.1";
  EXPECT_DOUBLE_EQ(costs[2].rates.edge_updates_per_s, 0.5e7) << "floored at half its scaled profile";
  EXPECT_DOUBLE_EQ(costs[3].rates.edge_updates_per_s, 1.25e8) << "capped at 1.25x its profile";
  // The desktop's speed against the unmeasured pi1 stays the profile's 5:1.
  EXPECT_DOUBLE_EQ(costs[0].rates.edge_updates_per_s / costs[1].rates.edge_updates_per_s, 5.0);

  graphs::RunMemory tiny;
  tiny.edge_updates_per_s["desktop"] = 1.0;  // a figure no graph gives: the factor stops at 0.01
  EXPECT_DOUBLE_EQ(graphs::remembered_costs({node("desktop", 5e8)}, tiny)[0].rates.edge_updates_per_s, 5e6 * 0.5);
  EXPECT_DOUBLE_EQ(graphs::remembered_costs({node("desktop", 5e8)}, {})[0].rates.edge_updates_per_s, 5e8)
      << "no memory: the profile's rate";
}

TEST_F(RunMemoryTest, RatesComeFromRunsAloneDeltaCostsFromRunsWithOthersAndEachSetKeepsItsExtra) {
  graphs::RunMeasurement with_others;
  with_others.parts = 2;
  with_others.set_key = graphs::set_key({"desktop", "pi"});
  EXPECT_EQ(with_others.set_key, "desktop|pi");
  with_others.delta_cost_scale["pi"] = 8.0;
  with_others.share_edge_updates_per_s["pi"] = 3e7;
  with_others.extra_s = 0.2;
  graphs::RunMemory memory = graphs::remember({}, with_others);
  EXPECT_TRUE(memory.edge_updates_per_s.empty());
  EXPECT_DOUBLE_EQ(memory.delta_cost_scale.at("pi"), 8.0);
  EXPECT_DOUBLE_EQ(memory.extra_by_set.at("desktop|pi"), 0.2);
  EXPECT_DOUBLE_EQ(*memory.extra_several_s, 0.2);

  with_others.delta_cost_scale["pi"] = 2.0;  // geometric smoothing: sqrt(8 x 2)
  with_others.extra_s = 0.4;                 // arithmetic: (0.2 + 0.4) / 2
  memory = graphs::remember(memory, with_others);
  EXPECT_DOUBLE_EQ(memory.delta_cost_scale.at("pi"), 4.0);
  EXPECT_DOUBLE_EQ(memory.extra_by_set.at("desktop|pi"), 0.3);
  with_others.delta_cost_scale["pi"] = 1e9;
  EXPECT_LE(graphs::remember(memory, with_others).delta_cost_scale.at("pi"), 200.0) << "a wild ratio is bounded";

  graphs::RunMeasurement alone;
  alone.set_key = "desktop";
  alone.edge_updates_per_s["desktop"] = 4e8;
  alone.extra_s = 0.01;
  memory = graphs::remember(memory, alone);
  EXPECT_DOUBLE_EQ(*memory.extra_alone_s, 0.01);
  EXPECT_DOUBLE_EQ(memory.extra_by_set.at("desktop"), 0.01);
  ASSERT_TRUE(graphs::save_run_memory(path(), memory).is_ok());
  EXPECT_EQ(graphs::load_run_memory(path()), memory);

  // The pi's delta costs are the profile's times its scale; the desktop's stay the profile's.
  const std::vector<GraphNodeCosts> costs =
      graphs::remembered_costs({node("desktop", 5e8, 1e9, 1e-8), node("pi", 1e8, 1e9, 1e-6)}, memory);
  EXPECT_DOUBLE_EQ(costs[1].rates.send_s_per_delta, 4e-6);
  EXPECT_DOUBLE_EQ(costs[1].rates.receive_s_per_delta, 4e-6);
  EXPECT_DOUBLE_EQ(costs[0].rates.send_s_per_delta, 1e-8);
  EXPECT_DOUBLE_EQ(costs[0].rates.edge_updates_per_s, 4e8);

  // Shares of several parts are sized by the rates measured with others (the pi's, floored at half
  // its profile's 1e8 scaled by the graph's 0.8), else by the forecast's (the desktop's, measured alone).
  // A node's part may suit its caches better than the probe did: up to 1.25x its profile stands.
  const std::vector<GraphNodeCosts> shares =
      graphs::remembered_share_costs({node("desktop", 5e8, 1e9, 1e-8), node("pi", 1e8, 1e9, 1e-6)}, memory);
  EXPECT_DOUBLE_EQ(shares[0].rates.edge_updates_per_s, 4e8);
  EXPECT_DOUBLE_EQ(shares[1].rates.edge_updates_per_s, 4e7);
  graphs::RunMemory fits = memory;
  fits.share_edge_updates_per_s["pi"] = 1.1e8;  // 1.1x its profile while the graph's factor is 0.8
  EXPECT_DOUBLE_EQ(graphs::remembered_share_costs({node("desktop", 5e8), node("pi", 1e8)}, fits)[1]
                       .rates.edge_updates_per_s,
                   1.1e8);
  // The forecast of several nodes reads the same rate; a node never measured beside others has none.
  const std::vector<GraphNodeCosts> forecast = graphs::remembered_costs({node("desktop", 5e8), node("pi", 1e8)}, fits);
  EXPECT_DOUBLE_EQ(forecast[1].edge_updates_per_s_with_others, 1.1e8);
  EXPECT_DOUBLE_EQ(forecast[0].edge_updates_per_s_with_others, 0.0);
}

TEST(GraphPlacementModel, ASetThatRanBeforeIsForecastWithItsOwnExtra) {
  const std::vector<GraphNodeCosts> costs{node("desktop", 1e8)};
  GraphWorkload w = workload(1'000'000, 10.0);
  w.extra_alone_s = 0.5;
  GraphCandidate candidate = alone(0, 100'000, 1'000'000);
  const double with_workloads = graphs::forecast_graph_run(costs, w, candidate).total_s;
  candidate.extra_s = 0.1;
  const graphs::GraphForecast own = graphs::forecast_graph_run(costs, w, candidate);
  EXPECT_DOUBLE_EQ(own.extra_s, 0.1);
  EXPECT_NEAR(with_workloads - own.total_s, 0.4, 1e-12);
}

// A part that grows from 68% to 90% of the graph has fewer remote ends, not more: ghosts and the
// cut follow s (1 - s); vertices and edges the share.
TEST(RunMemoryShape, ARescaledShapeScalesGhostsByTheEdgesThatCrossBetweenAPartAndTheRest) {
  const graphs::RunMemory::Shape shape{1000, {GraphPartShape{680, 6800, 500, 400, 1, 1}, GraphPartShape{320, 3200, 400, 500, 1, 1}},
                                             {0.68, 0.32}};
  const graphs::RunMemory::Shape grown = shape.rescaled({0.9, 0.1});
  EXPECT_EQ(grown.parts[0].vertices, 900);
  EXPECT_EQ(grown.parts[1].edges, 1000);
  const double factor = (0.9 * 0.1) / (0.68 * 0.32);
  EXPECT_EQ(grown.parts[0].ghosts_out, std::llround(500 * factor));
  EXPECT_EQ(grown.parts[1].ghosts_in, std::llround(500 * factor));
  EXPECT_LT(grown.parts[0].ghosts_in, 400);
  EXPECT_EQ(grown.cut_edges, std::llround(1000 * factor)) << "both parts' crossings shrink alike here";
  EXPECT_EQ(grown.shares, (std::vector<double>{0.9, 0.1}));
}

// The desktop re-swept its part (113 edge updates per edge against the Pis' 32) while the Pis,
// busy as long, set the pace: its need is its busy time scaled by 32/113, and shares move toward
// equal need, halfway and at most twofold per run.
TEST(RunMemoryShares, SharesMoveTowardEqualNeedHalfwayAndAtMostTwofold) {
  using graphs::PartRun;
  const std::vector<double> next = graphs::shares_for_equal_need({
      {0.7, 700'000, 113.0 * 700'000, 2.6},  // the desktop, re-sweeping
      {0.15, 150'000, 32.0 * 150'000, 2.6},  // two Pis setting the pace
      {0.15, 150'000, 32.0 * 150'000, 2.6},
  });
  ASSERT_EQ(next.size(), 3u);
  EXPECT_NEAR(next[0] + next[1] + next[2], 1.0, 1e-12);
  EXPECT_GT(next[0], 0.7) << "the desktop's share grows";
  EXPECT_DOUBLE_EQ(next[1], next[2]);
  // Undamped, need-equal shares would be 0.7 x 113/32 : 0.15 : 0.15; the move is the geometric
  // mean of old and balanced, renormalised.
  const double balanced_sum = 0.7 * 113.0 / 32.0 + 0.3;
  const double desktop = std::sqrt(0.7 * (0.7 * 113.0 / 32.0 / balanced_sum)), pi = std::sqrt(0.15 * (0.15 / balanced_sum));
  EXPECT_NEAR(next[0], desktop / (desktop + 2.0 * pi), 1e-12);

  const std::vector<double> even = graphs::shares_for_equal_need({{0.5, 100, 4000.0, 1.0}, {0.5, 100, 4000.0, 1.0}});
  EXPECT_EQ(even, (std::vector<double>{0.5, 0.5})) << "equal need: nothing moves";
  const std::vector<double> capped = graphs::shares_for_equal_need({{0.5, 100, 4000.0, 1.0}, {0.5, 100, 4000.0, 1000.0}});
  // The slow part's halfway move (to 0.022) is held at half its share, 0.25; the other moves to
  // sqrt(0.5 x 0.999); then both are renormalised.
  EXPECT_NEAR(capped[1] / capped[0], 0.25 / std::sqrt(0.5 * (1.0 / 1.001)), 1e-12) << "at most twofold before renormalising";
  EXPECT_TRUE(graphs::shares_for_equal_need({{1.0, 100, 4000.0, 1.0}}).empty()) << "one part: nothing to share";
  EXPECT_TRUE(graphs::shares_for_equal_need({{0.5, 100, 4000.0, 1.0}, {0.5, 0, 0.0, 0.0}}).empty())
      << "a part without edges or busy time says nothing";
}

TEST_F(RunMemoryTest, AGarbledOrImplausibleFileIsIgnoredNeverTrusted) {
  std::filesystem::create_directories(dir_);
  for (const std::string& text : {std::string("not json at all {"), std::string("[1, 2, 3]"),
                                 std::string(R"({"updates_per_edge_alone": -5, "edge_updates_per_s": {"d": 1e300},
                                                 "delta_cost_scale": {"d": 1e9}, "extra_by_set": {"d": "x"},
                                                 "shapes": {"k": {"cut_edges": -1, "parts": [[1,2,3]]}}})")}) {
    std::ofstream(path(), std::ios::trunc) << text;
    std::string note;
    const graphs::RunMemory memory = graphs::load_run_memory(path(), &note);
    EXPECT_FALSE(memory.updates_per_edge_alone) << text;
    EXPECT_TRUE(memory.edge_updates_per_s.empty()) << text;
    EXPECT_TRUE(memory.delta_cost_scale.empty()) << text;
    EXPECT_TRUE(memory.extra_by_set.empty()) << text;
    EXPECT_TRUE(memory.shapes.empty()) << text;
  }
}

TEST(NodeChoiceParsing, AutoAllBestAndListsAreReadAndBadListsRefused) {
  EXPECT_EQ(graphs::parse_node_choice("auto")->mode, graphs::NodeChoice::Mode::kAuto);
  EXPECT_EQ(graphs::parse_node_choice("all")->mode, graphs::NodeChoice::Mode::kAll);
  EXPECT_EQ(graphs::parse_node_choice("best")->mode, graphs::NodeChoice::Mode::kBest);
  Result<graphs::NodeChoice> listed = graphs::parse_node_choice("desktop,pi1");
  ASSERT_TRUE(listed.is_ok());
  EXPECT_EQ(listed->listed, (std::vector<std::string>{"desktop", "pi1"}));
  EXPECT_EQ(graphs::describe(*listed), "desktop,pi1");
  for (const char* bad : {"", "a,,b", "a,b,a", "a,"}) {
    Result<graphs::NodeChoice> refused = graphs::parse_node_choice(bad);
    EXPECT_FALSE(refused.is_ok()) << bad;
    if (!refused.is_ok()) {
      EXPECT_NE(refused.status().message().find("--nodes"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace tessera::balance
