#include "tessera/balance/graphs/node_selection.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "tessera/core/strings.hpp"
#include "tessera/partition/placement_cache.hpp"

namespace tessera::balance::graphs {

PlacementShape placement_shape(const graphdata::DirectedGraph& graph, std::span<const int32_t> part_of, uint32_t parts) {
  PlacementShape shape;
  shape.parts.resize(parts);
  // last_seen[v] = the part whose scan last counted v as its ghost (+1; 0: none yet); vertices
  // are scanned part by part, so each (part, ghost) pair is counted once.
  std::vector<uint32_t> last_seen(static_cast<std::size_t>(graph.vertex_count), 0);
  std::vector<std::vector<char>> talks(parts, std::vector<char>(parts, 0));
  std::vector<std::vector<int64_t>> by_part(parts);
  for (int64_t v = 0; v < graph.vertex_count; ++v) by_part[static_cast<std::size_t>(part_of[v])].push_back(v);
  for (uint32_t p = 0; p < parts; ++p) {
    graphs::GraphPartShape& part = shape.parts[p];
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

graphs::GraphWorkload default_workload(const graph::AlgorithmSpec& spec, double tolerance,
                                      const graphdata::DirectedGraph& graph, double poll_interval_s) {
  graphs::GraphWorkload workload;
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

std::vector<std::vector<std::size_t>> candidate_sets(const std::vector<graphs::GraphNodeCosts>& costs,
                                                     const std::vector<std::size_t>& usable) {
  std::vector<std::size_t> order;
  for (std::size_t node : graphs::nodes_by_graph_speed(costs)) {
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

// The locality placements tried for every candidate set, the better forecast kept: linear in the
// edges, so they are never what decides whether a set pays. Chunks of the vertex order win where
// the ids already follow locality (meshes, most files); Fennel's one streaming pass cuts R-MAT
// and log-normal graphs nearly as well as METIS' multilevel refinement in a small fraction of its
// time (tessera-partition-bench compares the methods).
constexpr tp::PartitionMethod kCheapMethods[] = {tp::PartitionMethod::kChunks, tp::PartitionMethod::kFennel};
// METIS seconds per edge of the placement graph on the coordinator, until a run measures it (the
// run memory then keeps this coordinator's own figure): set for skewed graphs such as R-MAT, which
// cost METIS more per edge than meshes, so a first forecast does not undercharge METIS.
constexpr double kMetisSecondsPerEdge = 3e-7;

bool all_measured(const std::vector<graphs::GraphNodeCosts>& costs, const std::vector<std::size_t>& nodes) {
  if (costs.empty()) return false;
  return std::all_of(nodes.begin(), nodes.end(), [&](std::size_t node) { return costs[node].rates.measured(); });
}

struct Placed {
  tp::Partition partition;
  tp::PartitionMethod method = tp::PartitionMethod::kChunks;
  double seconds = 0.0;
  bool cached = false;
  std::string cache_note;  // why the cache was not read or written, or empty
};

tp::PartitionOptions partition_options(const SelectionInput& input, tp::PartitionMethod method, const std::vector<double>& weights) {
  return placement_options(input.options, method, weights);
}

// METIS placements are kept in the cache (the cheap ones cost less to make than to read back).
bool cacheable(const SelectionInput& input, const tp::PartitionOptions& options) {
  return !input.options.cache_dir.empty() && options.method == tp::PartitionMethod::kMetis;
}

// The cached placement, when the cache has one for exactly this graph and these options.
std::optional<Placed> cached_placement(const SelectionInput& input, tp::PartitionMethod method, const std::vector<double>& weights,
                                       std::string& note) {
  const tp::PartitionOptions options = partition_options(input, method, weights);
  if (!cacheable(input, options)) return std::nullopt;
  const auto begun = Clock::now();
  Result<tp::PlacementKey> key = tp::placement_key(input.graph_hash, input.placement_graph, options);
  if (!key) return std::nullopt;
  std::string reason;
  Result<std::optional<tp::Partition>> loaded = tp::load_placement(input.options.cache_dir, *key, input.placement_graph, &reason);
  if (!loaded || !*loaded) {
    // No file is the ordinary miss; anything else is worth a line in the record.
    if (!loaded) {
      note = "placement cache not read: " + loaded.status().message();
    } else if (!reason.empty() && reason.find("no cached placement") == std::string::npos) {
      note = "placement cache entry ignored: " + reason;
    }
    return std::nullopt;
  }
  return Placed{std::move(**loaded), method, std::chrono::duration<double>(Clock::now() - begun).count(), true, ""};
}

Result<Placed> place(const SelectionInput& input, tp::PartitionMethod method, const std::vector<double>& weights) {
  std::string note;
  if (std::optional<Placed> cached = cached_placement(input, method, weights, note)) return std::move(*cached);
  const tp::PartitionOptions options = partition_options(input, method, weights);
  const auto begun = Clock::now();
  Result<tp::Partition> partition = tp::partition_graph(input.placement_graph, options);
  if (!partition) return partition.status();
  Placed placed{std::move(*partition), method, std::chrono::duration<double>(Clock::now() - begun).count(), false, note};
  if (cacheable(input, options)) {
    Result<tp::PlacementKey> key = tp::placement_key(input.graph_hash, input.placement_graph, options);
    const Status stored = key ? tp::store_placement(input.options.cache_dir, *key, placed.partition) : key.status();
    if (!stored) placed.cache_note = "placement not cached: " + stored.message();
  }
  return placed;
}

graphs::GraphCandidate candidate_of(const SelectionInput& input, const std::vector<std::size_t>& nodes, const Placed& placed) {
  PlacementShape shape = placement_shape(input.graph, placed.partition.part, static_cast<uint32_t>(nodes.size()));
  graphs::GraphCandidate candidate;
  candidate.nodes = nodes;
  candidate.parts = std::move(shape.parts);
  candidate.cut_edges = shape.cut_edges;
  candidate.placement_s = placed.seconds;
  candidate.method = std::string(tp::method_name(placed.method));
  return candidate;
}

// `candidate` (its nodes set) with the parts and cut a past run kept for `key`, rescaled to
// `weights`; false when the memory has no shape of that many parts for it.
bool take_remembered_shape(const RunMemory& memory, const std::string& key, const std::vector<double>& weights,
                           graphs::GraphCandidate& candidate) {
  const auto known = memory.shapes.find(key);
  if (known == memory.shapes.end() || known->second.parts.size() != candidate.nodes.size()) return false;
  const RunMemory::Shape shape = known->second.rescaled(shares_of(weights));
  candidate.parts = shape.parts;
  candidate.cut_edges = shape.cut_edges;
  return true;
}

std::vector<std::string> names_of(const SelectionInput& input, const std::vector<std::size_t>& nodes) {
  std::vector<std::string> names;
  for (std::size_t node : nodes) names.push_back(input.node_names[node]);
  return names;
}

// `candidate` with what past runs of its very node set took beyond their forecast, when one ran.
graphs::GraphCandidate with_remembered_extra(const RunMemory& memory, const SelectionInput& input, graphs::GraphCandidate candidate) {
  const auto known = memory.extra_by_set.find(set_key(names_of(input, candidate.nodes)));
  if (known != memory.extra_by_set.end()) candidate.extra_s = known->second;
  return candidate;
}

}  // namespace

partition::PartitionOptions placement_options(const GraphRunOptions& run, partition::PartitionMethod method,
                                              const std::vector<double>& weights) {
  partition::PartitionOptions options;
  // One part takes everything whatever the method: no need to run METIS for it.
  options.method = weights.size() == 1 ? partition::PartitionMethod::kContiguous : method;
  options.target_weights = weights;
  options.imbalance = run.imbalance;
  options.seed = run.seed;
  return options;
}

std::vector<double> target_weights_of(const GraphRunOptions& options, const std::vector<graphs::GraphNodeCosts>& costs,
                                      const std::vector<std::size_t>& nodes) {
  if (options.weights_from_rates && costs.size() > *std::max_element(nodes.begin(), nodes.end())) {
    return graphs::graph_share_weights(costs, nodes);
  }
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
  std::string memory_note;
  selection.memory = load_run_memory(input.memory_path, &memory_note);
  if (!memory_note.empty()) selection.placing.cache_note = memory_note;
  selection.costs = remembered_costs(options.node_costs, selection.memory);
  selection.share_costs = remembered_share_costs(options.node_costs, selection.memory);
  const std::vector<graphs::GraphNodeCosts>& costs = selection.costs;
  std::vector<std::size_t> every(count);
  for (std::size_t i = 0; i < count; ++i) every[i] = i;

  // The sets to weigh: one for all and a list, the growing sets of the fastest for auto.
  std::vector<std::vector<std::size_t>> sets;
  const bool costs_known = all_measured(costs, every);
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
    case NodeChoice::Mode::kBest:
      selection.record.mode = "best";
      if (!costs_known) {
        return invalid_argument(
            "--nodes best needs every node's graph rates, and the profile has none for some; run `tessera profile` "
            "on the cluster first, or name the node with --nodes NAME");
      }
      sets.push_back({graphs::nodes_by_graph_speed(costs).front()});
      break;
    case NodeChoice::Mode::kAuto:
      selection.record.mode = "auto";
      if (costs_known) {
        sets = candidate_sets(costs, every);
      } else {
        sets.push_back(every);
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

  graphs::GraphWorkload workload = default_workload(options.algorithm, input.tolerance, input.graph,
                                                   std::chrono::duration<double>(options.poll_interval).count());
  if (selection.record.workload_source.empty()) {
    std::string source = fmt::format("estimated {:.3g} edge updates per edge alone, x(1 + {:g} x cut fraction) spread",
                                     workload.updates_per_edge_alone, workload.spread_per_cut);
    workload = remembered_workload(workload, selection.memory, source);
    selection.record.workload_source = source;
  }
  const double metis_s_per_edge = selection.memory.metis_s_per_edge.value_or(kMetisSecondsPerEdge);
  const bool forecastable = std::all_of(sets.begin(), sets.end(),
                                       [&](const std::vector<std::size_t>& set) { return all_measured(costs, set); });
  const auto run_part_s = [&](const graphs::GraphCandidate& candidate) {
    const graphs::GraphForecast forecast =
        graphs::forecast_graph_run(costs, workload, with_remembered_extra(selection.memory, input, candidate));
    return forecast.total_s - forecast.placement_s;
  };

  // A set of several nodes that ran before takes the shares its runs taught (the time each node
  // needed, RunMemory::shares_by_set); otherwise shares follow the nodes' edge rates.
  const auto learned_shares = [&](const std::vector<std::size_t>& set) -> const std::vector<double>* {
    if (set.size() < 2 || !options.weights_from_rates) return nullptr;
    const auto learned = selection.memory.shares_by_set.find(set_key(names_of(input, set)));
    return learned != selection.memory.shares_by_set.end() && learned->second.size() == set.size() ? &learned->second : nullptr;
  };
  const auto weights_for = [&](const std::vector<std::size_t>& set) {
    if (const std::vector<double>* learned = learned_shares(set)) return *learned;
    return target_weights_of(options, set.size() > 1 ? selection.share_costs : costs, set);
  };

  // METIS for every candidate set would cost more than the choice can save: with METIS asked for
  // or auto, the sets are weighed with the chunks placement (or the shape a past run on this graph
  // kept of it), and only the chosen set is placed for real. A set that could not beat the best
  // smaller one even with nothing cut is not placed at all.
  const bool metis_asked = !options.choose_method && options.method == tp::PartitionMethod::kMetis;
  const bool weigh_cheaply = options.choose_method || (metis_asked && sets.size() > 1);
  std::vector<std::optional<Placed>> placed(sets.size());  // per set, when it was placed to weigh it
  std::vector<graphs::GraphCandidate> candidates;
  double spent_s = 0.0;  // every placement made while choosing is part of the run's time
  double best_so_far_s = std::numeric_limits<double>::infinity();
  for (std::size_t index = 0; index < sets.size(); ++index) {
    const std::vector<std::size_t>& set = sets[index];
    const std::vector<double> weights = weights_for(set);
    const tp::PartitionMethod method = weigh_cheaply && set.size() > 1 ? kCheapMethods[0] : options.method;
    const std::string key = shape_key(tp::method_name(method), names_of(input, set));
    graphs::GraphCandidate candidate;
    candidate.nodes = set;
    candidate.method = std::string(tp::method_name(method));
    if (!take_remembered_shape(selection.memory, key, weights, candidate)) {
      if (forecastable && set.size() > 1) {
        graphs::GraphCandidate uncut = candidate;
        uncut.parts.assign(set.size(), {});
        for (std::size_t i = 0; i < set.size(); ++i) {
          const double share = weights[i] / std::accumulate(weights.begin(), weights.end(), 0.0);
          uncut.parts[i].vertices = static_cast<int64_t>(share * static_cast<double>(input.graph.vertex_count));
          uncut.parts[i].edges = static_cast<int64_t>(share * static_cast<double>(input.graph.edge_count()));
        }
        if (run_part_s(uncut) >= best_so_far_s) {
          uncut.method = "none: it could not pay even with nothing cut";
          candidates.push_back(std::move(uncut));
          continue;
        }
      }
      Result<Placed> one = place(input, method, weights);
      if (!one) return one.status();
      spent_s += one->seconds;
      candidate = candidate_of(input, set, *one);
      selection.shapes[key] = {candidate.cut_edges, candidate.parts, shares_of(weights)};
      placed[index] = std::move(*one);
    }
    if (forecastable) best_so_far_s = std::min(best_so_far_s, run_part_s(candidate));
    candidates.push_back(std::move(candidate));
  }
  std::size_t chosen = 0;
  for (graphs::GraphCandidate& candidate : candidates) candidate = with_remembered_extra(selection.memory, input, std::move(candidate));
  if (forecastable) {
    graphs::GraphNodeChoice choice = graphs::choose_graph_nodes(costs, workload, candidates);
    chosen = choice.chosen;
    selection.record.left_out = std::move(choice.left_out);
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      selection.record.candidates.push_back({names_of(input, candidates[i].nodes), choice.forecasts[i].total_s});
    }
  }
  selection.nodes = sets[chosen];
  selection.weights = weights_for(selection.nodes);
  if (learned_shares(selection.nodes) != nullptr) {
    selection.record.workload_source += "; shares: what this node set's past runs needed (each node's busy time less its re-sweeping)";
  }
  const bool several = selection.nodes.size() > 1;
  // The chosen set placed for real: by METIS when it was asked for; with the locality placements,
  // the better of the two by forecast (a shape kept from a past run or made while weighing saves
  // placing to compare, so a warm run places only the one it uses).
  const bool metis_for_chosen = several && metis_asked && weigh_cheaply;
  std::optional<Placed> chosen_placement = std::move(placed[chosen]);
  graphs::GraphCandidate winner_candidate = candidates[chosen];
  if (metis_for_chosen) {
    Result<Placed> metis = place(input, tp::PartitionMethod::kMetis, selection.weights);
    if (!metis) return metis.status();
    spent_s += metis->seconds;
    winner_candidate = candidate_of(input, selection.nodes, *metis);
    chosen_placement = std::move(*metis);
  } else {
    std::vector<tp::PartitionMethod> methods{weigh_cheaply && several ? kCheapMethods[0] : options.method};
    if (options.choose_method && several) methods.push_back(kCheapMethods[1]);
    const std::vector<std::string> chosen_names = names_of(input, selection.nodes);
    std::optional<tp::PartitionMethod> best_method;
    for (tp::PartitionMethod method : methods) {
      const std::string key = shape_key(tp::method_name(method), chosen_names);
      graphs::GraphCandidate candidate = candidates[chosen];
      if (chosen_placement && chosen_placement->method == method) {
        // weighed with this very placement
      } else if (!take_remembered_shape(selection.memory, key, selection.weights, candidate)) {
        Result<Placed> one = place(input, method, selection.weights);
        if (!one) return one.status();
        spent_s += one->seconds;
        candidate = candidate_of(input, selection.nodes, *one);
        selection.shapes[key] = {candidate.cut_edges, candidate.parts, shares_of(selection.weights)};
        chosen_placement = std::move(*one);
      }
      const bool better = !best_method || (forecastable ? run_part_s(candidate) < run_part_s(winner_candidate)
                                                        : candidate.cut_edges < winner_candidate.cut_edges);
      if (better) {
        best_method = method;
        winner_candidate = std::move(candidate);
      }
    }
    // Holding another method's placement (or none): place with the winner now.
    if (!chosen_placement || chosen_placement->method != *best_method) {
      Result<Placed> one = place(input, *best_method, selection.weights);
      if (!one) return one.status();
      spent_s += one->seconds;
      chosen_placement = std::move(*one);
    }
  }
  Placed winner = std::move(*chosen_placement);
  selection.placing.reason = !options.choose_method ? "as asked"
                             : several             ? fmt::format("{}: the better of the locality placements", tp::method_name(winner.method))
                                                   : "one node: nothing to cut";

  if (several && options.choose_method && forecastable) {
    // --partition auto: a METIS placement from the cache is nearly free; otherwise METIS runs only
    // if even a placement that cut nothing could pay back its forecast time.
    const double cheap_run_s = run_part_s(winner_candidate);
    std::string note;
    std::optional<Placed> metis = cached_placement(input, tp::PartitionMethod::kMetis, selection.weights, note);
    if (!note.empty()) selection.placing.cache_note = note;
    if (!metis) {
      const double metis_s = metis_s_per_edge * static_cast<double>(input.placement_graph.edge_count());
      graphs::GraphCandidate uncut = winner_candidate;
      for (graphs::GraphPartShape& part : uncut.parts) part.ghosts_out = part.ghosts_in = part.peers_out = part.peers_in = 0;
      uncut.cut_edges = 0;
      const double best_case_s = metis_s + run_part_s(uncut);
      if (best_case_s < cheap_run_s) {
        Result<Placed> fresh = place(input, tp::PartitionMethod::kMetis, selection.weights);
        if (!fresh) return fresh.status();
        metis = std::move(*fresh);
      } else {
        selection.placing.reason = fmt::format(
            "{}: METIS (estimated {:.3g} s) could not pay back even if it cut nothing (run forecast {:.3g} s, "
            "{:.3g} s with no cut)",
            tp::method_name(winner.method), metis_s, cheap_run_s, run_part_s(uncut));
      }
    }
    if (metis) {
      spent_s += metis->seconds;
      graphs::GraphCandidate with_metis = candidate_of(input, selection.nodes, *metis);
      const double metis_run_s = run_part_s(with_metis);
      if (metis_run_s < cheap_run_s) {
        selection.placing.reason = fmt::format("metis{}: its cut saves {:.3g} s of the run's forecast",
                                               metis->cached ? " (cached)" : "", cheap_run_s - metis_run_s);
        winner_candidate = std::move(with_metis);
        winner = std::move(*metis);
      } else {
        selection.placing.reason = fmt::format("{}: METIS' cut would not shorten the run ({:.3g} s against {:.3g} s)",
                                               tp::method_name(winner.method), metis_run_s, cheap_run_s);
      }
    }
  }
  if (!winner.cached && winner.method == tp::PartitionMethod::kMetis && several) selection.metis_seconds = winner.seconds;
  winner_candidate.placement_s = spent_s;
  winner_candidate = with_remembered_extra(selection.memory, input, std::move(winner_candidate));
  selection.workload = workload;
  selection.candidate = winner_candidate;
  if (forecastable) {
    selection.record.forecast = graphs::forecast_graph_run(costs, workload, winner_candidate);
    selection.record.bound = graphs::forecast_bound(*selection.record.forecast);
  }
  selection.partition = std::move(winner.partition);
  selection.method = winner.method;
  selection.placing.method = several ? std::string(tp::method_name(winner.method)) : "one part";
  selection.placing.cached = winner.cached;
  if (!winner.cache_note.empty()) selection.placing.cache_note = winner.cache_note;
  selection.record.taking_part = names_of(input, selection.nodes);
  return selection;
}

}  // namespace tessera::balance::graphs
