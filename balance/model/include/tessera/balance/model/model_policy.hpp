// The `model` policy: a static plan whose rows are sized so that the finish times replay.hpp
// forecasts are as equal as integer rows allow. Pure function of values; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "tessera/balance/model/cluster_model.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::model {

// The `model` policy: rows chosen so that predicted finish times are as equal as the integer rows
// allow. Bisection on the common finish time T: each node takes the most rows it can finish by T
// (itself found by bisection, since a node's finish time grows with its rows); the smallest T at
// which the nodes together take all m rows wins. A node that is not worth its fixed cost (e.g. a
// slow link that must carry all of B before its first row pays off) gets 0 rows. Nodes with zero
// speed or zero bandwidth are excluded and named in `warnings`. The rows are sized with each
// node's receive charge and availability (CpuModel). When nodes share the coordinator's host, the
// rows are sized again (twice) with each node's compute at the share of its cores predict() says
// the previous plan left it, and the plan predict() forecasts soonest is kept.
// Sizing assumes every node receiving at once shares the coordinator (and the switch's uplink), so
// with many nodes each one's share of the link can be too thin for any to pay: the fastest j
// nodes alone (by speed at the problem's size, j = 1, 2, ...) are sized too, and a set that
// predict() forecasts more than 2% sooner than every node together is planned instead; the others
// get 0 rows and a warning that says what taking them would have cost.
struct ModelPlanResult {
  plan::Plan plan;
  std::vector<std::string> warnings;
};
// REQUIRES: request.node_names match model.nodes in order. request.policy and weights are ignored.
Result<ModelPlanResult> make_model_plan(const plan::PlanRequest& request, const ClusterModel& model);

}  // namespace tessera::balance::model
