// The multiply driver: carries out a Plan for C = A x B on a connected cluster.
//
// For each node, one thread streams: the node's rows of A once (straight from A's memory), then B
// as k-panels. Each panel's frame is encoded once and the same bytes are written to every node
// (marshal-once broadcast); the panel data itself is sent from B's memory without a copy. After
// each panel a JOB tells the node to add A_i[:, panel] * B_panel into its C block in place; no
// barrier separates panels. A node holds at most `panels_in_flight` panels: a CREDIT from it
// frees a slot. The last job asks for the C block, which is read straight into C's rows.
//
// If a node fails (connection reset, ERROR frame, protocol violation), every session is shut down
// and the run fails with a message naming the node, its address and how far it got. The caller
// owns A, B, C and the cluster; run_multiply is not reentrant on the same cluster.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/balance/cluster_connection.hpp"
#include "tessera/balance/matrix.hpp"
#include "tessera/balance/plan.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance {

struct NodeRunStats {
  std::string name;
  uint64_t rows = 0;
  double weight = 0.0;
  uint64_t bytes_to_node = 0;    // A rows, B panels, jobs, headers
  uint64_t bytes_from_node = 0;  // credits and the C block
  double compute_s = 0.0;        // time the node spent multiplying, as it measured it
  double comm_s = 0.0;           // time the coordinator spent writing to / reading from the node
  double idle_s = 0.0;           // makespan - compute_s: waiting for data or for other nodes
  double finish_s = 0.0;         // from the start of the run to its C block being received
  uint64_t panels = 0;
};

struct MultiplyRun {
  std::vector<NodeRunStats> nodes;  // plan order
  double makespan_s = 0.0;          // slowest node's finish
  double gflops = 0.0;              // 2 m n k / makespan
  double imbalance = 0.0;           // slowest finish / mean finish, over nodes with rows
  // Dynamic runs only (dynamic_multiply.hpp):
  uint64_t tiles = 0;                       // tiles C was cut into
  std::vector<std::string> lost_nodes;      // nodes that failed mid-run; the run went on without them
  std::vector<uint64_t> reissued_tiles;     // tiles handed out again because their node was lost
  uint64_t speculative_copies = 0;          // tiles also given to an idle node near the end
  uint64_t speculative_wins = 0;            // copies whose result arrived first
};

struct MultiplyHooks {
  // Called from the node's streaming thread each time a node returns a credit.
  std::function<void(std::size_t node_index, uint64_t jobs_done)> on_credit;
};

// REQUIRES: plan.shares match cluster.links() in order and name; a is m x k, b is k x n.
// On success c is m x n and holds the product.
Result<MultiplyRun> run_multiply(ClusterConnection& cluster, const Plan& plan, const Matrix& a,
                                 const Matrix& b, Matrix& c, const MultiplyHooks& hooks = {});

}  // namespace tessera::balance
