#include "tessera/balance/graphs/graph_placement.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace tessera::balance::graphs {
namespace {

// Wire bytes per shipped vertex (offset, value, delta) and per edge (its target slot), plus a ghost
// reference per ghost; values coming back are 8 bytes per owned vertex.
constexpr double kShipBytesPerVertex = 8.0 + 8.0 + 8.0;
constexpr double kShipBytesPerEdge = 4.0;
constexpr double kShipBytesPerGhost = 8.0;
constexpr double kValueBytes = 8.0;
constexpr double kDeltaBytes = 4.0 + 8.0;  // a slot and a value per remote delta on the wire

double per_second(double amount, double rate) { return rate > 0.0 ? amount / rate : 0.0; }

std::string seconds_text(double seconds) { return fmt::format("{:.3g} s", seconds); }

// The largest of a node's costs, named.
std::string dominant_cost(const GraphNodeForecast& node) {
  struct Part {
    const char* what;
    double seconds;
  };
  const Part parts[] = {{"edge updates", node.edges_s},
                        {"sending deltas", node.send_s},
                        {"receiving deltas", node.receive_s},
                        {"receiving its part", node.ship_s},
                        {"returning its values", node.gather_s}};
  const Part* largest = std::max_element(std::begin(parts), std::end(parts),
                                         [](const Part& a, const Part& b) { return a.seconds < b.seconds; });
  return fmt::format("{} ({} of its {})", largest->what, seconds_text(largest->seconds), seconds_text(node.total_s));
}

}  // namespace

double graph_part_bytes(const GraphPartShape& part) {
  return kShipBytesPerVertex * static_cast<double>(part.vertices) + kShipBytesPerEdge * static_cast<double>(part.edges) +
         kShipBytesPerGhost * static_cast<double>(part.ghosts_out);
}

double poll_gap_s(double run_s, double poll_interval_s) {
  constexpr double kGapPerRunSecond = 0.125;
  constexpr double kQuickestGap = 0.005;
  return std::min(poll_interval_s, std::max(kQuickestGap, kGapPerRunSecond * run_s));
}

GraphForecast forecast_graph_run(const std::vector<GraphNodeCosts>& costs, const GraphWorkload& workload,
                                 const GraphCandidate& candidate) {
  GraphForecast forecast;
  const double edges = static_cast<double>(std::max<int64_t>(workload.edges, 1));
  const double cut_fraction = std::clamp(static_cast<double>(candidate.cut_edges) / edges, 0.0, 1.0);
  const bool alone = candidate.nodes.size() <= 1;
  forecast.updates_per_edge = workload.updates_per_edge_alone * (alone ? 1.0 : 1.0 + workload.spread_per_cut * cut_fraction);
  const double sweeps = forecast.updates_per_edge;
  double slowest_latency_s = 0.0;
  for (std::size_t i = 0; i < candidate.nodes.size(); ++i) {
    const GraphNodeCosts& node = costs[candidate.nodes[i]];
    const GraphPartShape& part = candidate.parts[i];
    const GraphRates& rates = node.rates;
    GraphNodeForecast out;
    out.name = node.name;
    out.edge_updates = sweeps * static_cast<double>(part.edges);
    out.edges_s = per_second(out.edge_updates, node.edge_rate(alone));
    out.deltas_sent = sweeps * static_cast<double>(part.ghosts_out) * workload.delta_fraction;
    const double deltas_received = sweeps * static_cast<double>(part.ghosts_in) * workload.delta_fraction;
    // A delta costs CPU at both ends, and its bytes cross the node's own link (peers reach each
    // other through their links; on a LAN switch those are the narrow part).
    out.send_s = out.deltas_sent * rates.send_s_per_delta + sweeps * static_cast<double>(part.peers_out) * rates.send_s_per_batch +
                 per_second(kDeltaBytes * out.deltas_sent, node.from_node_bytes_per_s);
    out.receive_s = deltas_received * rates.receive_s_per_delta +
                    sweeps * static_cast<double>(part.peers_in) * rates.receive_s_per_batch +
                    per_second(kDeltaBytes * deltas_received, node.to_node_bytes_per_s);
    out.ship_s = per_second(graph_part_bytes(part), node.to_node_bytes_per_s);
    out.gather_s = per_second(kValueBytes * static_cast<double>(part.vertices), node.from_node_bytes_per_s);
    out.total_s = out.ship_s + out.edges_s + out.send_s + out.receive_s + out.gather_s;
    if (out.total_s > forecast.slowest_node_s) {
      forecast.slowest_node_s = out.total_s;
      forecast.slowest = i;
    }
    slowest_latency_s = std::max(slowest_latency_s, node.busy_latency_s);
    forecast.nodes.push_back(std::move(out));
  }
  // The switch's uplink: what the nodes behind it exchange with the coordinator and with the nodes
  // that are not behind it, all through one link.
  double uplink_rate = 0.0, set_edges = 0.0, outside_edges = 0.0;
  for (std::size_t i = 0; i < candidate.nodes.size(); ++i) {
    const double rate = costs[candidate.nodes[i]].switch_uplink_bytes_per_s;
    set_edges += static_cast<double>(candidate.parts[i].edges);
    if (rate > 0.0) uplink_rate = rate;
    else outside_edges += static_cast<double>(candidate.parts[i].edges);
  }
  if (uplink_rate > 0.0) {
    double uplink_bytes = 0.0;
    for (std::size_t i = 0; i < candidate.nodes.size(); ++i) {
      if (!(costs[candidate.nodes[i]].switch_uplink_bytes_per_s > 0.0)) continue;
      const GraphPartShape& part = candidate.parts[i];
      const double others = set_edges - static_cast<double>(part.edges);
      const double outside_share = others > 0.0 ? outside_edges / others : 0.0;
      const double deltas = forecast.nodes[i].deltas_sent + sweeps * static_cast<double>(part.ghosts_in) * workload.delta_fraction;
      uplink_bytes += graph_part_bytes(part) + kValueBytes * static_cast<double>(part.vertices) + kDeltaBytes * deltas * outside_share;
    }
    forecast.uplink_s = uplink_bytes / uplink_rate;
    forecast.slowest_node_s = std::max(forecast.slowest_node_s, forecast.uplink_s);
  }
  // The end is noticed at the first poll after it, confirmed 5 ms later, each poll a round trip to
  // the slowest-answering node. Polls start 5 ms apart and double up to the gap poll_gap_s allows
  // at the run's end; for PageRank and Katz the driver also polls where the residual's decay puts
  // the tolerance, which often notices the end sooner. This term keeps the plain schedule's three
  // quarters of a gap (an upper estimate for those): what a set's runs take beyond it is learned
  // per node set (GraphCandidate::extra_s), negative where the predicted poll did better.
  const double gap_s = poll_gap_s(forecast.slowest_node_s, workload.poll_interval_s);
  forecast.termination_s = 0.75 * gap_s + 0.005 + 2.0 * 2.0 * slowest_latency_s;
  forecast.placement_s = candidate.placement_s;
  forecast.extra_s = candidate.extra_s.value_or(alone ? workload.extra_alone_s : workload.extra_several_s);
  forecast.total_s = std::max(forecast.placement_s + forecast.slowest_node_s,
                              forecast.placement_s + forecast.slowest_node_s + forecast.extra_s + forecast.termination_s);
  return forecast;
}

std::string forecast_bound(const GraphForecast& forecast) {
  if (forecast.nodes.empty()) return "nothing";
  const GraphNodeForecast& slowest = forecast.nodes[forecast.slowest];
  if (forecast.uplink_s > slowest.total_s) {
    return fmt::format("the switch's uplink ({} of bytes, against {} for {}, the slowest node)", seconds_text(forecast.uplink_s),
                       seconds_text(slowest.total_s), slowest.name);
  }
  return fmt::format("{}'s {}", slowest.name, dominant_cost(slowest));
}

GraphNodeChoice choose_graph_nodes(const std::vector<GraphNodeCosts>& costs, const GraphWorkload& workload,
                                   const std::vector<GraphCandidate>& candidates, double margin) {
  GraphNodeChoice choice;
  for (const GraphCandidate& candidate : candidates) {
    choice.forecasts.push_back(forecast_graph_run(costs, workload, candidate));
  }
  // Smaller sets first, so that a larger one must beat the best so far by the margin.
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return candidates[a].nodes.size() < candidates[b].nodes.size(); });
  choice.chosen = order.front();
  for (std::size_t index : order) {
    const bool larger = candidates[index].nodes.size() > candidates[choice.chosen].nodes.size();
    const double bar = choice.forecasts[choice.chosen].total_s * (larger ? 1.0 - margin : 1.0);
    if (choice.forecasts[index].total_s < bar) choice.chosen = index;
  }
  const std::size_t largest = order.back();
  const GraphCandidate& chosen = candidates[choice.chosen];
  const GraphForecast& chosen_forecast = choice.forecasts[choice.chosen];
  for (std::size_t node : candidates[largest].nodes) {
    if (std::find(chosen.nodes.begin(), chosen.nodes.end(), node) != chosen.nodes.end()) continue;
    // The smallest candidate that has this node: what taking it would have cost.
    std::size_t with = largest;
    for (std::size_t index : order) {
      const std::vector<std::size_t>& set = candidates[index].nodes;
      if (std::find(set.begin(), set.end(), node) != set.end()) {
        with = index;
        break;
      }
    }
    const GraphForecast& with_forecast = choice.forecasts[with];
    const auto at = std::find(candidates[with].nodes.begin(), candidates[with].nodes.end(), node);
    const GraphNodeForecast& own = with_forecast.nodes[static_cast<std::size_t>(at - candidates[with].nodes.begin())];
    choice.left_out.push_back(fmt::format(
        "{} left out: with it ({} nodes) the run is forecast at {} against {} without; its share would cost it {} "
        "and the run would be bound by {}",
        costs[node].name, candidates[with].nodes.size(), seconds_text(with_forecast.total_s),
        seconds_text(chosen_forecast.total_s), dominant_cost(own), forecast_bound(with_forecast)));
  }
  return choice;
}

std::vector<std::size_t> nodes_by_graph_speed(const std::vector<GraphNodeCosts>& costs) {
  std::vector<std::size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const double rate_a = costs[a].rates.edge_updates_per_s, rate_b = costs[b].rates.edge_updates_per_s;
    if (rate_a != rate_b) return rate_a > rate_b;
    return costs[a].name < costs[b].name;
  });
  return order;
}

std::vector<double> graph_share_weights(const std::vector<GraphNodeCosts>& costs, const std::vector<std::size_t>& nodes) {
  std::vector<double> weights;
  bool any = false;
  for (std::size_t node : nodes) {
    weights.push_back(std::max(costs[node].rates.edge_updates_per_s, 0.0));
    any |= weights.back() > 0.0;
  }
  if (!any) std::fill(weights.begin(), weights.end(), 1.0);
  return weights;
}

}  // namespace tessera::balance::graphs
