// An evaluated matrix expression as values, a table and JSON: what `tessera eval` prints and
// writes with --report, and what the Python module returns, from one place.
//
// JSON keys (stable): expression, rewritten (bool), rows, cols, cost_as_written and
// cost_evaluated {flops, products, intermediate_bytes, moved_bytes}, products[] {m, n, k, policy,
// makespan_s, predicted_makespan_s (null without a model), verified (null when not checked)},
// makespan_sum_s, wall_s, mode ("scheduled" | "sequence"), scheduled (null in sequence mode) {tile,
// candidates[] {tile, predicted_makespan_s}, tasks, predicted_/measured_/theoretical_makespan_s,
// fastest_alone_s, theoretical_speedup, predicted_/measured_/naive_bytes, nodes[] {name, tasks,
// host_share, predicted_/measured_busy_s, predicted_/measured_finish_s, bytes_to_node, bytes_from_node},
// kinds[] {kind, tasks, predicted_s, measured_s}, lost_nodes, attempts, verified,
// verification_seconds}. Pure functions on values; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/balance/expr/expression.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/balance/multiply/report.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::expr {

// One product of an evaluated expression, run on the cluster.
struct EvalProduct {
  std::string expression;  // which product and its shapes: "product 2 (1x4096 by 4096x4096)"
  multiply::MultiplyReport report;
  std::vector<std::string> warnings;  // from planning it
};

// What a scheduled evaluation (the tiled task DAG placed by HEFT with tile caches, run on the
// workers with intermediates kept where they were made) predicted and measured.
struct ScheduledTaskKind {
  std::string kind;          // "product", "sum", "difference", "scale"
  uint64_t tasks = 0;
  double predicted_s = 0.0;  // compute seconds the schedule gives these tasks, summed
  double measured_s = 0.0;   // compute seconds the workers reported for them, summed
};
struct ScheduledNode {
  std::string name;
  uint64_t tasks = 0;
  double predicted_busy_s = 0.0;   // the schedule's compute time on the node
  double host_share = 1.0;         // the share of its speed the schedule let it keep beside the coordinator
  double measured_busy_s = 0.0;    // the worker's own compute time for its jobs
  double predicted_start_s = 0.0;  // when its first task begins in the simulation
  double measured_start_s = 0.0;   // when its first job began (its first CREDIT less that job's compute)
  double predicted_finish_s = 0.0; // when its last task ends in the simulation
  double measured_finish_s = 0.0;  // when its last task's credit came back
  uint64_t bytes_to_node = 0;      // tiles, jobs and headers sent to it
  uint64_t bytes_from_node = 0;    // credits and tiles it returned
  uint64_t peer_bytes_sent = 0;    // tile data it sent straight to other nodes
};
// One task of the first schedule run, forecast against what happened (seconds from the start).
struct ScheduledTaskTiming {
  std::string node;
  std::string kind;
  double predicted_start_s = 0.0;
  double predicted_finish_s = 0.0;
  double sent_s = -1.0;  // its first JOB written; -1: none (a tile of zeros) or never (the run stopped)
  double done_s = -1.0;  // its last CREDIT in; -1: never
};
struct ScheduledEval {
  uint64_t tile = 0;  // the tile size that ran
  // Every candidate tile size with the makespan its schedule was predicted to take.
  std::vector<std::pair<uint64_t, double>> candidates;
  double predicted_makespan_s = 0.0;    // the chosen schedule, simulated
  double measured_makespan_s = 0.0;     // first byte sent to the result's last byte received
  double theoretical_makespan_s = 0.0;  // the same DAG with every transfer free (HEFT, zero communication)
  double fastest_alone_s = 0.0;         // the same DAG on the fastest node alone, transfers free
  double predicted_bytes = 0.0;         // tile bytes the schedule moves
  double measured_bytes = 0.0;          // tile bytes that really travelled (to and from nodes)
  double naive_bytes = 0.0;             // tile bytes when every intermediate returns to the coordinator
  // The coordinator's CPU seconds while the schedule ran: the model's (its bytes at the profiled
  // CPU per byte) and this process's own (every thread, from the first byte sent to the last
  // result in).
  double predicted_coordinator_cpu_s = 0.0;
  double measured_coordinator_cpu_s = 0.0;
  uint64_t tasks = 0;
  std::vector<ScheduledNode> nodes;      // the nodes that took part, cluster order
  std::vector<ScheduledTaskKind> kinds;  // per task kind
  std::vector<ScheduledTaskTiming> timeline;  // per task of the first schedule, DAG order (JSON only)
  std::vector<std::string> lost_nodes;   // lost mid-run; the DAG was rescheduled on the others
  uint32_t attempts = 1;                 // schedules run (1 + reschedules after losses)
  // How tiles moved between nodes in the run that finished: "direct" (worker to worker) or
  // "coordinator"; with why it was not direct when that was asked for.
  std::string tile_route;
  std::vector<std::string> route_notes;
  uint64_t coordinator_bytes_sent = 0;   // everything the coordinator wrote to the nodes, every attempt
  multiply::Verification verification;             // the whole expression's value, checked on the coordinator
  // Zero-communication speedup over the fastest node alone: fastest_alone_s / theoretical_makespan_s.
  double theoretical_speedup() const {
    return theoretical_makespan_s > 0.0 ? fastest_alone_s / theoretical_makespan_s : 0.0;
  }
};

struct EvalOutcome {
  expr::Expr written;    // as parsed
  expr::Expr evaluated;  // what ran: rewritten (or as written)
  bool rewritten = true;
  expr::CostWeights weights;
  linalg::Matrix value;
  std::vector<EvalProduct> products;  // sequence mode: the products in the order they ran
  std::optional<ScheduledEval> scheduled;  // scheduled mode
  double seconds = 0.0;               // wall time of the whole evaluation
  // Nodes of the cluster file that did not answer at the start, and why; nothing ran on them.
  std::vector<cluster::LeftOutNode> left_out_at_start;
};

// "expression: u * P^8  (1x2048)\nrewritten by cost: ...\n" then, with `explain`, both trees,
// then one line per product and the totals.
std::string format_eval_table(const EvalOutcome& outcome, bool explain);
std::string eval_report_json(const EvalOutcome& outcome);

}  // namespace tessera::balance::expr
