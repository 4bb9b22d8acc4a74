// From an expression to a schedule: the rewritten tree lowered to a DAG of tile tasks, placed on
// heterogeneous nodes by HEFT extended with a node-level tile cache, and simulated.
//
// Lowering (tile size t): every matrix is cut into t x t tiles (smaller at the edges). A product's
// output tile (i, j) is one task that reads A's row of tiles i and B's column of tiles j; a sum,
// difference or scale reads the tiles at the same place. A transpose is read through: its tile
// (i, j) is its operand's tile (j, i), transposed (TileRef::transposed), so it costs no task and
// no bytes of its own; only a transpose that is the whole result is computed, a transposed copy
// per tile. Inputs' tiles start at the coordinator; identity tiles cost nothing anywhere.
//
// HEFT (Topcuoglu et al.): tasks in decreasing upward rank (mean compute time plus the most
// expensive path to the end, transfers at their mean cost), each placed on the node where it
// would finish first. The extension, as in the Julia Cloud Matrix Machine: each node keeps the
// tiles it received or computed in a cache of `cache_bytes`, evicting the least recently used
// tile when full; a tile in a node's cache costs nothing to use there, and one that is not is
// fetched from whoever holds it (the coordinator for inputs, else the node that computed it),
// queued on the receiving node's link. Intermediates therefore stay where they were made. With
// peer transfers (ScheduleOptions::peer_transfers) a tile from another node travels worker to
// worker: the coordinator neither sends nor receives it, and between two nodes behind the same
// switch it does not cross the switch's uplink; without, it goes through the coordinator (in and
// out again). The node a computed tile comes from pays the CPU of sending it (the profile's transfer
// CPU per byte, as for receiving): once per copy worker to worker, once for its return otherwise.
// At the end the result's tiles travel to the coordinator.
//
// Node costs come from the performance model (model.hpp): GEMM speed at each job's
// square-equivalent size (so a vector-matrix tile runs at the memory-bound rate), the node's availability and receive charge, link latency and
// bandwidths. Nodes on the coordinator's host also lose the CPU the coordinator spends moving the
// schedule's bytes (ClusterModel::coordinator_cpu_s_per_byte, shared max-min fairly by
// host_availability): the schedule is made again with those shares until they settle (two passes).
// Pure functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/balance/expr/expression.hpp"
#include "tessera/balance/model/model.hpp"

namespace tessera::balance::expr {

// A tile as stored (row, col of its matrix), read as it is or transposed. A transpose that other
// nodes read has no tiles of its own: its tile (i, j) is read as its operand's tile (j, i),
// transposed, so a node holding A serves both A and A' (the cache knows one tile).
struct TileRef {
  std::size_t matrix = 0;  // index into TaskDag::matrices
  uint32_t row = 0, col = 0;
  bool transposed = false;
  bool operator==(const TileRef&) const = default;
};

// A stored tile as one number, for maps and sets (a transposed read has its tile's key): 20 bits
// each for its row and column (lower_to_tasks keeps every matrix under 2^20 tiles across), the
// rest for the matrix.
uint64_t tile_key(const TileRef& tile);

struct TiledMatrix {
  Expr node;
  uint64_t rows = 0, cols = 0;
  uint32_t tile_rows = 0, tile_cols = 0;  // tiles down and across
  bool input = false;                     // tiles start at the coordinator
  bool identity = false;                  // tiles are free everywhere
  std::optional<std::size_t> transpose_of;  // a transpose read through its operand's tiles (no tasks)
};

struct TileTask {
  Op op = Op::kProduct;
  TileRef output;
  std::vector<TileRef> reads;
  double flops = 0.0;
  double output_bytes = 0.0;
};

struct TaskDag {
  uint64_t tile = 0;
  std::vector<TiledMatrix> matrices;
  std::vector<TileTask> tasks;                     // in an order where every task follows what it reads
  std::vector<std::vector<std::size_t>> successors;  // per task
  std::size_t result = 0;                          // the matrix holding the expression's value
  uint64_t rows_of(const TileRef& tile) const;     // the tile's rows as stored (edge tiles are smaller)
  uint64_t cols_of(const TileRef& tile) const;     // the tile's columns as stored
  double tile_bytes(const TileRef& tile) const;    // 8 x the tile's rows x cols
};

// REQUIRES: `e` without kPower nodes (rewrite() lowers them). A tile of 0 counts as 1.
TaskDag lower_to_tasks(const Expr& e, uint64_t tile);

struct TaskPlacement {
  std::size_t node = 0;
  double start_s = 0.0, finish_s = 0.0;
  std::vector<bool> cached;     // per read: already in the node's cache (true) or fetched (false)
  std::vector<TileRef> evicted;  // dropped from the node's cache to make room for this task
};

struct Schedule {
  std::vector<TaskPlacement> tasks;  // per task of the DAG
  std::vector<std::size_t> order;    // the tasks in the order they were placed
  double makespan_s = 0.0;           // until the result's last tile reached the coordinator
  double bytes_moved = 0.0;          // every tile transfer, the result's return included
  double coordinator_bytes = 0.0;    // bytes the coordinator sends or receives (a move between nodes twice, or none worker to worker)
  std::vector<double> busy_s;        // per node: seconds computing
  // Per node: the share of its speed the schedule assumed it keeps on the coordinator's host
  // (host_availability); empty when no node shares it or nothing is short.
  std::vector<double> host_availability;
};

struct ScheduleOptions {
  double cache_bytes = 1e9;         // per node
  bool zero_communication = false;  // every transfer free: the theoretical schedule
  bool peer_transfers = false;      // tiles between nodes go worker to worker (expr::DagRunOptions)
};

// REQUIRES: model has at least one node that can compute.
Schedule heft(const TaskDag& dag, const model::ClusterModel& model, const ScheduleOptions& options = {});

// A schedule made on some of a model's nodes: `nodes` lists them (indices into the model, in
// order); the schedule's node p is nodes[p].
struct NodeSetSchedule {
  Schedule schedule;
  std::vector<std::size_t> nodes;
};

// HEFT places each task greedily where it finishes first, which can hand a task to a slow or
// badly connected node whose output then costs more to fetch than the node saved. So the DAG is
// also scheduled on the fastest node alone, the fastest two, ... (ranked by the speed curve at
// `ranking_size`), and the schedule on every node is kept unless one on fewer is forecast at
// least `margin` (a fraction) faster. REQUIRES: as heft().
NodeSetSchedule heft_on_best_nodes(const TaskDag& dag, const model::ClusterModel& model, const ScheduleOptions& options,
                                   double margin, double ranking_size);

// Which of several candidate schedules of one expression to run, given their forecast makespans
// listed largest tile first: the largest tile whose forecast is within `margin` (a fraction) of
// the fastest. More, smaller tiles mean more messages, whose waits on busy nodes the model knows
// least, so a smaller tile must be forecast clearly faster to be chosen. REQUIRES: not empty.
std::size_t pick_tile_candidate(const std::vector<double>& makespans_largest_first, double margin);

// What the same tasks move when every intermediate returns to the coordinator and nothing is
// cached (the naive sequence of multiplies): every task's reads out and its output back.
double naive_bytes(const TaskDag& dag);

// Replays `schedule` in its placing order, with its recorded evictions, and returns an empty
// string when it is consistent, else what is wrong: a read marked cached of a tile the node did
// not hold then (never had it, or it was evicted), an eviction of a tile the task reads, a task
// that starts before what it reads was computed. Tests use it.
std::string check_schedule(const TaskDag& dag, const Schedule& schedule);

}  // namespace tessera::balance::expr
