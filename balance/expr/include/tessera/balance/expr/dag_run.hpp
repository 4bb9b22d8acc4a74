// Running a scheduled task DAG (expr/schedule.hpp) on the workers: each node does its tasks in the
// schedule's order, keeps in its tile store exactly what the schedule's cache holds, and an
// intermediate a node computed stays there until the schedule evicts it.
//
// Per node, one thread sends and one reads. For each task the sender releases the tiles the
// schedule evicts, stores the tiles the schedule fetches, then sends the task's jobs: a product
// tile is one GEMM JOB per k (the first creates the output), a sum, difference or scale one
// ADD_SCALED JOB per operand with its scalar as a 1x1 tile, and a transposed read (A' read
// through A's tiles) sets the JOB's transpose flag for that operand, so a node holding A serves
// A' too; a transpose that is the whole result is an ADD_SCALED copy with A transposed.
// A tile the schedule moves from one node to another goes worker to worker when every node offers
// transport::kCapabilityTileSend (DagRunOptions::peer_transfers): each node is set up for one
// forwarding run, and right after a task's jobs its producer is told SEND_TILE for every other
// node whose first copy of the tile it is; the worker sends it once the jobs are done and answers
// SENT, the receiver announces it with STORED, and the receiver's sender sends jobs on it only
// then. A tile a node needs again after evicting it (or its producer needs again) comes from the
// coordinator as before: its producer's last job returns it as RESULT and the coordinator keeps it
// for whoever fetches it next (kept until the run ends). Without peer transfers every moved tile
// goes that way.
// Identity tiles cost nothing: off-diagonal ones are zero and skipped, a diagonal one is stored
// once per node. The reader takes CREDITs (the workers' compute seconds per task) and RESULTs
// (into the result matrix and the coordinator's copies). A node holds at most `jobs_in_flight`
// unanswered jobs.
//
// Waits cannot deadlock: every node works in the schedule's placing order, a topological order,
// so whatever a node waits for was placed earlier and its producer never waits on the waiter.
// Failures: a node that closes, errs, misbehaves or stays silent past its deadline while it owes
// frames is lost; the others stop sending, drain what they owe and release their tiles, and the
// run comes back incomplete with the lost nodes named, for the caller to schedule the DAG again
// on the survivors. A tile is in the result only after its whole RESULT arrived and matched its
// CRC. A tile send that fails (SENT undelivered: the link between two workers, not a node) stops
// the run with DagRun::peer_failure and no node lost: the caller runs it again without peer
// transfers. A node owes the coordinator SENT for each SEND_TILE, and STORED once its tile was
// sent, so a silent sender or receiver is lost like any node.
// One state machine per node, in one source file (src/dag_run.cpp): a node's sender and reader
// share its tile store's contents, its jobs in flight, what it owes (SENT, STORED, RESULT) and
// whether it is lost, and every step above (evict, fetch, send jobs, tell the producer to send,
// take credits and results, lose the node) moves that one record. What stands alone is elsewhere:
// the coordinator's copies of tiles (src/coordinator_tiles.hpp), the schedule (schedule.hpp), the
// GEMM client (gemm/client.hpp) and the watchdog.
// The caller owns the cluster, the DAG, the schedule and the matrices; not reentrant on one cluster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/expr/schedule.hpp"
#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::expr {

struct DagRunOptions {
  // > 0: how long a node that owes frames may stay silent; 0: max(floor_s, 4 x the schedule's makespan).
  double node_timeout_s = 0.0;
  double floor_s = 10.0;
  // 64: enough 256-square jobs queued that a fast node does not idle while a CREDIT makes its
  // round trip through a busy coordinator; more gains nothing once that trip is covered.
  uint32_t jobs_in_flight = 64;
  // Tile ids on the workers start here (apart from the multiply driver's and the profiler's).
  uint32_t first_tile_id = 0x40000000;
  // Tiles moved between nodes go worker to worker when every node can (kCapabilityTileSend);
  // false: through the coordinator.
  bool peer_transfers = true;
  // How each node's worker reaches each other node's, hosts[from][to] by index in cluster.links()
  // (emulation::load_peer_hosts for emulated clusters); empty or short: at the nodes' own hosts.
  std::vector<std::vector<std::string>> peer_hosts;
};

struct DagNodeStats {
  uint64_t tasks = 0;
  uint64_t jobs = 0;
  double compute_s = 0.0;  // the worker's compute seconds for its jobs (from CREDITs)
  double start_s = -1.0;   // when its first job began computing (its CREDIT's arrival less its compute); -1: none
  double finish_s = 0.0;   // from the start to its last frame of the run
  uint64_t bytes_to_node = 0;    // everything written to it, headers included
  uint64_t bytes_from_node = 0;  // everything read from it
  uint64_t tile_bytes_to_node = 0;    // tile data stored on it
  uint64_t tile_bytes_from_node = 0;  // tile data it returned
  uint64_t peer_tiles_sent = 0;       // tiles it sent to other nodes (SENT delivered)
  uint64_t peer_bytes_sent = 0;       // their data
};

struct LostNode {
  std::size_t node = 0;  // schedule node index
  std::string reason;
};

struct DagRun {
  bool complete = false;  // every result tile arrived; false when a node was lost
  double makespan_s = 0.0;  // first byte sent to the result's last byte received (or to the stop)
  double coordinator_cpu_s = 0.0;  // this process's CPU seconds (every thread) over the run
  std::vector<DagNodeStats> nodes;    // per schedule node
  std::vector<double> task_compute_s;  // per task: the workers' compute seconds for its jobs
  // Per task, seconds from the start: its first JOB written, and its last CREDIT in (-1: not
  // reached). With the schedule's start and finish they show where a run fell behind its forecast.
  std::vector<double> task_sent_s;
  std::vector<double> task_done_s;
  std::vector<LostNode> lost;
  bool peer_transfers = false;  // tiles between nodes went worker to worker
  // Why the run stopped when a tile send between two workers failed (no node lost); else empty.
  std::string peer_failure;
  // Notes on how tiles travelled (why peer transfers were not used, when asked for).
  std::vector<std::string> notes;
  uint64_t tile_bytes() const;  // tile data moved either way, summed over nodes and peer links
  uint64_t coordinator_bytes_sent() const;  // everything the coordinator wrote to the nodes
};

// links[p]: the index in cluster.links() of schedule node p. inputs[m]: the data of DAG matrix m
// when dag.matrices[m].input (others ignored). result: dag.matrices[dag.result]'s shape.
// REQUIRES: the schedule was made for `dag` on as many nodes as `links` names; every node whose
// tasks include a sum, difference, scale or transposed copy offers transport::kCapabilityExpression,
// and one that reads a tile transposed offers transport::kCapabilityTransposedJobs (the caller
// refuses otherwise). Fails (not incomplete) only on bad arguments; a node's failure is in
// DagRun::lost.
Result<DagRun> run_dag(cluster::ClusterConnection& cluster, const std::vector<std::size_t>& links, const expr::TaskDag& dag,
                       const expr::Schedule& schedule, const std::vector<linalg::MatrixView>& inputs,
                       linalg::MutableMatrixView result, const DagRunOptions& options = {});

}  // namespace tessera::balance::expr
