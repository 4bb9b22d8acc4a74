#include "tessera/balance/expr/scheduled_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/balance/expr/schedule.hpp"
#include "tessera/balance/expr/dag_run.hpp"
#include "tessera/balance/expr/verify_expression.hpp"

namespace tessera::balance::expr {

namespace {

using Clock = std::chrono::steady_clock;

// Tile sizes tried, largest first so ties keep fewer, larger tiles (fewer jobs and headers).
constexpr uint64_t kCandidateTiles[] = {4096, 2048, 1024, 512, 256};
// How much faster (a fraction) a smaller tile's schedule must be forecast to be chosen over a
// larger one (pick_tile_candidate): a forecast a few percent sooner is within the model's error,
// while a smaller tile's extra jobs and headers cost a run more than the forecast charges them.
constexpr double kTileTieMargin = 0.05;
// Beyond this many tasks a candidate is not simulated: its jobs' overheads would swamp the work.
constexpr std::size_t kMostTasks = 20000;
// How much faster (a fraction) a schedule on fewer nodes must be forecast to run instead of the
// one on every node: the forecasts' own spread on this kind of host is wider than a few percent.
constexpr double kFewerNodesMargin = 0.05;
// The size at which nodes are ranked fastest first for the fewer-node schedules.
constexpr double kRankingSize = 1024.0;

std::string_view kind_name(Op op) {
  switch (op) {
    case Op::kProduct: return "product";
    case Op::kSum: return "sum";
    case Op::kDifference: return "difference";
    case Op::kScale: return "scale";
    default: return "other";
  }
}

uint64_t expr_longest(const Expr& e) {
  uint64_t longest = 1;
  for (const Expr& node : nodes_in_order(e)) longest = std::max({longest, node->rows, node->cols});
  return longest;
}

struct Candidate {
  TaskDag dag;
  Schedule schedule;
  std::vector<std::size_t> nodes;  // the schedule's nodes, as indices into the model it was made on
  bool direct = false;             // tiles between nodes worker to worker (the schedule charges that)
  double other_route_s = NAN;      // the other route's forecast, when both were scheduled
};

// `dag` scheduled on the nodes `nodes` of `model` (indices, cluster order).
Candidate schedule_dag(TaskDag dag, const model::ClusterModel& model, const std::vector<std::size_t>& nodes,
                       const ScheduleOptions& options) {
  Candidate candidate;
  candidate.dag = std::move(dag);
  candidate.nodes = nodes;
  candidate.schedule = heft(candidate.dag, model::model_of_nodes(model, nodes), options);
  return candidate;
}

// `dag` on every node, or (unless `every_node`) on the fastest few when that is forecast
// kFewerNodesMargin faster (heft_on_best_nodes). The nodes are indices into `model`.
Candidate schedule_on_best_nodes(TaskDag dag, const model::ClusterModel& model, bool every_node,
                                 const ScheduleOptions& options) {
  if (every_node) {
    std::vector<std::size_t> every(model.nodes.size());
    std::iota(every.begin(), every.end(), std::size_t{0});
    return schedule_dag(std::move(dag), model, every, options);
  }
  NodeSetSchedule best = heft_on_best_nodes(dag, model, options, kFewerNodesMargin, kRankingSize);
  return Candidate{std::move(dag), std::move(best.schedule), std::move(best.nodes)};
}

// The worker capabilities a DAG's jobs need beyond GEMM: ADD_SCALED for sums, differences,
// scales and a transposed result; the transpose flags for any tile read transposed.
uint64_t capabilities_needed(const TaskDag& dag) {
  uint64_t needed = 0;
  for (const TileTask& task : dag.tasks) {
    if (task.op != Op::kProduct) needed |= transport::kCapabilityExpression;
    for (const TileRef& read : task.reads) {
      if (read.transposed && !dag.matrices[read.matrix].identity) needed |= transport::kCapabilityTransposedJobs;
    }
  }
  return needed;
}

}  // namespace

std::string_view tile_route_name(TileRoute route) {
  switch (route) {
    case TileRoute::kAuto: return "auto";
    case TileRoute::kDirect: return "direct";
    case TileRoute::kCoordinator: return "coordinator";
  }
  return "auto";
}

Result<TileRoute> parse_tile_route(std::string_view name) {
  for (TileRoute route : {TileRoute::kAuto, TileRoute::kDirect, TileRoute::kCoordinator}) {
    if (name == tile_route_name(route)) return route;
  }
  return invalid_argument(fmt::format("unknown tile route '{}'; use auto, direct (worker to worker) or coordinator", name));
}

Status run_scheduled(cluster::ClusterConnection& connection, const model::ClusterModel& model, const Expr& prepared,
                     const std::map<std::string, linalg::MatrixView>& inputs, const ScheduledEvalOptions& options,
                     EvalOutcome& outcome) {
  std::vector<cluster::NodeLink>& links = connection.links();
  // The taking part: model index == link index (both in cluster order), checked by name.
  std::vector<std::size_t> taking_part;
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (i >= model.nodes.size() || model.nodes[i].name != links[i].spec.name) {
      return internal_error("the performance model does not list the cluster's nodes in order");
    }
    const bool wanted = options.only_nodes.empty() ||
                        std::find(options.only_nodes.begin(), options.only_nodes.end(), links[i].spec.name) !=
                            options.only_nodes.end();
    if (wanted) taking_part.push_back(i);
  }
  for (const std::string& name : options.only_nodes) {
    if (std::none_of(links.begin(), links.end(), [&](const cluster::NodeLink& link) { return link.spec.name == name; })) {
      return invalid_argument(fmt::format("there is no node named '{}' in the cluster", name));
    }
  }
  if (taking_part.empty()) return invalid_argument("no node to evaluate on");

  const Expr& e = prepared;
  {
    // Any tile size lowers to the same kinds of jobs.
    const uint64_t needed = capabilities_needed(lower_to_tasks(e, std::max<uint64_t>(1, expr_longest(e))));
    for (std::size_t i : taking_part) {
      const uint64_t missing = needed & ~links[i].hello.capabilities;
      if (missing != 0) {
        return invalid_config(fmt::format(
            "node {} runs a worker without the '{}' capability this expression's jobs need (it offers: {}); "
            "upgrade it, or run with --mode sequence",
            links[i].spec.name, transport::capability_names(missing),
            transport::capability_names(links[i].hello.capabilities)));
      }
    }
  }
  double cache_bytes = options.cache_bytes;
  if (cache_bytes <= 0.0) {
    cache_bytes = std::numeric_limits<double>::infinity();
    for (std::size_t i : taking_part) {
      cache_bytes = std::min(cache_bytes, 0.5 * static_cast<double>(links[i].hello.tile_memory_cap));
    }
  }
  ScheduledEval report;
  // The routes a tile between nodes may take, each scheduled (the schedule charges the path):
  // worker to worker needs every node's worker to send tiles.
  ScheduleOptions schedule_options;
  schedule_options.cache_bytes = cache_bytes;
  bool direct_possible = options.tile_route != TileRoute::kCoordinator;
  if (direct_possible) {
    constexpr uint64_t kTileSend = transport::kCapabilityForward | transport::kCapabilityTileSend;
    for (std::size_t i : taking_part) {
      if ((links[i].hello.capabilities & kTileSend) == kTileSend) continue;
      report.route_notes.push_back(fmt::format(
          "tiles between nodes go through the coordinator: {}'s worker does not send tiles to other workers (it offers {})",
          links[i].spec.name, transport::capability_names(links[i].hello.capabilities)));
      direct_possible = false;
      break;
    }
  }
  std::vector<bool> routes;  // peer_transfers values to schedule, direct first (it wins a tie)
  if (direct_possible) routes.push_back(true);
  if (!direct_possible || options.tile_route == TileRoute::kAuto) routes.push_back(false);

  // The tile size: the largest whose predicted schedule is within kTileTieMargin of the fastest.
  const model::ClusterModel part_model = model::model_of_nodes(model, taking_part);
  const uint64_t longest = expr_longest(e);
  std::vector<uint64_t> tiles;
  if (options.tile > 0) {
    tiles.push_back(options.tile);
  } else {
    for (uint64_t tile : kCandidateTiles) {
      if (tile < longest || tiles.empty()) tiles.push_back(std::min(tile, longest));
    }
    tiles.erase(std::unique(tiles.begin(), tiles.end()), tiles.end());
  }
  std::vector<Candidate> candidates;  // largest tile first
  for (uint64_t tile : tiles) {
    TaskDag dag = lower_to_tasks(e, tile);
    if (options.tile == 0 && !candidates.empty() && dag.tasks.size() > kMostTasks) continue;
    std::optional<Candidate> chosen;
    for (bool direct : routes) {
      ScheduleOptions route_options = schedule_options;
      route_options.peer_transfers = direct;
      Candidate tried = schedule_on_best_nodes(dag, part_model, options.every_node, route_options);
      tried.direct = direct;
      if (!chosen) {
        chosen = std::move(tried);
      } else if (tried.schedule.makespan_s < chosen->schedule.makespan_s) {
        tried.other_route_s = chosen->schedule.makespan_s;
        chosen = std::move(tried);
      } else {
        chosen->other_route_s = tried.schedule.makespan_s;
      }
    }
    Candidate candidate = std::move(*chosen);
    for (std::size_t& node : candidate.nodes) node = taking_part[node];  // from now on: link indices
    report.candidates.emplace_back(candidate.dag.tile, candidate.schedule.makespan_s);
    candidates.push_back(std::move(candidate));
  }
  std::vector<double> makespans;  // the forecasts just reported, in the same order
  for (const auto& [tile, makespan] : report.candidates) makespans.push_back(makespan);
  Candidate best = std::move(candidates[pick_tile_candidate(makespans, kTileTieMargin)]);
  schedule_options.peer_transfers = best.direct;
  if (std::isfinite(best.other_route_s)) {
    report.route_notes.push_back(fmt::format("tiles between nodes {}: forecast {:.3f} s, {:.3f} s {}",
                                             best.direct ? "worker to worker" : "through the coordinator",
                                             best.schedule.makespan_s, best.other_route_s,
                                             best.direct ? "through the coordinator" : "worker to worker"));
  }
  report.tile = best.dag.tile;
  report.predicted_makespan_s = best.schedule.makespan_s;
  report.predicted_bytes = best.schedule.bytes_moved;
  report.predicted_coordinator_cpu_s = best.schedule.coordinator_bytes * part_model.coordinator_cpu_s_per_byte;
  report.naive_bytes = naive_bytes(best.dag);
  report.tasks = best.dag.tasks.size();
  {
    ScheduleOptions free;
    free.zero_communication = true;
    free.cache_bytes = cache_bytes;
    report.theoretical_makespan_s = heft(best.dag, part_model, free).makespan_s;
    // The fastest node: the one HEFT alone would finish soonest on, transfers free.
    report.fastest_alone_s = std::numeric_limits<double>::infinity();
    for (std::size_t p = 0; p < part_model.nodes.size(); ++p) {
      report.fastest_alone_s =
          std::min(report.fastest_alone_s, heft(best.dag, model::model_of_nodes(part_model, {p}), free).makespan_s);
    }
  }
  // The predicted side of the per-node and per-kind figures, from the schedule that runs first.
  std::map<std::string, ScheduledTaskKind> kinds;
  for (std::size_t t = 0; t < best.dag.tasks.size(); ++t) {
    const TaskPlacement& placed = best.schedule.tasks[t];
    ScheduledTaskKind& kind = kinds[std::string(kind_name(best.dag.tasks[t].op))];
    kind.kind = kind_name(best.dag.tasks[t].op);
    ++kind.tasks;
    kind.predicted_s += placed.finish_s - placed.start_s;
  }
  // Per node of the cluster (link index); the nodes taking part that the schedule left out show 0 tasks.
  std::vector<ScheduledNode> node_figures(links.size());
  for (std::size_t i : taking_part) node_figures[i].name = links[i].spec.name;
  for (std::size_t p = 0; p < best.nodes.size(); ++p) {
    ScheduledNode& node = node_figures[best.nodes[p]];
    node.predicted_busy_s = best.schedule.busy_s[p];
    if (!best.schedule.host_availability.empty()) node.host_share = best.schedule.host_availability[p];
  }
  std::vector<bool> seen(links.size(), false);
  for (const TaskPlacement& placed : best.schedule.tasks) {
    const std::size_t link = best.nodes[placed.node];
    ScheduledNode& node = node_figures[link];
    node.predicted_start_s = seen[link] ? std::min(node.predicted_start_s, placed.start_s) : placed.start_s;
    seen[link] = true;
    node.predicted_finish_s = std::max(node.predicted_finish_s, placed.finish_s);
  }

  // Run; a lost node's share is rescheduled on the others, from the inputs again.
  const TiledMatrix& result_matrix = best.dag.matrices[best.dag.result];
  outcome.value = linalg::Matrix(result_matrix.rows, result_matrix.cols);
  const auto start = Clock::now();
  Candidate current = std::move(best);
  report.attempts = 0;
  for (;;) {
    if (options.cancel != nullptr && options.cancel->load()) return cancelled("the evaluation was cancelled");
    ++report.attempts;
    std::vector<linalg::MatrixView> input_views(current.dag.matrices.size());
    for (std::size_t m = 0; m < current.dag.matrices.size(); ++m) {
      if (current.dag.matrices[m].input) input_views[m] = inputs.at(current.dag.matrices[m].node->name);
    }
    const double offset = std::chrono::duration<double>(Clock::now() - start).count();
    DagRunOptions run_options;
    run_options.node_timeout_s = options.node_timeout_s;
    run_options.peer_transfers = current.direct;
    run_options.peer_hosts = options.peer_hosts;
    Result<DagRun> run = run_dag(connection, current.nodes, current.dag, current.schedule, input_views, outcome.value,
                                 run_options);
    if (!run) return run.status();
    for (std::size_t p = 0; p < current.nodes.size(); ++p) {
      ScheduledNode& node = node_figures[current.nodes[p]];
      const DagNodeStats& stats = run->nodes[p];
      node.tasks += stats.tasks;
      node.measured_busy_s += stats.compute_s;
      if (stats.tasks > 0) node.measured_finish_s = std::max(node.measured_finish_s, offset + stats.finish_s);
      if (report.attempts == 1 && stats.start_s >= 0.0) node.measured_start_s = stats.start_s;
      node.bytes_to_node += stats.bytes_to_node;
      node.bytes_from_node += stats.bytes_from_node;
      node.peer_bytes_sent += stats.peer_bytes_sent;
    }
    report.coordinator_bytes_sent += run->coordinator_bytes_sent();
    // Direct when tiles went worker to worker, or would have had any moved (none did); not when
    // the runner fell back to the coordinator (its notes say why).
    report.tile_route = run->peer_transfers || (current.direct && run->notes.empty()) ? "direct" : "coordinator";
    for (const std::string& note : run->notes) report.route_notes.push_back(note);
    report.measured_bytes += static_cast<double>(run->tile_bytes());
    report.measured_coordinator_cpu_s += run->coordinator_cpu_s;
    for (std::size_t t = 0; t < current.dag.tasks.size(); ++t) {
      kinds[std::string(kind_name(current.dag.tasks[t].op))].measured_s += run->task_compute_s[t];
      if (report.attempts == 1) {
        const TaskPlacement& placed = current.schedule.tasks[t];
        report.timeline.push_back({links[current.nodes[placed.node]].spec.name,
                                   std::string(kind_name(current.dag.tasks[t].op)), placed.start_s, placed.finish_s,
                                   run->task_sent_s[t], run->task_done_s[t]});
      }
    }
    if (run->complete) {
      report.measured_makespan_s = offset + run->makespan_s;
      break;
    }
    if (options.cancel != nullptr && options.cancel->load()) return cancelled("the evaluation was cancelled");
    if (run->lost.empty() && !run->peer_failure.empty()) {
      // A link between two workers failed, not a node: the same nodes again, every tile through
      // the coordinator, scheduled for that path.
      const std::string note = fmt::format("{}; running again with every tile through the coordinator", run->peer_failure);
      report.route_notes.push_back(note);
      if (options.on_notice) options.on_notice(note);
      schedule_options.peer_transfers = false;
      const std::vector<std::size_t> same_nodes = current.nodes;  // link indices == model indices
      current = schedule_dag(std::move(current.dag), model, same_nodes, schedule_options);
      current.direct = false;
      continue;
    }
    std::vector<std::size_t> lost_links;
    for (const LostNode& lost : run->lost) {
      lost_links.push_back(current.nodes[lost.node]);
      report.lost_nodes.push_back(links[current.nodes[lost.node]].spec.name);
      if (options.on_notice) options.on_notice(fmt::format("lost {}: {}; rescheduling on the others", report.lost_nodes.back(), lost.reason));
    }
    std::erase_if(taking_part, [&](std::size_t i) { return std::find(lost_links.begin(), lost_links.end(), i) != lost_links.end(); });
    if (taking_part.empty()) {
      std::string reasons;
      for (const LostNode& lost : run->lost) reasons += fmt::format("; {}", lost.reason);
      return network_error(fmt::format("every node was lost ({}){}", fmt::join(report.lost_nodes, ", "), reasons));
    }
    // Every node left takes part again: the set chosen before had the lost one in it.
    const bool direct = current.direct;
    current = schedule_dag(std::move(current.dag), model, taking_part, schedule_options);
    current.direct = direct;
  }
  for (std::size_t i = 0; i < node_figures.size(); ++i) {
    if (!node_figures[i].name.empty()) report.nodes.push_back(node_figures[i]);
  }
  for (auto& [name, kind] : kinds) report.kinds.push_back(kind);
  report.verification = verify_expression(prepared, inputs, outcome.value, options.verify,
                                          options.verify_seed);
  outcome.scheduled = std::move(report);
  return Status::ok();
}

}  // namespace tessera::balance::expr
