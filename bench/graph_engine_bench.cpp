// tessera-graph-engine-bench: the graph engine on one part of one machine, asynchronous
// (prioritised rounds) against the synchronous Jacobi baseline with the same kernels, run
// interleaved so both see the same machine load. Per run and as median (min..max): wall seconds
// from start to the tolerance, edge updates, edge updates per second, the wall time per edge
// update (ns/edge: what a sweep or a step costs per edge, everything included) and the final
// residual, then the async / sync ratio of ns/edge per interleaved pair.
// Issue 13's target: one update thread, PageRank on rmat:20, at least 50 M edge updates/s.
// A figure generator, not a test: its times depend on the machine.
//
//   tessera-graph-engine-bench [--graph rmat:20|FILE] [--runs 5] [--threads 1]
//       [--algorithm pagerank|katz|cc|sssp] [--tolerance 1e-6] [--priority 0.25]
//       [--beta B] [--source V] [--seed 1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tessera/core/stats.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/engine.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/state.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/graphdata/generators.hpp"

namespace tg = tessera::graph;
namespace graphdata = tessera::graphdata;

namespace {

using Clock = std::chrono::steady_clock;

// One part owns every vertex: nothing ever leaves.
class NoPeers final : public tg::Outbound {
 public:
  tessera::Status send(tg::DeltaBatch&&) override {
    return tessera::internal_error("a single-part run has no peers to send deltas to");
  }
};

struct Measurement {
  double wall_seconds = 0.0;
  uint64_t edge_updates = 0;
  uint64_t steps = 0;  // sync: Jacobi steps
  double residual = 0.0;
  double rate() const { return static_cast<double>(edge_updates) / wall_seconds; }
  // Everything a run does (scans, selection, flushes) charged to the edges it updated.
  double ns_per_edge() const { return 1e9 * wall_seconds / static_cast<double>(std::max<uint64_t>(1, edge_updates)); }
};

bool converged(const tg::AlgorithmSpec& spec, double residual, double tolerance) {
  return tg::is_linear(spec) ? residual <= tolerance : residual == 0.0;
}

enum class Mode { kAsync, kSync };

// One run from the part's initial state to the tolerance; the wall time excludes making the engine.
tessera::Result<Measurement> measure(Mode mode, const tg::GraphPart& part, const tg::AlgorithmSpec& spec,
                                     const tg::EngineOptions& options, double tolerance) {
  NoPeers peers;
  tessera::Result<std::unique_ptr<tg::Engine>> created = tg::Engine::create(part, spec, options, peers);
  if (!created) return created.status();
  tg::Engine& engine = **created;
  Measurement measurement;
  const Clock::time_point start = Clock::now();
  if (mode == Mode::kAsync) {
    engine.start();
    // Polling costs a mutex per millisecond; the wall time errs by at most one poll.
    while (!converged(spec, engine.progress().residual, tolerance) && engine.failure().is_ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    measurement.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    engine.stop();
    if (!engine.failure().is_ok()) return engine.failure();
  } else {
    for (uint64_t step = 0;; ++step) {
      tessera::Result<tg::StepReport> report = engine.step(step);
      if (!report) return report.status();
      measurement.steps = step + 1;
      if (converged(spec, report->progress.residual, tolerance)) break;
    }
    measurement.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const tg::EngineProgress progress = engine.progress();
  measurement.edge_updates = progress.edge_updates;
  measurement.residual = progress.residual;
  return measurement;
}

std::string summary(const std::vector<Measurement>& runs, double (*figure)(const Measurement&), const char* format) {
  std::vector<double> values;
  for (const Measurement& m : runs) values.push_back(figure(m));
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return fmt::format(fmt::runtime(format), tessera::median(values), *low, *high);
}

void print_summary(const char* mode, const std::vector<Measurement>& runs) {
  fmt::print("{:<6} wall {}  edge updates {}  rate {}  {}  residual {}\n", mode,
             summary(runs, [](const Measurement& m) { return m.wall_seconds; }, "{:.3f} s ({:.3f}..{:.3f})"),
             summary(runs, [](const Measurement& m) { return static_cast<double>(m.edge_updates); },
                     "{:.4g} ({:.4g}..{:.4g})"),
             summary(runs, [](const Measurement& m) { return m.rate() / 1e6; }, "{:.1f} M/s ({:.1f}..{:.1f})"),
             summary(runs, [](const Measurement& m) { return m.ns_per_edge(); }, "{:.2f} ns/edge ({:.2f}..{:.2f})"),
             summary(runs, [](const Measurement& m) { return m.residual; }, "{:.2e} ({:.2e}..{:.2e})"));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The graph engine on one part: async vs sync, edge updates per second"};
  std::string graph_spec = "rmat:20";
  int runs = 5;
  uint32_t threads = 1;
  std::string algorithm = "pagerank";
  double tolerance = 1e-6;
  double priority = tg::EngineOptions{}.priority_fraction;
  double beta = 0.0;
  int64_t source = 0;
  uint64_t seed = 1;
  app.add_option("--graph", graph_spec, "generator spec (rmat:SCALE, lognormal:N, mesh2d:NXxNY) or graph file");
  app.add_option("--runs", runs, "runs of each mode")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "update threads")->check(CLI::PositiveNumber);
  app.add_option("--algorithm", algorithm, "pagerank, katz, cc or sssp");
  app.add_option("--tolerance", tolerance, "sum |dv| to stop at (pagerank, katz)");
  app.add_option("--priority", priority, "share of pending vertices updated per async round");
  app.add_option("--beta", beta, "katz: attenuation, below 1/lambda_max");
  app.add_option("--source", source, "sssp (and single-source katz): the source vertex");
  app.add_option("--seed", seed, "generator seed");
  CLI11_PARSE(app, argc, argv);

  tessera::Result<tg::AlgorithmKind> kind = tg::parse_algorithm(algorithm);
  if (!kind) {
    fmt::print(stderr, "{}\n", kind.status().to_string());
    return 2;
  }
  tg::AlgorithmSpec spec{.kind = *kind, .beta = beta};
  if (spec.kind == tg::AlgorithmKind::kShortestPaths) spec.source = source;
  if (tessera::Status status = tg::check_spec(spec); !status.is_ok()) {
    fmt::print(stderr, "{}\n", status.to_string());
    return 2;
  }

  const Clock::time_point load_start = Clock::now();
  tessera::Result<graphdata::DirectedGraph> loaded = graphdata::is_generator_spec(graph_spec)
                                                  ? graphdata::generate_directed_graph(graph_spec, seed)
                                                  : graphdata::read_directed_graph_file(graph_spec);
  if (!loaded) {
    fmt::print(stderr, "{}\n", loaded.status().to_string());
    return 1;
  }
  graphdata::DirectedGraph graph = spec.kind == tg::AlgorithmKind::kConnectedComponents ? graphdata::symmetrised(*loaded)
                                                                                  : std::move(*loaded);
  if (spec.source && *spec.source >= graph.vertex_count) {
    fmt::print(stderr, "--source {} is not a vertex of {} ({} vertices)\n", *spec.source, graph_spec, graph.vertex_count);
    return 2;
  }
  const tg::VertexState state = tg::initial_state(graph, spec);
  const tg::Placement placement =
      tg::make_placement(std::vector<int32_t>(static_cast<std::size_t>(graph.vertex_count), 0), 1);
  const tg::GraphPart part = tg::build_parts(graph, placement, state.value, state.delta)[0];
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();

  tg::EngineOptions options;
  options.threads = threads;
  options.priority_fraction = priority;
  options.idle_residual = tolerance / threads;
  fmt::print("graph {} (seed {}): {}; loaded and placed in {:.1f} s\n", graph_spec, seed, graphdata::describe(graph),
             load_seconds);
  fmt::print("{}, tolerance {:g}, {} update thread(s), priority fraction {:g}; part {:.1f} bytes/edge\n",
             tg::describe(spec), tolerance, threads, priority,
             static_cast<double>(part.memory_bytes()) / static_cast<double>(std::max<int64_t>(1, graph.edge_count())));

  std::vector<Measurement> async_runs;
  std::vector<Measurement> sync_runs;
  for (int run = 1; run <= runs; ++run) {
    tessera::Result<Measurement> async = measure(Mode::kAsync, part, spec, options, tolerance);
    tessera::Result<Measurement> sync = measure(Mode::kSync, part, spec, options, tolerance);
    if (!async || !sync) {
      fmt::print(stderr, "{}\n", (!async ? async.status() : sync.status()).to_string());
      return 1;
    }
    fmt::print("run {}: async {:.3f} s, {} edge updates, {:.1f} M/s, residual {:.2e} | sync {:.3f} s, {} steps, {} edge "
               "updates, {:.1f} M/s, residual {:.2e}\n",
               run, async->wall_seconds, async->edge_updates, async->rate() / 1e6, async->residual, sync->wall_seconds,
               sync->steps, sync->edge_updates, sync->rate() / 1e6, sync->residual);
    async_runs.push_back(*async);
    sync_runs.push_back(*sync);
  }
  fmt::print("median (min..max) of {} runs:\n", runs);
  print_summary("async", async_runs);
  print_summary("sync", sync_runs);
  // Per run, so that both modes of a pair saw the same machine load.
  std::vector<double> ratios;
  for (std::size_t i = 0; i < async_runs.size(); ++i) ratios.push_back(async_runs[i].ns_per_edge() / sync_runs[i].ns_per_edge());
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  fmt::print("async / sync ns per edge, per run pair: {:.2f} ({:.2f}..{:.2f}); edge updates async / sync: {:.2f}\n",
             tessera::median(ratios), *low, *high,
             static_cast<double>(async_runs.back().edge_updates) / static_cast<double>(sync_runs.back().edge_updates));
  return 0;
}
