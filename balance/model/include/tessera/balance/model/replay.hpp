// Forecasts of a plan, replayed without running it: predict() replays a static plan, predict_pull()
// the `dynamic` policy's pull protocol tile by tile (host.hpp divides a shared host's cores for
// both). Pure functions of values (the caller owns model and plan); thread-safe.
//
// The coordinator sends to all nodes at once (one thread per node), so concurrent transfers share
// its measured send capacity max-min fairly, each also capped by its own link.
//
// predict() replays the multiply driver's streaming protocol as a fluid simulation: per node, A's
// rows then one panel of B after another, at most `panels_in_flight` panels unacknowledged (a
// panel can be sent once the job `panels_in_flight` earlier has finished), each job starting when
// its panel has arrived and the previous job is done, the C block travelling back after the last
// job; a job's compute includes the CPU its received bytes cost the node and the node's share of
// contended cores (CpuModel). Nodes on the coordinator's host (HostModel) share its cores, moment
// by moment, with each other while they multiply and with the coordinator while it moves bytes.
//
// A kChain plan (plan.hpp) is replayed with B forwarded: the coordinator sends each panel once, to
// plan.chain's head, and every node sends A's rows and C's block over its own link as in a star.
// A chain node forwards each panel to the next one cut-through, as the workers do: it may start
// once the panel's first 1 MB chunk is in, and sends the last chunk no sooner than a chunk's time
// after the panel is whole here (in order, pipelined across panels, while it multiplies). Every link a
// transfer crosses is shared max-min fairly with the other transfers crossing it at that moment:
// a node's link in (to_node rate) carries its A and the panels reaching it, its link out
// (from_node rate) its C and the panels it forwards, so a worker-to-worker panel runs at no more
// than the slower of the sender's link out and the receiver's link in. Between two nodes behind
// the switch a panel does not cross the uplink; between a node behind it and one that is not, it
// does. Forwarding costs the node CPU per byte sent as receiving does (CpuModel: the profile has
// no figure for sending). The coordinator lets panel p + panels_in_flight enter the chain once
// the node j hops down the chain has its credit for job p - min(j, panels_in_flight) back (the
// driver's rule): panels on their way count against a node's window, with one extra per hop so
// that a long chain does not wait a hop per panel; no node holds more than twice the window.
#pragma once

#include <vector>

#include "tessera/balance/model/cluster_model.hpp"
#include "tessera/balance/plan/plan.hpp"

namespace tessera::balance::model {

struct Prediction {
  std::vector<double> finish_s;  // per node, plan order; 0 for nodes without rows
  double makespan_s = 0.0;
  // Per node, the share of its cores it kept while it multiplied (on the coordinator's host, the
  // rest went to other nodes there and to the coordinator); 1 where nothing competed.
  std::vector<double> host_share;
};

// On the coordinator's host, each moment of the replay divides the host's cores max-min fairly
// (as the kernel's fair scheduler divides them between cgroups and processes) among the nodes
// there that are multiplying, each wanting its quota (HostModel::node_cores), and the
// coordinator, wanting coordinator_cpu_s_per_byte x the bytes per second it is moving; a node
// short of cores computes proportionally slower, a coordinator short of them moves bytes so. A
// node multiplying while another there multiplies too runs at no more than its crowded_share.
// REQUIRES: plan.shares has one entry per model node, same order; for kChain, plan.chain names
// every node with rows once (set_chain). A node given rows it cannot serve (zero speed or zero
// bandwidth), or with rows but off the chain (it never gets B), finishes at +infinity.
Prediction predict(const ClusterModel& model, const plan::Plan& plan);

// The `dynamic` policy's forecast: its pull protocol replayed tile by tile. Each tile the driver
// cuts (cut_row_tiles: quarter-size ones first and last, plan.tile_rows between) goes to the node that asks first (a node asks while it holds fewer than two
// unfinished tiles, as the driver does); it receives the tile's A, with its first tile all of B
// (kept for later tiles), over its own link one transfer after another, multiplies once the data
// and its previous tile are done, and sends C back. Links to the nodes share the coordinator's
// send capacity max-min fairly as if all received at once. Then the speculative copies: the tile
// arriving last goes, once, to the node that would deliver it soonest after its own work, while
// that beats the original (a node's finish is its last tile that counted). Not replayed: B's
// panels overlapping the first multiply (so a node's first tile is forecast late). Nodes that
// cannot compute or have no link take no tiles; with none left the makespan is +infinity. Nodes
// on the coordinator's host get the share of its cores host_availability() gives them over the
// whole replay (their busy time and the coordinator's bytes), replayed again twice.
// REQUIRES: as predict(); plan.tile_rows > 0 for a forecast.
Prediction predict_pull(const ClusterModel& model, const plan::Plan& plan);

}  // namespace tessera::balance::model
