#include "tessera/balance/graphs/graph_report.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "tessera/graph/algorithm.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::balance::graphs {
namespace {

using json = nlohmann::json;
namespace tg = tessera::graph;
namespace tp = tessera::partition;

json placement_json(const PlacementSummary& placement) {
  json parts = json::array();
  for (std::size_t part = 0; part < placement.nodes.size(); ++part) {
    parts.push_back({{"node", placement.nodes[part]},
                     {"target_share", placement.target_share[part]},
                     {"vertices", placement.vertices[part]},
                     {"edges", placement.edges[part]},
                     {"weight", placement.quality.parts[part].weight}});
  }
  return {{"edge_cut", placement.quality.edge_cut},
          {"comm_volume", placement.quality.comm_volume},
          {"imbalance", placement.quality.imbalance},
          {"max_target_deviation", placement.quality.max_target_deviation},
          {"total_weight", placement.quality.total_weight},
          {"note", placement.note},
          {"parts", std::move(parts)}};
}

json forecast_json(const graphs::GraphForecast& forecast) {
  json nodes = json::array();
  for (const graphs::GraphNodeForecast& node : forecast.nodes) {
    nodes.push_back({{"name", node.name}, {"total_s", node.total_s}, {"ship_s", node.ship_s}, {"edges_s", node.edges_s},
                     {"send_s", node.send_s}, {"receive_s", node.receive_s}, {"gather_s", node.gather_s},
                     {"edge_updates", node.edge_updates}, {"deltas_sent", node.deltas_sent}});
  }
  return {{"total_s", forecast.total_s}, {"placement_s", forecast.placement_s},
          {"slowest_node_s", forecast.slowest_node_s}, {"uplink_s", forecast.uplink_s}, {"termination_s", forecast.termination_s},
          {"updates_per_edge", forecast.updates_per_edge}, {"nodes", std::move(nodes)}};
}

json choice_json(const NodeChoiceRecord& choice) {
  json candidates = json::array();
  for (const auto& [names, seconds] : choice.candidates) candidates.push_back({{"nodes", names}, {"forecast_s", seconds}});
  return {{"mode", choice.mode},
          {"taking_part", choice.taking_part},
          {"left_out", choice.left_out},
          {"bound", choice.bound},
          {"workload", choice.workload_source},
          {"forecast", choice.forecast ? forecast_json(*choice.forecast) : json(nullptr)},
          {"candidates", std::move(candidates)}};
}

// JSON has no infinity: unreachable distances and the like are written as null.
json number_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

}  // namespace

std::string graph_report_json(const GraphReportHeader& header, const graphdata::DirectedGraph& graph, const GraphOutcome& outcome,
                              int indent) {
  json nodes = json::array();
  for (const GraphNodeFigures& node : outcome.nodes) {
    nodes.push_back({{"name", node.name},
                     {"vertices", node.vertices},
                     {"edges", node.edges},
                     {"updates", node.updates},
                     {"edge_updates", node.edge_updates},
                     {"batches_sent", node.batches_sent},
                     {"batches_received", node.batches_received},
                     {"deltas_sent", node.deltas_sent},
                     {"deltas_received", node.deltas_received},
                     {"coordinator_bytes_sent", node.coordinator_bytes_sent},
                     {"coordinator_bytes_received", node.coordinator_bytes_received},
                     {"peer_bytes_sent", node.peer_bytes_sent},
                     {"peer_bytes_received", node.peer_bytes_received},
                     {"busy_s", node.busy_s},
                     {"idle_s", node.idle_s},
                     {"memory_bytes", node.memory_bytes},
                     {"bytes_per_edge", node.bytes_per_edge()},
                     {"lost", node.lost},
                     {"left_out", node.left_out}});
  }
  json trace = json::array();
  for (const TracePoint& point : outcome.trace) {
    trace.push_back({{"time_s", point.time_s}, {"residual", point.residual}, {"edge_updates", point.edge_updates},
                     {"batches_sent", point.batches_sent}, {"batches_received", point.batches_received}});
  }
  json lost = json::array();
  for (std::size_t i = 0; i < outcome.lost_nodes.size(); ++i) {
    lost.push_back({{"node", outcome.lost_nodes[i]}, {"reason", outcome.lost_reasons[i]}});
  }
  json left_out_at_start = json::array();
  for (const cluster::LeftOutNode& node : outcome.left_out_at_start) {
    left_out_at_start.push_back({{"node", node.node}, {"reason", node.reason}});
  }
  json document = {
      {"cluster", header.cluster},
      {"graph", {{"description", graphdata::describe(graph)}, {"vertices", outcome.vertices}, {"edges", outcome.edges}}},
      {"algorithm", {{"name", tg::algorithm_name(outcome.algorithm.kind)}, {"description", tg::describe(outcome.algorithm)},
                     {"damping", outcome.algorithm.damping}, {"beta", outcome.algorithm.beta},
                     {"source", outcome.algorithm.source ? json(*outcome.algorithm.source) : json(nullptr)},
                     {"max_label", outcome.algorithm.max_label}}},
      {"mode", graph_mode_name(outcome.mode)},
      {"partition", tp::method_name(outcome.method)},
      {"weights", outcome.weights},
      {"tolerance", outcome.tolerance},
      {"placement", placement_json(outcome.placement)},
      {"final_placement", outcome.final_placement ? placement_json(*outcome.final_placement) : json(nullptr)},
      {"nodes", std::move(nodes)},
      {"choice", choice_json(outcome.choice)},
      {"placing", {{"method", outcome.placing.method}, {"cached", outcome.placing.cached},
                   {"cache_note", outcome.placing.cache_note}, {"reason", outcome.placing.reason}}},
      {"totals", {{"total_s", outcome.total_s()}, {"wall_s", outcome.wall_s}, {"placement_s", outcome.placement_s},
                  {"forecast_s", outcome.choice.forecast ? json(outcome.choice.forecast->total_s) : json(nullptr)},
                  {"edge_updates", outcome.edge_updates},
                  {"edge_updates_per_s", outcome.edge_updates_per_s}, {"residual", outcome.residual},
                  {"polls", outcome.polls}, {"poll_s", outcome.poll_s}, {"steps", outcome.steps}, {"restarts", outcome.restarts}}},
      {"lost_nodes", std::move(lost)},
      {"left_out_at_start", std::move(left_out_at_start)},
      {"trace", std::move(trace)},
  };
  if (outcome.verification) {
    const GraphVerification& verification = *outcome.verification;
    document["verification"] = {{"passed", verification.passed},
                                {"l1_error", number_or_null(verification.l1_error)},
                                {"max_error", number_or_null(verification.max_error)},
                                {"l1_bound", verification.l1_bound},
                                {"mismatches", verification.mismatches},
                                {"first_mismatch", verification.first_mismatch},
                                {"detail", verification.detail}};
  } else {
    document["verification"] = nullptr;
  }
  if (!header.input.empty()) document["graph"]["input"] = header.input;
  for (const auto& [name, value] : header.settings) document[name] = value;
  return document.dump(indent);
}


}  // namespace tessera::balance::graphs
