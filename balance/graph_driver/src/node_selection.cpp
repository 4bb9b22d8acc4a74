#include "node_selection.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "tessera/core/strings.hpp"

namespace tessera::balance::graph_driver {

PlacementShape placement_shape(const partition::DirectedGraph& graph, std::span<const int32_t> part_of, uint32_t parts) {
  PlacementShape shape;
  shape.parts.resize(parts);
  // last_seen[v] = the part whose scan last counted v as its ghost (+1; 0: none yet); vertices
  // are scanned part by part, so each (part, ghost) pair is counted once.
  std::vector<uint32_t> last_seen(static_cast<std::size_t>(graph.vertex_count), 0);
  std::vector<std::vector<char>> talks(parts, std::vector<char>(parts, 0));
  std::vector<std::vector<int64_t>> by_part(parts);
  for (int64_t v = 0; v < graph.vertex_count; ++v) by_part[static_cast<std::size_t>(part_of[v])].push_back(v);
  for (uint32_t p = 0; p < parts; ++p) {
    model::GraphPartShape& part = shape.parts[p];
    part.vertices = static_cast<int64_t>(by_part[p].size());
    for (int64_t u : by_part[p]) {
      const auto begin = graph.offsets[static_cast<std::size_t>(u)], end = graph.offsets[static_cast<std::size_t>(u) + 1];
      part.edges += static_cast<int64_t>(end - begin);
      for (uint64_t e = begin; e < end; ++e) {
        const auto v = static_cast<std::size_t>(graph.targets[e]);
        const auto owner = static_cast<uint32_t>(part_of[v]);
        if (owner == p) continue;
        ++shape.cut_edges;
        if (last_seen[v] == p + 1) continue;
        last_seen[v] = p + 1;
        ++part.ghosts_out;
        ++shape.parts[owner].ghosts_in;
        talks[p][owner] = 1;
      }
    }
  }
  for (uint32_t p = 0; p < parts; ++p) {
    for (uint32_t q = 0; q < parts; ++q) {
      if (!talks[p][q]) continue;
      ++shape.parts[p].peers_out;
      ++shape.parts[q].peers_in;
    }
  }
  return shape;
}

model::GraphWorkload default_workload(const graph::AlgorithmSpec& spec, double tolerance,
                                      const partition::DirectedGraph& graph, double poll_interval_s) {
  model::GraphWorkload workload;
  workload.vertices = graph.vertex_count;
  workload.edges = graph.edge_count();
  workload.poll_interval_s = poll_interval_s;
  double sync_steps = 2.0;
  if (spec.kind == graph::AlgorithmKind::kPageRank && spec.damping > 0.0 && spec.damping < 1.0 && tolerance > 0.0) {
    sync_steps = std::max(1.0, std::log(tolerance / (1.0 - spec.damping)) / std::log(spec.damping));
  } else if (spec.kind == graph::AlgorithmKind::kKatz) {
    sync_steps = 30.0;
  }
  const bool linear = graph::is_linear(spec);
  workload.updates_per_edge_alone = linear ? 0.6 * sync_steps : sync_steps;
  workload.spread_per_cut = 2.0;
  workload.delta_fraction = 1.0;
  return workload;
}

std::vector<std::vector<std::size_t>> candidate_sets(const std::vector<model::GraphNodeCosts>& costs,
                                                     const std::vector<std::size_t>& usable) {
  std::vector<std::size_t> order;
  for (std::size_t node : model::nodes_by_graph_speed(costs)) {
    if (std::find(usable.begin(), usable.end(), node) != usable.end()) order.push_back(node);
  }
  std::vector<std::vector<std::size_t>> sets;
  for (std::size_t size = 1; size <= order.size(); ++size) {
    std::vector<std::size_t> set(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(size));
    std::sort(set.begin(), set.end());  // cluster order, as parts are numbered
    sets.push_back(std::move(set));
  }
  return sets;
}

namespace {

namespace tp = tessera::partition;
using Clock = std::chrono::steady_clock;

// The locality placement tried for every candidate set: linear in the edges, so it is never what
// decides whether a set pays.
constexpr tp::PartitionMethod kCheapMethod = tp::PartitionMethod::kContiguous;
// METIS seconds per edge of the placement graph on the coordinator, until a run measures it
// (rmat:18, 2026-11-27: 2.2-2.7 s for 8.4 M edges; meshes are about three times faster).
constexpr double kMetisSecondsPerEdge = 3e-7;

bool all_measured(const std::vector<model::GraphNodeCosts>& costs, const std::vector<std::size_t>& nodes) {
  if (costs.empty()) return false;
  return std::all_of(nodes.begin(), nodes.end(), [&](std::size_t node) { return costs[node].rates.measured(); });
}

struct Placed {
  tp::Partition partition;
  tp::PartitionMethod method = kCheapMethod;
  double seconds = 0.0;
};

Result<Placed> place(const SelectionInput& input, tp::PartitionMethod method, const std::vector<double>& weights) {
  tp::PartitionOptions options;
  // One part takes everything whatever the method: no need to run METIS for it.
  options.method = weights.size() == 1 ? tp::PartitionMethod::kContiguous : method;
  options.target_weights = weights;
  options.imbalance = input.options.imbalance;
  options.seed = input.options.seed;
  const auto begun = Clock::now();
  Result<tp::Partition> partition = tp::partition_graph(input.placement_graph, options);
  if (!partition) return partition.status();
  return Placed{std::move(*partition), method, std::chrono::duration<double>(Clock::now() - begun).count()};
}

model::GraphCandidate candidate_of(const SelectionInput& input, const std::vector<std::size_t>& nodes, const Placed& placed) {
  PlacementShape shape = placement_shape(input.graph, placed.partition.part, static_cast<uint32_t>(nodes.size()));
  model::GraphCandidate candidate;
  candidate.nodes = nodes;
  candidate.parts = std::move(shape.parts);
  candidate.cut_edges = shape.cut_edges;
  candidate.placement_s = placed.seconds;
  candidate.method = std::string(tp::method_name(placed.method));
  return candidate;
}

std::vector<std::string> names_of(const SelectionInput& input, const std::vector<std::size_t>& nodes) {
  std::vector<std::string> names;
  for (std::size_t node : nodes) names.push_back(input.node_names[node]);
  return names;
}

}  // namespace

std::vector<double> target_weights_of(const GraphRunOptions& options, const std::vector<std::size_t>& nodes) {
  std::vector<double> weights;
  bool any = false;
  for (std::size_t node : nodes) {
    const bool explicit_weights = options.weights.source == TargetWeights::Source::kExplicit;
    weights.push_back(explicit_weights ? options.weights.weights[node] : 1.0);
    any |= weights.back() > 0.0;
  }
  if (!any) std::fill(weights.begin(), weights.end(), 1.0);
  return weights;
}

Result<Selection> select_and_place(const SelectionInput& input) {
  const GraphRunOptions& options = input.options;
  const std::size_t count = input.node_names.size();
  Selection selection;
  std::vector<std::size_t> every(count);
  for (std::size_t i = 0; i < count; ++i) every[i] = i;

  // The sets to weigh: one for all and a list, the growing sets of the fastest for auto.
  std::vector<std::vector<std::size_t>> sets;
  const bool costs_known = all_measured(options.node_costs, every);
  switch (options.nodes.mode) {
    case NodeChoice::Mode::kAll:
      selection.record.mode = "all";
      sets.push_back(every);
      break;
    case NodeChoice::Mode::kListed: {
      selection.record.mode = "listed";
      std::vector<std::size_t> listed;
      for (const std::string& name : options.nodes.listed) {
        const auto at = std::find(input.node_names.begin(), input.node_names.end(), name);
        if (at == input.node_names.end()) {
          return invalid_argument(fmt::format("--nodes names \"{}\", which is not a node of the cluster; its nodes are {}",
                                              name, join(input.node_names, ", ")));
        }
        listed.push_back(static_cast<std::size_t>(at - input.node_names.begin()));
      }
      std::sort(listed.begin(), listed.end());
      sets.push_back(std::move(listed));
      break;
    }
    case NodeChoice::Mode::kAuto:
      selection.record.mode = "auto";
      if (costs_known) {
        sets = candidate_sets(options.node_costs, every);
      } else {
        sets.push_back(every);
        selection.record.left_out.clear();
        selection.record.workload_source =
            "no graph rates in the profile for every node, so every node takes part (run `tessera profile` to measure them)";
      }
      break;
  }
  for (std::vector<std::size_t>& set : sets) {
    // A node given weight 0 takes no part; it is left out of the set rather than given an empty part.
    if (options.weights.source == TargetWeights::Source::kExplicit && sets.size() > 1) {
      std::erase_if(set, [&](std::size_t node) { return !(options.weights.weights[node] > 0.0); });
    }
  }
  std::erase_if(sets, [](const std::vector<std::size_t>& set) { return set.empty(); });
  if (sets.empty()) return invalid_argument("no node is left to take part (every one has weight 0)");

  // METIS for every candidate set would cost more than the choice can save: the sets are weighed
  // with the locality placement, and METIS (when asked for) places only the chosen one.
  const bool metis_after = !options.choose_method && options.method == tp::PartitionMethod::kMetis && sets.size() > 1;
  const tp::PartitionMethod first_method = options.choose_method || metis_after ? kCheapMethod : options.method;
  std::vector<Placed> placed;
  std::vector<model::GraphCandidate> candidates;
  for (const std::vector<std::size_t>& set : sets) {
    Result<Placed> one = place(input, first_method, target_weights_of(options, set));
    if (!one) return one.status();
    candidates.push_back(candidate_of(input, set, *one));
    placed.push_back(std::move(*one));
  }
  std::size_t chosen = 0;
  model::GraphWorkload workload = default_workload(options.algorithm, input.tolerance, input.graph,
                                                   std::chrono::duration<double>(options.poll_interval).count());
  if (selection.record.workload_source.empty()) {
    selection.record.workload_source = fmt::format("estimated: {:.3g} edge updates per edge alone, x(1 + {:g} x cut fraction) spread",
                                                   workload.updates_per_edge_alone, workload.spread_per_cut);
  }
  if (costs_known || all_measured(options.node_costs, sets.front())) {
    model::GraphNodeChoice choice = model::choose_graph_nodes(options.node_costs, workload, candidates);
    chosen = choice.chosen;
    selection.record.left_out = std::move(choice.left_out);
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      selection.record.candidates.push_back({names_of(input, candidates[i].nodes), choice.forecasts[i].total_s});
    }
    selection.record.forecast = choice.forecasts[chosen];
  }
  selection.nodes = sets[chosen];
  selection.weights = target_weights_of(options, selection.nodes);
  Placed* winner = &placed[chosen];
  std::optional<Placed> metis_placed;  // when METIS was run and won
  selection.placing.reason = options.choose_method ? "" : "as asked";

  // --partition auto: METIS for the chosen set only if even a placement that cut nothing could
  // pay back its forecast time.
  if (options.choose_method && selection.nodes.size() > 1 && selection.record.forecast) {
    const double metis_s = kMetisSecondsPerEdge * static_cast<double>(input.placement_graph.edge_count());
    model::GraphCandidate uncut = candidates[chosen];
    for (model::GraphPartShape& part : uncut.parts) part.ghosts_out = part.ghosts_in = part.peers_out = part.peers_in = 0;
    uncut.cut_edges = 0;
    uncut.placement_s = metis_s;
    const double best_case = model::forecast_graph_run(options.node_costs, workload, uncut).total_s;
    const double cheap = selection.record.forecast->total_s;
    if (best_case < cheap) {
      Result<Placed> metis = place(input, tp::PartitionMethod::kMetis, selection.weights);
      if (!metis) return metis.status();
      model::GraphCandidate with_metis = candidate_of(input, selection.nodes, *metis);
      // What METIS took is spent either way; compare what is left to run.
      const model::GraphForecast forecast = model::forecast_graph_run(options.node_costs, workload, with_metis);
      if (forecast.total_s - forecast.placement_s < cheap - winner->seconds) {
        selection.placing.reason = fmt::format("metis: its cut saves {:.3g} s of the run's forecast",
                                               cheap - winner->seconds - (forecast.total_s - forecast.placement_s));
        metis_placed = std::move(*metis);
        winner = &*metis_placed;
        selection.record.forecast = forecast;
      } else {
        selection.placing.reason = "the locality placement: METIS' cut would not have saved its own time";
      }
    } else {
      selection.placing.reason = fmt::format(
          "{}: even a placement that cut nothing ({:.3g} s forecast with METIS' estimated {:.3g} s) would not beat it "
          "({:.3g} s)",
          tp::method_name(kCheapMethod), best_case, metis_s, cheap);
    }
  } else if (metis_after && selection.nodes.size() > 1) {
    Result<Placed> metis = place(input, tp::PartitionMethod::kMetis, selection.weights);
    if (!metis) return metis.status();
    if (selection.record.forecast) {
      selection.record.forecast =
          model::forecast_graph_run(options.node_costs, workload, candidate_of(input, selection.nodes, *metis));
    }
    metis_placed = std::move(*metis);
    winner = &*metis_placed;
  } else if (options.choose_method) {
    selection.placing.reason = selection.nodes.size() == 1 ? "one node: nothing to cut" : "no forecast: the locality placement";
  }
  selection.partition = std::move(winner->partition);
  selection.method = winner->method;
  selection.placing.method = selection.nodes.size() == 1 ? "one part" : std::string(tp::method_name(winner->method));
  if (selection.record.forecast) {
    // Every placement made while choosing is part of the run's time, not only the winner's.
    model::GraphForecast& forecast = *selection.record.forecast;
    double spent = 0.0;
    for (const Placed& one : placed) spent += one.seconds;
    if (metis_placed) spent += metis_placed->seconds;
    forecast.total_s += spent - forecast.placement_s;
    forecast.placement_s = spent;
    selection.record.bound = model::forecast_bound(*selection.record.forecast);
  }
  selection.record.taking_part = names_of(input, selection.nodes);
  return selection;
}

}  // namespace tessera::balance::graph_driver
