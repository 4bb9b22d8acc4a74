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
//
// How B travels: the rows are sized as above (B sent to each node), then predict() forecasts those
// rows both ways, with B sent to each node (star) and forwarded along the nodes taking rows
// (chain, ordered by order_chain_by_links). The chain is also forecast for the fastest j nodes
// (j = 2, 4, 8, ... and all), their rows sized as if each node got B at its own link's rate (no
// uplink or coordinator capacity shared for B, which is nearly what a chain's pipeline gives it;
// the star sizing behind a thin uplink keeps only a few nodes, and every node can make the chain
// too long), stopping two lengths past the best; the soonest of these chain forecasts stands for
// the chain. request.distribution
// set: the plan takes it. Unset: it takes chain only when that forecast is at least kChainMargin
// shorter than star's (forwarding adds a hop per node, so a near tie goes to star). The warnings
// are those of the rows the plan took.
inline constexpr double kChainMargin = 0.03;

struct ModelPlanResult {
  plan::Plan plan;
  std::vector<std::string> warnings;
  // The star's rows forecast with B sent to each node, and the chain's forecast (the soonest of
  // the chains above).
  double star_makespan_s = 0.0;
  double chain_makespan_s = 0.0;
  // One line: which distribution the plan took and why, e.g. "B forwarded along a chain of 6
  // nodes: forecast 1.92 s against 3.10 s sending B to each node over the switch's 31 MB/s uplink".
  std::string distribution_reason;
};
// REQUIRES: request.node_names match model.nodes in order. request.policy and weights are ignored.
Result<ModelPlanResult> make_model_plan(const plan::PlanRequest& request, const ClusterModel& model);

// Orders a kChain plan's chain by the measured links: the fastest link to the node
// (LinkModel::to_node_bytes_per_s) first, ties in cluster order. The head takes B from the
// coordinator, and every other node from the one before it, so the fastest links in sit at the
// front. Does nothing to a star plan. REQUIRES: plan.shares match model.nodes in order.
void order_chain_by_links(plan::Plan& plan, const ClusterModel& model);

}  // namespace tessera::balance::model
