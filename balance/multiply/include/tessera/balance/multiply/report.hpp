// Multiply reports: the per-node table printed after a run and the same facts as JSON.
//
// JSON keys (stable, used by experiments and tests): policy, n, m, k, panel_width,
// panels_in_flight, makespan_s (until every node was released), last_result_s, gflops,
// imbalance, coordinator_cpu_s, verified (true/false, null when not
// verified), verification {mode, max_error_ratio, max_abs_error, seconds (after the run), overlapped_seconds
// (on A and B during it), detail}, cluster,
// predicted_makespan_s and prediction_error (|predicted - measured| / measured; both null without
// a model), nodes[] {name, kind, endpoint, rows, weight, bytes_to_node, bytes_from_node,
// compute_s, comm_s, idle_s, finish_s, predicted_finish_s, predicted_host_share, panels}. Pure functions;
// thread-compatible.
#pragma once

#include <optional>
#include <string>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/multiply/multiply.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::multiply {

struct MultiplyReport {
  std::string cluster;
  plan::Plan plan;
  multiply::MultiplyRun run;
  multiply::Verification verification;
  std::vector<cluster::NodeSpec> nodes;  // for kind and endpoint, plan order
  // Nodes of the cluster file that did not answer at the start, and why; the plan leaves them out.
  std::vector<cluster::LeftOutNode> left_out_at_start;
  std::optional<model::Prediction> prediction;  // the model's forecast of this plan, when a model exists

  // |predicted - measured| / measured makespan; empty without a prediction.
  std::optional<double> prediction_error() const;
};

std::string format_report_table(const MultiplyReport& report);
std::string report_json(const MultiplyReport& report);  // pretty-printed
Status write_report_json(const std::string& path, const MultiplyReport& report);

}  // namespace tessera::balance::multiply
