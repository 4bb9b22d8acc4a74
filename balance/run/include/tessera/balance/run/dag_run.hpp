// Running a scheduled task DAG (expr/schedule.hpp) on the workers: each node does its tasks in the
// schedule's order, keeps in its tile store exactly what the schedule's cache holds, and an
// intermediate a node computed stays there until the schedule evicts it.
//
// Per node, one thread sends and one reads. For each task the sender releases the tiles the
// schedule evicts, stores the tiles the schedule fetches, then sends the task's jobs: a product
// tile is one GEMM JOB per k (the first creates the output), a sum, difference or scale one
// ADD_SCALED JOB per operand with its scalar as a 1x1 tile, and a transposed read (A' read
// through A's tiles) sets the JOB's transpose flag for that operand, so a node holding A serves
// A' too; a transpose that is the whole result is an ADD_SCALED copy with A transposed. A tile the schedule moves
// from one node to another travels through the coordinator: its producer's last job returns it
// as RESULT and the coordinator keeps it for whoever fetches it next (kept until the run ends).
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
// CRC.
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

namespace tessera::balance::run {

struct DagRunOptions {
  // > 0: how long a node that owes frames may stay silent; 0: max(floor_s, 4 x the schedule's makespan).
  double node_timeout_s = 0.0;
  double floor_s = 10.0;
  // 64: with 16 the desktop of local-mixed-lan idled between its 256-square jobs (a CREDIT's round
  // trip through a busy coordinator outlasted 16 of them): the chain A B C D took 0.61-0.75 s, with 64
  // 0.50-0.62 s, and 256 measured the same as 64.
  uint32_t jobs_in_flight = 64;
  // Tile ids on the workers start here (apart from the multiply driver's and the profiler's).
  uint32_t first_tile_id = 0x40000000;
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
  uint64_t tile_bytes() const;  // tile data moved either way, summed over nodes
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

}  // namespace tessera::balance::run
