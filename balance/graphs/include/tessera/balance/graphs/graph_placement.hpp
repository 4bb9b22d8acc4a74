// The graph placement model: forecasts an asynchronous graph run (PageRank and its kin) on a set
// of nodes with given parts, and picks the set forecast fastest, saying why each node left out is
// left out. The multiply's model policy does the same for rows; here a node's cost is its edge
// updates, the remote deltas its part sends and receives, shipping its part, and the run's fixed
// costs (placing the vertices, noticing termination).
//
// The forecast, per node i of the set with part P_i:
//   sweeps K    = updates per edge alone x (1 + spread_per_cut x cut fraction) (1 for one node:
//                 no remote delta ever makes a node sweep again);
//   edges_s     = K x |E(P_i)| / edge_updates_per_s;
//   send_s      = K x (ghosts_out x delta_fraction x send_s_per_delta + batches x send_s_per_batch)
//                 + those deltas' bytes (12 each) over the node's link;
//   receive_s   = K x (ghosts_in x delta_fraction x receive_s_per_delta + batches x receive_s_per_batch)
//                 + their bytes over the node's link;
//   ship_s      = the part's bytes over the node's link;
//   node total  = ship_s + edges_s + send_s + receive_s + the values' bytes back;
// With nodes behind a switch, the run is at least the bytes its uplink carries (their parts, their
// values, and the deltas between them and the nodes not behind it, in the proportion of those
// nodes' edges among their peers') over its rate: slowest_node_s is the larger of the two.
// run = placement_s + the slowest node + extra_s (what past runs took beyond their forecast: this
// very set's when one ran before, else the workload's figure for one node or several) +
// termination_s (the polls that notice the end: three
// quarters of the gap between polls then, which doubles from 5 ms up to poll_gap_s of the run's
// length (an eighth of it, at most the poll interval), plus the confirming poll 5 ms later and the
// slowest node's busy round trip for each of the two).
// Pure functions of values; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/balance/model/graph_rates.hpp"

namespace tessera::balance::graphs {

using model::GraphRates;

// What one node costs a graph run (rates from the profile, or from the last run on this graph).
struct GraphNodeCosts {
  std::string name;
  GraphRates rates;
  // Its edge rate on this graph beside other nodes, where a past run measured one (its part's
  // size and cache fit differ from the whole graph's alone); 0: rates.edge_updates_per_s.
  double edge_updates_per_s_with_others = 0.0;
  // The rate its edges are charged at, alone or in a set of several nodes.
  double edge_rate(bool alone) const {
    return !alone && edge_updates_per_s_with_others > 0.0 ? edge_updates_per_s_with_others : rates.edge_updates_per_s;
  }
  double to_node_bytes_per_s = 0.0;    // the coordinator's link to it (shipping the part)
  double from_node_bytes_per_s = 0.0;  // back (the values)
  double busy_latency_s = 0.0;         // one way while it computes (each poll waits for it)
  // Behind the cluster's switch: its uplink's rate, which every node behind it shares for what it
  // exchanges with the coordinator and with the nodes not behind it; 0: not behind one.
  double switch_uplink_bytes_per_s = 0.0;
  bool operator==(const GraphNodeCosts&) const = default;
};

// What the algorithm needs on this graph, whatever the placement.
struct GraphWorkload {
  int64_t vertices = 0;
  int64_t edges = 0;  // of the graph the algorithm runs on
  // Edge updates per edge on one node alone (async), and how much more several parts need per
  // unit of cut fraction (cut edges / edges): deltas that arrive late make vertices update again.
  double updates_per_edge_alone = 0.0;
  double spread_per_cut = 0.0;
  // Share of a part's ghost vertices that carry a delta at a flush (1: every one, every sweep).
  double delta_fraction = 1.0;
  double poll_interval_s = 0.1;
  // What past runs took beyond their forecast (building and loading the parts on the workers,
  // opening the peer links), alone and with several nodes; 0 until a run measured it.
  double extra_alone_s = 0.0;
  double extra_several_s = 0.0;
  bool operator==(const GraphWorkload&) const = default;
};

// One part as the placement made it.
struct GraphPartShape {
  int64_t vertices = 0;
  int64_t edges = 0;       // out-edges of its vertices
  int64_t ghosts_out = 0;  // distinct vertices of other parts its edges reach (one delta each per flush)
  int64_t ghosts_in = 0;   // entries the other parts send it per flush, summed over them
  int64_t peers_out = 0;   // parts it sends to (a batch each per flush)
  int64_t peers_in = 0;    // parts that send to it
  bool operator==(const GraphPartShape&) const = default;
};

// A candidate: a set of nodes (indices into the costs), the part each gets, and what placing cost.
struct GraphCandidate {
  std::vector<std::size_t> nodes;
  std::vector<GraphPartShape> parts;  // same order as nodes
  int64_t cut_edges = 0;
  double placement_s = 0.0;           // time to compute this placement (0 when it was cached)
  // What past runs of this very set took beyond their forecast; none: the workload's figure.
  std::optional<double> extra_s;
  std::string method;                 // how it was placed, for the record
  bool operator==(const GraphCandidate&) const = default;
};

struct GraphNodeForecast {
  std::string name;
  double ship_s = 0.0;
  double edges_s = 0.0;
  double send_s = 0.0;
  double receive_s = 0.0;
  double gather_s = 0.0;
  double total_s = 0.0;
  double edge_updates = 0.0;
  double deltas_sent = 0.0;
  bool operator==(const GraphNodeForecast&) const = default;
};

struct GraphForecast {
  std::vector<GraphNodeForecast> nodes;  // candidate order
  double updates_per_edge = 0.0;         // K above
  double placement_s = 0.0;
  double slowest_node_s = 0.0;           // the slowest node, or the switch's uplink when it takes longer
  double uplink_s = 0.0;                 // the bytes the run moves through the switch's uplink, over its rate
  double termination_s = 0.0;
  double extra_s = 0.0;                  // the candidate's, else the workload's extra_alone_s or extra_several_s
  double total_s = 0.0;                  // what the command's wall time should be, placing included
  std::size_t slowest = 0;               // index into nodes
  bool operator==(const GraphForecast&) const = default;
};

// REQUIRES: candidate.parts.size() == candidate.nodes.size(), every node index < costs.size().
GraphForecast forecast_graph_run(const std::vector<GraphNodeCosts>& costs, const GraphWorkload& workload,
                                 const GraphCandidate& candidate);

// The cost that bounds a forecast, in words: "desktop's edge updates (0.31 s of 0.35 s)".
std::string forecast_bound(const GraphForecast& forecast);

// Which candidate to run: the one forecast soonest, except that a larger set must beat a
// smaller one by `margin` (a fraction, 0.03: a forecast that close is within its own error, and
// fewer nodes are the safer bet). `left_out` says, for every node of the largest candidate that
// the chosen one lacks, why: the forecast with it, the forecast without, and its dominant cost.
struct GraphNodeChoice {
  std::size_t chosen = 0;                    // index into the candidates
  std::vector<GraphForecast> forecasts;      // one per candidate
  std::vector<std::string> left_out;         // one sentence per node left out
  bool operator==(const GraphNodeChoice&) const = default;
};
// REQUIRES: at least one candidate.
GraphNodeChoice choose_graph_nodes(const std::vector<GraphNodeCosts>& costs, const GraphWorkload& workload,
                                   const std::vector<GraphCandidate>& candidates, double margin = 0.03);

// The nodes in the order candidate sets grow: fastest first by edge updates per second (names
// break ties), so the candidates are the best node alone, the best two, ..., all.
std::vector<std::size_t> nodes_by_graph_speed(const std::vector<GraphNodeCosts>& costs);

// Target weights for a set: each node's edge updates per second (equal when none is measured).
std::vector<double> graph_share_weights(const std::vector<GraphNodeCosts>& costs, const std::vector<std::size_t>& nodes);

// Bytes a part takes on the wire when shipped (CSR, values and deltas), and the values coming back.
double graph_part_bytes(const GraphPartShape& part);

// The longest gap the graph driver leaves between two progress polls once a run has gone on for
// `run_s` seconds: an eighth of that (at least 5 ms, at most `poll_interval_s`), so the end of a
// 0.3 s run is noticed within about 40 ms rather than a whole 100 ms interval, which every node
// would spend idle, while a long run still polls ten times a second. The driver schedules by it
// and the forecast charges it.
double poll_gap_s(double run_s, double poll_interval_s);

}  // namespace tessera::balance::graphs
