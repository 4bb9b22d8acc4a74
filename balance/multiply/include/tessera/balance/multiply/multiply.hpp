// The multiply driver: carries out a Plan for C = A x B on a connected cluster, whatever its
// policy and layout.
//
// Work is a list of tiles, boxes of the m x n x k space: a static plan's boxes belong to their
// node; a dynamic plan cuts C's rows into tiles that nodes take as they finish earlier ones (a
// quarter of the tile size first and last, so every node starts at once and the tail is short).
// One thread per node streams: a tile's A (straight from A's memory when the box spans all of k),
// then per k-panel the piece of B it reads and a JOB that adds A_tile[:, piece] x B_piece into
// the tile's C block in place on the worker, no barrier between panels. Every piece of B is
// encoded once and written to each node that needs it from the same bytes. A node holds at most
// `panels_in_flight` unanswered jobs; after the first burst, jobs go out once `refill_threshold`
// credits are back. The last job of a tile returns its block: whole-k blocks go straight into C,
// blocks of a box that splits k are partial sums added into C as they arrive.
//
// A chain plan (plan::Distribution::kChain) sends B's pieces to the chain's head only; every
// other member gets each piece from the member before it and is sent its job on a piece once its
// worker says the piece arrived (STORED), under a credit rule that bounds every member to twice
// the window of B (src/chain_feed.hpp). A member whose feed breaks gets the rest of B directly.
// Failures: a node that disconnects, dies or misbehaves is dropped and its unfinished tiles go to
// whoever asks next (or to the node already holding a copy), so the product stays exact; the run
// fails only when every node has failed (with their common code when they failed alike, e.g.
// kResourceExhausted when every worker ran out of tile memory; else kNetworkError). Near the end
// of a dynamic run an idle node takes a copy of the tile running longest elsewhere; the first
// result wins. When the last tile is in, nodes drain their queues and release their tiles, so
// sessions stay usable.
// A node that stops answering without closing its socket (stopped, lost power behind a switch)
// is found by the cluster's silent-node watchdog (cluster/silent_node_watchdog.hpp): when no
// frame has come from a node for its deadline while it owes us something (jobs in flight, a STATS
// reply, a write we are blocked in), the node is dropped as "unresponsive: no frame for N s while
// M jobs were in flight" and its tiles are reissued like any other lost node's (see
// ProgressDeadlines).
// The caller owns A, B, C and the cluster; run_multiply is not reentrant on the same cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/multiply/plan_work.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::multiply {

struct NodeRunStats {
  std::string name;
  uint64_t rows = 0;              // rows of C delivered (row-equivalents, volume / (n k), for 2D/3D)
  double weight = 0.0;            // share of the m n k multiply-adds delivered
  uint64_t bytes_to_node = 0;    // A rows, B panels, jobs, headers
  uint64_t bytes_from_node = 0;  // credits and the C block
  double compute_s = 0.0;        // time the node spent multiplying, as it measured it
  double comm_s = 0.0;           // time the coordinator spent writing to / reading from the node
  double idle_s = 0.0;           // makespan - compute_s: waiting for data, for other nodes, or released late
  double finish_s = 0.0;         // from the start of the run to its C block being received
  uint64_t panels = 0;           // pieces of B the coordinator sent to the node
  uint64_t pieces_by_chain = 0;  // pieces of B that came from the node before it in the chain
  uint64_t forwarded_bytes = 0;  // bytes of B this node forwarded to the next in the chain
  uint64_t volume = 0;            // multiply-adds of the tiles whose result came from this node
  uint64_t tiles = 0;             // tiles whose result came from this node
  uint64_t abandoned = 0;         // dynamic: tiles whose sending stopped because another node finished them
  // The worker's own CPU accounting for this run (STATS before and after): time its threads spent
  // communicating (socket reads and writes, decoding, filing tiles) and multiplying.
  double worker_io_cpu_s = 0.0;
  double worker_compute_cpu_s = 0.0;
  // io / (io + compute); none for a node that did no work (answering STATS alone would read as
  // 100%) or was lost before it could report its figures.
  std::optional<double> worker_comm_share() const {
    const double total = worker_io_cpu_s + worker_compute_cpu_s;
    if (volume == 0 || total <= 0.0) return std::nullopt;
    return worker_io_cpu_s / total;
  }
};

struct MultiplyRun {
  std::vector<NodeRunStats> nodes;  // plan order
  // What the user waits for: from the start of sending until the product is complete and every
  // node has been released (its last transfers, results and figures done), whether or not the
  // node's work counted. A node still busy with a transfer that bought nothing is included.
  double makespan_s = 0.0;
  double last_result_s = 0.0;       // when the last result that went into C arrived
  double gflops = 0.0;              // 2 m n k / makespan
  double imbalance = 0.0;           // last result / mean finish, over nodes with rows
  uint64_t tiles = 0;                       // tiles the work was cut into
  std::vector<std::string> lost_nodes;      // nodes that failed mid-run; the run went on without them
  // Why, one per lost node: the worker's own reason when it sent one ("... reported out of
  // memory: ..."), else what the connection saw ("... closed the connection").
  std::vector<std::string> lost_reasons;
  std::vector<uint64_t> reissued_tiles;     // tiles handed out again because their node was lost
  // Chain plans: the chain as it ran ("coordinator -> desktop -> pi1 -> pi2"; empty when B went
  // to each node) and what changed it (a node that does not forward, a link that failed).
  std::string chain;
  std::vector<std::string> chain_notes;
  // Dynamic runs only:
  uint64_t speculative_copies = 0;          // tiles also given to an idle node near the end
  uint64_t speculative_wins = 0;            // copies whose result arrived first
  // CPU seconds this process used from the start of sending until every node was released: the
  // coordinator's packing, sending, checksums, receiving and the check run during the transfers
  // (the share of a host's cores it took from nodes running beside it).
  double coordinator_cpu_s = 0.0;

  // The workers' CPU seconds summed over nodes, and the communication share of them (none when
  // no worker reported figures).
  double worker_io_cpu_s() const;
  double worker_compute_cpu_s() const;
  std::optional<double> worker_comm_share() const;
};

// What the driver may expect of one node, as plain figures (the session takes them from the
// profile, which run does not depend on). Zero means unknown.
struct NodeExpectation {
  double to_node_bytes_per_s = 0.0;    // link bandwidth, coordinator to node
  double from_node_bytes_per_s = 0.0;  // link bandwidth, node to coordinator
  double flops_per_s = 0.0;            // GEMM speed (2 m n k per second)
};

// How long a node that owes us something may stay silent before it is dropped as unresponsive.
// Each node's deadline is node_timeout_s when set; else safety_factor x (bytes in flight to it /
// to_node_bytes_per_s + result bytes in flight / from_node_bytes_per_s + multiply-adds in flight
// x 2 / flops_per_s), never below floor_s. Unknown figures add nothing, so without a profile the
// deadline is floor_s. The clock restarts with every frame from the node.
struct ProgressDeadlines {
  double node_timeout_s = 0.0;  // > 0: this deadline for every node (tessera multiply --node-timeout)
  // 10 s: far beyond a frame's round trip on any link Tessera targets (a Pi on 100 Mbit/s
  // Ethernet), yet short next to the minutes a hung run would otherwise cost.
  double floor_s = 10.0;
  // x4: a loaded node, a noisy link or a profile measured in a better moment still gets its
  // frames in well within four times the time the figures predict.
  double safety_factor = 4.0;
  std::vector<NodeExpectation> nodes;  // plan order; empty: floor_s for every node
};

struct MultiplyHooks {
  // Called once on the calling thread when the work is cut and checked, before anything is sent:
  // the jobs (credits) the run expects per node and in total (count_jobs).
  std::function<void(const JobCounts& jobs)> on_start;
  // Called from the node's streaming thread each time a node returns a credit.
  std::function<void(std::size_t node_index, uint64_t jobs_done)> on_credit;
  // When a silent node counts as lost (see ProgressDeadlines).
  ProgressDeadlines deadlines;
  // Chain plans: how each node's worker reaches each other node's, hosts[from][to] in plan order
  // (emulated nodes in network namespaces reach each other at other addresses than the
  // coordinator does); empty: at the hosts the coordinator uses.
  std::vector<std::vector<std::string>> peer_hosts;
};

// REQUIRES: plan.shares match cluster.links() in order and name; a is m x k, b is k x n, c is
// m x n. The views' memory belongs to the caller and must outlive the call; strided A or B views
// are packed once first (the driver writes contiguous rows straight from memory). On success c
// holds the product; run.lost_nodes / reissued_tiles / speculative_* say what happened on the
// way. Fails on bad input, on a static share that does not fit a worker's tile memory (before
// sending anything), or when every node failed (naming each); c's contents are then unspecified.
Result<MultiplyRun> run_multiply(cluster::ClusterConnection& cluster, const plan::Plan& plan, linalg::MatrixView a,
                                 linalg::MatrixView b, linalg::MutableMatrixView c, const MultiplyHooks& hooks = {});

// The same into a Matrix the driver sizes to m x n.
Result<MultiplyRun> run_multiply(cluster::ClusterConnection& cluster, const plan::Plan& plan, linalg::MatrixView a,
                                 linalg::MatrixView b, linalg::Matrix& c, const MultiplyHooks& hooks = {});

}  // namespace tessera::balance::multiply
