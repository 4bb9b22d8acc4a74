// An evaluated matrix expression as values, a table and JSON: what `tessera eval` prints and
// writes with --report, and what the Python module returns, from one place.
//
// JSON keys (stable): expression, rewritten (bool), rows, cols, cost_as_written and
// cost_evaluated {flops, products, intermediate_bytes, moved_bytes}, products[] {m, n, k, policy,
// makespan_s, predicted_makespan_s (null without a model), verified (null when not checked)},
// makespan_sum_s, wall_s. Pure functions on values; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "tessera/balance/expr/expression.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/balance/report/report.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance {

// One product of an evaluated expression, run on the cluster.
struct EvalProduct {
  std::string expression;  // which product and its shapes: "product 2 (1x4096 by 4096x4096)"
  MultiplyReport report;
  std::vector<std::string> warnings;  // from planning it
};

struct EvalOutcome {
  expr::Expr written;    // as parsed
  expr::Expr evaluated;  // what ran: rewritten (or as written)
  bool rewritten = true;
  expr::CostWeights weights;
  linalg::Matrix value;
  std::vector<EvalProduct> products;  // in the order they ran
  double seconds = 0.0;               // wall time of the whole evaluation
};

// "expression: u * P^8  (1x2048)\nrewritten by cost: ...\n" then, with `explain`, both trees,
// then one line per product and the totals.
std::string format_eval_table(const EvalOutcome& outcome, bool explain);
std::string eval_report_json(const EvalOutcome& outcome);

}  // namespace tessera::balance
