#include "tessera/balance/model/model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace tessera::balance {
namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

model::SpeedCurve flat_curve(double gflops) { return model::SpeedCurve({{64, gflops}, {4096, gflops}}); }

// Shaped like a measured OpenBLAS profile: slow for small GEMMs, levelling off past 1024.
model::SpeedCurve rising_curve(double peak_gflops) {
  return model::SpeedCurve({{64, 0.1 * peak_gflops}, {256, 0.5 * peak_gflops}, {1024, 0.9 * peak_gflops},
                     {4096, peak_gflops}});
}

model::NodeModel node_model(std::string name, model::SpeedCurve speed, double to_node_bytes_per_s = kUnlimited,
                     double from_node_bytes_per_s = kUnlimited, double latency_s = 0.0) {
  return {std::move(name), std::move(speed), {latency_s, to_node_bytes_per_s, from_node_bytes_per_s}, {}, {}};
}

// A plan with exactly these rows per node, contiguous in node order.
plan::Plan plan_with_rows(const model::ClusterModel& model, std::vector<uint64_t> rows, uint64_t n, uint64_t k,
                    uint64_t panel_width, uint32_t panels_in_flight) {
  plan::Plan plan;
  plan.policy = plan::Policy::kModel;
  plan.m = std::accumulate(rows.begin(), rows.end(), uint64_t{0});
  plan.n = n;
  plan.k = k;
  plan.panel_width = panel_width;
  plan.panels_in_flight = panels_in_flight;
  uint64_t begin = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    plan.shares.push_back({model.nodes[i].name, 0.0, {begin, rows[i]}, {}});
    begin += rows[i];
  }
  return plan;
}

plan::PlanRequest request_for(const model::ClusterModel& model, uint64_t m, uint64_t n, uint64_t k, uint64_t panel_width = 64,
                        uint32_t panels_in_flight = 4) {
  plan::PlanRequest request;
  request.policy = plan::Policy::kModel;
  request.m = m;
  request.n = n;
  request.k = k;
  request.panel_width = panel_width;
  request.panels_in_flight = panels_in_flight;
  for (const model::NodeModel& node : model.nodes) request.node_names.push_back(node.name);
  return request;
}

// Node i of `count` runs at 1 + (ratio - 1) * i / (count - 1) times the slowest one's rate.
model::ClusterModel graded_cluster(std::size_t count, double ratio, double link_bytes_per_s, double coordinator_bytes_per_s,
                            double latency_s = 1e-4) {
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = coordinator_bytes_per_s;
  for (std::size_t i = 0; i < count; ++i) {
    const double scale = count == 1 ? 1.0 : 1.0 + (ratio - 1.0) * static_cast<double>(i) / static_cast<double>(count - 1);
    model.nodes.push_back(node_model("node" + std::to_string(i), rising_curve(2.0 * scale), link_bytes_per_s,
                                     link_bytes_per_s, latency_s));
  }
  return model;
}

void expect_valid_plan(const plan::Plan& plan, const plan::PlanRequest& request) {
  ASSERT_EQ(plan.shares.size(), request.node_names.size());
  EXPECT_EQ(plan.policy, plan::Policy::kModel);
  uint64_t begin = 0;
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    const plan::NodeShare& share = plan.shares[i];
    EXPECT_EQ(share.node_name, request.node_names[i]);
    EXPECT_EQ(share.rows.begin, begin) << plan.to_string();
    EXPECT_NEAR(share.weight, static_cast<double>(share.rows.count) / static_cast<double>(request.m), 1e-12);
    begin = share.rows.end();
  }
  EXPECT_EQ(begin, request.m) << plan.to_string();
}

double used_finish_ratio(const model::Prediction& prediction, const plan::Plan& plan) {
  double slowest = 0.0;
  double fastest = kUnlimited;
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    if (plan.shares[i].rows.count == 0) continue;
    slowest = std::max(slowest, prediction.finish_s[i]);
    fastest = std::min(fastest, prediction.finish_s[i]);
  }
  return slowest / fastest;
}

// ---------------------------------------------------------------------------------------------

TEST(SpeedCurveTest, ExactAtMeasuredPointsGivenInAnyOrder) {
  const model::SpeedCurve curve({{512, 8.0}, {64, 2.0}, {2048, 9.5}, {128, 4.25}});
  ASSERT_EQ(curve.points().size(), 4u);
  EXPECT_TRUE(std::is_sorted(curve.points().begin(), curve.points().end(),
                             [](const model::SpeedPoint& a, const model::SpeedPoint& b) { return a.size < b.size; }));
  for (const model::SpeedPoint& point : curve.points()) EXPECT_DOUBLE_EQ(curve.gflops_at(point.size), point.gflops);
}

TEST(SpeedCurveTest, MonotoneBetweenNeighbouringPoints) {
  // Rising, then falling past 1024 (a node that runs out of cache): each segment is monotone.
  const model::SpeedCurve curve({{64, 1.0}, {256, 6.0}, {1024, 9.0}, {4096, 7.0}});
  for (std::size_t segment = 0; segment + 1 < curve.points().size(); ++segment) {
    const model::SpeedPoint lo = curve.points()[segment];
    const model::SpeedPoint hi = curve.points()[segment + 1];
    const double direction = hi.gflops >= lo.gflops ? 1.0 : -1.0;
    double previous = lo.gflops;
    for (int step = 1; step <= 500; ++step) {
      const double size = lo.size * std::pow(hi.size / lo.size, step / 500.0);
      const double gflops = curve.gflops_at(size);
      EXPECT_GE(direction * (gflops - previous), -1e-12) << "size " << size;
      EXPECT_GE(gflops, std::min(lo.gflops, hi.gflops) - 1e-12);
      EXPECT_LE(gflops, std::max(lo.gflops, hi.gflops) + 1e-12);
      previous = gflops;
    }
  }
}

TEST(SpeedCurveTest, ClampedOutsideTheMeasuredRange) {
  const model::SpeedCurve curve({{100, 3.0}, {1000, 7.0}});
  EXPECT_EQ(curve.gflops_at(99.9), 3.0);
  EXPECT_EQ(curve.gflops_at(1.0), 3.0);
  EXPECT_EQ(curve.gflops_at(0.0), 3.0);
  EXPECT_EQ(curve.gflops_at(1000.1), 7.0);
  EXPECT_EQ(curve.gflops_at(1e9), 7.0);
}

TEST(SpeedCurveTest, LinearInLogSizeSoTheGeometricMeanGetsTheMeanRate) {
  const model::SpeedCurve curve({{100, 2.0}, {400, 6.0}});
  EXPECT_NEAR(curve.gflops_at(200), 4.0, 1e-12);
  EXPECT_NEAR(curve.gflops_at(100 * std::pow(4.0, 0.25)), 3.0, 1e-12);
}

TEST(SpeedCurveTest, EmptyCurveIsZeroAndDuplicateSizesKeepTheFirst) {
  EXPECT_EQ(model::SpeedCurve().gflops_at(512), 0.0);
  EXPECT_EQ(model::SpeedCurve(std::vector<model::SpeedPoint>{}).gflops_at(512), 0.0);
  const model::SpeedCurve curve({{256, 5.0}, {64, 1.0}, {256, 99.0}, {0, 42.0}, {-8, 42.0}});
  ASSERT_EQ(curve.points(), (std::vector<model::SpeedPoint>{{64, 1.0}, {256, 5.0}}));
  EXPECT_EQ(curve.gflops_at(256), 5.0);
}

// ---------------------------------------------------------------------------------------------

TEST(PredictTest, ComputeBoundNodeTakesFlopsOverSpeedPlusLatency) {
  constexpr double kLatency = 1e-3;
  model::ClusterModel model;
  model.nodes.push_back(node_model("solo", flat_curve(10.0), kUnlimited, kUnlimited, kLatency));
  const plan::Plan plan = plan_with_rows(model, {300}, 200, 1000, 64, 64);  // 16 panels, all in flight
  const model::Prediction prediction = model::predict(model, plan);
  const double compute_s = 2.0 * 300 * 200 * 1000 / 10e9;
  // A's arrival and the result's each pay the latency once; the panels stream behind A.
  const double expected = compute_s + 2 * kLatency;
  ASSERT_EQ(prediction.finish_s.size(), 1u);
  EXPECT_NEAR(prediction.finish_s[0], expected, 1e-9 * expected);
  EXPECT_EQ(prediction.makespan_s, prediction.finish_s[0]);
}

TEST(PredictTest, ReceivedBytesCostComputeTimeAndContentionSlowsItAll) {
  model::ClusterModel model;
  model.nodes.push_back(node_model("solo", flat_curve(10.0)));
  const plan::Plan plan = plan_with_rows(model, {300}, 200, 1000, 64, 4);
  const double alone = model::predict(model, plan).makespan_s;
  ASSERT_NEAR(alone, 2.0 * 300 * 200 * 1000 / 10e9, 1e-12);  // unlimited links: the GEMM only

  model.nodes[0].cpu.availability = 0.5;  // half the speed it had alone
  EXPECT_NEAR(model::predict(model, plan).makespan_s, 2.0 * alone, 1e-12);

  // Every byte of A and B received costs the node 1 ns of compute; frame overheads add a little.
  model.nodes[0].cpu = {1e-9, 1.0};
  const double data_bytes = 8.0 * (300.0 * 1000 + 1000.0 * 200);
  const double charged = model::predict(model, plan).makespan_s - alone;
  EXPECT_GE(charged, data_bytes * 1e-9);
  EXPECT_LT(charged, (data_bytes + 64 * 1024) * 1e-9);
  model.nodes[0].cpu = {1e-9, 0.5};
  EXPECT_NEAR(model::predict(model, plan).makespan_s, 2.0 * (alone + charged), 1e-12);
}

TEST(ModelPlanTest, ANodeWithLessOfItsCoresGetsFewerRowsAndTheFinishesStayEven) {
  model::ClusterModel model = graded_cluster(3, 4.0, 1e9, 0.0);
  const plan::PlanRequest request = request_for(model, 1024, 1024, 1024);
  Result<model::ModelPlanResult> before = model::make_model_plan(request, model);
  ASSERT_TRUE(before.is_ok()) << before.status().to_string();
  model.nodes[2].cpu.availability = 0.25;  // the fastest node keeps a quarter of its cores
  Result<model::ModelPlanResult> after = model::make_model_plan(request, model);
  ASSERT_TRUE(after.is_ok()) << after.status().to_string();
  EXPECT_LT(after->plan.shares[2].rows.count, before->plan.shares[2].rows.count) << after->plan.to_string();
  EXPECT_LT(used_finish_ratio(model::predict(model, after->plan), after->plan), 1.05) << after->plan.to_string();
}

TEST(ModelPlanTest, ANodeThatPaysMoreToReceiveGetsFewerRows) {
  model::ClusterModel model;
  model.nodes = {node_model("cheap", flat_curve(10.0), 1e9, 1e9), node_model("dear", flat_curve(10.0), 1e9, 1e9)};
  model.nodes[1].cpu.receive_s_per_byte = 4e-9;  // a quarter core reading 1 GB/s of socket: ~1 ns/B of CPU
  Result<model::ModelPlanResult> result = model::make_model_plan(request_for(model, 1024, 1024, 1024), model);
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_LT(result->plan.shares[1].rows.count, result->plan.shares[0].rows.count) << result->plan.to_string();
  const model::Prediction prediction = model::predict(model, result->plan);
  EXPECT_LT(used_finish_ratio(prediction, result->plan), 1.05) << result->plan.to_string();
}

TEST(PredictTest, CreditStallsPayTheLatencyBothWays) {
  constexpr double kLatency = 1e-3;
  model::ClusterModel model;
  model.nodes.push_back(node_model("solo", flat_curve(10.0), kUnlimited, kUnlimited, kLatency));
  const plan::Plan plan = plan_with_rows(model, {300}, 200, 1000, 64, 1);
  const double compute_s = 2.0 * 300 * 200 * 1000 / 10e9;
  // With one panel in flight, each of the 15 later panels waits for the credit to come back and
  // then for itself to reach the node.
  const double expected = compute_s + 2 * kLatency + 15 * 2 * kLatency;
  EXPECT_NEAR(model::predict(model, plan).makespan_s, expected, 1e-9 * expected);
}

TEST(PredictTest, LinkBoundNodeTakesBytesOverBandwidth) {
  constexpr double kBandwidth = 1e6;
  model::ClusterModel model;
  model.nodes.push_back(node_model("far", flat_curve(1e6), kBandwidth, kBandwidth));
  const uint64_t rows = 64, n = 256, k = 512;
  const plan::Plan plan = plan_with_rows(model, {rows}, n, k, 64, 4);
  const double bytes = 8.0 * (rows * k + k * n + rows * n);
  const double expected = bytes / kBandwidth;
  EXPECT_NEAR(model::predict(model, plan).makespan_s, expected, 0.01 * expected);
}

TEST(PredictTest, PanelsInFlightOverlapTransferWithCompute) {
  // One panel (1 MiB) takes as long to send as to multiply (2*256*128*1024 flops at 1 GFLOP/s).
  const double panel_s = 2.0 * 256 * 128 * 1024 / 1e9;
  model::ClusterModel model;
  model.nodes.push_back(node_model("balanced", flat_curve(1.0), 8.0 * 128 * 1024 / panel_s));
  const double serial = model::predict(model, plan_with_rows(model, {256}, 1024, 1024, 128, 1)).makespan_s;
  const double overlapped = model::predict(model, plan_with_rows(model, {256}, 1024, 1024, 128, 8)).makespan_s;
  // A (2 panels' worth) + 8 x (send + compute) against A + 8 sends + the last compute.
  EXPECT_NEAR(serial, 18 * panel_s, 0.01 * serial);
  EXPECT_NEAR(overlapped, 11 * panel_s, 0.01 * overlapped);
  EXPECT_LT(overlapped, 0.75 * serial);
}

TEST(PredictTest, NodesShareTheCoordinatorsSendCapacity) {
  model::ClusterModel one;
  one.coordinator_send_bytes_per_s = 100e6;
  one.nodes.push_back(node_model("a", flat_curve(1e4), 100e6));
  model::ClusterModel two = one;
  two.nodes.push_back(node_model("b", flat_curve(1e4), 100e6));
  const double alone = model::predict(one, plan_with_rows(one, {8}, 1024, 1024, 128, 4)).makespan_s;
  const model::Prediction both = model::predict(two, plan_with_rows(two, {8, 8}, 1024, 1024, 128, 4));
  EXPECT_NEAR(alone, 8.0 * (8 * 1024 + 1024 * 1024) / 100e6, 0.01 * alone);
  EXPECT_NEAR(both.finish_s[0] / alone, 2.0, 0.05);
  EXPECT_NEAR(both.finish_s[1] / alone, 2.0, 0.05);
}

TEST(PredictTest, ASlowLinkLeavesTheRestOfTheCapacityToTheOthers) {
  // Max-min fairness: the 30 MB/s link is its own bottleneck, the other node gets the other 70.
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = 100e6;
  model.nodes.push_back(node_model("slow", flat_curve(1e4), 30e6));
  model.nodes.push_back(node_model("fast", flat_curve(1e4), 1e9));
  const model::Prediction prediction = model::predict(model, plan_with_rows(model, {8, 8}, 1024, 1024, 128, 4));
  const double bytes = 8.0 * (8 * 1024 + 1024 * 1024);
  EXPECT_NEAR(prediction.finish_s[0], bytes / 30e6, 0.01 * prediction.finish_s[0]);
  EXPECT_NEAR(prediction.finish_s[1], bytes / 70e6, 0.01 * prediction.finish_s[1]);
}

TEST(PredictTest, NodesBehindASwitchShareItsUplinkAndTheOthersKeepTheirLinks) {
  // Two nodes behind a 50 MB/s uplink get 25 MB/s each although their links carry 100; a third
  // off the switch keeps its 100 (the coordinator's 1 GB/s binds nobody).
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = 1e9;
  model.switch_uplink_bytes_per_s = 50e6;
  for (const char* name : {"pi1", "pi2", "desk"}) model.nodes.push_back(node_model(name, flat_curve(1e4), 100e6, 100e6));
  model.nodes[0].link.behind_switch = model.nodes[1].link.behind_switch = true;
  const model::Prediction prediction = model::predict(model, plan_with_rows(model, {8, 8, 8}, 1024, 1024, 128, 4));
  const double bytes = 8.0 * (8 * 1024 + 1024 * 1024);
  EXPECT_NEAR(prediction.finish_s[0], bytes / 25e6, 0.02 * prediction.finish_s[0]);
  EXPECT_NEAR(prediction.finish_s[1], bytes / 25e6, 0.02 * prediction.finish_s[1]);
  EXPECT_NEAR(prediction.finish_s[2], bytes / 100e6, 0.02 * prediction.finish_s[2]);

  model::ClusterModel no_switch = model;
  no_switch.switch_uplink_bytes_per_s = 0.0;
  EXPECT_NEAR(model::predict(no_switch, plan_with_rows(no_switch, {8, 8, 8}, 1024, 1024, 128, 4)).finish_s[0],
              bytes / 100e6, 0.02 * bytes / 100e6);
  // The pull replay shares the uplink alike.
  plan::Plan pulled = plan_with_rows(model, {8, 8, 8}, 1024, 1024, 128, 4);
  pulled.tile_rows = 8;
  const model::Prediction pull = model::predict_pull(model, pulled);
  const model::Prediction pull_free = model::predict_pull(no_switch, pulled);
  EXPECT_GT(pull.makespan_s, pull_free.makespan_s);
}

// Eight Pis behind a switch whose uplink carries 40 MB/s, each needing all of B (33.5 MB): sized
// as if all eight received at once, each gets 5 MB/s and none pays, so every row goes to the
// desktop; the fastest few alone do pay. The model plan takes them, never ending later than the
// desktop alone, and names every Pi it leaves out.
TEST(ModelPlanTest, BehindASharedUplinkFewerNodesThanAllAreTakenWhenTheyFinishSooner) {
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = 1e9;
  model.switch_uplink_bytes_per_s = 40e6;
  model.nodes.push_back(node_model("desktop", flat_curve(8.0), 1e9, 1e9));
  for (int i = 1; i <= 8; ++i) {
    model.nodes.push_back(node_model("pi" + std::to_string(i), flat_curve(4.0), 100e6, 100e6));
    model.nodes.back().link.behind_switch = true;
  }
  const plan::PlanRequest request = request_for(model, 2048, 2048, 2048, 128, 4);
  Result<model::ModelPlanResult> planned = model::make_model_plan(request, model);
  ASSERT_TRUE(planned.is_ok()) << planned.status().to_string();
  expect_valid_plan(planned->plan, request);
  std::size_t pis_taking = 0;
  for (std::size_t i = 1; i < planned->plan.shares.size(); ++i) pis_taking += planned->plan.shares[i].rows.count > 0 ? 1 : 0;
  EXPECT_GT(pis_taking, 0u) << planned->plan.to_string();
  EXPECT_LT(pis_taking, 8u) << planned->plan.to_string();
  plan::Plan alone = planned->plan;
  for (std::size_t i = 0; i < alone.shares.size(); ++i) alone.shares[i].rows = partition::RowBlock{0, i == 0 ? 2048u : 0u};
  EXPECT_LT(model::predict(model, planned->plan).makespan_s, model::predict(model, alone).makespan_s);
  std::size_t named = 0;
  for (const std::string& warning : planned->warnings) named += warning.find("gets no rows") != std::string::npos ? 1 : 0;
  EXPECT_EQ(named, 8 - pis_taking);
}

TEST(PredictTest, NodesThatCannotServeTheirRowsNeverFinish) {
  model::ClusterModel model;
  model.nodes.push_back(node_model("ok", flat_curve(5.0), 1e8, 1e8));
  model.nodes.push_back(node_model("unprofiled", model::SpeedCurve()));
  model.nodes.push_back(node_model("stalled", flat_curve(0.0)));
  model.nodes.push_back(node_model("deaf", flat_curve(5.0), 0.0, 1e8));
  model.nodes.push_back(node_model("mute", flat_curve(5.0), 1e8, 0.0));
  model.nodes.push_back(node_model("spare", model::SpeedCurve()));
  const model::Prediction prediction = model::predict(model, plan_with_rows(model, {10, 10, 10, 10, 10, 0}, 64, 64, 16, 2));
  EXPECT_TRUE(std::isfinite(prediction.finish_s[0]));
  EXPECT_GT(prediction.finish_s[0], 0.0);
  for (std::size_t i = 1; i <= 4; ++i) EXPECT_TRUE(std::isinf(prediction.finish_s[i])) << model.nodes[i].name;
  EXPECT_EQ(prediction.finish_s[5], 0.0);
  EXPECT_TRUE(std::isinf(prediction.makespan_s));
}

TEST(PredictTest, FinishGrowsWithRows) {
  const std::vector<model::ClusterModel> models = {
      graded_cluster(1, 1.0, kUnlimited, 0.0),  // compute-bound
      graded_cluster(1, 1.0, 12.5e6, 0.0),      // link-bound
      graded_cluster(1, 1.0, 125e6, 0.0, 5e-3), // comparable, with latency
  };
  for (const model::ClusterModel& model : models) {
    for (uint32_t in_flight : {1u, 4u}) {
      double previous = 0.0;
      for (uint64_t rows = 0; rows <= 600; rows += 7) {
        const double finish = model::predict(model, plan_with_rows(model, {rows}, 300, 700, 64, in_flight)).makespan_s;
        EXPECT_GE(finish, previous) << "rows " << rows;
        previous = finish;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

plan::Plan dynamic_plan(const model::ClusterModel& model, uint64_t m, uint64_t n, uint64_t k, uint64_t tile_rows) {
  plan::Plan plan;
  plan.policy = plan::Policy::kDynamic;
  plan.m = m;
  plan.n = n;
  plan.k = k;
  plan.tile_rows = tile_rows;
  plan.panel_width = 64;
  plan.panels_in_flight = 4;
  for (const model::NodeModel& node : model.nodes) plan.shares.push_back({node.name, 0.0, {0, 0}, {}});
  return plan;
}

TEST(PredictPullTest, OneComputeBoundNodeTakesEveryTileBackToBack) {
  model::ClusterModel model;
  model.nodes = {node_model("solo", flat_curve(2.0))};
  const model::Prediction prediction = model::predict_pull(model, dynamic_plan(model, 1000, 100, 100, 64));
  // Unlimited links: the time is the flops over the rate, whatever the tiling.
  EXPECT_NEAR(prediction.makespan_s, 2.0 * 1000 * 100 * 100 / 2e9, 1e-12);
  EXPECT_EQ(prediction.finish_s.front(), prediction.makespan_s);
}

TEST(PredictPullTest, ReceivedBytesAndContentionCostThePullReplayToo) {
  model::ClusterModel model;
  model.nodes = {node_model("solo", flat_curve(2.0))};
  const plan::Plan plan = dynamic_plan(model, 1000, 100, 100, 64);
  const double alone = model::predict_pull(model, plan).makespan_s;
  model.nodes[0].cpu = {1e-9, 0.25};
  // A once per tile (1000 rows of it), B once: 8 (1000 x 100 + 100 x 100) bytes at 1 ns, then all slowed 4x.
  const double expected = 4.0 * (alone + 8.0 * (1000.0 * 100 + 100.0 * 100) * 1e-9);
  EXPECT_NEAR(model::predict_pull(model, plan).makespan_s, expected, 1e-9 * expected);
}

TEST(PredictPullTest, EqualNodesShareTheTilesAndAFasterOneFinishesNoLater) {
  model::ClusterModel model;
  model.nodes = {node_model("a", flat_curve(2.0)), node_model("b", flat_curve(2.0))};
  const model::Prediction equal = model::predict_pull(model, dynamic_plan(model, 1024, 256, 256, 64));
  const double alone = 2.0 * 1024 * 256 * 256 / 2e9;
  EXPECT_NEAR(equal.makespan_s, alone / 2.0, 1e-12) << "16 tiles, 8 each";
  EXPECT_NEAR(equal.finish_s[0], equal.finish_s[1], 1e-12);
  model.nodes[1].speed = flat_curve(6.0);
  const model::Prediction skewed = model::predict_pull(model, dynamic_plan(model, 1024, 256, 256, 64));
  EXPECT_LT(skewed.makespan_s, equal.makespan_s);
  EXPECT_GE(skewed.makespan_s, alone / 4.0 - 1e-12) << "never better than the pooled rate";
}

TEST(PredictPullTest, ASlowLinkPaysForAllOfBWithItsFirstTileAndCopiesTakeItsTilesBack) {
  model::ClusterModel model;
  // b's link carries 1 MB/s: B (512 x 512 doubles, 2 MiB) alone takes it about 2 s.
  model.nodes = {node_model("a", flat_curve(1.0)), node_model("b", flat_curve(1.0), 1e6, 1e6)};
  const plan::Plan plan = dynamic_plan(model, 512, 512, 512, 32);
  const model::Prediction prediction = model::predict_pull(model, plan);
  const double b_bytes = 8.0 * 512 * 512;
  // b pulls its first tiles at once but cannot deliver one before B has reached it (2.1 s); a,
  // done with the rest by about 0.27 s, copies b's tiles and wins them all.
  if (prediction.finish_s[1] > 0.0) {
    EXPECT_GT(prediction.finish_s[1], b_bytes / 1e6);
  }
  EXPECT_LT(prediction.makespan_s, b_bytes / 1e6) << "the copies beat waiting for b";
  EXPECT_GE(prediction.makespan_s, 2.0 * 512 * 512 * 512 / 1e9 - 1e-12) << "never better than a doing everything";
  EXPECT_EQ(prediction.makespan_s, std::max(prediction.finish_s[0], prediction.finish_s[1]));
}

TEST(PredictPullTest, NodesThatCannotComputeTakeNoTilesAndWithNoneLeftItNeverFinishes) {
  model::ClusterModel model;
  model.nodes = {node_model("ok", flat_curve(1.0)), node_model("no-link", flat_curve(1.0), 0.0)};
  const model::Prediction prediction = model::predict_pull(model, dynamic_plan(model, 256, 64, 64, 16));
  EXPECT_EQ(prediction.finish_s[1], 0.0);
  EXPECT_GT(prediction.finish_s[0], 0.0);
  model.nodes.erase(model.nodes.begin());
  const model::Prediction none = model::predict_pull(model, dynamic_plan(model, 256, 64, 64, 16));
  EXPECT_TRUE(std::isinf(none.makespan_s));
}

TEST(ModelPlanTest, RowsSumToMAcrossClusterSizesSpeedRatiosAndShapes) {
  for (std::size_t nodes : {1u, 2u, 3u, 5u, 7u}) {
    for (double ratio : {1.0, 2.0, 5.0, 16.0}) {
      for (double coordinator : {0.0, 250e6}) {
        const model::ClusterModel model = graded_cluster(nodes, ratio, 125e6, coordinator);
        for (uint64_t m : {1u, 2u, 3u, 6u, 97u, 1009u}) {
          const plan::PlanRequest request = request_for(model, m, 257, 301, 64, 3);
          Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
          ASSERT_TRUE(result.is_ok()) << result.status().to_string();
          SCOPED_TRACE(::testing::Message() << nodes << " nodes, ratio " << ratio << ", m " << m);
          // Every node is usable: a warning only explains a node the plan leaves without rows.
          std::size_t idle = 0;
          for (const plan::NodeShare& share : result->plan.shares) idle += share.rows.count == 0 ? 1 : 0;
          EXPECT_EQ(result->warnings.size(), idle);
          for (const std::string& warning : result->warnings) EXPECT_NE(warning.find("gets no rows"), std::string::npos);
          expect_valid_plan(result->plan, request);
          EXPECT_TRUE(std::isfinite(model::predict(model, result->plan).makespan_s));
        }
      }
    }
  }
}

TEST(ModelPlanTest, ComputeBoundNodesFinishTogether) {
  for (std::size_t nodes : {2u, 3u, 7u}) {
    for (double ratio : {1.0, 3.0, 16.0}) {
      const model::ClusterModel model = graded_cluster(nodes, ratio, 10e9, 0.0);
      const plan::PlanRequest request = request_for(model, 2048, 1024, 1024, 128, 4);
      Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
      ASSERT_TRUE(result.is_ok()) << result.status().to_string();
      const model::Prediction prediction = model::predict(model, result->plan);
      EXPECT_LT(used_finish_ratio(prediction, result->plan), 1.05) << result->plan.to_string();
      // No node could take one more row without finishing after the makespan... unless it is the
      // one that sets it: the plan is within one row of the common finish time.
      for (std::size_t i = 0; i < nodes; ++i) {
        std::vector<uint64_t> rows(nodes, 0);
        rows[i] = result->plan.shares[i].rows.count + 1;
        const double with_one_more = model::predict(model, plan_with_rows(model, rows, 1024, 1024, 128, 4)).finish_s[i];
        EXPECT_GE(with_one_more, prediction.makespan_s * (1 - 1e-6)) << "node " << i;
      }
    }
  }
}

TEST(ModelPlanTest, FewerRowsThanNodesStillCoversEveryRow) {
  const model::ClusterModel model = graded_cluster(7, 16.0, 125e6, 500e6);
  for (uint64_t m = 1; m <= 7; ++m) {
    const plan::PlanRequest request = request_for(model, m, 64, 64, 16, 2);
    Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    expect_valid_plan(result->plan, request);
  }
}

TEST(ModelPlanTest, CurvesTooSteepForMonotoneFinishTimesStillGiveValidPlans) {
  // 0.01 -> 10 GFLOP/s between 64 and 128: a bigger share can finish sooner than a smaller one,
  // which breaks the bisection's assumption but must not break the plan.
  model::ClusterModel model;
  model.nodes.push_back(node_model("steep", model::SpeedCurve({{64, 0.01}, {128, 10.0}}), 1e9, 1e9));
  model.nodes.push_back(node_model("steeper", model::SpeedCurve({{16, 0.001}, {256, 20.0}}), 1e9, 1e9));
  model.nodes.push_back(node_model("flat", flat_curve(1.0), 1e9, 1e9));
  for (uint64_t m : {1u, 5u, 50u, 333u, 4000u}) {
    const plan::PlanRequest request = request_for(model, m, 96, 80, 16, 2);
    Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    expect_valid_plan(result->plan, request);
    EXPECT_TRUE(std::isfinite(model::predict(model, result->plan).makespan_s));
  }
}

TEST(ModelPlanTest, UnusableNodesAreExcludedWithAWarningNamingThem) {
  model::ClusterModel model;
  model.nodes.push_back(node_model("ok", rising_curve(4.0), 125e6, 125e6));
  model.nodes.push_back(node_model("unprofiled", model::SpeedCurve(), 125e6, 125e6));
  model.nodes.push_back(node_model("stalled", flat_curve(0.0), 125e6, 125e6));
  model.nodes.push_back(node_model("deaf", rising_curve(4.0), 0.0, 125e6));
  model.nodes.push_back(node_model("mute", rising_curve(4.0), 125e6, 0.0));
  model.nodes.push_back(node_model("also-ok", rising_curve(2.0), 125e6, 125e6));
  const plan::PlanRequest request = request_for(model, 500, 256, 256);
  Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  expect_valid_plan(result->plan, request);
  ASSERT_EQ(result->warnings.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"'unprofiled'", "speed curve is empty"},
      {"'stalled'", "rates are 0"},
      {"'deaf'", "to the node is 0"},
      {"'mute'", "from the node is 0"}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NE(result->warnings[i].find(expected[i].first), std::string::npos) << result->warnings[i];
    EXPECT_NE(result->warnings[i].find(expected[i].second), std::string::npos) << result->warnings[i];
    EXPECT_EQ(result->plan.shares[i + 1].rows.count, 0u);
  }
  EXPECT_GT(result->plan.shares[0].rows.count, result->plan.shares[5].rows.count);
  EXPECT_GT(result->plan.shares[5].rows.count, 0u);
  EXPECT_TRUE(std::isfinite(model::predict(model, result->plan).makespan_s));
}

TEST(ModelPlanTest, NoUsableNodeIsAnError) {
  model::ClusterModel model;
  model.nodes.push_back(node_model("unprofiled", model::SpeedCurve()));
  model.nodes.push_back(node_model("deaf", flat_curve(1.0), 0.0, 1e6));
  Result<model::ModelPlanResult> result = model::make_model_plan(request_for(model, 10, 10, 10), model);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("'deaf'"), std::string::npos) << result.status().message();
}

TEST(ModelPlanTest, SamePlanEveryTime) {
  const model::ClusterModel model = graded_cluster(5, 7.0, 50e6, 120e6, 2e-4);
  const plan::PlanRequest request = request_for(model, 10007, 999, 1001, 100, 3);
  const Result<model::ModelPlanResult> first = model::make_model_plan(request, model);
  ASSERT_TRUE(first.is_ok());
  for (int i = 0; i < 5; ++i) {
    const Result<model::ModelPlanResult> again = model::make_model_plan(request, model);
    ASSERT_TRUE(again.is_ok());
    EXPECT_EQ(again->plan, first->plan);
    EXPECT_EQ(again->warnings, first->warnings);
  }
}

TEST(ModelPlanTest, ASlowLinkEarnsLessThanItsCpuShare) {
  // Same CPU, so on speed alone the slow-link node would take half the rows.
  model::ClusterModel model;
  model.nodes.push_back(node_model("lan", flat_curve(10.0), 1.25e9, 1.25e9));
  model.nodes.push_back(node_model("wifi", flat_curve(10.0), 12.5e6, 12.5e6));
  const plan::PlanRequest request = request_for(model, 8192, 4096, 512, 128, 4);
  Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  expect_valid_plan(result->plan, request);
  const uint64_t wifi_rows = result->plan.shares[1].rows.count;
  EXPECT_GT(wifi_rows, 0u) << result->plan.to_string();
  EXPECT_LT(wifi_rows, request.m / 4) << result->plan.to_string();
  EXPECT_LT(used_finish_ratio(model::predict(model, result->plan), result->plan), 1.05);
}

TEST(ModelPlanTest, ASlowLinkThatCannotEvenCarryBInTimeGetsNoRows) {
  model::ClusterModel model;
  model.nodes.push_back(node_model("lan", flat_curve(10.0), 1.25e9, 1.25e9));
  model.nodes.push_back(node_model("wifi", flat_curve(10.0), 12.5e6, 12.5e6));
  const plan::PlanRequest request = request_for(model, 512, 4096, 512, 128, 4);
  // B alone takes 8*512*4096 / 12.5e6 = 1.34 s on the slow link; the fast node does everything
  // (2.1 GFLOP at 10 GFLOP/s plus its transfers) in about 0.23 s.
  const double b_on_slow_link_s = 8.0 * 512 * 4096 / 12.5e6;
  const double lan_alone_s = model::predict(model, plan_with_rows(model, {512, 0}, 4096, 512, 128, 4)).makespan_s;
  ASSERT_GT(b_on_slow_link_s, lan_alone_s);
  Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ(result->plan.shares[0].rows.count, 512u);
  EXPECT_EQ(result->plan.shares[1].rows.count, 0u);
  // Left out by the model, not for being unusable, and the plan says why.
  ASSERT_EQ(result->warnings.size(), 1u);
  EXPECT_NE(result->warnings[0].find("node 'wifi' gets no rows: even one row would finish at"), std::string::npos)
      << result->warnings[0];
  EXPECT_NE(result->warnings[0].find("its link must first carry B, 16.8 MB at 12.5 MB/s"), std::string::npos)
      << result->warnings[0];
  EXPECT_NEAR(model::predict(model, result->plan).makespan_s, lan_alone_s, 1e-12 * lan_alone_s);
}

TEST(ModelPlanTest, NeverSlowerThanEvenOrProportionalPlans) {
  for (std::size_t nodes : {1u, 2u, 3u, 7u}) {
    for (double ratio : {1.0, 4.0, 16.0}) {
      for (double link : {kUnlimited, 125e6, 12.5e6}) {
        const model::ClusterModel model = graded_cluster(nodes, ratio, link, 0.0);
        SCOPED_TRACE(::testing::Message() << nodes << " nodes, ratio " << ratio << ", link " << link);
        plan::PlanRequest request = request_for(model, 1531, 777, 513, 64, 4);
        Result<model::ModelPlanResult> model_plan = model::make_model_plan(request, model);
        ASSERT_TRUE(model_plan.is_ok()) << model_plan.status().to_string();
        const double model_makespan = model::predict(model, model_plan->plan).makespan_s;

        request.policy = plan::Policy::kEven;
        Result<plan::Plan> even = plan::make_plan(request);
        ASSERT_TRUE(even.is_ok());
        request.policy = plan::Policy::kProportional;
        for (const model::NodeModel& node : model.nodes) request.weights.push_back(node.speed.points().back().gflops);
        Result<plan::Plan> proportional = plan::make_plan(request);
        ASSERT_TRUE(proportional.is_ok());
        // Without a shared coordinator the single-node model is exact, so the bisection's answer
        // is optimal up to its tolerance.
        EXPECT_LE(model_makespan, model::predict(model, *even).makespan_s * (1 + 2e-6));
        EXPECT_LE(model_makespan, model::predict(model, *proportional).makespan_s * (1 + 2e-6));
      }
    }
  }
}

TEST(ModelPlanTest, UsuallyNoSlowerWithASharedCoordinator) {
  // The fair-share approximation is pessimistic, so allow it a little slack against baselines
  // that model::predict() judges with the true sharing.
  for (std::size_t nodes : {2u, 3u, 7u}) {
    for (double ratio : {1.0, 4.0, 16.0}) {
      const model::ClusterModel model = graded_cluster(nodes, ratio, 125e6, 200e6);
      SCOPED_TRACE(::testing::Message() << nodes << " nodes, ratio " << ratio);
      plan::PlanRequest request = request_for(model, 1531, 777, 513, 64, 4);
      Result<model::ModelPlanResult> model_plan = model::make_model_plan(request, model);
      ASSERT_TRUE(model_plan.is_ok());
      const double model_makespan = model::predict(model, model_plan->plan).makespan_s;
      request.policy = plan::Policy::kProportional;
      for (const model::NodeModel& node : model.nodes) request.weights.push_back(node.speed.points().back().gflops);
      EXPECT_LE(model_makespan, model::predict(model, *plan::make_plan(request)).makespan_s * 1.02);
      request.policy = plan::Policy::kEven;
      EXPECT_LE(model_makespan, model::predict(model, *plan::make_plan(request)).makespan_s * 1.02);
    }
  }
}

TEST(ModelPlanTest, BadRequestsAreRefusedWithReasons) {
  const model::ClusterModel model = graded_cluster(3, 2.0, 125e6, 0.0);
  const plan::PlanRequest good = request_for(model, 100, 100, 100);
  ASSERT_TRUE(model::make_model_plan(good, model).is_ok());

  plan::PlanRequest zero_k = good;
  zero_k.k = 0;
  EXPECT_EQ(model::make_model_plan(zero_k, model).status().code(), StatusCode::kInvalidArgument);
  plan::PlanRequest too_few_names = good;
  too_few_names.node_names.pop_back();
  EXPECT_EQ(model::make_model_plan(too_few_names, model).status().code(), StatusCode::kInvalidArgument);
  plan::PlanRequest wrong_name = good;
  wrong_name.node_names[1] = "elsewhere";
  const Status wrong_name_status = model::make_model_plan(wrong_name, model).status();
  EXPECT_EQ(wrong_name_status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_name_status.message().find("elsewhere"), std::string::npos);
  plan::PlanRequest no_width = good;
  no_width.panel_width = 0;
  EXPECT_EQ(model::make_model_plan(no_width, model).status().code(), StatusCode::kInvalidArgument);
  plan::PlanRequest no_credit = good;
  no_credit.panels_in_flight = 0;
  EXPECT_EQ(model::make_model_plan(no_credit, model).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelPlanTest, PanelWidthIsClippedToK) {
  const model::ClusterModel model = graded_cluster(2, 2.0, 125e6, 0.0);
  Result<model::ModelPlanResult> result = model::make_model_plan(request_for(model, 100, 100, 50, 1000), model);
  ASSERT_TRUE(result.is_ok());
  EXPECT_EQ(result->plan.panel_width, 50u);
  EXPECT_EQ(result->plan.panel_count(), 1u);
}

TEST(ModelPlanTest, LargePlanIsMadeWellUnderASecond) {
  model::ClusterModel model = graded_cluster(4, 8.0, 125e6, 250e6, 1e-4);
  const plan::PlanRequest request = request_for(model, 8192, 8192, 8192, 256, 4);
  const auto start = std::chrono::steady_clock::now();
  Result<model::ModelPlanResult> result = model::make_model_plan(request, model);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.is_ok());
  expect_valid_plan(result->plan, request);
  RecordProperty("plan_seconds", std::to_string(seconds));
  std::printf("model plan for m=n=k=8192, 4 nodes, panel 256: %.1f ms\n%s", seconds * 1e3,
              result->plan.to_string().c_str());
  EXPECT_LT(seconds, 0.5);
}

}  // namespace
}  // namespace tessera::balance

namespace tessera::balance {
namespace {

// The mixed lab on one 2-core machine: a desktop at a full core and three quarter-core Pis beside
// the coordinator.
model::ClusterModel shared_host_lab() {
  model::ClusterModel model;
  for (const auto& [name, cores] : {std::pair{"desktop", 1.0}, std::pair{"pi1", 0.25}, std::pair{"pi2", 0.25},
                                    std::pair{"pi3", 0.25}}) {
    model::NodeModel node = node_model(name, rising_curve(cores * 56.0));
    node.host = {true, 2.0, cores};
    model.nodes.push_back(node);
  }
  return model;
}

TEST(HostAvailability, TheCoreTheCoordinatorNeedsComesFromTheNodesThatWantMoreThanAFairShare) {
  const model::ClusterModel model = shared_host_lab();
  const std::vector<double> busy(4, 1.0);
  // 1.75 cores of nodes and 0.25 of coordinator fit two cores exactly: nobody loses.
  EXPECT_EQ(model::host_availability(model, busy, 0.25, 1.0), std::vector<double>(4, 1.0));
  // 0.6 core of coordinator: the fair share is 0.4; the Pis (0.25) and the coordinator (0.6 of
  // the 0.625 left each) get what they want, the desktop the remaining 0.65 core.
  const std::vector<double> shares = model::host_availability(model, busy, 0.6, 1.0);
  EXPECT_NEAR(shares[0], 0.65, 1e-12);
  for (std::size_t pi = 1; pi < 4; ++pi) EXPECT_DOUBLE_EQ(shares[pi], 1.0);
  // Idle half the time, the Pis want half as much, and the desktop keeps more.
  EXPECT_GT(model::host_availability(model, {1.0, 0.5, 0.5, 0.5}, 0.6, 1.0)[0], shares[0]);
}

TEST(HostAvailability, NodesElsewhereOrOfUnknownCoresKeepTheirSpeed) {
  model::ClusterModel model = shared_host_lab();
  for (model::NodeModel& node : model.nodes) node.host.with_coordinator = false;
  EXPECT_EQ(model::host_availability(model, std::vector<double>(4, 1.0), 5.0, 1.0), std::vector<double>(4, 1.0));
  model = shared_host_lab();
  for (model::NodeModel& node : model.nodes) node.host.cores = 0.0;
  EXPECT_EQ(model::host_availability(model, std::vector<double>(4, 1.0), 5.0, 1.0), std::vector<double>(4, 1.0));
}

// Replays where only the host's sharing differs: the lab above with 1 GB/s links and the
// coordinator paying 1 ns of CPU per byte it moves (a core's worth at 1 GB/s).
model::ClusterModel shared_host_lab_with_links(double coordinator_cpu_s_per_byte) {
  model::ClusterModel model = shared_host_lab();
  for (model::NodeModel& node : model.nodes) node.link = {0.0, 1e9, 1e9};
  model.coordinator_cpu_s_per_byte = coordinator_cpu_s_per_byte;
  return model;
}

TEST(ModelOfNodes, KeepsTheChosenNodesInOrderAndEveryClusterWideFigure) {
  model::ClusterModel model = shared_host_lab_with_links(1e-9);
  model.coordinator_send_bytes_per_s = 2e9;
  const model::ClusterModel part = model::model_of_nodes(model, {3, 0});
  ASSERT_EQ(part.nodes.size(), 2u);
  EXPECT_EQ(part.nodes[0], model.nodes[3]);
  EXPECT_EQ(part.nodes[1], model.nodes[0]);
  // Every field but the nodes survives: a subset that dropped the coordinator's CPU per byte
  // once switched the expression scheduler's host sharing off without a word.
  model::ClusterModel same_nodes = model;
  same_nodes.nodes = part.nodes;
  EXPECT_EQ(part, same_nodes);
}

TEST(PredictHostSharing, NodesOnTheCoordinatorsHostLoseCoresToItsSendingAndNoMoreThanThat) {
  const model::ClusterModel free_coordinator = shared_host_lab_with_links(0.0);
  const model::ClusterModel busy_coordinator = shared_host_lab_with_links(1e-9);
  const plan::Plan plan = plan_with_rows(free_coordinator, {1200, 300, 300, 248}, 2048, 2048, 128, 4);
  const model::Prediction free_run = model::predict(free_coordinator, plan);
  const model::Prediction busy_run = model::predict(busy_coordinator, plan);
  // 1.75 cores of nodes fit two cores: with a coordinator that costs nothing, nobody loses.
  EXPECT_EQ(free_run.host_share, std::vector<double>(4, 1.0));
  // Sending to four nodes at 1 GB/s each wants 4 cores of the coordinator: the desktop, the only
  // node wanting more than a fair share, pays, and the Pis keep their quarter cores.
  EXPECT_LT(busy_run.host_share[0], 1.0);
  EXPECT_GT(busy_run.host_share[0], 0.0);
  for (std::size_t pi = 1; pi < 4; ++pi) EXPECT_DOUBLE_EQ(busy_run.host_share[pi], 1.0);
  EXPECT_GT(busy_run.finish_s[0], free_run.finish_s[0]);
  // ... and the coordinator, short of cores itself, moves bytes more slowly: no node finishes sooner.
  for (std::size_t i = 0; i < 4; ++i) EXPECT_GE(busy_run.finish_s[i], free_run.finish_s[i]) << i;

  // The same nodes anywhere else, or on a host with room for everyone, lose nothing.
  model::ClusterModel elsewhere = busy_coordinator;
  for (model::NodeModel& node : elsewhere.nodes) node.host.with_coordinator = false;
  EXPECT_EQ(model::predict(elsewhere, plan).finish_s, free_run.finish_s);
  model::ClusterModel roomy = busy_coordinator;
  for (model::NodeModel& node : roomy.nodes) node.host.cores = 64.0;
  EXPECT_EQ(model::predict(roomy, plan).finish_s, free_run.finish_s);
}

TEST(PredictHostSharing, NodesThatWantMoreThanTheHostHasShareItWhileTheyComputeTogether) {
  // Two one-core nodes on a one-core host, unlimited links, no coordinator cost: while both
  // multiply each gets half the core, so equal halves take twice as long as either alone.
  model::ClusterModel model;
  for (const char* name : {"a", "b"}) {
    model::NodeModel node = node_model(name, flat_curve(10.0));
    node.host = {true, 1.0, 1.0};
    model.nodes.push_back(node);
  }
  const plan::Plan halves = plan_with_rows(model, {512, 512}, 1024, 1024, 64, 4);
  const double alone = 2.0 * 512 * 1024 * 1024 / 10e9;
  const model::Prediction together = model::predict(model, halves);
  EXPECT_NEAR(together.finish_s[0], 2.0 * alone, 1e-9);
  EXPECT_NEAR(together.finish_s[1], 2.0 * alone, 1e-9);
  EXPECT_NEAR(together.host_share[0], 0.5, 1e-12);
  // One node alone has the core to itself.
  const plan::Plan one = plan_with_rows(model, {512, 0}, 1024, 1024, 64, 4);
  EXPECT_NEAR(model::predict(model, one).finish_s[0], alone, 1e-9);
}

TEST(PredictHostSharing, ANodeKeepsItsCrowdedShareOnlyWhileAnotherNodeThereMultiplies) {
  model::ClusterModel model = shared_host_lab_with_links(0.0);
  model.nodes[0].host.crowded_share = 0.75;  // the desktop, measured with everyone multiplying
  const plan::Plan everyone = plan_with_rows(model, {1200, 300, 300, 248}, 2048, 2048, 128, 4);
  const model::Prediction crowded = model::predict(model, everyone);
  // 0.75 while the Pis multiply too; the desktop finishes alone, at full speed.
  EXPECT_GT(crowded.host_share[0], 0.75);
  EXPECT_LT(crowded.host_share[0], 0.85);
  model::ClusterModel uncrowded = model;
  uncrowded.nodes[0].host.crowded_share = 1.0;
  EXPECT_GT(crowded.finish_s[0], model::predict(uncrowded, everyone).finish_s[0]);
  // Alone on the host it runs at its full speed.
  const plan::Plan desktop_only = plan_with_rows(model, {2048, 0, 0, 0}, 2048, 2048, 128, 4);
  EXPECT_EQ(model::predict(model, desktop_only).host_share[0], 1.0);
  EXPECT_EQ(model::predict(model, desktop_only).finish_s, model::predict(uncrowded, desktop_only).finish_s);
  // The averaged form the pull replay and the expression scheduler use agrees.
  EXPECT_DOUBLE_EQ(model::host_availability(model, {1.0, 1.0, 1.0, 1.0}, 0.0, 1.0)[0], 0.75);
  EXPECT_DOUBLE_EQ(model::host_availability(model, {1.0, 0.0, 0.0, 0.0}, 0.0, 1.0)[0], 1.0);
}

TEST(PredictPullHostSharing, ANodeIsCrowdedOnlyByTilesThatCountedElsewhere) {
  // A desktop and one Pi on the coordinator's host, the desktop crowded to 75% by any other node
  // multiplying there.
  model::ClusterModel model;
  for (const auto& [name, cores] : {std::pair{"desktop", 1.0}, std::pair{"pi", 0.25}}) {
    model::NodeModel node = node_model(name, flat_curve(cores * 40.0));
    node.host = {true, 2.0, cores, name == std::string("desktop") ? 0.75 : 1.0};
    model.nodes.push_back(node);
  }
  const plan::Plan plan = dynamic_plan(model, 2048, 2048, 2048, 128);
  // Both take tiles: the desktop is forecast at its crowded share.
  EXPECT_DOUBLE_EQ(model::predict_pull(model, plan).host_share[0], 0.75);
  // Behind a link that cannot pay for B, the Pi's tiles all go to copies on the desktop: the
  // desktop multiplied alone and keeps its whole core.
  model.nodes[1].link = {0.0, 1e6, 1e6};
  const model::Prediction alone = model::predict_pull(model, plan);
  EXPECT_EQ(alone.finish_s[1], 0.0) << "no tile of the Pi's counted";
  EXPECT_DOUBLE_EQ(alone.host_share[0], 1.0);
}

// The plan sized knowing the desktop loses cores to the coordinator is another plan (rows move off
// the desktop, or the model keeps fewer nodes, whichever it forecasts sooner), never a worse one.
TEST(ModelPlanHostSharing, ThePlanSizedForTheSharedHostDiffersAndIsForecastNoWorse) {
  model::ClusterModel unshared = shared_host_lab_with_links(2e-9);
  for (model::NodeModel& node : unshared.nodes) node.host.with_coordinator = false;
  const model::ClusterModel shared = shared_host_lab_with_links(2e-9);
  const plan::PlanRequest request = request_for(shared, 2048, 2048, 2048, 128, 4);
  Result<model::ModelPlanResult> naive = model::make_model_plan(request, unshared);
  Result<model::ModelPlanResult> aware = model::make_model_plan(request, shared);
  ASSERT_TRUE(naive.is_ok()) << naive.status().to_string();
  ASSERT_TRUE(aware.is_ok()) << aware.status().to_string();
  expect_valid_plan(aware->plan, request);
  EXPECT_NE(aware->plan, naive->plan) << aware->plan.to_string();
  // Judged by the model that knows the sharing, the plan sized for it ends no later.
  EXPECT_LE(model::predict(shared, aware->plan).makespan_s, model::predict(shared, naive->plan).makespan_s);
}

}  // namespace
}  // namespace tessera::balance

namespace tessera::balance {
namespace {

TEST(SquareEquivalentSize, IsTheSizeForCubesAndAboutThreeForVectorMatrixProducts) {
  EXPECT_DOUBLE_EQ(model::square_equivalent_size(512, 512, 512), 512.0);
  EXPECT_NEAR(model::square_equivalent_size(1, 2048, 2048), model::kVectorEquivalentSize, 0.01);
  EXPECT_NEAR(model::square_equivalent_size(2048, 1, 2048), model::kVectorEquivalentSize, 0.01);
  EXPECT_DOUBLE_EQ(model::square_equivalent_size(0, 5, 5), 0.0);
  // A skinny job reads the curve far below its cube root: 1 x 512 x 512 sits at ~3, not 64.
  EXPECT_LT(model::square_equivalent_size(1, 512, 512), 3.0);
}

}  // namespace
}  // namespace tessera::balance
