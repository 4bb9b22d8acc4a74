// One planned, run, verified and predicted multiply on a connected cluster: the steps that
// `tessera multiply` and the experiment runner share.
//
// plan_for_policy turns a policy into a Plan (weights or the model from the profile); run_planned
// carries it out and returns the report with verification and the model's prediction. The caller
// owns the connection, the inputs and the profile. Not synchronised.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/balance/run/multiply.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/report/report.hpp"
#include "tessera/balance/run/verify.hpp"

namespace tessera::balance {

// `request` carries dimensions, panels and node names; policy and explicit weights are applied
// here. proportional without weights and model need `profile`; warnings (nodes the model
// excluded) are appended to `warnings`.
Result<Plan> plan_for_policy(Policy policy, PlanRequest request, const std::vector<double>& explicit_weights,
                             const ClusterSpec& cluster, const std::optional<ClusterProfile>& profile,
                             const std::string& profile_path, std::vector<std::string>& warnings);

struct PlannedRun {
  MultiplyReport report;
  linalg::Matrix c;
};

// Runs `plan`, verifies the product and, when the profile yields a model, predicts the plan.
Result<PlannedRun> run_planned(ClusterConnection& connection, const ClusterSpec& cluster, const Plan& plan,
                               const linalg::Matrix& a, const linalg::Matrix& b, const std::optional<ClusterProfile>& profile,
                               const std::string& profile_path, VerifyMode verify_mode, uint64_t verify_seed,
                               const MultiplyHooks& hooks = {});

}  // namespace tessera::balance
