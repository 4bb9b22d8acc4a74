#include "tessera/graph/engine.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "graph_fixtures.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/state.hpp"

namespace tessera::graph {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Generous: tests must pass on a loaded 2-core machine; a run that needs this long is a bug.
constexpr auto kRunDeadline = std::chrono::seconds(60);

// An Outbound that routes batches to the other in-process engines: at once, after a latency
// (a courier thread), or not at all until release() (holding).
class Router final : public Outbound {
 public:
  explicit Router(milliseconds latency = milliseconds(0)) : latency_(latency) {
    courier_ = std::thread([this] { run_courier(); });
  }
  ~Router() override { close(); }
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  void connect(std::vector<Engine*> engines) { engines_ = std::move(engines); }

  Status send(DeltaBatch&& batch) override {
    routed_.fetch_add(1);
    // Outside deltas leave combined: one entry per target vertex and destination per flush.
    std::vector<uint32_t> slots = batch.slots;
    std::sort(slots.begin(), slots.end());
    if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) repeated_slots_.fetch_add(1);
    {
      std::lock_guard lock(mutex_);
      if (holding_ || latency_.count() > 0) {
        queue_.push_back({Clock::now() + latency_, std::move(batch)});
        wake_.notify_all();
        return Status::ok();
      }
    }
    deliver(std::move(batch));
    return Status::ok();
  }

  // While busy, ready() says every link is busy (a saturated link, as PeerLinks reports it).
  void set_busy(bool busy) { busy_.store(busy); }
  bool ready(uint32_t) override { return !busy_.load(); }
  uint64_t batches_routed() const { return routed_.load(); }
  uint64_t batches_with_repeated_slots() const { return repeated_slots_.load(); }

  void hold() {
    std::lock_guard lock(mutex_);
    holding_ = true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    holding_ = false;
    wake_.notify_all();
  }
  std::size_t queued() {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }
  // Stops the courier, dropping what it still holds. Call before the engines are destroyed.
  void close() {
    {
      std::lock_guard lock(mutex_);
      if (closing_) return;
      closing_ = true;
      wake_.notify_all();
    }
    courier_.join();
  }
  Status first_refusal() {
    std::lock_guard lock(mutex_);
    return refusal_;
  }

 private:
  struct Queued {
    Clock::time_point due;
    DeltaBatch batch;
  };

  void deliver(DeltaBatch&& batch) {
    Status status = engines_.at(batch.to_part)->deliver(std::move(batch));
    if (!status.is_ok()) {
      std::lock_guard lock(mutex_);
      if (refusal_.is_ok()) refusal_ = status;
    }
  }

  void run_courier() {
    std::unique_lock lock(mutex_);
    while (!closing_) {
      if (holding_ || queue_.empty()) {
        wake_.wait(lock);
        continue;
      }
      if (Clock::now() < queue_.front().due) {
        wake_.wait_until(lock, queue_.front().due);
        continue;
      }
      DeltaBatch batch = std::move(queue_.front().batch);
      queue_.pop_front();
      lock.unlock();
      deliver(std::move(batch));
      lock.lock();
    }
  }

  milliseconds latency_;
  std::atomic<bool> busy_{false};
  std::atomic<uint64_t> routed_{0};
  std::atomic<uint64_t> repeated_slots_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  bool holding_ = false;
  bool closing_ = false;
  Status refusal_;
  std::vector<Engine*> engines_;
  std::thread courier_;
};

EngineProgress total_progress(const std::vector<std::unique_ptr<Engine>>& engines) {
  EngineProgress total;
  for (const auto& engine : engines) total += engine->progress();
  return total;
}

double tolerance_for(const AlgorithmSpec& spec) { return is_linear(spec) ? 1e-12 : 0.0; }

enum class Mode { kAsync, kSync };

struct RunConfig {
  uint32_t parts = 1;
  Mode mode = Mode::kAsync;
  uint32_t threads = 1;
  milliseconds latency{0};
  uint32_t batch_max_entries = 4096;
  double priority_fraction = 1.0;
};

struct Cluster {
  const graphdata::DirectedGraph& graph;
  AlgorithmSpec spec;
  RunConfig config;
  Placement placement;
  std::unique_ptr<Router> router;
  std::vector<std::unique_ptr<Engine>> engines;

  Cluster(const graphdata::DirectedGraph& g, const AlgorithmSpec& s, const RunConfig& c)
      : Cluster(g, s, c, initial_state(g, s)) {}
  Cluster(const graphdata::DirectedGraph& g, const AlgorithmSpec& s, const RunConfig& c, const VertexState& state)
      : graph(g), spec(s), config(c) {
    placement = make_placement(fixtures::scattered_placement(graph.vertex_count, config.parts), config.parts);
    router = std::make_unique<Router>(config.latency);
    EngineOptions options;
    options.threads = config.threads;
    options.idle_residual = tolerance_for(spec) / (config.parts * config.threads);
    options.batch_max_entries = config.batch_max_entries;
    options.priority_fraction = config.priority_fraction;
    std::vector<Engine*> raw;
    for (GraphPart& part : build_parts(graph, placement, state.value, state.delta)) {
      Result<std::unique_ptr<Engine>> engine = Engine::create(std::move(part), spec, options, *router);
      EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
      if (!engine.is_ok()) return;
      raw.push_back(engine->get());
      engines.push_back(std::move(*engine));
    }
    router->connect(raw);
  }
  ~Cluster() {
    for (auto& engine : engines) engine->stop();
    router->close();  // no courier delivery into destroyed engines
  }

  std::vector<double> values() const {
    std::vector<double> global(static_cast<std::size_t>(graph.vertex_count), 0.0);
    for (uint32_t p = 0; p < engines.size(); ++p) scatter_values(placement, p, engines[p]->values(), global);
    return global;
  }

  void start() {
    for (auto& engine : engines) engine->start();
  }
  void stop() {
    for (auto& engine : engines) engine->stop();
  }

  // The coordinator's rule: residual under the tolerance and sent == received on two
  // consecutive polls with unchanged counts. False at the deadline.
  bool wait_for_termination(Clock::duration limit = kRunDeadline) {
    const Clock::time_point deadline = Clock::now() + limit;
    bool previous_quiet = false;
    uint64_t previous_sent = 0;
    while (Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
      const EngineProgress total = total_progress(engines);
      const bool quiet = total.residual <= tolerance_for(spec) && total.batches_sent == total.batches_received;
      if (quiet && previous_quiet && total.batches_sent == previous_sent) return true;
      previous_quiet = quiet;
      previous_sent = total.batches_sent;
    }
    return false;
  }

  // Runs to the tolerance; false (with a test failure) if it did not get there.
  bool run_async() {
    start();
    const bool done = wait_for_termination();
    stop();
    EXPECT_TRUE(done) << "async run did not terminate";
    return done;
  }

  bool run_sync(uint64_t* steps = nullptr) {
    uint64_t step = 0;
    for (; step < 100000; ++step) {
      uint64_t batches_this_step = 0;
      for (auto& engine : engines) {
        Result<StepReport> report = engine->step(step);
        EXPECT_TRUE(report.is_ok()) << report.status().to_string();
        if (!report.is_ok()) return false;
        EXPECT_EQ(report->step, step);
        for (uint64_t count : report->batches_sent_to) batches_this_step += count;
      }
      // The worker's rule for the next step: wait for every batch of this one.
      const Clock::time_point deadline = Clock::now() + kRunDeadline;
      EngineProgress total = total_progress(engines);
      while (total.batches_received < total.batches_sent && Clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(1));
        total = total_progress(engines);
      }
      EXPECT_EQ(total.batches_received, total.batches_sent);
      if (total.residual <= tolerance_for(spec)) break;
    }
    if (steps != nullptr) *steps = step;
    return true;
  }

  bool run() { return config.mode == Mode::kAsync ? run_async() : run_sync(); }
};

void expect_values_near(const std::vector<double>& got, const std::vector<double>& expected, const AlgorithmSpec& spec,
                        const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t v = 0; v < got.size(); ++v) {
    if (is_linear(spec)) {
      ASSERT_NEAR(got[v], expected[v], 1e-9) << what << ": vertex " << v;
    } else {
      ASSERT_EQ(got[v], expected[v]) << what << ": vertex " << v;
    }
  }
}

// --- Every algorithm, placement size and mode against the naive fixed point ---------------------

struct AlgorithmCase {
  std::string name;
  AlgorithmSpec spec;
};

std::vector<AlgorithmCase> algorithm_cases() {
  return {
      {"pagerank", {.kind = AlgorithmKind::kPageRank, .damping = 0.85}},
      {"katz_all", {.kind = AlgorithmKind::kKatz, .beta = 0.02}},
      {"katz_from_2", {.kind = AlgorithmKind::kKatz, .beta = 0.02, .source = 2}},
      {"cc_max", {.kind = AlgorithmKind::kConnectedComponents, .max_label = true}},
      {"cc_min", {.kind = AlgorithmKind::kConnectedComponents, .max_label = false}},
      {"sssp_from_0", {.kind = AlgorithmKind::kShortestPaths, .source = 0}},
      {"sssp_from_5", {.kind = AlgorithmKind::kShortestPaths, .source = 5}},
  };
}

class EveryAlgorithm : public ::testing::TestWithParam<AlgorithmCase> {};

TEST_P(EveryAlgorithm, MatchesTheFixedPointOnEveryPlacementAndMode) {
  const AlgorithmSpec spec = GetParam().spec;
  const bool cc = spec.kind == AlgorithmKind::kConnectedComponents;
  std::vector<std::pair<std::string, graphdata::DirectedGraph>> graphs = {
      {"awkward", fixtures::awkward_graph()},
      {"random", fixtures::random_graph(300, 1800, 17, /*weighted=*/true)},
      {"unweighted random", fixtures::random_graph(150, 600, 23, /*weighted=*/false)},
  };
  for (auto& [name, graph] : graphs) {
    if (cc) graph = graphdata::symmetrised(graph);
    const std::vector<double> expected = fixtures::fixed_point(graph, spec);
    ASSERT_TRUE(std::all_of(expected.begin(), expected.end(), [](double x) { return !std::isnan(x); }));
    std::vector<double> sync_one_part;
    for (uint32_t parts : {1u, 2u, 3u, 7u}) {
      for (Mode mode : {Mode::kSync, Mode::kAsync}) {
        const std::string what = name + ", " + std::to_string(parts) + " parts, " +
                                 (mode == Mode::kAsync ? "async" : "sync");
        SCOPED_TRACE(what);
        Cluster run(graph, spec, {.parts = parts, .mode = mode});
        ASSERT_TRUE(run.run());
        EXPECT_TRUE(run.router->first_refusal().is_ok()) << run.router->first_refusal().to_string();
        const std::vector<double> values = run.values();
        expect_values_near(values, expected, spec, what);
        if (parts == 1 && mode == Mode::kSync) sync_one_part = values;
        expect_values_near(values, sync_one_part, spec, what + " vs sync on one part");
        const EngineProgress total = total_progress(run.engines);
        EXPECT_EQ(total.batches_sent, total.batches_received);
        EXPECT_EQ(total.deltas_sent, total.deltas_received);
        EXPECT_EQ(run.router->batches_with_repeated_slots(), 0u);
        if (parts == 1) {
          EXPECT_EQ(total.batches_sent, 0u);
        }
        EXPECT_FALSE(total.running);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, EveryAlgorithm, ::testing::ValuesIn(algorithm_cases()),
                         [](const ::testing::TestParamInfo<AlgorithmCase>& param_info) { return param_info.param.name; });

TEST(Engine, SeveralUpdateThreadsPerPart) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(400, 3000, 29, true);
  const graphdata::DirectedGraph symmetric = graphdata::symmetrised(graph);
  for (const AlgorithmCase& c : algorithm_cases()) {
    const graphdata::DirectedGraph& input = c.spec.kind == AlgorithmKind::kConnectedComponents ? symmetric : graph;
    const std::vector<double> expected = fixtures::fixed_point(input, c.spec);
    for (uint32_t threads : {2u, 3u}) {
      for (uint32_t parts : {1u, 2u}) {
        for (Mode mode : {Mode::kSync, Mode::kAsync}) {
          const std::string what = c.name + ", " + std::to_string(threads) + " threads, " + std::to_string(parts) +
                                   " parts, " + (mode == Mode::kAsync ? "async" : "sync");
          SCOPED_TRACE(what);
          // Small batches: slices exchange many mailbox pushes.
          Cluster run(input, c.spec, {.parts = parts, .mode = mode, .threads = threads, .batch_max_entries = 7});
          ASSERT_TRUE(run.run());
          expect_values_near(run.values(), expected, c.spec, what);
        }
      }
    }
  }
}

// --- Closed forms ---------------------------------------------------------------------------

TEST(Engine, DirectedCyclePageRankIsUniform) {
  const graphdata::DirectedGraph cycle = fixtures::directed_cycle(12);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kPageRank};
  for (Mode mode : {Mode::kSync, Mode::kAsync}) {
    Cluster run(cycle, spec, {.parts = 3, .mode = mode});
    ASSERT_TRUE(run.run());
    std::vector<double> values = run.values();
    normalise_pagerank(values);
    for (double v : values) EXPECT_NEAR(v, 1.0 / 12, 1e-11);
  }
}

TEST(Engine, PathKatzIsAGeometricSeries) {
  const graphdata::DirectedGraph path = fixtures::directed_path(10);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kKatz, .beta = 0.5, .source = 0};
  for (Mode mode : {Mode::kSync, Mode::kAsync}) {
    Cluster run(path, spec, {.parts = 2, .mode = mode});
    ASSERT_TRUE(run.run());
    const std::vector<double> values = run.values();
    for (std::size_t k = 0; k < values.size(); ++k) EXPECT_DOUBLE_EQ(values[k], std::pow(0.5, static_cast<double>(k)));
  }
}

// Issue 13 compares the modes by edge updates, so both must count the same thing: one per edge
// along which g was applied. On a path each vertex receives exactly one delta, so whatever the
// timing every vertex is updated once: 9 edges, and 10 updates (the dangling end folds for free).
TEST(Engine, BothModesCountOneEdgeUpdatePerEdgeRelaxed) {
  const graphdata::DirectedGraph path = fixtures::directed_path(10);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kKatz, .beta = 0.5, .source = 0};
  for (uint32_t parts : {1u, 2u, 3u}) {
    for (Mode mode : {Mode::kSync, Mode::kAsync}) {
      Cluster run(path, spec, {.parts = parts, .mode = mode});
      ASSERT_TRUE(run.run());
      const EngineProgress total = total_progress(run.engines);
      const std::string what = std::to_string(parts) + (mode == Mode::kSync ? " parts, sync" : " parts, async");
      EXPECT_EQ(total.edge_updates, 9u) << what;
      EXPECT_EQ(total.updates, 10u) << what;
    }
  }
}

TEST(Engine, GridShortestPathsAreManhattanDistances) {
  const uint32_t nx = 9;
  const uint32_t ny = 6;
  const graphdata::DirectedGraph unit = fixtures::grid(nx, ny, /*weighted=*/false);
  for (Mode mode : {Mode::kSync, Mode::kAsync}) {
    Cluster run(unit, {.kind = AlgorithmKind::kShortestPaths, .source = 0}, {.parts = 3, .mode = mode});
    ASSERT_TRUE(run.run());
    const std::vector<double> values = run.values();
    for (uint32_t y = 0; y < ny; ++y) {
      for (uint32_t x = 0; x < nx; ++x) EXPECT_EQ(values[x + nx * y], x + y) << x << "," << y;
    }
  }
  // Weighted 3x2 grid, weights 1 + (x + y) % 3 on the edges leaving (x, y) right and down:
  //   (0,0) -1- (1,0) -2- (2,0)
  //     1         2         3
  //   (0,1) -2- (1,1) -3- (2,1)
  const graphdata::DirectedGraph weighted = fixtures::grid(3, 2, /*weighted=*/true);
  Cluster run(weighted, {.kind = AlgorithmKind::kShortestPaths, .source = 0}, {.parts = 2, .mode = Mode::kAsync});
  ASSERT_TRUE(run.run());
  EXPECT_EQ(run.values(), (std::vector<double>{0, 1, 3, 1, 3, 6}));
}

TEST(Engine, ConnectedComponentLabels) {
  const graphdata::DirectedGraph symmetric = graphdata::symmetrised(fixtures::awkward_graph());
  for (Mode mode : {Mode::kSync, Mode::kAsync}) {
    Cluster largest(symmetric, {.kind = AlgorithmKind::kConnectedComponents}, {.parts = 3, .mode = mode});
    ASSERT_TRUE(largest.run());
    EXPECT_EQ(largest.values(), (std::vector<double>{4, 4, 4, 4, 4, 9, 9, 9, 9, 9, 10, 12, 12, 13}));
    Cluster smallest(symmetric, {.kind = AlgorithmKind::kConnectedComponents, .max_label = false},
                 {.parts = 7, .mode = mode});
    ASSERT_TRUE(smallest.run());
    EXPECT_EQ(smallest.values(), (std::vector<double>{0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 10, 11, 11, 13}));
  }
}

// Best first on one part: the largest label (or smallest distance) is settled before anything
// worse moves, so every vertex is updated exactly once with its final value. Label propagation in
// slot order would carry each of the grid's labels one hop per pass (hundreds of updates per
// vertex on a large mesh).
TEST(Engine, BestFirstUpdatesEachVertexOnceOnOnePart) {
  const graphdata::DirectedGraph grid = graphdata::symmetrised(fixtures::grid(30, 20, /*weighted=*/false));
  const struct {
    std::string name;
    AlgorithmSpec spec;
  } cases[] = {
      {"cc max label", {.kind = AlgorithmKind::kConnectedComponents, .max_label = true}},
      {"cc min label", {.kind = AlgorithmKind::kConnectedComponents, .max_label = false}},
      {"sssp unweighted", {.kind = AlgorithmKind::kShortestPaths, .source = 317}},
  };
  for (const auto& c : cases) {
    Cluster run(grid, c.spec, {.parts = 1, .mode = Mode::kAsync});
    ASSERT_TRUE(run.run()) << c.name;
    const EngineProgress total = total_progress(run.engines);
    EXPECT_EQ(total.updates, static_cast<uint64_t>(grid.vertex_count)) << c.name;
    EXPECT_EQ(total.edge_updates, static_cast<uint64_t>(grid.edge_count())) << c.name;
    expect_values_near(run.values(), fixtures::fixed_point(grid, c.spec), c.spec, c.name);
  }
}

// Maiter's sampled threshold (priority_fraction < 1) instead of whole sweeps: pagerank and katz
// still reach their fixed points, on one part and several, with fewer edge updates per sweep.
TEST(Engine, SampledPriorityReachesTheFixedPoint) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(300, 2400, 23, true);
  for (const AlgorithmCase& c : {algorithm_cases()[0], algorithm_cases()[1]}) {
    for (uint32_t parts : {1u, 3u}) {
      Cluster run(graph, c.spec, {.parts = parts, .priority_fraction = 0.25});
      ASSERT_TRUE(run.run()) << c.name;
      expect_values_near(run.values(), fixtures::fixed_point(graph, c.spec), c.spec,
                         c.name + " on " + std::to_string(parts) + " parts");
    }
  }
}

// Jacobi steps of a min/max algorithm from the queued frontier: sssp along a path moves one hop
// per step, with exactly one vertex pending after each.
TEST(Engine, SyncShortestPathsAdvanceOneHopPerStep) {
  const graphdata::DirectedGraph path = fixtures::directed_path(200);
  Cluster run(path, {.kind = AlgorithmKind::kShortestPaths, .source = 0}, {.parts = 1, .mode = Mode::kSync});
  for (uint64_t step = 0; step < 5; ++step) {
    Result<StepReport> report = run.engines[0]->step(step);
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_EQ(report->progress.updates, step + 1);
    EXPECT_EQ(report->progress.residual, 1.0) << "one vertex pending after step " << step;
  }
}

// While every link reports busy, an async engine keeps its outside deltas in their accumulators
// and sends them only when it has nothing else to do: far fewer batches, each a sum, and the
// same fixed point.
TEST(Engine, BusyLinksCoalesceDeltasUntilTheEngineIdles) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(3000, 30000, 29, false);
  const AlgorithmCase pagerank = algorithm_cases()[0];
  uint64_t batches[2] = {0, 0};
  for (bool busy : {false, true}) {
    Cluster run(graph, pagerank.spec, {.parts = 2});
    run.router->set_busy(busy);
    ASSERT_TRUE(run.run());
    expect_values_near(run.values(), fixtures::fixed_point(graph, pagerank.spec), pagerank.spec,
                       busy ? "busy links" : "free links");
    batches[busy ? 1 : 0] = run.router->batches_routed();
  }
  EXPECT_LT(batches[1] * 2, batches[0]) << "free links: " << batches[0] << " batches, busy: " << batches[1];
}

// --- Termination and accounting -------------------------------------------------------------

TEST(Engine, NotDoneWhileDeltasAreInFlight) {
  for (const AlgorithmCase& c : {algorithm_cases()[0], algorithm_cases()[5]}) {
    SCOPED_TRACE(c.name);
    const graphdata::DirectedGraph graph = fixtures::grid(8, 8, /*weighted=*/true);
    const std::vector<double> expected = fixtures::fixed_point(graph, c.spec);
    Cluster run(graph, c.spec, {.parts = 3});
    run.router->hold();
    run.start();
    // Every engine runs out of local work and idles with its remote deltas held on the "wire".
    const Clock::time_point deadline = Clock::now() + kRunDeadline;
    EngineProgress total = total_progress(run.engines);
    while (Clock::now() < deadline && (total.residual > tolerance_for(c.spec) || run.router->queued() == 0)) {
      std::this_thread::sleep_for(milliseconds(2));
      total = total_progress(run.engines);
    }
    ASSERT_LE(total.residual, tolerance_for(c.spec));
    EXPECT_GT(total.batches_sent, total.batches_received) << "held batches are visibly in flight";
    EXPECT_FALSE(run.wait_for_termination(milliseconds(100)));
    run.router->release();
    ASSERT_TRUE(run.wait_for_termination());
    run.stop();
    expect_values_near(run.values(), expected, c.spec, c.name);
  }
}

TEST(Engine, APriorityLevelHoldsUpdatesBackUntilItIsLowered) {
  const graphdata::DirectedGraph graph = fixtures::grid(8, 8, /*weighted=*/false);
  const AlgorithmCase pagerank = algorithm_cases()[0];  // a copy: the vector is a temporary
  Cluster run(graph, pagerank.spec, {.parts = 2});
  // Far above any |dv| / degree: even after the engines lower their own floors 4x, nothing is
  // updated, and the engines wait (running, residual untouched) rather than spin or finish.
  for (auto& engine : run.engines) engine->set_priority_level({1e6, 0.0, 0.0});
  run.start();
  std::this_thread::sleep_for(milliseconds(60));
  EngineProgress held = total_progress(run.engines);
  EXPECT_EQ(held.updates, 0u);
  EXPECT_TRUE(held.running);
  EXPECT_GT(held.residual, tolerance_for(pagerank.spec));
  for (auto& engine : run.engines) engine->set_priority_level({});
  ASSERT_TRUE(run.wait_for_termination());
  run.stop();
  expect_values_near(run.values(), fixtures::fixed_point(graph, pagerank.spec), pagerank.spec, pagerank.name);
}

// The driver's use of the level (graph_run.cpp): after every poll each part gets f x (the
// others' residual + its own) / E, lifted for a poll when nothing moved. Every sum algorithm
// still reaches its fixed point, on several parts and with slow links.
TEST(Engine, ConvergesUnderTheCoordinatorsPriorityLevels) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(300, 2400, 17, true);
  for (const AlgorithmCase& c : algorithm_cases()) {
    if (!is_linear(c.spec)) continue;
    for (uint32_t parts : {1u, 3u}) {
      SCOPED_TRACE(c.name + " on " + std::to_string(parts) + " parts");
      Cluster run(graph, c.spec, {.parts = parts, .latency = milliseconds(parts > 1 ? 2 : 0)});
      run.start();
      const double per_residual = 0.5 / static_cast<double>(graph.edge_count());
      uint64_t updates_before = std::numeric_limits<uint64_t>::max();
      bool previous_quiet = false;
      uint64_t previous_sent = 0;
      bool done = false;
      for (const Clock::time_point deadline = Clock::now() + kRunDeadline; !done && Clock::now() < deadline;) {
        std::this_thread::sleep_for(milliseconds(3));
        std::vector<EngineProgress> each;
        for (auto& engine : run.engines) each.push_back(engine->progress());
        EngineProgress total;
        for (const EngineProgress& p : each) total += p;
        const bool stalled = total.updates == updates_before && total.residual > tolerance_for(c.spec);
        updates_before = total.updates;
        for (std::size_t p = 0; p < each.size(); ++p) {
          run.engines[p]->set_priority_level(
              stalled ? PriorityLevel{}
                      : PriorityLevel{per_residual * std::max(0.0, total.residual - each[p].residual), 0.0, per_residual});
        }
        const bool quiet = total.residual <= tolerance_for(c.spec) && total.batches_sent == total.batches_received;
        done = quiet && previous_quiet && total.batches_sent == previous_sent;
        previous_quiet = quiet;
        previous_sent = total.batches_sent;
      }
      run.stop();
      ASSERT_TRUE(done) << "did not terminate under priority levels";
      expect_values_near(run.values(), fixtures::fixed_point(graph, c.spec), c.spec, c.name);
    }
  }
}

TEST(Engine, SlowLinksStillConvergeToTheFixedPoint) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(200, 1200, 31, true);
  for (const AlgorithmCase& c : {algorithm_cases()[0], algorithm_cases()[5]}) {
    for (Mode mode : {Mode::kSync, Mode::kAsync}) {
      SCOPED_TRACE(c.name);
      Cluster run(graph, c.spec, {.parts = 3, .mode = mode, .latency = milliseconds(3)});
      ASSERT_TRUE(run.run());
      expect_values_near(run.values(), fixtures::fixed_point(graph, c.spec), c.spec, c.name);
    }
  }
}

// PageRank without dangling vertices conserves (1 - d) * sum(v) + sum(dv) = 1 - d: every update
// moves dv into v and passes d * dv on. So value_sum + residual / (1 - d) must be 1 whenever the
// figures account for every delta.
TEST(Engine, PageRankMassIsAccountedFor) {
  graphdata::DirectedGraph graph = fixtures::random_graph(250, 1500, 37, false);
  std::vector<fixtures::Edge> edges;
  for (uint32_t u = 0; u < graph.vertex_count; ++u) {
    edges.push_back({u, (u + 1) % 250});  // nothing dangles
    for (uint64_t e = graph.offsets[u]; e < graph.offsets[u + 1]; ++e) edges.push_back({u, graph.targets[e]});
  }
  graph = fixtures::make_graph(250, edges);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kPageRank, .damping = 0.85};
  {
    Cluster run(graph, spec, {.parts = 3, .mode = Mode::kSync});
    for (uint64_t step = 0; step < 40; ++step) {
      for (auto& engine : run.engines) ASSERT_TRUE(engine->step(step).is_ok());
      const EngineProgress total = total_progress(run.engines);
      ASSERT_NEAR(total.value_sum + total.residual / 0.15, 1.0, 1e-12) << "after step " << step;
    }
  }
  for (uint32_t threads : {1u, 2u}) {
    Cluster run(graph, spec, {.parts = 3, .threads = threads, .batch_max_entries = 16});
    ASSERT_TRUE(run.run());
    const EngineProgress total = total_progress(run.engines);
    EXPECT_NEAR(total.value_sum + total.residual / 0.15, 1.0, 1e-12);
    double value_sum = 0.0;
    for (double v : run.values()) value_sum += v;
    EXPECT_NEAR(value_sum, total.value_sum, 1e-12);
  }
}

TEST(Engine, SyncModeIsDeterministic) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(200, 1500, 41, true);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kPageRank};
  std::vector<double> first;
  uint64_t first_steps = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    Cluster run(graph, spec, {.parts = 3, .mode = Mode::kSync, .threads = 2});
    uint64_t steps = 0;
    ASSERT_TRUE(run.run_sync(&steps));
    if (repeat == 0) {
      first = run.values();
      first_steps = steps;
    }
    EXPECT_EQ(run.values(), first);
    EXPECT_EQ(steps, first_steps);
  }
}

TEST(Engine, SnapshotsOnlyMoveTowardsTheAnswer) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(400, 3000, 43, true);
  for (const AlgorithmCase& c : {algorithm_cases()[0], algorithm_cases()[5]}) {
    SCOPED_TRACE(c.name);
    const std::vector<double> expected = fixtures::fixed_point(graph, c.spec);
    Cluster run(graph, c.spec, {.parts = 2, .latency = milliseconds(2)});
    run.start();
    // PageRank values only grow (every delta is positive); distances only shrink.
    std::vector<std::vector<double>> previous(2);
    for (int poll = 0; poll < 30; ++poll) {
      for (uint32_t p = 0; p < 2; ++p) {
        std::vector<double> snapshot = run.engines[p]->snapshot_values();
        ASSERT_EQ(snapshot.size(), run.placement.vertices[p].size());
        for (std::size_t s = 0; s < snapshot.size(); ++s) {
          const double answer = expected[run.placement.vertices[p][s]];
          if (c.spec.kind == AlgorithmKind::kPageRank) {
            ASSERT_LE(snapshot[s], answer + 1e-12);
            if (!previous[p].empty()) {
              ASSERT_GE(snapshot[s], previous[p][s]);
            }
          } else {
            ASSERT_GE(snapshot[s], answer);
            if (!previous[p].empty()) {
              ASSERT_LE(snapshot[s], previous[p][s]);
            }
          }
        }
        previous[p] = std::move(snapshot);
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_TRUE(run.wait_for_termination());
    run.stop();
    expect_values_near(run.values(), expected, c.spec, c.name);
  }
}

TEST(EngineProgress, AddsEveryFigure) {
  EngineProgress total{.value_sum = 1, .residual = 2, .updates = 3, .edge_updates = 4, .batches_sent = 5,
                       .batches_received = 6, .deltas_sent = 7, .deltas_received = 8, .sweeps = 11,
                       .busy_seconds = 9, .idle_seconds = 10, .running = false};
  total += total;
  total += EngineProgress{.running = true};
  EXPECT_EQ(total, (EngineProgress{.value_sum = 2, .residual = 4, .updates = 6, .edge_updates = 8, .batches_sent = 10,
                                   .batches_received = 12, .deltas_sent = 14, .deltas_received = 16,
                                   .sweeps = 22, .busy_seconds = 18, .idle_seconds = 20, .running = true}));
}

// --- One engine by hand ---------------------------------------------------------------------

// Part 0 of 2 with two vertices and no edges: every delta lands in a value and stays there.
GraphPart two_isolated_vertices(double delta0) {
  GraphPart part;
  part.part_index = 0;
  part.part_count = 2;
  part.local_count = 2;
  part.offsets = {0, 0, 0};
  part.value = {0.0, 0.0};
  part.delta = {delta0, 0.0};
  return part;
}

class NullOutbound final : public Outbound {
 public:
  Status send(DeltaBatch&&) override { return Status::ok(); }
};

const AlgorithmSpec kKatz{.kind = AlgorithmKind::kKatz, .beta = 0.5};

DeltaBatch batch_from_part_1(uint64_t step, std::vector<uint32_t> slots, std::vector<double> deltas) {
  DeltaBatch batch;
  batch.step = step;
  batch.from_part = 1;
  batch.to_part = 0;
  batch.slots = std::move(slots);
  batch.deltas = std::move(deltas);
  return batch;
}

TEST(Engine, StepFoldsOnlyThePreviousStepsBatches) {
  NullOutbound outbound;
  Result<std::unique_ptr<Engine>> created = Engine::create(two_isolated_vertices(0.25), kKatz, {}, outbound);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  Engine& engine = **created;
  ASSERT_TRUE(engine.deliver(batch_from_part_1(3, {1}, {0.5})).is_ok());  // early: for step 4
  ASSERT_TRUE(engine.deliver(batch_from_part_1(2, {1}, {0.125})).is_ok());
  EXPECT_DOUBLE_EQ(engine.progress().residual, 0.25 + 0.5 + 0.125);
  EXPECT_EQ(engine.progress().batches_received, 2u);

  Result<StepReport> step3 = engine.step(3);
  ASSERT_TRUE(step3.is_ok());
  EXPECT_EQ(engine.values(), (std::vector<double>{0.25, 0.125}));
  EXPECT_DOUBLE_EQ(step3->progress.residual, 0.5) << "the step-3 batch is still held";
  EXPECT_EQ(step3->batches_sent_to, (std::vector<uint64_t>{0, 0}));

  ASSERT_TRUE(engine.step(4).is_ok());
  EXPECT_EQ(engine.values(), (std::vector<double>{0.25, 0.625}));
  EXPECT_EQ(engine.progress().residual, 0.0);
}

TEST(Engine, BatchesDeliveredBeforeStartAreFoldedIn) {
  NullOutbound outbound;
  Result<std::unique_ptr<Engine>> created = Engine::create(two_isolated_vertices(0.25), kKatz, {}, outbound);
  ASSERT_TRUE(created.is_ok());
  Engine& engine = **created;
  ASSERT_TRUE(engine.deliver(batch_from_part_1(0, {1, 0}, {1.0, 2.0})).is_ok());
  engine.start();
  ASSERT_TRUE(engine.deliver(batch_from_part_1(0, {1}, {4.0})).is_ok());
  const Clock::time_point deadline = Clock::now() + kRunDeadline;
  while (engine.progress().residual > 0.0 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(1));
  engine.stop();
  EXPECT_EQ(engine.values(), (std::vector<double>{2.25, 5.0}));
  EXPECT_EQ(engine.snapshot_values(), engine.values());
  const EngineProgress progress = engine.progress();
  EXPECT_EQ(progress.batches_received, 2u);
  EXPECT_EQ(progress.deltas_received, 3u);
  EXPECT_GE(progress.updates, 2u);
  EXPECT_DOUBLE_EQ(progress.value_sum, 7.25);
  EXPECT_FALSE(progress.running);
}

TEST(Engine, DeliverRefusesBadBatchesWhole) {
  NullOutbound outbound;
  Result<std::unique_ptr<Engine>> created = Engine::create(two_isolated_vertices(0.25), kKatz, {}, outbound);
  ASSERT_TRUE(created.is_ok());
  Engine& engine = **created;
  struct Bad {
    DeltaBatch batch;
    std::string message;
  };
  std::vector<Bad> bad;
  bad.push_back({batch_from_part_1(0, {0, 9}, {1.0, 1.0}), "batch from part 1 has slot 9 but this part owns 2 vertices"});
  bad.push_back({batch_from_part_1(0, {0, 1}, {1.0}), "batch from part 1 has 2 slots but 1 deltas"});
  bad.push_back({batch_from_part_1(0, {0, 1}, {1.0, std::nan("")}), "has delta nan for slot 1"});
  bad.push_back({batch_from_part_1(0, {0}, {kInf}), "has delta inf for slot 0"});
  DeltaBatch from_self = batch_from_part_1(0, {0}, {1.0});
  from_self.from_part = 0;
  bad.push_back({from_self, "batch from part 0 to part 0 arrived at part 0 of 2"});
  DeltaBatch misrouted = batch_from_part_1(0, {0}, {1.0});
  misrouted.to_part = 1;
  bad.push_back({misrouted, "batch from part 1 to part 1 arrived at part 0"});
  for (float scale : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    DeltaBatch bad_scale = batch_from_part_1(0, {0}, {1.0});
    bad_scale.sender_scale = scale;
    bad.push_back({bad_scale, "batch from part 1 gives its residual per edge as"});
  }
  for (Bad& b : bad) {
    const Status status = engine.deliver(std::move(b.batch));
    EXPECT_EQ(status.code(), StatusCode::kProtocolError) << b.message;
    EXPECT_NE(status.message().find(b.message), std::string::npos) << status.message();
  }
  const EngineProgress progress = engine.progress();
  EXPECT_EQ(progress.batches_received, 0u);
  EXPECT_EQ(progress.deltas_received, 0u);
  EXPECT_DOUBLE_EQ(progress.residual, 0.25) << "nothing of a refused batch is applied";
  ASSERT_TRUE(engine.step(1).is_ok());
  EXPECT_EQ(engine.values(), (std::vector<double>{0.25, 0.0}));
}

class FailingOutbound final : public Outbound {
 public:
  Status send(DeltaBatch&&) override { return network_error("link to part 1 is down"); }
};

TEST(Engine, AnOutboundFailureStopsTheEngine) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(100, 600, 47, false);
  const Placement placement = make_placement(fixtures::scattered_placement(100, 2), 2);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kPageRank};
  const VertexState state = initial_state(graph, spec);
  FailingOutbound outbound;
  for (Mode mode : {Mode::kAsync, Mode::kSync}) {
    std::vector<GraphPart> parts = build_parts(graph, placement, state.value, state.delta);
    Result<std::unique_ptr<Engine>> created = Engine::create(std::move(parts[0]), spec, {}, outbound);
    ASSERT_TRUE(created.is_ok());
    Engine& engine = **created;
    if (mode == Mode::kAsync) {
      engine.start();
      const Clock::time_point deadline = Clock::now() + kRunDeadline;
      while (engine.progress().running && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(1));
      EXPECT_FALSE(engine.progress().running) << "update threads end after a failed send";
      engine.stop();
    } else {
      Result<StepReport> report = engine.step(0);
      EXPECT_EQ(report.status().code(), StatusCode::kNetworkError);
    }
    EXPECT_EQ(engine.failure().code(), StatusCode::kNetworkError);
    EXPECT_NE(engine.failure().message().find("part 0: sending deltas to part 1: link to part 1 is down"),
              std::string::npos)
        << engine.failure().message();
  }
}

TEST(Engine, CreateRefusesBadInput) {
  NullOutbound outbound;
  const auto refusal = [&](GraphPart part, const AlgorithmSpec& spec, const EngineOptions& options) {
    Result<std::unique_ptr<Engine>> created = Engine::create(std::move(part), spec, options, outbound);
    EXPECT_FALSE(created.is_ok());
    return created.is_ok() ? std::string("accepted") : created.status().message();
  };
  GraphPart broken = two_isolated_vertices(0.0);
  broken.offsets = {0, 1, 0};
  EXPECT_NE(refusal(broken, kKatz, {}).find("offsets decrease"), std::string::npos);
  EXPECT_NE(refusal(two_isolated_vertices(0.0), {.kind = AlgorithmKind::kKatz, .beta = 0.0}, {}).find("--beta"),
            std::string::npos);
  EXPECT_NE(refusal(two_isolated_vertices(0.0), kKatz, {.threads = 0}).find("threads is 0"), std::string::npos);
  EXPECT_NE(refusal(two_isolated_vertices(0.0), kKatz, {.priority_fraction = 0.0}).find("priority fraction"),
            std::string::npos);
  EXPECT_NE(refusal(two_isolated_vertices(0.0), kKatz, {.priority_fraction = 1.5}).find("priority fraction"),
            std::string::npos);
  EXPECT_NE(refusal(two_isolated_vertices(0.0), kKatz, {.idle_residual = std::nan("")}).find("idle residual"),
            std::string::npos);
  EXPECT_NE(refusal(two_isolated_vertices(0.0), kKatz, {.batch_max_entries = 0}).find("batch max entries"),
            std::string::npos);
  GraphPart negative = two_isolated_vertices(0.0);
  negative.offsets = {0, 1, 1};
  negative.targets = {1};
  negative.weights = {-1.0};
  EXPECT_NE(refusal(negative, {.kind = AlgorithmKind::kShortestPaths, .source = 0}, {}).find("non-negative"),
            std::string::npos);
}

TEST(Engine, MemoryBytesCoverThePartAndTheAccumulators) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(300, 3000, 53, true);
  const AlgorithmSpec spec{.kind = AlgorithmKind::kPageRank};
  const VertexState state = initial_state(graph, spec);
  std::vector<GraphPart> parts = build_parts(graph, make_placement(std::vector<int32_t>(300, 0), 1), state.value,
                                             state.delta);
  const uint64_t part_bytes = parts[0].memory_bytes();
  NullOutbound outbound;
  Result<std::unique_ptr<Engine>> created = Engine::create(std::move(parts[0]), spec, {}, outbound);
  ASSERT_TRUE(created.is_ok());
  // The deltas move into the accumulator: the total stays close to the part's own size.
  EXPECT_GE((*created)->memory_bytes(), part_bytes);
  EXPECT_LE((*created)->memory_bytes(), part_bytes + 300 * 8 + 4096);
}

// --- Accumulating small deltas (async sum algorithms) ----------------------------------------

// Part 0 of 2: a hot vertex 0 whose Katz update (beta 1, a self-loop) puts its whole delta back,
// so the engine sweeps for as long as the test wants, and `cold` vertices 1.. with one edge each
// to a vertex of part 1, so every update of one of them leaves as a delta to part 1.
GraphPart hot_vertex_and_cold_ones(uint32_t cold) {
  GraphPart part;
  part.part_index = 0;
  part.part_count = 2;
  part.local_count = cold + 1;
  part.offsets = {0, 1};
  part.targets = {0};
  for (uint32_t g = 0; g < cold; ++g) {
    part.targets.push_back(part.local_count + g);
    part.offsets.push_back(part.offsets.back() + 1);
    part.ghosts.push_back({1, g});
  }
  part.value.assign(part.local_count, 0.0);
  part.delta.assign(part.local_count, 0.0);
  part.delta[0] = 1.0;
  return part;
}

class CountingOutbound final : public Outbound {
 public:
  Status send(DeltaBatch&& batch) override {
    std::lock_guard lock(mutex_);
    // Outside deltas leave combined: one entry per target vertex and destination per flush.
    std::vector<uint32_t> slots = batch.slots;
    std::sort(slots.begin(), slots.end());
    if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) ++repeated_slots_;
    for (std::size_t i = 0; i < batch.slots.size(); ++i) sent_[batch.slots[i]] += batch.deltas[i];
    entries_ += batch.slots.size();
    return Status::ok();
  }
  uint64_t entries() {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  std::map<uint32_t, double> sent() {
    std::lock_guard lock(mutex_);
    return sent_;
  }
  uint64_t batches_with_repeated_slots() {
    std::lock_guard lock(mutex_);
    return repeated_slots_;
  }

 private:
  std::mutex mutex_;
  uint64_t entries_ = 0;
  uint64_t repeated_slots_ = 0;
  std::map<uint32_t, double> sent_;
};

bool wait_until(const std::function<bool()>& condition) {
  const Clock::time_point deadline = Clock::now() + kRunDeadline;
  while (!condition()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// Many tiny batches for vertices far below the part's residual scale do not make every sweep
// update them (each update would cost its out-degree again for the next tiny batch): they add
// up, are counted in the residual meanwhile, and leave as one update each once they are worth it.
TEST(Engine, TinyBatchesAddUpInsteadOfUpdatingEveryPendingVertex) {
  constexpr uint32_t kCold = 100;
  constexpr int kTinyBatches = 200;
  constexpr double kTiny = 1e-6;
  const AlgorithmSpec katz{.kind = AlgorithmKind::kKatz, .beta = 1.0};
  CountingOutbound outbound;
  Result<std::unique_ptr<Engine>> made = Engine::create(hot_vertex_and_cold_ones(kCold), katz, {}, outbound);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  Engine& engine = **made;
  engine.start();
  std::vector<uint32_t> cold_slots;
  for (uint32_t v = 1; v <= kCold; ++v) cold_slots.push_back(v);
  for (int k = 0; k < kTinyBatches; ++k) {
    ASSERT_TRUE(engine.deliver(batch_from_part_1(0, cold_slots, std::vector<double>(kCold, kTiny))).is_ok());
    if (k % 20 == 0) std::this_thread::sleep_for(milliseconds(1));  // let sweeps run in between
  }
  // Every batch is in: folded into the slice or still in the mailbox, the residual holds it.
  ASSERT_TRUE(wait_until([&] { return engine.progress().updates > 1000; }));
  const EngineProgress held = engine.progress();
  EXPECT_EQ(held.batches_received, static_cast<uint64_t>(kTinyBatches));
  EXPECT_EQ(outbound.entries(), 0u) << "a cold vertex was updated for tiny deltas";
  EXPECT_EQ(held.batches_sent, 0u);
  EXPECT_NEAR(held.residual, 1.0 + kCold * kTinyBatches * kTiny, 1e-9);
  EXPECT_TRUE(held.running);

  // Worth an update now (above the hot vertex's |dv| per edge, so above the mean over the pending
  // vertices): each cold vertex is updated once, with everything it accumulated.
  ASSERT_TRUE(engine.deliver(batch_from_part_1(0, cold_slots, std::vector<double>(kCold, 2.0))).is_ok());
  ASSERT_TRUE(wait_until([&] { return outbound.entries() >= kCold; }));
  ASSERT_TRUE(wait_until([&] { return engine.progress().residual < 1.0 + 1e-9; }));
  engine.stop();
  EXPECT_EQ(outbound.entries(), static_cast<uint64_t>(kCold));
  EXPECT_EQ(outbound.batches_with_repeated_slots(), 0u);
  for (const auto& [slot, delta] : outbound.sent()) EXPECT_NEAR(delta, 2.0 + kTinyBatches * kTiny, 1e-12) << slot;
  const EngineProgress done = engine.progress();
  EXPECT_NEAR(done.residual, 1.0, 1e-12);
  EXPECT_EQ(done.deltas_sent, static_cast<uint64_t>(kCold));
  EXPECT_FALSE(done.running);
}

// A part told by a peer's batch that the others hold far more residual per edge than it does
// leaves its own small deltas alone for a while, but not for ever: when no more batches come, the
// peer's figure is stale and the part goes on alone to its tolerance, each vertex updated once
// with everything it holds, and the residual accounting exact throughout.
TEST(Engine, APeerLevelHoldsSmallDeltasOnlyWhileThePeerKeepsSending) {
  constexpr uint32_t kCold = 100;
  GraphPart part = hot_vertex_and_cold_ones(kCold);
  part.delta[0] = 0.0;
  part.targets[0] = part.local_count + kCold;  // vertex 0 (no delta) sends to part 1 too, no self-loop
  part.ghosts.push_back({1, kCold});
  for (uint32_t v = 1; v <= kCold; ++v) part.delta[v] = 1e-3;
  const AlgorithmSpec pagerank{.kind = AlgorithmKind::kPageRank, .damping = 0.85};
  CountingOutbound outbound;
  EngineOptions options;
  options.idle_residual = 1e-12;
  options.combine_share = 0.5;  // off by default; what it does when on
  options.peer_level_share = 1.0;
  Result<std::unique_ptr<Engine>> made = Engine::create(std::move(part), pagerank, options, outbound);
  ASSERT_TRUE(made.is_ok()) << made.status().to_string();
  Engine& engine = **made;
  DeltaBatch from_a_busy_peer = batch_from_part_1(0, {1}, {1e-3});
  from_a_busy_peer.sender_scale = 1.0f;  // 1000x this part's residual per edge
  ASSERT_TRUE(engine.deliver(std::move(from_a_busy_peer)).is_ok());
  EXPECT_NEAR(engine.progress().residual, (kCold + 1) * 1e-3, 1e-15);
  engine.start();
  ASSERT_TRUE(wait_until([&] { return engine.progress().residual <= options.idle_residual; }));
  engine.stop();
  const EngineProgress done = engine.progress();
  EXPECT_EQ(done.updates, static_cast<uint64_t>(kCold));
  EXPECT_EQ(outbound.entries(), static_cast<uint64_t>(kCold)) << "each vertex went out once";
  EXPECT_EQ(outbound.batches_with_repeated_slots(), 0u);
  const std::map<uint32_t, double> sent = outbound.sent();
  EXPECT_NEAR(sent.at(0), 0.85 * 2e-3, 1e-15) << "vertex 1 sent the batch's delta with its own";
  for (uint32_t g = 1; g < kCold; ++g) EXPECT_NEAR(sent.at(g), 0.85 * 1e-3, 1e-15) << g;
  EXPECT_EQ(done.residual, 0.0);
  EXPECT_FALSE(done.running);
}

}  // namespace
}  // namespace tessera::graph
