#include "tessera/balance/report/eval_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessera::balance {

namespace {

nlohmann::json cost_json(const expr::Cost& cost) {
  return {{"flops", cost.flops},
          {"products", cost.products},
          {"intermediate_bytes", cost.intermediate_bytes},
          {"moved_bytes", cost.moved_bytes}};
}

bool checked(const MultiplyReport& report) { return report.verification.mode != VerifyMode::kNone; }

double makespan_sum(const EvalOutcome& outcome) {
  double sum = 0.0;
  for (const EvalProduct& product : outcome.products) sum += product.report.run.makespan_s;
  return sum;
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
  out += fmt::format("{:<8} {:<26} {:<13} {:>11} {:>9}\n", "product", "shape", "policy", "makespan s", "verified");
  for (std::size_t i = 0; i < outcome.products.size(); ++i) {
    const MultiplyReport& report = outcome.products[i].report;
    const Plan& plan = report.plan;
    out += fmt::format("{:<8} {:<26} {:<13} {:>11.3f} {:>9}\n", i + 1,
                       fmt::format("{}x{} by {}x{}", plan.m, plan.k, plan.k, plan.n), policy_name(plan.policy),
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
    const MultiplyReport& report = product.report;
    products.push_back({{"m", report.plan.m},
                        {"n", report.plan.n},
                        {"k", report.plan.k},
                        {"policy", std::string(policy_name(report.plan.policy))},
                        {"makespan_s", report.run.makespan_s},
                        {"predicted_makespan_s", report.prediction ? json(report.prediction->makespan_s) : json(nullptr)},
                        {"verified", checked(report) ? json(report.verification.passed) : json(nullptr)}});
  }
  const json document = {{"expression", expr::to_string(outcome.written)},
                         {"rewritten", outcome.rewritten},
                         {"rows", outcome.value.rows},
                         {"cols", outcome.value.cols},
                         {"cost_as_written", cost_json(expr::cost(outcome.written))},
                         {"cost_evaluated", cost_json(expr::cost(outcome.evaluated))},
                         {"products", products},
                         {"makespan_sum_s", makespan_sum(outcome)},
                         {"wall_s", outcome.seconds}};
  return document.dump(2);
}

}  // namespace tessera::balance
