// A graph run on the cluster: one Driver, the state machine of a run from preparing the parts and
// choosing the nodes through placements, polls, snapshots and recovery after a lost node, to the
// async (Mattern's counters) or sync end and what the run teaches the run memory. One file
// because every step reads and moves the same run state; what does not (node selection,
// termination, priority levels, the run memory, the report) lives in its own file.
#include "tessera/balance/graphs/graph_run.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "tessera/balance/cluster/silent_node_watchdog.hpp"
#include "tessera/balance/graphs/node_selection.hpp"
#include "tessera/balance/graphs/priority_levels.hpp"
#include "tessera/balance/graphs/termination.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/state.hpp"
#include "tessera/graph/wire.hpp"
#include "tessera/partition/placement_cache.hpp"

#include "tessera/balance/cluster/link_calls.hpp"

namespace tessera::balance::graphs {

namespace {

namespace tg = tessera::graph;
using cluster::CallOutcome;
using cluster::on_links;
namespace tp = tessera::partition;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A run shorter than a few CPU-quota periods lets a quarter-core node run at a full core's speed
// before its quota holds it back: its busy-time rate would rank it above the desktop. Over five
// periods (0.1 s of the emulation's 20 ms ones) one period's burst is at most a fifth of the
// time, within the band the memory keeps rates in (run_memory.cpp). Counted in the node's own
// periods, not seconds, so that a short period lets short runs teach a share rate too.
constexpr double kQuotaPeriodsTelling = 5.0;
// A node without a quota below its threads has no such bursts: its rate tells after 10 ms, so
// that even runs of a few tens of milliseconds (connected components on a small graph) teach the
// forecast their edges' cost.
constexpr double kUncappedTelling_s = 0.01;

// How long a node must have been busy for its rate to tell (see above).
double shortest_telling_busy_s(const cluster::NodeSpec& node) {
  const bool capped = node.emulate && node.emulate->cpu > 0.0 && node.emulate->cpu < static_cast<double>(std::max(1u, node.threads));
  return capped ? kQuotaPeriodsTelling * 1e-6 * static_cast<double>(node.emulate->cpu_period_us) : kUncappedTelling_s;
}

// What the run keeps per cluster node.
struct NodeRecord {
  bool lost = false;
  bool taking_part = true;  // chosen by NodeChoice
  GraphNodeFigures figures;
  std::optional<tg::NodeProgress> last;  // latest progress of the current placement
  uint64_t base_sent = 0;                // connection counters when the run (or connection) began
  uint64_t base_received = 0;
};

class Driver {
 public:
  Driver(cluster::ClusterConnection& cluster, const graphdata::DirectedGraph& input, const GraphRunOptions& options,
         const GraphHooks& hooks)
      : cluster_(cluster), input_(input), options_(options), hooks_(hooks) {}

  Result<GraphOutcome> run();

 private:
  // Set-up.
  Status prepare();
  // Chooses the nodes that take part and makes the first placement (select_and_place), and says
  // which were left out and why.
  Status choose_nodes();
  std::vector<double> active_weights(const std::vector<std::size_t>& nodes);
  // Places `x` (restart) or the initial state on the nodes not lost, loads and starts it; retries
  // with fewer nodes while nodes fail. Fails when none is left or the restarts run out.
  Status start_placement(std::optional<std::vector<double>> x);
  // True when every part loaded (and, async, started); false after failures were handled.
  Result<bool> load_and_start(const tg::VertexState& state);

  // Running.
  Status run_async();
  Status run_sync();
  // Polls every part's progress. Failures go to `failed` (part index, outcome).
  Result<std::vector<tg::NodeProgress>> poll(std::vector<std::pair<std::size_t, CallOutcome>>& failed);
  void take_snapshot(std::vector<std::pair<std::size_t, CallOutcome>>& failed);
  // Stops every part, gathers progress and values into `values`; empty `failed` on success.
  void finish(std::vector<double>& values, std::vector<std::pair<std::size_t, CallOutcome>>& failed);
  // After failures (or an engine that stopped by itself): stops the survivors, rebuilds the whole
  // vector from their values and the snapshots, and starts a new placement.
  Status recover(std::vector<std::pair<std::size_t, CallOutcome>> failed);

  // Helpers.
  // Runs call(part) for `parts` (default: every part) in parallel, bounded by the node timeout.
  // The outcomes are indexed by part.
  std::vector<CallOutcome> on_parts(std::span<const std::size_t> parts, const std::function<Status(std::size_t)>& call,
                                    std::optional<std::chrono::milliseconds> abort_after = std::nullopt);
  std::vector<CallOutcome> on_parts(const std::function<Status(std::size_t part)>& call,
                                    std::optional<std::chrono::milliseconds> abort_after = std::nullopt);
  // Stops every part still connected, ignoring failures: the run is being given up.
  void abandon();
  void sleep_until(Clock::time_point when) const;
  // Waits until every part received what the ledger says was sent to it; the summed residual
  // then, or nullopt when the batches did not arrive within the node timeout.
  std::optional<double> settle(const std::vector<uint64_t>& received_total,
                               std::vector<std::pair<std::size_t, CallOutcome>>& failed);
  std::vector<std::pair<std::size_t, CallOutcome>> failures_of(const std::vector<CallOutcome>& outcomes) const;
  // Reconnects the node of `part` when it takes a new session (and a secret is known), else
  // marks it lost. Either way the part's values are gone; its snapshot stands in for them.
  void handle_failure(std::size_t part, const CallOutcome& outcome);
  void fold_placement_figures();
  // Saves what this run measured on its graph (run_memory.hpp) for the next forecast; a run that
  // restarted measured a mixture and teaches nothing. A failure to save is a notice.
  void remember_run();
  Status check_limits();
  void notice(const std::string& text) const {
    if (hooks_.on_notice) hooks_.on_notice(text);
  }
  cluster::NodeLink& link_of(std::size_t part) { return cluster_.links()[part_nodes_[part]]; }
  const std::string& name_of(std::size_t part) const { return cluster_.links()[part_nodes_[part]].spec.name; }
  bool cancel_requested() const { return hooks_.cancel != nullptr && hooks_.cancel->load(); }
  std::chrono::milliseconds silence() const {
    return std::chrono::milliseconds(static_cast<int64_t>(options_.node_timeout_s * 1000.0));
  }
  uint64_t finished_edge_updates() const;
  uint64_t current_edge_updates() const;
  // Figures summed over the nodes of a poll (or a step).
  void add_trace_point(double residual, uint64_t batches_sent, uint64_t batches_received);

  cluster::ClusterConnection& cluster_;
  const graphdata::DirectedGraph& input_;
  const GraphRunOptions& options_;
  const GraphHooks& hooks_;

  graphdata::DirectedGraph symmetrised_;
  const graphdata::DirectedGraph* graph_ = nullptr;  // what the algorithm runs on
  graphdata::Graph placement_input_;
  double tolerance_ = 0.0;
  std::vector<tg::PriorityLevel> priority_levels_;  // per part, sent with every poll (async sum algorithms)
  std::vector<NodeRecord> records_;
  GraphOutcome outcome_;

  // The current placement.
  std::vector<std::size_t> part_nodes_;  // cluster node of each part
  tg::Placement placement_;
  std::vector<double> placement_start_;  // the global values it started from
  std::vector<std::vector<double>> snapshots_;  // per part, slot order; empty: none yet
  uint64_t run_id_ = 0;
  bool first_placement_ = true;
  std::optional<Selection> selection_;  // its partition and weights go to the first placement
  std::string memory_path_;
  tp::PartitionMethod method_ = tp::PartitionMethod::kMetis;  // of every placement after the first

  Clock::time_point started_;
};

std::vector<CallOutcome> Driver::on_parts(std::span<const std::size_t> parts,
                                          const std::function<Status(std::size_t)>& call,
                                          std::optional<std::chrono::milliseconds> abort_after) {
  std::vector<cluster::NodeLink*> links;
  for (std::size_t part : parts) links.push_back(&link_of(part));
  const std::vector<CallOutcome> called =
      on_links(links, silence(), hooks_.cancel, [&](std::size_t i) { return call(parts[i]); }, abort_after);
  // Indexed by part, so that failures_of names parts; parts not called count as fine.
  std::vector<CallOutcome> outcomes(part_nodes_.size());
  for (std::size_t i = 0; i < parts.size(); ++i) outcomes[parts[i]] = called[i];
  return outcomes;
}

std::vector<CallOutcome> Driver::on_parts(const std::function<Status(std::size_t part)>& call,
                                          std::optional<std::chrono::milliseconds> abort_after) {
  std::vector<std::size_t> parts(part_nodes_.size());
  for (std::size_t part = 0; part < parts.size(); ++part) parts[part] = part;
  return on_parts(parts, call, abort_after);
}

std::vector<std::pair<std::size_t, CallOutcome>> Driver::failures_of(const std::vector<CallOutcome>& outcomes) const {
  std::vector<std::pair<std::size_t, CallOutcome>> failed;
  for (std::size_t part = 0; part < outcomes.size(); ++part) {
    if (!outcomes[part].status.is_ok() || outcomes[part].silent) failed.push_back({part, outcomes[part]});
  }
  return failed;
}

void Driver::handle_failure(std::size_t part, const CallOutcome& outcome) {
  const std::size_t node = part_nodes_[part];
  cluster::NodeLink& link = cluster_.links()[node];
  NodeRecord& record = records_[node];
  std::string reason = outcome.silent    ? fmt::format("no answer for {:g} s", options_.node_timeout_s)
                       : outcome.aborted ? "stopped waiting for a step that another node's failure held up"
                                         : outcome.status.message();
  if (link.connection) {
    record.figures.coordinator_bytes_sent += link.connection->bytes_sent() - record.base_sent;
    record.figures.coordinator_bytes_received += link.connection->bytes_received() - record.base_received;
    link.connection->shutdown();
    link.connection.reset();
  }
  // Whether the worker is still there is found out by connecting again: a killed one refuses at
  // once, one that reported an error (its session ends with the ERROR) or was cut off waiting
  // takes a new session. A silent one is not asked again (it would hold us another timeout), and
  // one out of memory would only fail again.
  const StatusCode code = outcome.status.code();
  if (!outcome.silent && code != StatusCode::kResourceExhausted && code != StatusCode::kCancelled &&
      !options_.secret.empty()) {
    // The worker lets the old session go once it notices the close; until then it answers BUSY.
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    Status last = Status::ok();
    while (Clock::now() < deadline && !cancel_requested()) {
      Result<cluster::NodeLink> fresh = cluster::connect_node(link.spec, options_.secret, std::chrono::milliseconds(2000),
                                            transport::kCapabilityGraph);
      if (fresh) {
        link.hello = fresh->hello;
        link.connection = std::move(fresh->connection);
        record.base_sent = link.connection->bytes_sent();
        record.base_received = link.connection->bytes_received();
        notice(fmt::format("node '{}': {}; reconnected, its part restarts from its last snapshot", link.spec.name,
                           reason));
        return;
      }
      last = fresh.status();
      if (last.code() != StatusCode::kBusy) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (last.code() == StatusCode::kBusy) {
      reason += "; it still held the old session 5 s later";
    } else if (!last.is_ok()) {
      reason += "; it takes no new session either";
    }
  }
  record.lost = true;
  record.figures.lost = true;
  outcome_.lost_nodes.push_back(link.spec.name);
  outcome_.lost_reasons.push_back(reason);
  notice(fmt::format("node '{}' lost: {}", link.spec.name, reason));
}

Status Driver::prepare() {
  const graph::AlgorithmSpec& spec = options_.algorithm;
  TESSERA_RETURN_IF_ERROR(check_graph_run(input_, spec));
  Result<double> tolerance = run_tolerance(spec, options_.tolerance);
  if (!tolerance) return tolerance.status();
  tolerance_ = *tolerance;
  if (cluster_.links().empty()) return invalid_argument("the cluster has no nodes");
  for (const cluster::NodeLink& link : cluster_.links()) {
    if ((link.hello.capabilities & transport::kCapabilityGraph) == 0) {
      return invalid_config(fmt::format("node '{}' ({}) lacks the graph service (it offers {}); run a tessera-worker "
                                        "there that hosts graph",
                                        link.spec.name, link.spec.endpoint(),
                                        transport::capability_names(link.hello.capabilities)));
    }
  }
  if (options_.weights.source == TargetWeights::Source::kProfile) {
    return invalid_argument("--weights profile must be resolved to the nodes' speeds first (Session::graph does)");
  }
  if (options_.weights.source == TargetWeights::Source::kExplicit &&
      options_.weights.weights.size() != cluster_.links().size()) {
    return invalid_argument(fmt::format("--weights has {} values for {} nodes; give one per node",
                                        options_.weights.weights.size(), cluster_.links().size()));
  }
  if (!(options_.priority_level_fraction >= 0.0 && options_.priority_level_fraction <= 1.0)) {
    return invalid_argument(fmt::format("priority level fraction {} is out of range; use a value in [0, 1] "
                                        "(0 turns the common priority level off)",
                                        options_.priority_level_fraction));
  }
  if (!(options_.node_timeout_s > 0.0) || !(options_.max_wall_s > 0.0) || options_.poll_interval.count() <= 0 ||
      options_.snapshot_interval.count() <= 0) {
    return invalid_argument("the node timeout, wall-time limit, poll and snapshot intervals must be > 0");
  }
  if (spec.kind == graph::AlgorithmKind::kConnectedComponents) {
    symmetrised_ = graphdata::symmetrised(input_);
    graph_ = &symmetrised_;
  } else {
    graph_ = &input_;
  }
  Result<graphdata::Graph> placement_input = graphdata::placement_graph(*graph_);
  if (!placement_input) return placement_input.status();
  placement_input_ = std::move(*placement_input);

  records_.resize(cluster_.links().size());
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const cluster::NodeLink& link = cluster_.links()[i];
    records_[i].figures.name = link.spec.name;
    if (link.connection) {
      records_[i].base_sent = link.connection->bytes_sent();
      records_[i].base_received = link.connection->bytes_received();
    }
  }
  std::random_device entropy;
  run_id_ = (uint64_t{entropy()} << 32) ^ entropy() ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  outcome_.algorithm = spec;
  outcome_.mode = options_.mode;
  outcome_.method = options_.method;
  outcome_.weights = describe(options_.weights);
  outcome_.tolerance = tolerance_;
  outcome_.vertices = input_.vertex_count;
  outcome_.edges = graph_->edge_count();
  return Status::ok();
}

std::vector<double> Driver::active_weights(const std::vector<std::size_t>& nodes) {
  const bool all_zero = options_.weights.source == TargetWeights::Source::kExplicit &&
                        std::none_of(nodes.begin(), nodes.end(), [&](std::size_t node) { return options_.weights.weights[node] > 0.0; });
  if (all_zero) notice("the nodes left all have weight 0; sharing the graph equally among them");
  return target_weights_of(options_, selection_ ? selection_->share_costs : options_.node_costs, nodes);
}

void Driver::remember_run() {
  if (memory_path_.empty() || !selection_ || outcome_.restarts > 0 || outcome_.edges <= 0) return;
  const Selection& selection = *selection_;
  RunMeasurement run;
  run.parts = selection.nodes.size();
  run.updates_per_edge = static_cast<double>(outcome_.edge_updates) / static_cast<double>(outcome_.edges);
  run.cut_fraction = static_cast<double>(selection.candidate.cut_edges) / static_cast<double>(outcome_.edges);
  double ghosts = 0.0, deltas = 0.0;
  for (const graphs::GraphPartShape& part : selection.candidate.parts) ghosts += static_cast<double>(part.ghosts_out);
  std::vector<std::string> names;
  // Whether every node was busy long enough for its rate, and so its need, to tell (a quarter-core
  // node's short bursts run at a whole core's speed).
  bool every_node_tells = true;
  for (std::size_t node : selection.nodes) {
    const GraphNodeFigures& figures = records_[node].figures;
    names.push_back(figures.name);
    deltas += static_cast<double>(figures.deltas_sent);
    const double telling_s = shortest_telling_busy_s(cluster_.links()[node].spec);
    every_node_tells = every_node_tells && figures.busy_s >= telling_s;
    if (run.parts <= 1) {
      // Alone, busy time is sweeping: the node's edge rate on this graph.
      if (figures.edge_updates > 0 && figures.busy_s >= telling_s) {
        run.edge_updates_per_s[figures.name] = static_cast<double>(figures.edge_updates) / figures.busy_s;
      }
      continue;
    }
    // With others, busy time beyond its edge updates at its rate went to remote deltas and the
    // sweeps their batches started: that over what the profile's per-delta and per-batch costs
    // give is the node's delta cost scale on this graph.
    if (selection.costs.size() <= node || options_.node_costs.size() <= node) continue;
    const model::GraphRates& profiled = options_.node_costs[node].rates;
    const double deltas_s = static_cast<double>(figures.deltas_sent) * profiled.send_s_per_delta +
                            static_cast<double>(figures.deltas_received) * profiled.receive_s_per_delta;
    const double comm_s = deltas_s + static_cast<double>(figures.batches_sent) * profiled.send_s_per_batch +
                          static_cast<double>(figures.batches_received) * profiled.receive_s_per_batch;
    // The rate its share is sized by next time: busy time less its deltas at the profile's costs
    // (over as long as a quota-limited node's time alone must be to tell).
    const double sweeping_s = std::max(figures.busy_s - deltas_s, 0.5 * figures.busy_s);
    if (figures.edge_updates > 0 && sweeping_s >= telling_s) {
      run.share_edge_updates_per_s[figures.name] = static_cast<double>(figures.edge_updates) / sweeping_s;
    }
    // The rate the forecast of several nodes charged its edges at, so that the scale makes up
    // exactly what that forecast missed.
    const double rate = selection.costs[node].edge_rate(/*alone=*/false);
    constexpr double kShortestBusy_s = 0.05;
    if (rate > 0.0 && comm_s > 1e-4 && figures.busy_s >= kShortestBusy_s) {
      const double edges_s = static_cast<double>(figures.edge_updates) / rate;
      run.delta_cost_scale[figures.name] = std::max(figures.busy_s - edges_s, 0.0) / comm_s;
    }
  }
  run.set_key = set_key(names);
  // Shares learn only where every node's need tells: a run too short for one node's rate to tell
  // would move the shares on noise.
  if (options_.weights_from_rates && run.parts > 1 && every_node_tells) {
    std::vector<PartRun> parts;
    const std::vector<double> shares = shares_of(selection.weights);
    for (std::size_t i = 0; i < run.parts; ++i) {
      const GraphNodeFigures& figures = records_[selection.nodes[i]].figures;
      // Busy time is summed over the node's update threads; its need is wall time.
      const double threads = std::max(1u, cluster_.links()[selection.nodes[i]].spec.threads);
      parts.push_back({shares[i], figures.edges, static_cast<double>(figures.edge_updates), figures.busy_s / threads});
    }
    run.next_shares = shares_for_equal_need(parts);
  }
  if (ghosts > 0.0 && run.updates_per_edge > 0.0) run.delta_fraction = deltas / (run.updates_per_edge * ghosts);
  run.shapes = selection.shapes;
  if (selection.record.forecast) {
    const graphs::GraphForecast& forecast = *selection.record.forecast;
    // Each node's busy time (its edges, and its deltas beside others) is what this run teaches the
    // forecast through its rates and delta scale, whether or not the forecast had them right, so
    // the extra is what lies beyond the busiest node's shipping, busy time and gathering: start-up
    // and waiting. Charged with the forecast's node times instead, a first run on a graph dearer
    // per edge than the probe would leave its error as "start-up", which would make the next
    // forecast of the same set too slow and steer auto to worse sets.
    // The forecast's nodes are the chosen candidate's, in selection.nodes' order.
    double node_s = 0.0;
    for (std::size_t i = 0; i < forecast.nodes.size() && i < selection.nodes.size(); ++i) {
      const graphs::GraphNodeForecast& planned = forecast.nodes[i];
      node_s = std::max(node_s, planned.ship_s + records_[selection.nodes[i]].figures.busy_s + planned.gather_s);
    }
    run.extra_s = outcome_.total_s() - (forecast.placement_s + node_s + forecast.termination_s);
  }
  if (selection.metis_seconds && placement_input_.edge_count() > 0) {
    run.metis_s_per_edge = *selection.metis_seconds / static_cast<double>(placement_input_.edge_count());
  }
  if (Status saved = save_run_memory(memory_path_, remember(selection.memory, run)); !saved) {
    notice("the run's figures were not kept for the next forecast: " + saved.message());
  }
}

Status Driver::choose_nodes() {
  const uint64_t graph_hash = options_.cache_dir.empty() ? 0 : tp::graph_content_hash(placement_input_);
  if (!options_.cache_dir.empty()) memory_path_ = run_memory_path(options_.cache_dir, graph_hash, options_.algorithm, tolerance_, graph_mode_name(options_.mode));
  SelectionInput input{*graph_, placement_input_, {}, options_, tolerance_, memory_path_, graph_hash};
  for (const cluster::NodeLink& link : cluster_.links()) input.node_names.push_back(link.spec.name);
  Result<Selection> selection = select_and_place(input);
  if (!selection) return selection.status();
  for (std::size_t node = 0; node < records_.size(); ++node) {
    const bool chosen = std::find(selection->nodes.begin(), selection->nodes.end(), node) != selection->nodes.end();
    records_[node].taking_part = chosen;
    records_[node].figures.left_out = !chosen;
  }
  method_ = selection->method;
  outcome_.choice = selection->record;
  outcome_.placing = selection->placing;
  outcome_.method = method_;
  selection_ = std::move(*selection);
  return Status::ok();
}

Status Driver::check_limits() {
  if (cancel_requested()) {
    cluster_.shutdown_all();
    return cancelled("the graph run was cancelled; the workers' sessions were closed");
  }
  if (seconds_since(started_) > options_.max_wall_s) {
    abandon();
    const std::string residual =
        outcome_.trace.empty() ? "not measured" : fmt::format("{:.3g}", outcome_.trace.back().residual);
    return resource_exhausted(fmt::format("the run did not converge within {:g} s (residual {}, tolerance {:g}); "
                                          "allow more time or a larger tolerance",
                                          options_.max_wall_s, residual, tolerance_));
  }
  return Status::ok();
}

void Driver::abandon() {
  std::vector<cluster::NodeLink*> links;
  for (cluster::NodeLink& link : cluster_.links()) {
    if (link.connection) links.push_back(&link);
  }
  (void)on_links(links, std::chrono::milliseconds(2000), hooks_.cancel,
                 [&](std::size_t i) { return tg::stop_run(*links[i]->connection); });
}

void Driver::sleep_until(Clock::time_point when) const {
  while (!cancel_requested()) {
    const auto now = Clock::now();
    if (now >= when) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(when - now, std::chrono::milliseconds(20)));
  }
}

uint64_t Driver::finished_edge_updates() const {
  uint64_t total = 0;
  for (const NodeRecord& record : records_) total += record.figures.edge_updates;
  return total;
}

uint64_t Driver::current_edge_updates() const {
  uint64_t total = 0;
  for (std::size_t node : part_nodes_) {
    if (records_[node].last) total += records_[node].last->engine.edge_updates;
  }
  return total;
}

void Driver::add_trace_point(double residual, uint64_t batches_sent, uint64_t batches_received) {
  TracePoint point;
  point.time_s = seconds_since(started_);
  point.residual = residual;
  point.edge_updates = finished_edge_updates() + current_edge_updates();
  point.batches_sent = batches_sent;
  point.batches_received = batches_received;
  outcome_.trace.push_back(point);
  if (hooks_.on_progress) hooks_.on_progress(outcome_.trace.back());
}

// Adds the current placement's last figures of every node to its totals (engines count from their
// creation, so each placement's final figures add up).
void Driver::fold_placement_figures() {
  for (std::size_t node : part_nodes_) {
    NodeRecord& record = records_[node];
    if (!record.last) continue;
    const tg::EngineProgress& engine = record.last->engine;
    GraphNodeFigures& figures = record.figures;
    figures.updates += engine.updates;
    figures.edge_updates += engine.edge_updates;
    figures.batches_sent += engine.batches_sent;
    figures.batches_received += engine.batches_received;
    figures.deltas_sent += engine.deltas_sent;
    figures.deltas_received += engine.deltas_received;
    figures.busy_s += engine.busy_seconds;
    figures.idle_s += engine.idle_seconds;
    figures.peer_bytes_sent += record.last->peer_bytes_sent;
    figures.peer_bytes_received += record.last->peer_bytes_received;
    if (record.last->memory_bytes > 0) figures.memory_bytes = record.last->memory_bytes;
    record.last.reset();
  }
}

Status Driver::start_placement(std::optional<std::vector<double>> x) {
  const graph::AlgorithmSpec& spec = options_.algorithm;
  for (;;) {
    TESSERA_RETURN_IF_ERROR(check_limits());
    part_nodes_.clear();
    for (std::size_t node = 0; node < records_.size(); ++node) {
      if (!records_[node].lost && records_[node].taking_part) part_nodes_.push_back(node);
    }
    if (part_nodes_.empty()) {
      std::string message = "every node was lost:";
      for (std::size_t i = 0; i < outcome_.lost_nodes.size(); ++i) {
        message += fmt::format("\n  {}: {}", outcome_.lost_nodes[i], outcome_.lost_reasons[i]);
      }
      return network_error(message);
    }
    if (!first_placement_) {
      if (outcome_.restarts >= options_.max_restarts) {
        return resource_exhausted(fmt::format("gave up after {} restarts; lost: {}", outcome_.restarts,
                                              outcome_.lost_nodes.empty() ? "none" : join(outcome_.lost_nodes, ", ")));
      }
      ++outcome_.restarts;
    }
    const tg::VertexState state = x ? tg::restart_state(*graph_, spec, *x) : tg::initial_state(*graph_, spec);
    placement_start_ = state.value;

    std::optional<std::vector<double>> weights;
    Result<tp::Partition> partition = tp::Partition{};
    if (first_placement_ && selection_) {
      weights = selection_->weights;
      partition = std::move(selection_->partition);
    } else {
      weights = active_weights(part_nodes_);
      partition = tp::partition_graph(placement_input_, placement_options(options_, method_, *weights));
    }
    if (!partition) return partition.status();
    if (first_placement_) {
      // The run's clock starts when the first part is shipped; placing it is timed apart.
      outcome_.placement_s = seconds_since(started_);
      started_ = Clock::now();
    }
    const auto parts = static_cast<uint32_t>(part_nodes_.size());
    placement_ = tg::make_placement(partition->part, parts);

    PlacementSummary summary;
    double total_weight = 0.0;
    for (double weight : *weights) total_weight += weight;
    for (uint32_t part = 0; part < parts; ++part) {
      summary.nodes.push_back(name_of(part));
      summary.target_share.push_back(total_weight > 0.0 ? (*weights)[part] / total_weight : 0.0);
      summary.vertices.push_back(static_cast<int64_t>(placement_.vertices[part].size()));
      int64_t edges = 0;
      for (uint32_t v : placement_.vertices[part]) edges += static_cast<int64_t>(graph_->out_degree(v));
      summary.edges.push_back(edges);
    }
    summary.quality = partition->quality;
    summary.note = partition->note;
    if (first_placement_) {
      outcome_.placement = std::move(summary);
    } else {
      outcome_.final_placement = std::move(summary);
    }
    first_placement_ = false;
    snapshots_.assign(parts, {});
    ++run_id_;
    Result<bool> loaded = load_and_start(state);
    if (!loaded) return loaded.status();
    if (*loaded) return Status::ok();
    // Some node failed to load or start (and is now lost or reconnected): place again. Nothing
    // ran long enough to matter, so the same values are the start.
    x = placement_start_;
  }
}

Result<bool> Driver::load_and_start(const tg::VertexState& state) {
  const graph::AlgorithmSpec& spec = options_.algorithm;
  std::vector<cluster::NodeSpec> nodes;
  for (const cluster::NodeLink& link : cluster_.links()) nodes.push_back(link.spec);
  Result<std::vector<std::vector<tg::PeerEndpoint>>> peers = peer_endpoints(nodes, options_.peer_hosts, part_nodes_);
  if (!peers) return peers.status();
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) records_[part_nodes_[part]].last.reset();
  const auto part_count = static_cast<double>(part_nodes_.size());
  // Each part is built on the thread that ships it: the parts build in parallel, and one part's
  // bytes travel while the next is still being built.
  std::vector<std::pair<int64_t, int64_t>> sizes(part_nodes_.size());  // vertices, edges
  std::vector<CallOutcome> outcomes = on_parts([&](std::size_t part) {
    const tg::GraphPart built = tg::build_part(*graph_, placement_, static_cast<uint32_t>(part), state.value, state.delta);
    sizes[part] = {built.local_count, static_cast<int64_t>(built.edge_count())};
    cluster::NodeLink& link = link_of(part);
    tg::RunSetup setup;
    setup.run_id = run_id_;
    setup.algorithm = spec;
    setup.engine = options_.engine;
    setup.engine.threads = options_.threads_per_node > 0 ? options_.threads_per_node : std::max(1u, link.hello.threads);
    // Each thread idles at or below its share of the tolerance, so all idle engines together are
    // within it. An idle thread has flushed its ghost accumulators and wakes for any delivered
    // delta, so nothing else is pending once the detector sees every engine idle; the 10% left
    // is slack for float rounding in the summed figures. A smaller share only makes async polish
    // past the tolerance sync stops at, spending edge updates that buy nothing.
    setup.engine.idle_residual =
        graph::is_linear(spec) ? 0.9 * tolerance_ / (part_count * static_cast<double>(setup.engine.threads)) : 0.0;
    setup.peers = (*peers)[part];
    return tg::load_part(*link.connection, setup, built);
  });
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) {
    GraphNodeFigures& figures = records_[part_nodes_[part]].figures;
    figures.vertices = sizes[part].first;
    figures.edges = sizes[part].second;
  }
  std::vector<std::pair<std::size_t, CallOutcome>> failed = failures_of(outcomes);
  if (failed.empty() && options_.mode == GraphMode::kAsync) {
    outcomes = on_parts([&](std::size_t part) { return tg::start_async(*link_of(part).connection); });
    failed = failures_of(outcomes);
  }
  if (cancel_requested()) return check_limits();
  if (failed.empty()) return true;
  std::vector<char> failed_part(part_nodes_.size(), 0);
  for (const auto& [part, outcome] : failed) {
    failed_part[part] = 1;
    handle_failure(part, outcome);
  }
  // The others may have started: stop them before the next placement is loaded.
  std::vector<std::size_t> others;
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) {
    if (failed_part[part] == 0) others.push_back(part);
  }
  outcomes = on_parts(others, [&](std::size_t part) { return tg::stop_run(*link_of(part).connection); });
  for (const auto& [part, outcome] : failures_of(outcomes)) handle_failure(part, outcome);
  return false;
}

Result<std::vector<tg::NodeProgress>> Driver::poll(std::vector<std::pair<std::size_t, CallOutcome>>& failed) {
  std::vector<tg::NodeProgress> progress(part_nodes_.size());
  const auto begun = Clock::now();
  const std::vector<CallOutcome> outcomes = on_parts([&](std::size_t part) {
    const tg::PriorityLevel level = part < priority_levels_.size() ? priority_levels_[part] : tg::PriorityLevel{};
    Result<tg::NodeProgress> answer = tg::request_progress(*link_of(part).connection, level);
    if (!answer) return answer.status();
    progress[part] = *answer;
    return Status::ok();
  });
  ++outcome_.polls;
  outcome_.poll_s += seconds_since(begun);
  failed = failures_of(outcomes);
  if (cancel_requested()) return check_limits();
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) {
    if (outcomes[part].status.is_ok() && !outcomes[part].silent) records_[part_nodes_[part]].last = progress[part];
  }
  return progress;
}

void Driver::take_snapshot(std::vector<std::pair<std::size_t, CallOutcome>>& failed) {
  std::vector<std::vector<double>> values(part_nodes_.size());
  const std::vector<CallOutcome> outcomes = on_parts([&](std::size_t part) {
    Result<std::vector<double>> answer = tg::request_values(*link_of(part).connection);
    if (!answer) return answer.status();
    if (answer->size() != placement_.vertices[part].size()) {
      return protocol_error(fmt::format("node '{}' sent {} values for its {} vertices", name_of(part), answer->size(),
                                        placement_.vertices[part].size()));
    }
    values[part] = std::move(*answer);
    return Status::ok();
  });
  failed = failures_of(outcomes);
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) {
    if (outcomes[part].status.is_ok() && !outcomes[part].silent) snapshots_[part] = std::move(values[part]);
  }
}

void Driver::finish(std::vector<double>& values, std::vector<std::pair<std::size_t, CallOutcome>>& failed) {
  failed = failures_of(on_parts([&](std::size_t part) { return tg::stop_run(*link_of(part).connection); }));
  if (!failed.empty()) return;
  // The final figures (busy/idle, bytes) as the stopped engines have them.
  Result<std::vector<tg::NodeProgress>> progress = poll(failed);
  if (!progress || !failed.empty()) return;
  take_snapshot(failed);
  if (!failed.empty()) return;
  values.assign(static_cast<std::size_t>(graph_->vertex_count), 0.0);
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) {
    tg::scatter_values(placement_, static_cast<uint32_t>(part), snapshots_[part], values);
  }
}

Status Driver::recover(std::vector<std::pair<std::size_t, CallOutcome>> failed) {
  TESSERA_RETURN_IF_ERROR(check_limits());
  std::vector<char> survivor(part_nodes_.size(), 1);
  for (const auto& [part, outcome] : failed) {
    survivor[part] = 0;
    handle_failure(part, outcome);
  }
  // Stop the survivors and take their values, until a round passes with no new failure.
  std::vector<std::vector<double>> gathered(part_nodes_.size());
  for (;;) {
    std::vector<std::size_t> parts;
    for (std::size_t part = 0; part < survivor.size(); ++part) {
      if (survivor[part] != 0) parts.push_back(part);
    }
    if (parts.empty()) break;
    std::vector<CallOutcome> outcomes = on_parts(parts, [&](std::size_t part) {
      TESSERA_RETURN_IF_ERROR(tg::stop_run(*link_of(part).connection));
      Result<std::vector<double>> values = tg::request_values(*link_of(part).connection);
      if (!values) return values.status();
      if (values->size() != placement_.vertices[part].size()) {
        return protocol_error(fmt::format("node '{}' sent {} values for its {} vertices", name_of(part),
                                          values->size(), placement_.vertices[part].size()));
      }
      gathered[part] = std::move(*values);
      return Status::ok();
    });
    TESSERA_RETURN_IF_ERROR(check_limits());
    const std::vector<std::pair<std::size_t, CallOutcome>> more = failures_of(outcomes);
    if (more.empty()) break;
    for (const auto& [part, outcome] : more) {
      survivor[part] = 0;
      gathered[part].clear();
      handle_failure(part, outcome);
    }
  }
  // The whole vector: survivors' values, else the part's latest snapshot, else where it started.
  std::vector<double> x = placement_start_;
  std::vector<std::string> from_snapshot, from_start;
  for (std::size_t part = 0; part < part_nodes_.size(); ++part) {
    if (survivor[part] != 0) {
      tg::scatter_values(placement_, static_cast<uint32_t>(part), gathered[part], x);
    } else if (!snapshots_[part].empty()) {
      tg::scatter_values(placement_, static_cast<uint32_t>(part), snapshots_[part], x);
      from_snapshot.push_back(name_of(part));
    } else {
      from_start.push_back(name_of(part));
    }
  }
  if (!from_snapshot.empty() || !from_start.empty()) {
    notice(fmt::format("restarting{}{}", from_snapshot.empty() ? "" : " from the last snapshot of " + join(from_snapshot, ", "),
                       from_start.empty() ? "" : (from_snapshot.empty() ? " from where " : "; from where ") +
                                                      join(from_start, ", ") + " started (no snapshot yet)"));
  }
  fold_placement_figures();
  return start_placement(std::move(x));
}

std::optional<double> Driver::settle(const std::vector<uint64_t>& received_total,
                                     std::vector<std::pair<std::size_t, CallOutcome>>& failed) {
  const auto deadline = Clock::now() + silence();
  auto pause = std::chrono::milliseconds(1);
  while (Clock::now() < deadline && !cancel_requested()) {
    Result<std::vector<tg::NodeProgress>> progress = poll(failed);
    if (!progress || !failed.empty()) return std::nullopt;
    bool arrived = true;
    double residual = 0.0;
    for (std::size_t part = 0; part < progress->size(); ++part) {
      arrived = arrived && (*progress)[part].engine.batches_received >= received_total[part];
      residual += (*progress)[part].engine.residual;
    }
    if (arrived) return residual;
    sleep_until(Clock::now() + pause);
    pause = std::min(pause * 2, options_.poll_interval);
  }
  return std::nullopt;
}

Status Driver::run_async() {
  TerminationDetector detector(tolerance_);
  // Polls start 5 ms apart and back off (doubling) to poll_interval, so a run that converges in
  // milliseconds is not made to wait for the interval; and a poll that looks settled on its own
  // is confirmed 5 ms later rather than a whole interval later. Termination needs two
  // consecutive polls with nothing moved in between, however far apart they are.
  const Clock::duration quick_poll = std::min<Clock::duration>(std::chrono::milliseconds(5), options_.poll_interval);
  Clock::duration interval = quick_poll;
  auto next_poll = Clock::now() + interval;
  auto next_snapshot = Clock::now() + options_.snapshot_interval;
  uint32_t stopped_polls = 0;
  std::optional<std::pair<Clock::time_point, double>> last_poll;  // when, and the summed residual
  // Async pagerank/katz: a common priority level with every poll (priority_levels.hpp).
  const bool uses_level = options_.priority_level_fraction > 0.0 && graph::is_linear(options_.algorithm);
  PriorityLevels levels(uses_level ? options_.priority_level_fraction : 0.0,
                        static_cast<uint64_t>(graph_->edge_count()), tolerance_);
  std::vector<std::pair<std::size_t, CallOutcome>> failed;
  const auto restart = [&](std::vector<std::pair<std::size_t, CallOutcome>> failures) {
    priority_levels_.clear();
    levels.reset();
    Status recovered = recover(std::move(failures));
    detector.reset();
    stopped_polls = 0;
    last_poll.reset();
    interval = quick_poll;
    next_poll = Clock::now() + interval;
    next_snapshot = Clock::now() + options_.snapshot_interval;
    return recovered;
  };
  for (;;) {
    TESSERA_RETURN_IF_ERROR(check_limits());
    sleep_until(next_poll);
    const double gap_s = graphs::poll_gap_s(seconds_since(started_), std::chrono::duration<double>(options_.poll_interval).count());
    interval = std::min<Clock::duration>(interval * 2, std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s)));
    next_poll += interval;
    if (next_poll < Clock::now()) next_poll = Clock::now() + interval;
    Result<std::vector<tg::NodeProgress>> progress = poll(failed);
    if (!progress) return progress.status();
    if (!failed.empty()) {
      TESSERA_RETURN_IF_ERROR(restart(std::move(failed)));
      continue;
    }
    std::vector<NodeCounters> counters;
    double residual = 0.0;
    bool any_stopped = false;
    for (const tg::NodeProgress& node : *progress) {
      counters.push_back({node.engine.updates, node.engine.batches_sent, node.engine.batches_received,
                          node.engine.residual});
      residual += node.engine.residual;
      any_stopped = any_stopped || !node.engine.running;
    }
    uint64_t sent = 0;
    uint64_t received = 0;
    for (const NodeCounters& node : counters) {
      sent += node.batches_sent;
      received += node.batches_received;
    }
    add_trace_point(residual, sent, received);
    const auto polled_at = Clock::now();
    if (residual <= tolerance_ && sent == received) next_poll = std::min(next_poll, polled_at + quick_poll);
    // The sum algorithms' residual falls about geometrically: the next poll goes where the last
    // two polls' rate of decay puts the tolerance, if that is sooner than the interval, so the end
    // is noticed a few milliseconds after it rather than up to an interval later.
    if (graph::is_linear(options_.algorithm) && last_poll && residual > tolerance_ && residual < last_poll->second) {
      const double elapsed_s = std::chrono::duration<double>(polled_at - last_poll->first).count();
      const double decay_per_s = std::log(last_poll->second / residual) / std::max(elapsed_s, 1e-6);
      const double remaining_s = std::log(residual / tolerance_) / decay_per_s;
      const auto expected = polled_at + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(remaining_s));
      next_poll = std::min(next_poll, std::max(expected, polled_at + quick_poll));
    }
    last_poll = std::pair{polled_at, residual};
    if (uses_level) {
      priority_levels_ = levels.observe(counters, Clock::now());
      // Lifted (every engine waiting below its level): poll again soon with the new one.
      const bool lifted = std::all_of(priority_levels_.begin(), priority_levels_.end(),
                                      [](const tg::PriorityLevel& level) { return level == tg::PriorityLevel{}; });
      if (lifted && residual > tolerance_) next_poll = std::min(next_poll, Clock::now() + quick_poll);
    }
    if (detector.observe(counters)) {
      std::vector<double> values;
      finish(values, failed);
      if (failed.empty()) {
        TESSERA_RETURN_IF_ERROR(check_limits());
        outcome_.values = std::move(values);
        outcome_.residual = residual;
        return Status::ok();
      }
      TESSERA_RETURN_IF_ERROR(restart(std::move(failed)));
      continue;
    }
    // An engine whose outbound failed (a peer link broke) stops its threads and waits; with work
    // left the run cannot finish, so it is restarted (a lost peer is found on the way).
    stopped_polls = any_stopped && residual > tolerance_ ? stopped_polls + 1 : 0;
    if (stopped_polls >= 3) {
      notice("an engine stopped with work left (a peer link failed?); restarting from the current values");
      TESSERA_RETURN_IF_ERROR(restart({}));
      continue;
    }
    if (Clock::now() >= next_snapshot) {
      take_snapshot(failed);
      if (!failed.empty()) {
        TESSERA_RETURN_IF_ERROR(restart(std::move(failed)));
        continue;
      }
      next_snapshot = Clock::now() + options_.snapshot_interval;
    }
  }
}

Status Driver::run_sync() {
  std::vector<std::pair<std::size_t, CallOutcome>> failed;
  for (;;) {
    SyncLedger ledger(part_nodes_.size());
    auto next_snapshot = Clock::now() + options_.snapshot_interval;
    Status restart = Status::ok();
    for (uint64_t step = 1;; ++step) {
      TESSERA_RETURN_IF_ERROR(check_limits());
      std::vector<tg::StepReport> reports(part_nodes_.size());
      const std::vector<uint64_t> expected = ledger.expected_next();
      // A node lost during a step leaves the others waiting for its batches (the worker would
      // wait a minute); a second after the first failure the waiting ones are cut off and
      // reconnected, their parts restarting from their snapshots.
      failed = failures_of(on_parts(
          [&](std::size_t part) {
            Result<tg::StepReport> report = tg::run_step(*link_of(part).connection, step, expected[part]);
            if (!report) return report.status();
            reports[part] = std::move(*report);
            return Status::ok();
          },
          std::chrono::milliseconds(1000)));
      TESSERA_RETURN_IF_ERROR(check_limits());
      if (!failed.empty()) break;
      std::vector<std::vector<uint64_t>> sent_to;
      double residual = 0.0;
      uint64_t sent = 0;
      uint64_t received = 0;
      for (std::size_t part = 0; part < reports.size(); ++part) {
        sent_to.push_back(reports[part].batches_sent_to);
        residual += reports[part].progress.residual;
        sent += reports[part].progress.batches_sent;
        received += reports[part].progress.batches_received;
        std::optional<tg::NodeProgress>& last = records_[part_nodes_[part]].last;
        if (!last) last.emplace();
        last->engine = reports[part].progress;
      }
      ledger.record_step(sent_to);
      ++outcome_.steps;
      add_trace_point(residual, sent, received);
      if (residual <= tolerance_) {
        // The residual above misses the step's batches still on their way; with all of them
        // in, the receivers count them as received but not yet folded in.
        const std::optional<double> settled = settle(ledger.received_total(), failed);
        TESSERA_RETURN_IF_ERROR(check_limits());
        if (!failed.empty()) break;
        if (!settled) {
          notice(fmt::format("the batches of step {} did not all arrive within {:g} s; restarting", step,
                             options_.node_timeout_s));
          break;
        }
        if (*settled <= tolerance_) {
          std::vector<double> values;
          finish(values, failed);
          if (!failed.empty()) break;
          outcome_.values = std::move(values);
          outcome_.residual = *settled;
          return Status::ok();
        }
      }
      if (Clock::now() >= next_snapshot) {
        take_snapshot(failed);
        if (!failed.empty()) break;
        next_snapshot = Clock::now() + options_.snapshot_interval;
      }
    }
    TESSERA_RETURN_IF_ERROR(recover(std::move(failed)));
  }
}

Result<GraphOutcome> Driver::run() {
  TESSERA_RETURN_IF_ERROR(prepare());
  started_ = Clock::now();
  TESSERA_RETURN_IF_ERROR(choose_nodes());
  TESSERA_RETURN_IF_ERROR(start_placement(std::nullopt));
  TESSERA_RETURN_IF_ERROR(options_.mode == GraphMode::kAsync ? run_async() : run_sync());
  outcome_.wall_s = seconds_since(started_);
  fold_placement_figures();
  for (std::size_t node = 0; node < records_.size(); ++node) {
    const cluster::NodeLink& link = cluster_.links()[node];
    GraphNodeFigures& figures = records_[node].figures;
    if (link.connection) {
      figures.coordinator_bytes_sent += link.connection->bytes_sent() - records_[node].base_sent;
      figures.coordinator_bytes_received += link.connection->bytes_received() - records_[node].base_received;
    }
    outcome_.edge_updates += figures.edge_updates;
    outcome_.nodes.push_back(figures);
  }
  outcome_.edge_updates_per_s = outcome_.wall_s > 0.0 ? static_cast<double>(outcome_.edge_updates) / outcome_.wall_s : 0.0;
  remember_run();
  if (options_.algorithm.kind == graph::AlgorithmKind::kPageRank) tg::normalise_pagerank(outcome_.values);
  if (options_.verify) {
    Result<GraphVerification> verification = verify_graph(input_, options_.algorithm, outcome_.values, tolerance_);
    if (!verification) return verification.status();
    outcome_.verification = std::move(*verification);
  }
  return std::move(outcome_);
}

}  // namespace

Result<GraphOutcome> run_graph(cluster::ClusterConnection& cluster, const graphdata::DirectedGraph& graph,
                               const GraphRunOptions& options, const GraphHooks& hooks) {
  Driver driver(cluster, graph, options, hooks);
  return driver.run();
}

}  // namespace tessera::balance::graphs
