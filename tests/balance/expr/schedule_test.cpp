#include "tessera/balance/expr/schedule.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <string>

#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/expr/rewrite.hpp"

namespace tessera::balance::expr {
namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

model::NodeModel node(const std::string& name, double gflops, double link_bytes_per_s = kUnlimited) {
  model::NodeModel n;
  n.name = name;
  n.speed = model::SpeedCurve({{1.0, gflops}});
  n.link = {0.0, link_bytes_per_s, link_bytes_per_s};
  return n;
}

Expr parsed(const std::string& text, const std::map<std::string, Shape>& shapes) {
  Result<Expr> e = parse(text, shapes);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return rewrite(*e);
}

TEST(LowerToTasks, AProductHasATaskPerOutputTileReadingARowAndAColumnOfTiles) {
  const TaskDag dag = lower_to_tasks(parsed("A * B", {{"A", {100, 70}}, {"B", {70, 100}}}), 32);
  ASSERT_EQ(dag.tasks.size(), 16u);  // 4 x 4 output tiles (the last ones 4 wide)
  double flops = 0.0;
  for (const TileTask& task : dag.tasks) {
    EXPECT_EQ(task.reads.size(), 6u);  // 3 tiles of A's row, 3 of B's column (k = 70)
    flops += task.flops;
  }
  EXPECT_DOUBLE_EQ(flops, 2.0 * 100 * 100 * 70);
  EXPECT_DOUBLE_EQ(dag.tile_bytes({dag.result, 3, 3}), 8.0 * 4 * 4);
  const TaskDag sum = lower_to_tasks(parsed("A * B + A * B", {{"A", {64, 64}}, {"B", {64, 64}}}), 64);
  EXPECT_EQ(sum.tasks.size(), 2u) << "A * B is shared, then one sum";
  EXPECT_EQ(sum.successors[0], std::vector<std::size_t>{1});
}

TEST(LowerToTasks, ATransposeIsReadThroughItsOperandsTilesAndOnlyAResultTransposeIsComputed) {
  // H' * H: H' has no tiles of its own; the product reads H's tile (k, i) transposed for H'(i, k).
  const TaskDag dag = lower_to_tasks(parsed("H' * H", {{"H", {90, 60}}}), 30);
  ASSERT_EQ(dag.tasks.size(), 4u);  // 60 x 60 result in 2 x 2 tiles, nothing for H'
  std::size_t h = dag.matrices.size();
  for (std::size_t m = 0; m < dag.matrices.size(); ++m) {
    if (dag.matrices[m].input) h = m;
  }
  ASSERT_LT(h, dag.matrices.size());
  for (const TileTask& task : dag.tasks) {
    ASSERT_EQ(task.reads.size(), 6u);  // k = 90: 3 tiles of H' (i, k), 3 of H (k, j)
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(task.reads[k], (TileRef{h, static_cast<uint32_t>(k), task.output.row, true}));
      EXPECT_EQ(task.reads[3 + k], (TileRef{h, static_cast<uint32_t>(k), task.output.col, false}));
    }
  }
  // A transpose of a transpose reads the tile as it is; a transposed result is a copy per tile.
  const TaskDag result = lower_to_tasks(parsed("(A * B)'", {{"A", {40, 20}}, {"B", {20, 60}}}), 20);
  std::size_t copies = 0;
  for (const TileTask& task : result.tasks) {
    if (task.op != Op::kTranspose) continue;
    ++copies;
    ASSERT_EQ(task.reads.size(), 1u);
    EXPECT_TRUE(task.reads[0].transposed);
    EXPECT_EQ(task.reads[0].row, task.output.col);
    EXPECT_EQ(task.reads[0].col, task.output.row);
  }
  EXPECT_EQ(copies, 6u);  // (A * B)' is 60 x 40: 3 x 2 tiles
}

TEST(Heft, TwoIndependentProductsGoToTwoEqualNodesThenTheSum) {
  model::ClusterModel model;
  model.nodes = {node("a", 1.0), node("b", 1.0)};
  const TaskDag dag = lower_to_tasks(parsed("A * B + C * D", {{"A", {100, 100}}, {"B", {100, 100}},
                                                               {"C", {100, 100}}, {"D", {100, 100}}}), 100);
  const Schedule schedule = heft(dag, model);
  ASSERT_EQ(dag.tasks.size(), 3u);
  EXPECT_NE(schedule.tasks[0].node, schedule.tasks[1].node);
  const double product = 2.0 * 100 * 100 * 100 / 1e9, sum = 100.0 * 100 / 1e9;
  EXPECT_NEAR(schedule.makespan_s, product + sum, 1e-12);  // the optimum: both products at once
  EXPECT_EQ(check_schedule(dag, schedule), "");
}

TEST(Heft, AFasterNodeTakesTwiceTheTasksOfOneHalfItsSpeed) {
  model::ClusterModel model;
  model.nodes = {node("fast", 2.0), node("slow", 1.0)};
  // Three equal independent output tiles: the optimum puts two on the fast node.
  const TaskDag dag = lower_to_tasks(parsed("A * B", {{"A", {300, 100}}, {"B", {100, 100}}}), 100);
  ASSERT_EQ(dag.tasks.size(), 3u);
  const Schedule schedule = heft(dag, model);
  const double one_fast = 2.0 * 100 * 100 * 100 / 2e9;
  EXPECT_NEAR(schedule.makespan_s, 2 * one_fast, 1e-12);
  EXPECT_EQ(check_schedule(dag, schedule), "");
}

TEST(Heft, ANodeBehindASlowLinkGetsNothingWhenMovingTheDataCostsMoreThanItSaves) {
  model::ClusterModel model;
  model.nodes = {node("desktop", 10.0), node("pi", 10.0, 1e3)};  // 1 kB/s: a tile takes minutes
  const TaskDag dag = lower_to_tasks(parsed("A * B * C", {{"A", {128, 128}}, {"B", {128, 128}}, {"C", {128, 128}}}), 64);
  const Schedule schedule = heft(dag, model);
  for (const TaskPlacement& placement : schedule.tasks) EXPECT_EQ(placement.node, 0u);
  EXPECT_LT(schedule.makespan_s, 1.0);
  EXPECT_EQ(check_schedule(dag, schedule), "");
}

TEST(Heft, TheCacheKeepsTheMarkovMatrixOnTheNodesAndNeverUsesAnEvictedTile) {
  model::ClusterModel model;
  model.nodes = {node("a", 10.0, 1e8), node("b", 5.0, 1e8), node("c", 5.0, 1e8)};
  const Expr markov = parsed("u * P^8", {{"u", {1, 256}}, {"P", {256, 256}}});
  const TaskDag dag = lower_to_tasks(markov, 64);
  const Schedule roomy = heft(dag, model, {1e9, false});
  EXPECT_EQ(check_schedule(dag, roomy), "");
  // Each P tile crosses to a node once, not once per product.
  EXPECT_LE(roomy.bytes_moved, 0.5 * naive_bytes(dag)) << roomy.bytes_moved << " vs " << naive_bytes(dag);
  // A cache of three tiles forces evictions; the schedule must still only use what it holds.
  const Schedule tight = heft(dag, model, {3 * 8.0 * 64 * 64, false});
  EXPECT_EQ(check_schedule(dag, tight), "");
  std::size_t evictions = 0;
  for (const TaskPlacement& placement : tight.tasks) evictions += placement.evicted.size();
  EXPECT_GT(evictions, 0u);
  EXPECT_GE(tight.bytes_moved, roomy.bytes_moved);
}

TEST(Heft, ZeroCommunicationIsTheTheoreticalBound) {
  model::ClusterModel model;
  model.nodes = {node("a", 10.0, 1e7), node("b", 2.5, 1e7)};
  const TaskDag dag = lower_to_tasks(parsed("H' * H * (H' * H)", {{"H", {300, 200}}}), 50);
  const Schedule real = heft(dag, model);
  const Schedule ideal = heft(dag, model, {1e9, true});
  EXPECT_LE(ideal.makespan_s, real.makespan_s);
  EXPECT_GT(ideal.makespan_s, 0.0);
  EXPECT_EQ(check_schedule(dag, real), "");
  EXPECT_EQ(check_schedule(dag, ideal), "");
}

TEST(Heft, TilesQueuedOnOneLinkOverlapTheirLatency) {
  // One output tile reading three tiles of A and three of B over a link that moves bytes for free
  // but answers 10 ms late: the six arrive together, a latency after they were asked for, not six
  // latencies later; the result's return pays one more.
  model::ClusterModel model;
  model.nodes = {node("a", 1.0)};
  model.nodes[0].link.latency_s = 0.01;
  const TaskDag dag = lower_to_tasks(parsed("A * B", {{"A", {100, 300}}, {"B", {300, 100}}}), 100);
  ASSERT_EQ(dag.tasks.size(), 1u);
  const Schedule schedule = heft(dag, model);
  const double compute = 2.0 * 100 * 100 * 300 / 1e9;
  EXPECT_NEAR(schedule.tasks[0].start_s, 0.01, 1e-12);
  EXPECT_NEAR(schedule.makespan_s, 0.01 + compute + 0.01, 1e-12);
}

TEST(Heft, ANodeThatAnswersLateGetsNoneOfAChainOfSmallSteps) {
  // u * P^4: each step's four vector tiles read every tile of the previous step. With instant
  // links the steps spread over both nodes; when b answers 50 ms late, any tile it fetches costs
  // far more than the microseconds a vector tile computes, so a does the whole chain.
  model::ClusterModel model;
  model.nodes = {node("a", 10.0), node("b", 10.0)};
  const TaskDag dag = lower_to_tasks(parsed("u * P^4", {{"u", {1, 256}}, {"P", {256, 256}}}), 64);
  const Schedule idle = heft(dag, model);
  std::set<std::size_t> idle_nodes;
  for (const TaskPlacement& placement : idle.tasks) idle_nodes.insert(placement.node);
  EXPECT_EQ(idle_nodes.size(), 2u);
  model.nodes[1].link.latency_s = 0.05;
  const Schedule late = heft(dag, model);
  for (const TaskPlacement& placement : late.tasks) EXPECT_EQ(placement.node, 0u);
  EXPECT_LT(late.makespan_s, 0.01);
  EXPECT_EQ(check_schedule(dag, late), "");
  // The same when b is quick idle but answers 50 ms late while busy: the larger latency counts.
  model.nodes[1].link = {0.0, kUnlimited, kUnlimited, 0.05};
  const Schedule busy = heft(dag, model);
  for (const TaskPlacement& placement : busy.tasks) EXPECT_EQ(placement.node, 0u);
  EXPECT_EQ(check_schedule(dag, busy), "");
}

TEST(HeftOnBestNodes, FewerNodesRunWhenGreedyPlacementWouldStrandAnOutputBehindASlowReturnLink) {
  // X = A * B has two output tiles, Y = X + C two more, each reading one tile of X. HEFT puts X's
  // second tile on the nearly-as-fast node (it finishes first there), and then that tile, or Y's
  // tile made from it, must come back over the node's slow return link (64 MB/s: ten of its
  // products' compute times for a 32 KB tile). The desktop alone does all four tasks sooner.
  model::ClusterModel model;
  model::NodeModel slow_return = node("pi", 9.0);
  slow_return.link.from_node_bytes_per_s = 6.4e7;
  model.nodes = {node("desktop", 10.0), slow_return};
  const TaskDag dag =
      lower_to_tasks(parsed("A * B + C", {{"A", {128, 64}}, {"B", {64, 64}}, {"C", {128, 64}}}), 64);
  ASSERT_EQ(dag.tasks.size(), 4u);
  const Schedule every_node = heft(dag, model);
  std::set<std::size_t> used;
  for (const TaskPlacement& placement : every_node.tasks) used.insert(placement.node);
  ASSERT_EQ(used.size(), 2u) << "the greedy placement uses both nodes";

  const NodeSetSchedule best = heft_on_best_nodes(dag, model, {}, 0.05, 64.0);
  EXPECT_EQ(best.nodes, std::vector<std::size_t>{0});
  EXPECT_LT(best.schedule.makespan_s, 0.95 * every_node.makespan_s);
  EXPECT_NEAR(best.schedule.makespan_s, (2 * 2.0 * 64 * 64 * 64 + 2 * 64.0 * 64) / 10e9, 1e-12)
      << "two products and two sums back to back";
  EXPECT_EQ(check_schedule(dag, best.schedule), "");

  // Not clearly faster (a margin wider than the gain): every node stays.
  const double gain = 1.0 - best.schedule.makespan_s / every_node.makespan_s;
  const NodeSetSchedule kept = heft_on_best_nodes(dag, model, {}, gain + 0.01, 64.0);
  EXPECT_EQ(kept.nodes, (std::vector<std::size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(kept.schedule.makespan_s, every_node.makespan_s);
}

TEST(HeftOnBestNodes, EqualNodesKeepEveryNodeAndTheFastestAreRankedFirst) {
  model::ClusterModel model;
  model.nodes = {node("slow", 1.0), node("fast", 10.0), node("fast2", 10.0)};
  const TaskDag dag = lower_to_tasks(parsed("A * B", {{"A", {256, 64}}, {"B", {64, 256}}}), 64);
  const NodeSetSchedule best = heft_on_best_nodes(dag, model, {}, 0.05, 64.0);
  // 16 independent tasks: more nodes only help, so the set is every node.
  EXPECT_EQ(best.nodes, (std::vector<std::size_t>{0, 1, 2}));
  // Node 0 now computes fastest but sits behind a 1 kB/s link. It is ranked first, so every
  // fewer-node set holds it and loses; the schedule on every node leaves it idle anyway.
  model.nodes[0].link = {0.0, 1e3, 1e3};
  model.nodes[0].speed = model::SpeedCurve({{1.0, 100.0}});
  const NodeSetSchedule reachable = heft_on_best_nodes(dag, model, {}, 0.05, 64.0);
  EXPECT_EQ(reachable.nodes, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(check_schedule(dag, reachable.schedule), "");
  for (const TaskPlacement& placement : reachable.schedule.tasks) {
    EXPECT_NE(reachable.nodes[placement.node], 0u) << "no task behind the 1 kB/s link";
  }
}

TEST(PickTileCandidate, TheLargestTileWithinTheMarginOfTheFastestForecast) {
  // HITS on local-mixed-lan with the busy latency charged: 4096 .. 256 tiles.
  const std::vector<double> hits = {0.337, 0.296, 0.278, 0.265, 0.263};
  EXPECT_EQ(pick_tile_candidate(hits, 0.05), 3u) << "512: within 5% of 256's forecast";
  EXPECT_EQ(pick_tile_candidate(hits, 0.0), 4u) << "no margin: the fastest";
  EXPECT_EQ(pick_tile_candidate({0.5, 0.4, 0.45}, 0.05), 1u);
  EXPECT_EQ(pick_tile_candidate({0.3}, 0.05), 0u);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(pick_tile_candidate({inf, inf}, 0.05), 0u) << "nothing can run: the largest, not out of range";
}

TEST(Heft, NodesBesideTheCoordinatorLoseTheCpuItSpendsMovingTheScheduledBytes) {
  // A 1-core node and a quarter-core one on a 1.25-core host with the coordinator: every byte the
  // coordinator moves takes CPU one of them then does not get.
  model::ClusterModel model;
  model.nodes = {node("a", 40.0, 1e9), node("b", 10.0, 1e9)};
  model.nodes[0].host = {true, 1.25, 1.0};
  model.nodes[1].host = {true, 1.25, 0.25};
  const TaskDag dag = lower_to_tasks(parsed("A * B", {{"A", {512, 512}}, {"B", {512, 512}}}), 128);
  const Schedule alone = heft(dag, model);
  EXPECT_TRUE(alone.host_availability.empty()) << "no coordinator cost, nothing modelled";
  model.coordinator_cpu_s_per_byte = 2e-9;
  const Schedule shared = heft(dag, model);
  ASSERT_EQ(shared.host_availability.size(), 2u);
  EXPECT_LT(shared.host_availability[0], 1.0);
  EXPECT_GT(shared.makespan_s, alone.makespan_s);
  EXPECT_GT(shared.coordinator_bytes, 0.0);
  EXPECT_EQ(check_schedule(dag, shared), "");
  // The same nodes on machines of their own keep their speed.
  for (model::NodeModel& n : model.nodes) n.host.with_coordinator = false;
  EXPECT_DOUBLE_EQ(heft(dag, model).makespan_s, alone.makespan_s);
}

TEST(Heft, TilesForNodesBehindASwitchQueueOnItsUplink) {
  // Two fast nodes on gigabit links behind a switch whose uplink is 20 MB/s: every tile they read
  // crosses the uplink one after another, so the product takes longer than on their own links,
  // and the uplink's bytes alone bound it.
  model::ClusterModel model;
  model.nodes = {node("p1", 40.0, 125e6), node("p2", 40.0, 125e6)};
  const TaskDag dag = lower_to_tasks(parsed("A * B", {{"A", {1024, 1024}}, {"B", {1024, 1024}}}), 256);
  const Schedule free = heft(dag, model);
  model.switch_uplink_bytes_per_s = 20e6;
  for (model::NodeModel& n : model.nodes) n.link.behind_switch = true;
  const Schedule shared = heft(dag, model);
  EXPECT_EQ(check_schedule(dag, shared), "");
  EXPECT_GT(shared.makespan_s, free.makespan_s);
  EXPECT_GE(shared.makespan_s, shared.coordinator_bytes / 2.0 / 20e6) << "at least the bytes toward the nodes over the uplink";
  // Without the switch in the model (rate 0) nothing changes.
  model.switch_uplink_bytes_per_s = 0.0;
  EXPECT_DOUBLE_EQ(heft(dag, model).makespan_s, free.makespan_s);
}

// A tile one node computed and two others read: (A * B) is one tile, its product with C three
// tasks, one per node. Worker to worker the coordinator never carries it; through the coordinator
// it does, in once and out once per copy.
TEST(Heft, TilesWorkerToWorkerSpareTheCoordinatorAndCostTheirProducerASendPerCopy) {
  model::ClusterModel model;
  model.nodes = {node("a", 1.0, 1e9), node("b", 1.0, 1e9), node("c", 1.0, 1e9)};
  const TaskDag dag =
      lower_to_tasks(parsed("(A * B) * C", {{"A", {64, 64}}, {"B", {64, 64}}, {"C", {64, 192}}}), 64);
  ASSERT_EQ(dag.tasks.size(), 4u);
  ScheduleOptions via;
  ScheduleOptions direct;
  direct.peer_transfers = true;
  const Schedule through = heft(dag, model, via);
  const Schedule straight = heft(dag, model, direct);
  EXPECT_EQ(check_schedule(dag, straight), "");
  const double tile = 8.0 * 64 * 64;
  // Inputs go out from the coordinator either way, and the result's three tiles come back.
  std::set<std::size_t> readers;
  for (std::size_t t = 1; t < 4; ++t) readers.insert(straight.tasks[t].node);
  ASSERT_EQ(readers.size(), 3u) << "the three tasks of the second product run on the three nodes";
  EXPECT_DOUBLE_EQ(through.coordinator_bytes - straight.coordinator_bytes, 2.0 * 2.0 * tile)
      << "two copies of A * B, each in and out of the coordinator";
  // The producer's send: with a transfer cost, it pays once per copy worker to worker and once
  // for the return through the coordinator.
  for (model::NodeModel& n : model.nodes) n.cpu.receive_s_per_byte = 1e-6;
  const Schedule charged_via = heft(dag, model, via);
  const Schedule charged_direct = heft(dag, model, direct);
  const std::size_t producer = charged_direct.tasks[0].node;
  ASSERT_EQ(charged_via.tasks[0].node, producer);
  const double compute = 2.0 * 64 * 64 * 64 / 1e9;
  const double own_reads = 2.0 * tile * 1e-6;  // A and B received for its own task
  EXPECT_NEAR(charged_direct.busy_s[producer] - charged_via.busy_s[producer], tile * 1e-6, 1e-9)
      << "direct: two sends; via the coordinator: one";
  EXPECT_GE(charged_via.busy_s[producer], compute + own_reads + tile * 1e-6 - 1e-9);
}

// Two nodes behind a switch with a slow uplink: a tile one computed and the other reads crosses
// the uplink twice through the coordinator, not at all worker to worker.
TEST(Heft, ATileBetweenTwoNodesBehindASwitchSkipsTheUplinkWorkerToWorker) {
  model::ClusterModel model;
  // Slow nodes: each product tile takes seconds, so the second product's two tasks go to both.
  model.nodes = {node("p1", 0.01, 125e6), node("p2", 0.01, 125e6)};
  model.switch_uplink_bytes_per_s = 5e6;
  for (model::NodeModel& n : model.nodes) n.link.behind_switch = true;
  const TaskDag dag = lower_to_tasks(parsed("(A * B) * C", {{"A", {256, 256}}, {"B", {256, 256}}, {"C", {256, 512}}}), 256);
  ScheduleOptions direct;
  direct.peer_transfers = true;
  const Schedule through = heft(dag, model);
  const Schedule straight = heft(dag, model, direct);
  EXPECT_EQ(check_schedule(dag, straight), "");
  ASSERT_NE(straight.tasks[1].node, straight.tasks[2].node);
  EXPECT_DOUBLE_EQ(through.coordinator_bytes - straight.coordinator_bytes, 2.0 * 8.0 * 256 * 256);
  EXPECT_LT(straight.makespan_s, through.makespan_s) << "the moved tile no longer waits on the uplink";
}

TEST(CheckSchedule, CatchesAUseOfAnEvictedTileAnEvictionOfAReadAndAnEarlyStart) {
  model::ClusterModel model;
  model.nodes = {node("a", 1.0)};
  const TaskDag dag = lower_to_tasks(
      parsed("A * B + C * D", {{"A", {64, 64}}, {"B", {64, 64}}, {"C", {64, 64}}, {"D", {64, 64}}}), 64);
  const Schedule schedule = heft(dag, model);
  ASSERT_EQ(dag.tasks.size(), 3u);  // A*B, C*D, then their sum, all on the one node
  ASSERT_EQ(check_schedule(dag, schedule), "");
  const std::size_t sum = schedule.order[2];
  ASSERT_EQ(dag.tasks[sum].op, Op::kSum);
  ASSERT_TRUE(schedule.tasks[sum].cached[0] && schedule.tasks[sum].cached[1]);
  // The second product drops the first product's tile; the sum then claims it from the cache.
  Schedule evicted = schedule;
  evicted.tasks[schedule.order[1]].evicted.push_back(dag.tasks[schedule.order[0]].output);
  EXPECT_NE(check_schedule(dag, evicted).find("which did not hold it then"), std::string::npos);
  Schedule own_read = schedule;
  own_read.tasks[sum].evicted.push_back(dag.tasks[sum].reads[0]);
  EXPECT_NE(check_schedule(dag, own_read).find("evicts a tile it reads"), std::string::npos);
  Schedule early = schedule;
  early.tasks[sum].start_s = 0.0;
  EXPECT_NE(check_schedule(dag, early).find("before task"), std::string::npos);
}

}  // namespace
}  // namespace tessera::balance::expr
