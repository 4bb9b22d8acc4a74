// The coordinator's graph driver: runs PageRank, Katz, connected components or shortest paths on
// a connected cluster's graph services, asynchronously (accumulative updates, no barriers) or as
// the synchronous Jacobi baseline, survives lost workers, and returns the answer with figures.
//
// run_graph:
//   1. checks the spec against the graph (check_spec; the source in range; sssp refuses a
//      negative weight naming the edge; katz beta via check_katz_beta; cc runs on the symmetrised
//      graph, whose components are the weakly connected ones);
//   2. places the vertices: partition_graph(placement_graph(g)) by metis | contiguous | hash with
//      the target weights (one per node: measured speeds, explicit, or equal);
//   3. ships one part per node (build_parts of initial_state) with load_part, all in parallel;
//   4. async: start_async everywhere, then every poll_interval polls request_progress on all nodes
//      in parallel and stops when a TerminationDetector is satisfied (termination.hpp: Mattern's
//      four counters over two consecutive polls). sync: run_step k on all nodes, each told to
//      wait for the batches the others sent it in step k-1, until the residual after a step, with
//      that step's batches arrived, is within the tolerance;
//   5. stop_run, request_values, scatter by the placement; PageRank normalised to sum 1.
// Every snapshot_interval the driver keeps each node's values (request_values while it runs).
// A node whose connection fails or that stays silent for node_timeout_s while a call to it is
// pending is LOST: the survivors are stopped and their values gathered, the lost part's values
// come from its latest snapshot (or from where that placement started), restart_state turns the
// whole vector into a state with the same fixed point, the vertices are re-placed among the
// survivors by their own weights and loaded again under a new run id, and the run goes on. A node
// whose call failed but that takes a new session (it answered with an ERROR, which ends its
// session, or it was cut off waiting in a sync step for a lost peer's batches) is reconnected and
// keeps its place, its values taken from its snapshot like a lost node's; one that refuses the new
// session (killed) or stayed silent is lost. With no survivor the run fails naming every node and
// why. Every wait is bounded: calls by node_timeout_s of silence (a sync step's other calls by a
// second once one of them failed), the whole run by max_wall_s.
//
// One state machine, in one source file (src/graph_run.cpp): the run moves through the steps
// above and back from any of them to placing again after a loss, and every step reads and
// updates the same per-node records (taking part, lost, the last progress, the bytes counted) and
// the same placement. The jobs that stand alone are elsewhere: the calls on every link at once
// under the watchdog (cluster/link_calls.hpp), node choice and the first placement
// (node_selection.hpp), termination (termination.hpp), priority levels, the run memory, checks
// and the report.
//
// Ownership: the caller owns the cluster connection and the graph; the outcome is a value. Not
// reentrant on one ClusterConnection; hooks are called on the calling thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/graphs/peers.hpp"
#include "tessera/balance/graphs/graph_placement.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/engine.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::balance::graphs {

enum class GraphMode { kAsync, kSync };
// "async" | "sync"; anything else fails listing both.
Result<GraphMode> parse_graph_mode(std::string_view name);
std::string_view graph_mode_name(GraphMode mode);

// Where each node's target share of the graph comes from.
struct TargetWeights {
  enum class Source { kEqual, kProfile, kExplicit };
  Source source = Source::kEqual;
  std::vector<double> weights;  // kExplicit: one per node, >= 0, finite, not all 0
  bool operator==(const TargetWeights&) const = default;
};
// "equal" | "profile" | "w1,w2,..." (comma-separated numbers). Fails (kInvalidArgument) on
// anything else, naming the three forms; a number list is checked for negative, non-finite and
// all-zero values (the node count is checked by run_graph).
Result<TargetWeights> parse_target_weights(std::string_view text);
// "equal", "profile", "explicit 1,2,3".
std::string describe(const TargetWeights& weights);

// Which nodes take part in a run.
//   auto (default): the graph placement model (model/graph_placement.hpp) forecasts the best node
//     alone, the best two, ..., all, each with its own placement, and the run uses the set
//     forecast soonest; every node left out is named with the reason (see run_graph);
//   all: every node of the cluster;
//   best: the node with the most edge updates per second alone (needs measured graph rates), the
//     yardstick the cluster is judged against;
//   a list of node names: those nodes.
struct NodeChoice {
  enum class Mode { kAuto, kAll, kBest, kListed };
  Mode mode = Mode::kAuto;
  std::vector<std::string> listed;  // kListed
  bool operator==(const NodeChoice&) const = default;
};
// "auto" | "all" | "best" | "a,b,c". Fails (kInvalidArgument) on an empty name or a repeated one; whether
// the names are nodes of the cluster is checked by run_graph.
Result<NodeChoice> parse_node_choice(std::string_view text);
std::string describe(const NodeChoice& choice);

// Default tolerance of the sum algorithms (pagerank, katz) on sum |pending delta|.
inline constexpr double kDefaultGraphTolerance = 1e-6;

struct GraphRunOptions {
  graph::AlgorithmSpec algorithm;
  GraphMode mode = GraphMode::kAsync;
  partition::PartitionMethod method = partition::PartitionMethod::kMetis;
  // --partition auto: per candidate set, the cheap locality placement, and METIS only where the
  // forecast says its time pays back (or a cached METIS placement exists); `method` is then unused.
  bool choose_method = false;
  NodeChoice nodes;
  // What each node costs a graph run, cluster order (Session::graph fills it from the profile);
  // empty or unmeasured: `nodes` auto takes every node and says why.
  std::vector<graphs::GraphNodeCosts> node_costs;
  // Each part's target weight is its node's edge updates per second: the profile's graph rates, or
  // what past runs on the same graph measured (run_memory.hpp), instead of `weights` (Session::graph
  // sets it for --weights profile when every node has graph rates).
  bool weights_from_rates = false;
  // Where placements and the figures of past runs on the same graph are kept (placement_cache.hpp,
  // run_memory.hpp); empty: neither is read nor written.
  std::string cache_dir;
  // kProfile must be resolved to kExplicit by the caller (Session::graph does, from the saved
  // profile's node speeds); run_graph refuses it.
  TargetWeights weights;
  double imbalance = 1.03;     // metis: allowed max part weight / target
  uint64_t seed = 1;           // METIS seed, hash key
  // Sum algorithms stop at sum |pending| <= tolerance (default kDefaultGraphTolerance, > 0);
  // cc and sssp ignore it and stop with nothing pending.
  std::optional<double> tolerance;
  // 100 ms: a poll costs each worker one small frame and the coordinator a round trip (well
  // under a millisecond on a LAN), so ten a second are free, while termination is noticed at
  // most about two intervals after it happens; the AAU thesis' 4 s would add seconds to every
  // run that converges in a few.
  std::chrono::milliseconds poll_interval{100};
  // Values fetched from every node this often while a run goes on, to restart from if the node
  // is lost. 1 s: a lost node costs at most a second of its part's work, and the fetch (8 bytes
  // per owned vertex) is small next to a second of updates.
  std::chrono::milliseconds snapshot_interval{1000};
  // A call that sees nothing from its node for this long counts the node lost (like multiply's
  // --node-timeout). Also bounds a sync step. 30 s.
  double node_timeout_s = 30.0;
  // The whole run (all restarts included) fails with kResourceExhausted after this long. 600 s.
  double max_wall_s = 600.0;
  // Restarts after lost or failed nodes before the run gives up. 16.
  uint32_t max_restarts = 16;
  // Update threads per worker; 0 (default): each worker's compute threads (its HELLO).
  uint32_t threads_per_node = 0;
  // Batching and priority of the engines; `threads` and `idle_residual` are set by the driver.
  graph::EngineOptions engine;
  // Async pagerank/katz: with every poll the engines get a common priority level, this fraction
  // of the summed residual per edge (priority_levels.hpp), so a node whose part is already far
  // below the others' waits for their deltas instead of polishing its own. At most 1. Off (0) by
  // default: the level saves edge updates, but a node held at it waits for the others' deltas
  // instead of working, so the saving does not shorten the wall time, and on meshes the waits
  // lengthen it. scripts/bench-graph-level.sh measures the trade-off.
  double priority_level_fraction = 0.0;
  // How nodes reach each other (peers.hpp); empty: the NodeSpec hosts.
  PeerHosts peer_hosts;
  // The cluster's secret, to reconnect a node that ended its session with an ERROR; empty: such
  // a node counts as lost.
  std::string secret;
  // Compare the answer with reference_values computed here (see GraphVerification).
  bool verify = false;
};

struct TracePoint {
  double time_s = 0.0;        // since the first parts were shipped
  double residual = 0.0;      // summed over nodes (sum |dv|, or pending count for cc/sssp)
  uint64_t edge_updates = 0;  // cumulative, whole run
  // Summed over the current placement's nodes as this poll read them; unequal while a batch is
  // in flight (or read mid-delivery), which is what async termination waits out.
  uint64_t batches_sent = 0;
  uint64_t batches_received = 0;
  bool operator==(const TracePoint&) const = default;
};

struct GraphHooks {
  // Set from any thread to stop: connections are shut down and the call fails with kCancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Sentences for the person waiting: lost nodes, restarts.
  std::function<void(const std::string&)> on_notice;
  // Each trace point as it is taken (after every poll or step), for a progress display.
  std::function<void(const TracePoint&)> on_progress;
};

// Where the vertices went: one entry per part, part order.
struct PlacementSummary {
  std::vector<std::string> nodes;       // the node holding each part
  std::vector<double> target_share;     // normalised target weights
  std::vector<int64_t> vertices;
  std::vector<int64_t> edges;           // out-edges of the part's vertices
  partition::PartitionQuality quality;  // of placement_graph(g): weights, edge cut, ...
  std::string note;                     // partition_graph's trap note, or empty
  bool operator==(const PlacementSummary&) const = default;
};

// One node's work over the whole run (every placement it held), cluster order.
struct GraphNodeFigures {
  std::string name;
  int64_t vertices = 0;   // in the last part it held
  int64_t edges = 0;
  uint64_t updates = 0;
  uint64_t edge_updates = 0;
  uint64_t batches_sent = 0;
  uint64_t batches_received = 0;
  uint64_t deltas_sent = 0;
  uint64_t deltas_received = 0;
  uint64_t coordinator_bytes_sent = 0;      // coordinator -> node (parts, requests)
  uint64_t coordinator_bytes_received = 0;  // node -> coordinator (progress, values)
  uint64_t peer_bytes_sent = 0;             // to other workers
  uint64_t peer_bytes_received = 0;
  double busy_s = 0.0;    // summed over the node's update threads
  double idle_s = 0.0;
  uint64_t memory_bytes = 0;  // part + engine state, last part held
  bool lost = false;
  bool left_out = false;  // not chosen to take part (NodeChoice)
  // Memory per edge of the last part held; 0 without edges.
  double bytes_per_edge() const {
    return edges > 0 ? static_cast<double>(memory_bytes) / static_cast<double>(edges) : 0.0;
  }
  bool operator==(const GraphNodeFigures&) const = default;
};


// verify: the answer against reference_values (graph/reference.hpp). cc and sssp must match
// exactly. pagerank and katz pass when the L1 error is within l1_bound, derived from the
// tolerance (the final sum |dv| is at most the tolerance, and the error is that residual pushed
// through the rest of the series):
//   pagerank: x* - x = sum_k (d P^T)^k r with ||d P^T||_1 <= d, so ||x* - x||_1 <= tol / (1-d);
//     both are normalised by their sums, which moves an L1 error by at most a factor 2 / sum(x*),
//     and sum(x*) >= sum of the initial deltas = 1 - d: bound = 2 tol / (1-d)^2.
//   katz: x* - x = (I - beta A^T)^{-1} r, and for a nonnegative matrix ||(I - beta A^T)^{-1}||_1
//     = max_u z_u with z = sum_k (beta A)^k 1, solved here by fixed-point iteration (the same
//     series that converges because beta < 1/lambda_max): bound = tol * max_u z_u.
//   Both get 1e-9 * max(1, ||reference||_1) on top for the reference's own error and rounding.
struct GraphVerification {
  bool passed = false;
  double l1_error = 0.0;
  double max_error = 0.0;
  int64_t mismatches = 0;
  std::string first_mismatch;
  double l1_bound = 0.0;  // sum algorithms; 0 for cc/sssp (exact)
  std::string detail;     // one line for the report
  bool operator==(const GraphVerification&) const = default;
};

// How the nodes that took part were chosen, and what the model forecast for them.
struct NodeChoiceRecord {
  std::string mode;                      // auto | all | listed
  std::vector<std::string> taking_part;  // cluster order
  std::vector<std::string> left_out;     // one sentence per node left out, naming it and why
  // auto, and all/listed when the nodes' costs are known: the forecast of the set that ran, and
  // of every candidate the choice weighed (names, forecast total seconds).
  std::optional<graphs::GraphForecast> forecast;
  std::vector<std::pair<std::vector<std::string>, double>> candidates;
  std::string bound;                     // forecast_bound of the set that ran
  std::string workload_source;           // where the sweeps per edge came from
  bool operator==(const NodeChoiceRecord&) const = default;
};

// How the vertices were placed the first time: the method, whether a cached placement was used.
struct PlacementRecord {
  std::string method;
  bool cached = false;
  std::string cache_note;                // why a cache entry was not used, or empty
  std::string reason;                    // --partition auto: why this method
  bool operator==(const PlacementRecord&) const = default;
};

struct GraphOutcome {
  graph::AlgorithmSpec algorithm;
  GraphMode mode = GraphMode::kAsync;
  partition::PartitionMethod method = partition::PartitionMethod::kMetis;
  std::string weights;            // describe(TargetWeights) as used
  double tolerance = 0.0;         // what the run stopped at (0 for cc/sssp)
  int64_t vertices = 0;           // of the input graph
  int64_t edges = 0;              // of the graph the algorithm ran on (cc: symmetrised)
  std::vector<double> values;     // per global vertex; pagerank sums to 1
  PlacementSummary placement;                     // the first placement
  std::optional<PlacementSummary> final_placement;  // after the last restart, if any
  std::vector<GraphNodeFigures> nodes;            // cluster order
  NodeChoiceRecord choice;
  PlacementRecord placing;
  // Choosing the nodes and placing the vertices the first time (METIS, ...): part of the command's
  // time, before the parts are shipped.
  double placement_s = 0.0;
  double wall_s = 0.0;            // from shipping the first parts to the values gathered
  double total_s() const { return placement_s + wall_s; }  // what the command took to answer, after loading
  uint64_t edge_updates = 0;
  double edge_updates_per_s = 0.0;
  double residual = 0.0;          // at termination
  uint64_t polls = 0;             // rounds of progress requests to every node
  double poll_s = 0.0;            // time those rounds took, summed (what polling costs the run)
  uint64_t steps = 0;             // sync steps, whole run
  std::vector<TracePoint> trace;  // one point per poll (async) or step (sync)
  std::vector<std::string> lost_nodes;
  std::vector<std::string> lost_reasons;  // one per lost node
  // Nodes of the cluster file that did not answer when the session opened (Session::graph sets
  // it; run_graph never sees them), and why. Not part of `nodes`.
  std::vector<cluster::LeftOutNode> left_out_at_start;
  uint32_t restarts = 0;
  std::optional<GraphVerification> verification;  // when options.verify
};

// Runs `options.algorithm` on `graph` over every node of `cluster` (each must offer the graph
// capability). Fails: kInvalidArgument on a bad spec, weights or graph (naming the flag, edge or
// vertex); kInvalidConfig naming a node without the graph service; kNetworkError when every node
// was lost (naming each and why); kResourceExhausted past max_wall_s or max_restarts; kCancelled.
// A run whose answer fails verification succeeds; outcome.verification says so.
Result<GraphOutcome> run_graph(cluster::ClusterConnection& cluster, const graphdata::DirectedGraph& graph,
                               const GraphRunOptions& options, const GraphHooks& hooks = {});

// Checks that need only the graph (step 1 above). OK or kInvalidArgument naming what to fix;
// `graph_name` names the graph where a message is about the graph itself (its file, or a
// generator spec: "web.edges has no vertices ...").
Status check_graph_run(const graphdata::DirectedGraph& graph, const graph::AlgorithmSpec& spec,
                       std::string_view graph_name = "the graph");

// The tolerance a run of `spec` stops at: 0 for cc/sssp, else `requested` or the default.
// Fails on a requested tolerance that is not > 0 and finite.
Result<double> run_tolerance(const graph::AlgorithmSpec& spec, std::optional<double> requested);

// The verification described at GraphVerification; fails only if the reference cannot be
// computed. `graph` is the input graph (cc symmetrises it itself).
Result<GraphVerification> verify_graph(const graphdata::DirectedGraph& graph, const graph::AlgorithmSpec& spec,
                                       std::span<const double> values, double tolerance);

// max_u z_u, z = sum_k (beta A)^k 1 (the Katz error amplification above), or nullopt when the
// iteration does not settle within max_iterations (beta too close to 1/lambda_max).
std::optional<double> katz_error_amplification(const graphdata::DirectedGraph& graph, double beta,
                                               int max_iterations = 100000);

}  // namespace tessera::balance::graphs
