#include "tessera/balance/session/multiply_session.hpp"

#include <fmt/format.h>

#include "tessera/balance/model/model.hpp"

namespace tessera::balance {

Result<Plan> plan_for_policy(Policy policy, PlanRequest request, const std::vector<double>& explicit_weights,
                             const ClusterSpec& cluster, const std::optional<ClusterProfile>& profile,
                             const std::string& profile_path, std::vector<std::string>& warnings) {
  request.policy = policy;
  if (policy == Policy::kModel) {
    if (!profile) return not_found(fmt::format("the model policy needs a profile; run `tessera profile {}`",
                                               cluster.source_path));
    Result<ClusterModel> model = profile_model(*profile, cluster, profile_path);
    if (!model) return model.status();
    Result<ModelPlanResult> made = make_model_plan(request, *model);
    if (!made) return made.status();
    warnings.insert(warnings.end(), made->warnings.begin(), made->warnings.end());
    return std::move(made->plan);
  }
  if (policy == Policy::kProportional) {
    if (!explicit_weights.empty()) {
      request.weights = explicit_weights;
    } else {
      if (!profile) return not_found(fmt::format("the proportional policy needs weights or a profile; run "
                                                 "`tessera profile {}`", cluster.source_path));
      Result<std::vector<double>> weights = profile_weights(*profile, cluster, profile_path);
      if (!weights) return weights.status();
      request.weights = std::move(*weights);
    }
  }
  return make_plan(request);
}

Result<PlannedRun> run_planned(ClusterConnection& connection, const ClusterSpec& cluster, const Plan& plan,
                               const linalg::Matrix& a, const linalg::Matrix& b, const std::optional<ClusterProfile>& profile,
                               const std::string& profile_path, VerifyMode verify_mode, uint64_t verify_seed,
                               const MultiplyHooks& hooks) {
  PlannedRun outcome;
  Result<MultiplyRun> run = run_multiply(connection, plan, a, b, outcome.c, hooks);
  if (!run) return run.status();
  MultiplyReport& report = outcome.report;
  report.cluster = cluster.name;
  report.plan = plan;
  report.run = std::move(*run);
  report.nodes = cluster.nodes;
  // The simulator replays row strips; 2D/3D runs go without a forecast.
  if (profile && plan.layout == partition::Layout::kRows) {
    if (Result<ClusterModel> model = profile_model(*profile, cluster, profile_path)) {
      if (plan.policy != Policy::kDynamic) {
        report.prediction = predict(*model, plan);
      } else {
        // A dynamic run fixes no rows in advance; the model's forecast for it is the balanced
        // optimum it aims at: the model policy's plan for the same problem.
        PlanRequest request;
        request.m = plan.m;
        request.n = plan.n;
        request.k = plan.k;
        request.panel_width = plan.panel_width;
        request.panels_in_flight = plan.panels_in_flight;
        for (const NodeShare& share : plan.shares) request.node_names.push_back(share.node_name);
        if (Result<ModelPlanResult> optimum = make_model_plan(request, *model)) {
          report.prediction = predict(*model, optimum->plan);
        }
      }
    }
  }
  report.verification = verify_product(a, b, outcome.c, verify_mode, verify_seed);
  return outcome;
}

}  // namespace tessera::balance
