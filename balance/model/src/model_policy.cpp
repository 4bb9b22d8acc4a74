// The model policy: make_model_plan() sizes each node's rows so that the forecast finish times
// (the fluid replay of fluid_replay.hpp) are as equal as integer rows allow; model_policy.hpp
// says how.
#include "tessera/balance/model/model_policy.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fluid_replay.hpp"
#include "fair_share.hpp"
#include "tessera/balance/model/host_sharing.hpp"
#include "tessera/balance/model/replay.hpp"

namespace tessera::balance::model {

namespace {

using namespace detail;

// The outer bisection stops when the bracket on the common finish time is this tight; at 1e-6
// the rows the two ends give differ by about m * 1e-6 per node, i.e. by none for realistic m.
constexpr double kFinishTimeTolerance = 1e-6;
constexpr int kMaxBisectionSteps = 60;

// One node's predicted finish as a function of its rows, alone on a link capped at its fair
// share of the coordinator.
class SoloFinish {
 public:
  SoloFinish(const NodeModel& node, double to_node_cap, const SimShape& shape) : shape_(shape) {
    sim_.speed = &node.speed;
    sim_.cpu = node.cpu;
    sim_.latency_s = node.link.latency_s;
    sim_.to_node_bytes_per_s = to_node_cap;
    sim_.from_node_bytes_per_s = node.link.from_node_bytes_per_s;
  }

  double operator()(uint64_t rows) const {
    if (rows == 0) return 0.0;
    SimNode node = sim_;
    node.rows = rows;
    return simulate(std::span<const SimNode>(&node, 1), shape_, SimLinks{}).finish.front();
  }

  // The largest r in [known_ok, known_too_many) with finish(r) <= deadline, given
  // finish(known_ok) <= deadline and finish(known_too_many) > deadline (or known_too_many = m + 1).
  // Assumes finish grows with rows (it does while a GEMM's rate grows more slowly than its size
  // cubed, i.e. for every measured curve); if it did not, the result would still be feasible.
  uint64_t max_rows_by(double deadline, uint64_t known_ok, uint64_t known_too_many) const {
    while (known_too_many - known_ok > 1) {
      const uint64_t mid = known_ok + (known_too_many - known_ok) / 2;
      if ((*this)(mid) <= deadline) {
        known_ok = mid;
      } else {
        known_too_many = mid;
      }
    }
    return known_ok;
  }

 private:
  SimNode sim_;
  SimShape shape_;
};

// What a plan says of a node that cannot take rows at all (excluded_reason).
std::string excluded_warning(const NodeModel& node, const std::string& reason) {
  return fmt::format("node '{}' gets no rows: {}", node.name, reason);
}

// Each node's finish time is modelled alone, with its link capped at its max-min fair share of
// the coordinator as if every usable node were receiving at once, and its compute at its CpuModel
// availability. That is pessimistic when nodes stop receiving at different times (the survivors
// then get more) and when a node ends up with 0 rows, but it makes every node's finish a function
// of its own rows only, which is what lets the common finish time be found by bisection.
// predict() of the resulting plan simulates the true sharing.
Result<ModelPlanResult> size_rows_by_finish_time(const plan::PlanRequest& request, const ClusterModel& model) {
  TESSERA_RETURN_IF_ERROR(plan::check_plan_request(request));
  TESSERA_RETURN_IF_ERROR(plan::check_layout(plan::Policy::kModel, request.layout));
  if (request.node_names.size() != model.nodes.size()) {
    return invalid_argument(fmt::format("{} node names given but the performance model has {} nodes",
                                        request.node_names.size(), model.nodes.size()));
  }
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    if (request.node_names[i] != model.nodes[i].name) {
      return invalid_argument(fmt::format("node {} is '{}' in the request but '{}' in the performance model", i,
                                          request.node_names[i], model.nodes[i].name));
    }
  }

  ModelPlanResult result;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    const std::string reason = excluded_reason(model.nodes[i]);
    if (reason.empty()) {
      usable.push_back(i);
    } else {
      result.warnings.push_back(excluded_warning(model.nodes[i], reason));
    }
  }
  if (usable.empty()) {
    return invalid_argument(fmt::format("no node can take rows: {}", fmt::join(result.warnings, "; ")));
  }

  SimShape shape;
  shape.n = request.n;
  shape.k = request.k;
  shape.panel_width = std::min(request.panel_width, request.k);
  shape.panels_in_flight = request.panels_in_flight;

  std::vector<double> link_caps;
  for (std::size_t i : usable) link_caps.push_back(model.nodes[i].link.to_node_bytes_per_s);
  std::vector<bool> link_behind;
  const std::vector<bool> behind = behind_switch_of(model);
  for (std::size_t i : usable) link_behind.push_back(behind[i]);
  const std::vector<double> fair_caps =
      shared_transfer_rates(link_caps, link_behind, model.switch_uplink_bytes_per_s, model.coordinator_send_bytes_per_s);
  std::vector<SoloFinish> solo;
  for (std::size_t u = 0; u < usable.size(); ++u) solo.emplace_back(model.nodes[usable[u]], fair_caps[u], shape);

  const uint64_t m = request.m;
  // Any single node doing everything is a feasible plan, so the best of those bounds T above.
  std::vector<double> alone(solo.size());
  for (std::size_t u = 0; u < solo.size(); ++u) alone[u] = solo[u](m);
  double hi = *std::min_element(alone.begin(), alone.end());
  if (std::isinf(hi)) {
    return invalid_argument("the performance model predicts that no node ever finishes; check the speed curves");
  }
  double lo = 0.0;
  // rows_lo[u] fit by `lo` (sum < m), rows_hi[u] fit by `hi` (sum >= m), and one row more does not.
  std::vector<uint64_t> rows_lo(usable.size(), 0);
  std::vector<uint64_t> rows_hi(usable.size());
  for (std::size_t u = 0; u < usable.size(); ++u) {
    // Checked directly so that sum(rows_hi) >= m holds even for a curve steep enough to make a
    // node's finish time dip somewhere as its rows grow.
    rows_hi[u] = alone[u] <= hi ? m : solo[u].max_rows_by(hi, 0, m + 1);
  }

  for (int step = 0; step < kMaxBisectionSteps && hi - lo > kFinishTimeTolerance * hi; ++step) {
    const double mid = lo + (hi - lo) / 2;
    std::vector<uint64_t> rows_mid(usable.size());
    uint64_t total = 0;
    for (std::size_t u = 0; u < usable.size(); ++u) {
      rows_mid[u] = solo[u].max_rows_by(mid, rows_lo[u], rows_hi[u] + 1);
      total += rows_mid[u];
    }
    if (total >= m) {
      hi = mid;
      rows_hi = std::move(rows_mid);
    } else {
      lo = mid;
      rows_lo = std::move(rows_mid);
    }
  }

  // The rows `lo` leaves over go one at a time to whichever node would finish its next row
  // soonest, among those that can take it by `hi`: the plan then finishes by hi.
  std::vector<uint64_t> rows = rows_lo;
  uint64_t assigned = std::accumulate(rows.begin(), rows.end(), uint64_t{0});
  std::vector<double> next_row_finish(usable.size(), kInfinity);
  for (std::size_t u = 0; u < usable.size(); ++u) {
    if (rows[u] < rows_hi[u]) next_row_finish[u] = solo[u](rows[u] + 1);
  }
  while (assigned < m) {
    const auto best = std::min_element(next_row_finish.begin(), next_row_finish.end());
    const std::size_t u = static_cast<std::size_t>(best - next_row_finish.begin());
    if (rows[u] >= rows_hi[u]) return internal_error("the model plan's bisection lost rows");
    ++rows[u];
    ++assigned;
    next_row_finish[u] = rows[u] < rows_hi[u] ? solo[u](rows[u] + 1) : kInfinity;
  }
  // A usable node left without rows is one whose first row would finish after everyone else is
  // done (typically: its link must first carry all of B); say so rather than drop it silently.
  double planned_finish = 0.0;
  for (std::size_t u = 0; u < usable.size(); ++u) {
    if (rows[u] > 0) planned_finish = std::max(planned_finish, solo[u](rows[u]));
  }
  for (std::size_t u = 0; u < usable.size(); ++u) {
    if (rows[u] > 0) continue;
    const NodeModel& node = model.nodes[usable[u]];
    const double b_bytes = 8.0 * static_cast<double>(request.n) * static_cast<double>(request.k);
    const bool b_alone_too_slow = b_bytes / node.link.to_node_bytes_per_s >= planned_finish;
    result.warnings.push_back(fmt::format(
        "node '{}' gets no rows: even one row would finish at {:.3f} s, no sooner than the plan ends at {:.3f} s{}",
        node.name, solo[u](1), planned_finish,
        b_alone_too_slow ? fmt::format(" (its link must first carry B, {:.1f} MB at {:.1f} MB/s)", b_bytes / 1e6,
                                       node.link.to_node_bytes_per_s / 1e6)
                         : ""));
  }

  plan::Plan& plan = result.plan;
  plan.policy = plan::Policy::kModel;
  plan.m = m;
  plan.n = request.n;
  plan.k = request.k;
  plan.panel_width = shape.panel_width;
  plan.panels_in_flight = request.panels_in_flight;
  plan.refill_threshold = request.refill_threshold;
  std::vector<uint64_t> node_rows(model.nodes.size(), 0);
  for (std::size_t u = 0; u < usable.size(); ++u) node_rows[usable[u]] = rows[u];
  uint64_t begin = 0;
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    const double weight = static_cast<double>(node_rows[i]) / static_cast<double>(m);
    plan.shares.push_back({request.node_names[i], weight, partition::RowBlock{begin, node_rows[i]}, {}});
    begin += node_rows[i];
  }
  return result;
}

// The rows sized for `subset` (indices into model.nodes, ascending) alone, as a plan over every
// node (the others with 0 rows).
Result<ModelPlanResult> size_rows_for_nodes(const plan::PlanRequest& request, const ClusterModel& model,
                                            const std::vector<std::size_t>& subset) {
  plan::PlanRequest sub_request = request;
  sub_request.node_names.clear();
  for (std::size_t node : subset) sub_request.node_names.push_back(request.node_names[node]);
  Result<ModelPlanResult> sized = size_rows_by_finish_time(sub_request, model_of_nodes(model, subset));
  if (!sized) return sized;
  ModelPlanResult whole = *sized;
  whole.plan.shares.clear();
  uint64_t begin = 0;
  for (std::size_t i = 0, s = 0; i < model.nodes.size(); ++i) {
    const bool taken = s < subset.size() && subset[s] == i;
    const uint64_t rows = taken ? sized->plan.shares[s++].rows.count : 0;
    whole.plan.shares.push_back({request.node_names[i], static_cast<double>(rows) / static_cast<double>(request.m),
                                 partition::RowBlock{begin, rows}, {}});
    begin += rows;
  }
  return whole;
}

// The nodes that can take rows, fastest first at the request's square-equivalent size (ties in
// cluster order), and what every plan says of the others (excluded_warning).
struct UsableNodes {
  std::vector<std::size_t> fastest_first;
  std::vector<std::string> excluded;
};
UsableNodes usable_fastest_first(const plan::PlanRequest& request, const ClusterModel& model) {
  UsableNodes usable;
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    const std::string reason = excluded_reason(model.nodes[i]);
    if (reason.empty()) {
      usable.fastest_first.push_back(i);
    } else {
      usable.excluded.push_back(excluded_warning(model.nodes[i], reason));
    }
  }
  const double size = square_equivalent_size(static_cast<double>(request.m), static_cast<double>(request.n),
                                             static_cast<double>(request.k));
  std::stable_sort(usable.fastest_first.begin(), usable.fastest_first.end(), [&](std::size_t a, std::size_t b) {
    return model.nodes[a].speed.gflops_at(size) > model.nodes[b].speed.gflops_at(size);
  });
  return usable;
}

// The first `count` of `order`, ascending (as size_rows_for_nodes takes them).
std::vector<std::size_t> first_nodes(const std::vector<std::size_t>& order, std::size_t count) {
  std::vector<std::size_t> subset(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count));
  std::sort(subset.begin(), subset.end());
  return subset;
}

// The rows sized for the fastest j nodes alone (j = 1, 2, ...), as plans over every node (the
// others with 0 rows, so they receive nothing), when one is forecast more than kSubsetMargin sooner
// than `all`; else `all`. Sizing every node at once assumes they all receive at once: behind a
// shared uplink each gets a thin slice, and the sizing can leave out every node but one although a
// few together would finish sooner. The search stops once sets four past the best so far have not
// beaten it (the forecast falls, then rises, as nodes are added).
Result<ModelPlanResult> best_node_set(const plan::PlanRequest& request, const ClusterModel& model, ModelPlanResult all) {
  constexpr double kSubsetMargin = 0.02;
  constexpr std::size_t kPastBest = 4;
  if (model.nodes.size() < 2) return all;
  const UsableNodes usable = usable_fastest_first(request, model);
  const std::vector<std::size_t>& order = usable.fastest_first;
  const double all_makespan = predict(model, all.plan).makespan_s;
  std::optional<ModelPlanResult> best;
  double best_makespan = all_makespan;
  std::size_t best_count = 0;
  for (std::size_t count = 1; count < order.size() && (best_count == 0 || count <= best_count + kPastBest); ++count) {
    Result<ModelPlanResult> whole = size_rows_for_nodes(request, model, first_nodes(order, count));
    if (!whole) continue;
    const double makespan = predict(model, whole->plan).makespan_s;
    if (makespan < (best ? best_makespan : all_makespan * (1.0 - kSubsetMargin))) {
      best_makespan = makespan;
      best_count = count;
      best = std::move(*whole);
    }
  }
  if (!best) return all;
  for (std::size_t i = best_count; i < order.size(); ++i) {
    best->warnings.push_back(fmt::format(
        "node '{}' gets no rows: sized for every node at once the forecast is {:.3f} s, for the fastest {} alone {:.3f} s "
        "(nodes that receive at once share the coordinator's links{})",
        model.nodes[order[i]].name, all_makespan, best_count, best_makespan,
        model.switch_uplink_bytes_per_s > 0.0 ? " and the switch's uplink" : ""));
  }
  best->warnings.insert(best->warnings.end(), usable.excluded.begin(), usable.excluded.end());
  return std::move(*best);
}

// Where B's bytes from the coordinator go in a star: through the switch's uplink when a node taking
// rows is behind it, else over the coordinator's link.
std::string star_route(const ClusterModel& model, const plan::Plan& plan) {
  const std::vector<bool> behind = behind_switch_of(model);
  for (std::size_t i = 0; i < plan.shares.size() && i < behind.size(); ++i) {
    if (plan.shares[i].rows.count > 0 && behind[i]) {
      return fmt::format(" over the switch's {:.0f} MB/s uplink", model.switch_uplink_bytes_per_s / 1e6);
    }
  }
  if (model.coordinator_send_bytes_per_s > 0.0) {
    return fmt::format(" over the coordinator's {:.0f} MB/s link", model.coordinator_send_bytes_per_s / 1e6);
  }
  return " from the coordinator";
}

// `rows`' plan as a chain ordered by the links, with its forecast.
Result<std::pair<plan::Plan, double>> chain_of(const plan::Plan& rows, const ClusterModel& model) {
  plan::Plan chain = rows;
  TESSERA_RETURN_IF_ERROR(plan::set_chain(chain));
  order_chain_by_links(chain, model);
  const double makespan = predict(model, chain).makespan_s;
  return std::pair<plan::Plan, double>{std::move(chain), makespan};
}

// A chain candidate: its plan, forecast and warnings.
struct ChainCandidate {
  plan::Plan plan;
  double makespan_s = kInfinity;
  std::vector<std::string> warnings;
};

// The chain of the fastest j nodes (j = 2, 4, 8, ... and all the usable ones), each with rows
// sized as if every node got B at its own link's rate (no uplink or coordinator capacity shared
// for B: nearly what a chain's pipeline gives a node), forecast as a chain by `model`; the
// soonest, if sooner than `best`. Sizing for the star keeps few nodes behind a thin uplink, and
// sizing every node for the chain can make it too long (each node adds a hop, and the credits
// span the whole chain), so a few lengths are tried; the search stops two lengths past the best.
void search_chain_lengths(const plan::PlanRequest& request, const ClusterModel& model, ChainCandidate& best) {
  ClusterModel own_links = model;
  own_links.switch_uplink_bytes_per_s = 0.0;
  own_links.coordinator_send_bytes_per_s = 0.0;
  const UsableNodes usable = usable_fastest_first(request, model);
  const std::vector<std::size_t>& order = usable.fastest_first;
  std::vector<std::size_t> lengths;
  for (std::size_t length = 2; length < order.size(); length *= 2) lengths.push_back(length);
  if (order.size() >= 2) lengths.push_back(order.size());
  std::size_t best_length = 0, since_best = 0;
  for (std::size_t length : lengths) {
    if (best_length > 0 && since_best >= 2) break;
    Result<ModelPlanResult> sized = size_rows_for_nodes(request, own_links, first_nodes(order, length));
    if (!sized) continue;
    Result<std::pair<plan::Plan, double>> chained = chain_of(sized->plan, model);
    if (!chained) continue;
    if (chained->second < best.makespan_s) {
      best.plan = std::move(chained->first);
      best.makespan_s = chained->second;
      best.warnings = std::move(sized->warnings);
      best_length = length;
      since_best = 0;
    } else {
      ++since_best;
    }
  }
  if (best_length == 0) return;
  if (best_length < order.size()) {
    // One line for all of them: a lab of 64 would otherwise print the same sentence 48 times.
    std::vector<std::string> names;
    for (std::size_t i = best_length; i < order.size(); ++i) names.push_back("'" + model.nodes[order[i]].name + "'");
    const std::string who =
        names.size() == 1 ? "node " + names.front()
        : names.size() <= 4
            ? fmt::format("nodes {}", fmt::join(names, ", "))
            : fmt::format("{} nodes ({}, {}, ..., {})", names.size(), names[0], names[1], names.back());
    best.warnings.push_back(fmt::format(
        "{} get{} no rows: B forwarded along the fastest {} nodes alone is forecast {:.3f} s, along more no sooner "
        "(each node adds a hop, and panels on their way count against the credits)",
        who, names.size() == 1 ? "s" : "", best_length, best.makespan_s));
  }
  best.warnings.insert(best.warnings.end(), usable.excluded.begin(), usable.excluded.end());
}

// Forecasts both ways and sets the plan's distribution: the one asked for, or, unasked, chain
// when its forecast is at least kChainMargin shorter (model_policy.hpp). The chain is the soonest
// of the star's rows forwarded and the lengths search_chain_lengths tries.
Status choose_distribution(const plan::PlanRequest& request, const ClusterModel& model, ModelPlanResult& result) {
  plan::Plan star = result.plan;
  star.distribution = plan::Distribution::kStar;
  star.chain.clear();
  Result<std::pair<plan::Plan, double>> star_rows_chained = chain_of(star, model);
  if (!star_rows_chained) return star_rows_chained.status();
  ChainCandidate best_chain{std::move(star_rows_chained->first), star_rows_chained->second, result.warnings};
  search_chain_lengths(request, model, best_chain);
  plan::Plan chain = std::move(best_chain.plan);
  result.chain_makespan_s = best_chain.makespan_s;
  std::vector<std::string> chain_warnings = std::move(best_chain.warnings);
  result.star_makespan_s = predict(model, star).makespan_s;
  const double star_s = result.star_makespan_s, chain_s = result.chain_makespan_s;
  const std::size_t links = chain.chain.size();
  const std::string route = star_route(model, star);
  if (request.distribution) {
    const bool chained = *request.distribution == plan::Distribution::kChain;
    result.plan = chained ? std::move(chain) : std::move(star);
    if (chained) result.warnings = std::move(chain_warnings);
    result.distribution_reason =
        chained ? fmt::format("B forwarded along a chain of {} nodes, as asked: forecast {:.2f} s (sending B to each node{}: {:.2f} s)",
                              links, chain_s, route, star_s)
                : fmt::format("B sent to each node{}, as asked: forecast {:.2f} s (forwarded along a chain of {} nodes: {:.2f} s)",
                              route, star_s, links, chain_s);
    return Status::ok();
  }
  if (chain_s <= star_s * (1.0 - kChainMargin)) {
    result.plan = std::move(chain);
    result.warnings = std::move(chain_warnings);
    result.distribution_reason = fmt::format("B forwarded along a chain of {} nodes: forecast {:.2f} s against {:.2f} s sending B to each node{}",
                                             links, chain_s, star_s, route);
    return Status::ok();
  }
  result.plan = std::move(star);
  result.distribution_reason =
      links < 2 ? fmt::format("B sent{} to the one node taking rows: forecast {:.2f} s (no chain to forward along)", route, star_s)
                : fmt::format("B sent to each node{}: forecast {:.2f} s against {:.2f} s forwarding it along a chain of {} nodes "
                              "(a chain is taken when its forecast is at least {:.0f}% shorter)",
                              route, star_s, chain_s, links, 100.0 * kChainMargin);
  return Status::ok();
}

// The model policy's rows with B sent to each node: sized, the best set of nodes, and (on the
// coordinator's shared host) sized again with the shares of cores the forecasts leave.
Result<ModelPlanResult> size_star_plan(const plan::PlanRequest& request, const ClusterModel& model) {
  Result<ModelPlanResult> sized = size_rows_by_finish_time(request, model);
  if (sized && request.layout == partition::Layout::kRows) sized = best_node_set(request, model, std::move(*sized));
  if (!sized || !(coordinator_host(model).cores > 0.0)) return sized;
  // Nodes on the coordinator's host lose cores to each other and to the coordinator while it
  // moves bytes, by amounts that depend on the whole plan. Each pass sizes the rows again with
  // every node's compute at the share of its cores the last plan left it (predict's host_share),
  // and the plan whose forecast, sharing simulated, ends soonest is kept: never one the model
  // thinks worse than the plan sized without sharing.
  ModelPlanResult best = std::move(*sized);
  Prediction last = predict(model, best.plan);
  double best_makespan = last.makespan_s;
  for (int pass = 0; pass < kHostSharingPasses; ++pass) {
    Result<ModelPlanResult> candidate = size_rows_by_finish_time(request, with_host_shares(model, last.host_share));
    if (!candidate) break;
    last = predict(model, candidate->plan);
    if (last.makespan_s < best_makespan) {
      best_makespan = last.makespan_s;
      best = std::move(*candidate);
    }
  }
  return best;
}

}  // namespace

Result<ModelPlanResult> make_model_plan(const plan::PlanRequest& request, const ClusterModel& model) {
  // The rows are sized for a star: sizing them for a chain would need each node's finish as a
  // function of every earlier node's rows, which the bisection cannot take; the chain forecast of
  // the same rows decides whether forwarding pays.
  Result<ModelPlanResult> sized = size_star_plan(request, model);
  if (!sized) return sized;
  TESSERA_RETURN_IF_ERROR(choose_distribution(request, model, *sized));
  return sized;
}

void order_chain_by_links(plan::Plan& plan, const ClusterModel& model) {
  if (plan.distribution != plan::Distribution::kChain) return;
  const auto to_node = [&](uint32_t node) {
    return node < model.nodes.size() ? model.nodes[node].link.to_node_bytes_per_s : 0.0;
  };
  std::sort(plan.chain.begin(), plan.chain.end(), [&](uint32_t a, uint32_t b) {
    return to_node(a) != to_node(b) ? to_node(a) > to_node(b) : a < b;
  });
}

}  // namespace tessera::balance::model
