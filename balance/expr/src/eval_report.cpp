#include "tessera/balance/expr/eval_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace tessera::balance::expr {

namespace {

nlohmann::json cost_json(const expr::Cost& cost) {
  return {{"flops", cost.flops},
          {"products", cost.products},
          {"intermediate_bytes", cost.intermediate_bytes},
          {"moved_bytes", cost.moved_bytes}};
}

bool checked(const multiply::MultiplyReport& report) { return report.verification.mode != multiply::VerifyMode::kNone; }

double makespan_sum(const EvalOutcome& outcome) {
  double sum = 0.0;
  for (const EvalProduct& product : outcome.products) sum += product.report.run.makespan_s;
  return sum;
}

double percent_off(double predicted, double measured) {
  return measured > 0.0 ? 100.0 * (predicted - measured) / measured : 0.0;
}

std::string format_scheduled(const ScheduledEval& run, double wall_s) {
  std::string out;
  std::string candidates;
  for (const auto& [tile, seconds] : run.candidates) {
    candidates += fmt::format("{}{} {:.3f} s", candidates.empty() ? "" : ", ", tile, seconds);
  }
  out += fmt::format("schedule: {} tile tasks of {} x {}, placed by HEFT with tile caches (predicted: {})\n", run.tasks,
                     run.tile, run.tile, candidates);
  out += fmt::format("{:<12} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8}\n", "node",
                     "tasks", "share", "start pred", "start meas", "busy pred", "busy meas", "end pred", "end meas",
                     "MB to", "MB from", "MB peers");
  for (const ScheduledNode& node : run.nodes) {
    out += fmt::format(
        "{:<12} {:>6} {:>5.0f}% {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>8.1f} {:>8.1f} {:>8.1f}\n",
        node.name, node.tasks, 100.0 * node.host_share, node.predicted_start_s, node.measured_start_s,
        node.predicted_busy_s, node.measured_busy_s, node.predicted_finish_s, node.measured_finish_s,
        static_cast<double>(node.bytes_to_node) / 1e6, static_cast<double>(node.bytes_from_node) / 1e6,
        static_cast<double>(node.peer_bytes_sent) / 1e6);
  }
  out += "(share: of its profiled speed, what the schedule expects the node to keep beside the coordinator's work)\n";
  out += fmt::format("{:<12} {:>6} {:>10} {:>10}\n", "task kind", "tasks", "pred s", "meas s");
  for (const ScheduledTaskKind& kind : run.kinds) {
    out += fmt::format("{:<12} {:>6} {:>10.3f} {:>10.3f}\n", kind.kind, kind.tasks, kind.predicted_s, kind.measured_s);
  }
  out += fmt::format("makespan: {:.3f} s measured, {:.3f} s predicted ({:+.1f}%); {:.3f} s with free transfers, "
                     "{:.3f} s on the fastest node alone (theoretical speedup {:.2f})\n",
                     run.measured_makespan_s, run.predicted_makespan_s,
                     percent_off(run.predicted_makespan_s, run.measured_makespan_s), run.theoretical_makespan_s,
                     run.fastest_alone_s, run.theoretical_speedup());
  out += fmt::format("tiles moved: {:.1f} MB measured, {:.1f} MB predicted; {:.1f} MB if every intermediate came back "
                     "({:.2f} of that)\n",
                     run.measured_bytes / 1e6, run.predicted_bytes / 1e6, run.naive_bytes / 1e6,
                     run.naive_bytes > 0.0 ? run.measured_bytes / run.naive_bytes : 0.0);
  out += fmt::format("coordinator CPU: {:.3f} s measured, {:.3f} s predicted; it sent {:.1f} MB\n",
                     run.measured_coordinator_cpu_s, run.predicted_coordinator_cpu_s,
                     static_cast<double>(run.coordinator_bytes_sent) / 1e6);
  out += fmt::format("tiles between nodes: {}\n", run.tile_route == "direct" ? "worker to worker (MB peers: sent by each node)"
                                                                            : "through the coordinator");
  for (const std::string& note : run.route_notes) out += fmt::format("  {}\n", note);
  if (!run.lost_nodes.empty()) {
    out += fmt::format("lost: {}; rescheduled on the others ({} schedules run)\n", fmt::join(run.lost_nodes, ", "),
                       run.attempts);
  }
  const multiply::Verification& check = run.verification;
  out += fmt::format("verified: {}{}\n",
                     check.mode == multiply::VerifyMode::kNone ? "not checked" : (check.passed ? "yes" : "NO"),
                     check.mode == multiply::VerifyMode::kNone ? "" : fmt::format(" ({}, {}, {:.3f} s)", multiply::verify_mode_name(check.mode), check.detail, check.seconds));
  out += fmt::format("total: {:.3f} s wall\n", wall_s);
  return out;
}

nlohmann::json scheduled_json(const ScheduledEval& run) {
  using nlohmann::json;
  json candidates = json::array(), nodes = json::array(), kinds = json::array(), timeline = json::array();
  for (const auto& [tile, seconds] : run.candidates) candidates.push_back({{"tile", tile}, {"predicted_makespan_s", seconds}});
  for (const ScheduledTaskTiming& task : run.timeline) {
    timeline.push_back({{"node", task.node},
                        {"kind", task.kind},
                        {"predicted_start_s", task.predicted_start_s},
                        {"predicted_finish_s", task.predicted_finish_s},
                        {"sent_s", task.sent_s},
                        {"done_s", task.done_s}});
  }
  for (const ScheduledNode& node : run.nodes) {
    nodes.push_back({{"name", node.name},
                     {"tasks", node.tasks},
                     {"host_share", node.host_share},
                     {"predicted_start_s", node.predicted_start_s},
                     {"measured_start_s", node.measured_start_s},
                     {"predicted_busy_s", node.predicted_busy_s},
                     {"measured_busy_s", node.measured_busy_s},
                     {"predicted_finish_s", node.predicted_finish_s},
                     {"measured_finish_s", node.measured_finish_s},
                     {"bytes_to_node", node.bytes_to_node},
                     {"bytes_from_node", node.bytes_from_node},
                     {"peer_bytes_sent", node.peer_bytes_sent}});
  }
  for (const ScheduledTaskKind& kind : run.kinds) {
    kinds.push_back({{"kind", kind.kind}, {"tasks", kind.tasks}, {"predicted_s", kind.predicted_s}, {"measured_s", kind.measured_s}});
  }
  const multiply::Verification& check = run.verification;
  return {{"tile", run.tile},
          {"candidates", candidates},
          {"tasks", run.tasks},
          {"predicted_makespan_s", run.predicted_makespan_s},
          {"measured_makespan_s", run.measured_makespan_s},
          {"theoretical_makespan_s", run.theoretical_makespan_s},
          {"fastest_alone_s", run.fastest_alone_s},
          {"theoretical_speedup", run.theoretical_speedup()},
          {"predicted_bytes", run.predicted_bytes},
          {"predicted_coordinator_cpu_s", run.predicted_coordinator_cpu_s},
          {"measured_coordinator_cpu_s", run.measured_coordinator_cpu_s},
          {"measured_bytes", run.measured_bytes},
          {"naive_bytes", run.naive_bytes},
          {"nodes", nodes},
          {"kinds", kinds},
          {"timeline", timeline},
          {"lost_nodes", run.lost_nodes},
          {"attempts", run.attempts},
          {"tile_route", run.tile_route},
          {"route_notes", run.route_notes},
          {"coordinator_bytes_sent", run.coordinator_bytes_sent},
          {"verified", check.mode == multiply::VerifyMode::kNone ? json(nullptr) : json(check.passed)},
          {"verification_seconds", check.seconds}};
}

}  // namespace

std::string format_eval_table(const EvalOutcome& outcome, bool explain) {
  const expr::Cost written = expr::cost(outcome.written);
  const expr::Cost evaluated = expr::cost(outcome.evaluated);
  std::string out = fmt::format("expression: {}  ({}x{})\n", expr::to_string(outcome.written), outcome.value.rows,
                                outcome.value.cols);
  if (outcome.rewritten) {
    out += fmt::format("rewritten by cost: {} products, {:.4g} flops, {:.4g} MB moved (as written: {} products, "
                       "{:.4g} flops, {:.4g} MB)\n",
                       evaluated.products, evaluated.flops, evaluated.moved_bytes / 1e6, written.products,
                       written.flops, written.moved_bytes / 1e6);
  }
  if (explain) out += expr::explain(outcome.written, outcome.evaluated);
  if (outcome.scheduled) return out + format_scheduled(*outcome.scheduled, outcome.seconds);
  out += fmt::format("{:<8} {:<26} {:<13} {:>11} {:>9}\n", "product", "shape", "policy", "makespan s", "verified");
  for (std::size_t i = 0; i < outcome.products.size(); ++i) {
    const multiply::MultiplyReport& report = outcome.products[i].report;
    const plan::Plan& plan = report.plan;
    out += fmt::format("{:<8} {:<26} {:<13} {:>11.3f} {:>9}\n", i + 1,
                       fmt::format("{}x{} by {}x{}", plan.m, plan.k, plan.k, plan.n), plan::policy_name(plan.policy),
                       report.run.makespan_s, checked(report) ? (report.verification.passed ? "true" : "false") : "-");
  }
  out += fmt::format("total: {} product{} on the cluster, {:.3f} s of makespan, {:.3f} s wall\n",
                     outcome.products.size(), outcome.products.size() == 1 ? "" : "s", makespan_sum(outcome),
                     outcome.seconds);
  return out;
}

std::string eval_report_json(const EvalOutcome& outcome) {
  using nlohmann::json;
  json products = json::array();
  for (const EvalProduct& product : outcome.products) {
    const multiply::MultiplyReport& report = product.report;
    products.push_back({{"m", report.plan.m},
                        {"n", report.plan.n},
                        {"k", report.plan.k},
                        {"policy", std::string(plan::policy_name(report.plan.policy))},
                        {"makespan_s", report.run.makespan_s},
                        {"predicted_makespan_s", report.prediction ? json(report.prediction->makespan_s) : json(nullptr)},
                        {"verified", checked(report) ? json(report.verification.passed) : json(nullptr)}});
  }
  json left_out = json::array();
  for (const cluster::LeftOutNode& node : outcome.left_out_at_start) {
    left_out.push_back({{"node", node.node}, {"reason", node.reason}});
  }
  const json document = {{"expression", expr::to_string(outcome.written)},
                         {"rewritten", outcome.rewritten},
                         {"rows", outcome.value.rows},
                         {"cols", outcome.value.cols},
                         {"cost_as_written", cost_json(expr::cost(outcome.written))},
                         {"cost_evaluated", cost_json(expr::cost(outcome.evaluated))},
                         {"products", products},
                         {"makespan_sum_s", makespan_sum(outcome)},
                         {"mode", outcome.scheduled ? "scheduled" : "sequence"},
                         {"scheduled", outcome.scheduled ? scheduled_json(*outcome.scheduled) : nlohmann::json(nullptr)},
                         {"left_out_at_start", left_out},
                         {"wall_s", outcome.seconds}};
  return document.dump(2);
}

}  // namespace tessera::balance::expr
