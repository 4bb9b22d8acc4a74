#include "tessera/balance/graphs/run_memory.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/files.hpp"

namespace tessera::balance::graphs {
namespace {

using json = nlohmann::json;

// How far above and below its profiled rate a node's remembered rate is believed.
constexpr double kRememberedRateCap = 1.25;
constexpr double kRememberedRateFloor = 0.5;
// The slowest a graph's edges are believed to be against the probe's (a hundredth).
constexpr double kLowestGraphCostFactor = 0.01;

// How far a node's remote deltas are believed to cost beyond the profile's figures, either way.
constexpr double kDeltaScaleLow = 0.25;
constexpr double kDeltaScaleHigh = 200.0;

// How many node sets keep their own extra (keys sort, the first go beyond it).
constexpr std::size_t kMaxRemembered = 64;

// A memory file is a few hundred bytes; anything far larger is not one.
constexpr uint64_t kMaxMemoryBytes = 1 << 20;

// Plausible ranges: a value outside is a damaged file, not a measurement.
bool plausible(double value, double low, double high) { return std::isfinite(value) && value >= low && value <= high; }

std::optional<double> read_number(const json& document, const char* key, double low, double high) {
  const auto at = document.find(key);
  if (at == document.end() || !at->is_number()) return std::nullopt;
  const double value = at->get<double>();
  return plausible(value, low, high) ? std::optional<double>(value) : std::nullopt;
}

}  // namespace

std::string set_key(const std::vector<std::string>& nodes) {
  std::string key;
  for (const std::string& node : nodes) key += (key.empty() ? "" : "|") + node;
  return key;
}

std::string shape_key(std::string_view method, const std::vector<std::string>& nodes) {
  return std::string(method) + "|" + set_key(nodes);
}

std::vector<double> shares_of(const std::vector<double>& weights) {
  double total = 0.0;
  for (double weight : weights) total += weight;
  std::vector<double> shares;
  for (double weight : weights) shares.push_back(total > 0.0 ? weight / total : 1.0 / static_cast<double>(weights.size()));
  return shares;
}

RunMemory::Shape RunMemory::Shape::rescaled(const std::vector<double>& new_shares) const {
  Shape out = *this;
  out.shares = new_shares;
  // A part's remote ends grow with its share and with what the others hold, s (1 - s), as the edges
  // between it and the rest of a graph whose ends fall anywhere: a desktop going from 68% to 90% of
  // the vertices has fewer ghosts, not more.
  const auto crossing = [](double share) { return std::max(share * (1.0 - share), 1e-9); };
  double cut_before = 0.0, cut_after = 0.0;
  for (std::size_t i = 0; i < parts.size() && i < shares.size() && i < new_shares.size(); ++i) {
    const double factor = shares[i] > 0.0 ? new_shares[i] / shares[i] : 1.0;
    const double ghost_factor = shares[i] > 0.0 ? crossing(new_shares[i]) / crossing(shares[i]) : 1.0;
    const auto scale = [](double by, int64_t value) { return static_cast<int64_t>(std::llround(by * static_cast<double>(value))); };
    out.parts[i].vertices = scale(factor, parts[i].vertices);
    out.parts[i].edges = scale(factor, parts[i].edges);
    out.parts[i].ghosts_out = scale(ghost_factor, parts[i].ghosts_out);
    out.parts[i].ghosts_in = scale(ghost_factor, parts[i].ghosts_in);
    cut_before += crossing(shares[i]);
    cut_after += crossing(new_shares[i]);
  }
  if (cut_before > 0.0) out.cut_edges = static_cast<int64_t>(std::llround(cut_after / cut_before * static_cast<double>(cut_edges)));
  return out;
}

std::string run_memory_path(const std::string& dir, uint64_t graph_hash, const graph::AlgorithmSpec& spec, double tolerance,
                            std::string_view mode) {
  if (dir.empty()) return "";
  // The parameters that change how many sweeps a run needs, and the mode (a sync run's sweeps and
  // start-up are not an async run's), are part of the name.
  return fmt::format("{}/run-{:016x}-{}-{}-d{:g}-b{:g}-s{}-{}-t{:g}.json", dir, graph_hash, graph::algorithm_name(spec.kind),
                     mode, spec.damping, spec.beta, spec.source ? std::to_string(*spec.source) : "all",
                     spec.max_label ? "max" : "min", tolerance);
}

RunMemory load_run_memory(const std::string& path, std::string* note) {
  RunMemory memory;
  if (path.empty()) return memory;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return memory;
  Result<std::string> text = read_regular_file(path, kMaxMemoryBytes, "run memory");
  if (!text) {
    if (note != nullptr) *note = text.status().message();
    return memory;
  }
  const json document = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object()) {
    if (note != nullptr) *note = fmt::format("{} is not a run memory (ignored)", path);
    return memory;
  }
  memory.updates_per_edge_alone = read_number(document, "updates_per_edge_alone", 1e-6, 1e6);
  memory.spread_per_cut = read_number(document, "spread_per_cut", 0.0, 1e3);
  memory.updates_per_edge_spread = read_number(document, "updates_per_edge_spread", 1e-6, 1e6);
  memory.spread_cut_fraction = read_number(document, "spread_cut_fraction", 1e-6, 1.0);
  memory.delta_fraction = read_number(document, "delta_fraction", 1e-6, 1.0);
  memory.metis_s_per_edge = read_number(document, "metis_s_per_edge", 1e-12, 1e-3);
  memory.extra_alone_s = read_number(document, "extra_alone_s", -10.0, 100.0);
  memory.extra_several_s = read_number(document, "extra_several_s", -10.0, 100.0);
  const auto read_map = [&](const char* key, double low, double high, std::map<std::string, double>& into) {
    const auto entries = document.find(key);
    if (entries == document.end() || !entries->is_object()) return;
    for (const auto& [name, value] : entries->items()) {
      if (value.is_number() && plausible(value.get<double>(), low, high)) into[name] = value.get<double>();
    }
  };
  read_map("edge_updates_per_s", 1.0, 1e12, memory.edge_updates_per_s);
  read_map("share_edge_updates_per_s", 1.0, 1e12, memory.share_edge_updates_per_s);
  read_map("delta_cost_scale", kDeltaScaleLow, kDeltaScaleHigh, memory.delta_cost_scale);
  read_map("extra_by_set", -10.0, 100.0, memory.extra_by_set);
  if (const auto sets = document.find("shares_by_set"); sets != document.end() && sets->is_object()) {
    for (const auto& [key, entry] : sets->items()) {
      if (!entry.is_array() || entry.empty()) continue;
      std::vector<double> shares;
      double sum = 0.0;
      for (const json& share : entry) {
        if (!share.is_number() || !plausible(share.get<double>(), 1e-9, 1.0)) break;
        shares.push_back(share.get<double>());
        sum += shares.back();
      }
      if (shares.size() == entry.size() && std::abs(sum - 1.0) < 1e-6) memory.shares_by_set[key] = std::move(shares);
    }
  }
  if (const auto shapes = document.find("shapes"); shapes != document.end() && shapes->is_object()) {
    for (const auto& [key, entry] : shapes->items()) {
      if (!entry.is_object() || !entry.contains("cut_edges") || !entry.contains("parts") || !entry["parts"].is_array()) continue;
      RunMemory::Shape shape;
      bool sound = entry["cut_edges"].is_number_integer() && entry["cut_edges"].get<int64_t>() >= 0;
      if (sound) shape.cut_edges = entry["cut_edges"].get<int64_t>();
      for (const json& part : entry["parts"]) {
        sound = sound && part.is_array() && part.size() == 6;
        if (!sound) break;
        for (const json& number : part) sound = sound && number.is_number_integer() && number.get<int64_t>() >= 0;
        if (!sound) break;
        shape.parts.push_back({part[0].get<int64_t>(), part[1].get<int64_t>(), part[2].get<int64_t>(), part[3].get<int64_t>(),
                               part[4].get<int64_t>(), part[5].get<int64_t>()});
      }
      if (sound && entry.contains("shares") && entry["shares"].is_array() && entry["shares"].size() == shape.parts.size()) {
        for (const json& share : entry["shares"]) {
          sound = sound && share.is_number() && plausible(share.get<double>(), 0.0, 1.0);
          if (sound) shape.shares.push_back(share.get<double>());
        }
      } else {
        sound = false;
      }
      if (sound && !shape.parts.empty()) memory.shapes[key] = std::move(shape);
    }
  }
  return memory;
}

Status save_run_memory(const std::string& path, const RunMemory& memory) {
  if (path.empty()) return Status::ok();
  json document = json::object();
  if (memory.updates_per_edge_alone) document["updates_per_edge_alone"] = *memory.updates_per_edge_alone;
  if (memory.spread_per_cut) document["spread_per_cut"] = *memory.spread_per_cut;
  if (memory.updates_per_edge_spread) document["updates_per_edge_spread"] = *memory.updates_per_edge_spread;
  if (memory.spread_cut_fraction) document["spread_cut_fraction"] = *memory.spread_cut_fraction;
  if (memory.delta_fraction) document["delta_fraction"] = *memory.delta_fraction;
  if (memory.metis_s_per_edge) document["metis_s_per_edge"] = *memory.metis_s_per_edge;
  if (memory.extra_alone_s) document["extra_alone_s"] = *memory.extra_alone_s;
  if (memory.extra_several_s) document["extra_several_s"] = *memory.extra_several_s;
  document["edge_updates_per_s"] = memory.edge_updates_per_s;
  document["share_edge_updates_per_s"] = memory.share_edge_updates_per_s;
  document["delta_cost_scale"] = memory.delta_cost_scale;
  document["extra_by_set"] = memory.extra_by_set;
  document["shares_by_set"] = memory.shares_by_set;
  json shapes = json::object();
  for (const auto& [key, shape] : memory.shapes) {
    json parts = json::array();
    for (const graphs::GraphPartShape& part : shape.parts) {
      parts.push_back({part.vertices, part.edges, part.ghosts_out, part.ghosts_in, part.peers_out, part.peers_in});
    }
    shapes[key] = {{"cut_edges", shape.cut_edges}, {"parts", std::move(parts)}, {"shares", shape.shares}};
  }
  document["shapes"] = std::move(shapes);
  std::error_code error;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), error);
  if (error) return io_error(fmt::format("cannot create {}: {}", target.parent_path().string(), error.message()));
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << document.dump(1) << "\n";
    if (!file.flush()) return io_error(fmt::format("cannot write {}", temporary));
  }
  std::filesystem::rename(temporary, target, error);
  if (error) return io_error(fmt::format("cannot rename {} to {}: {}", temporary, path, error.message()));
  return Status::ok();
}

RunMemory remember(RunMemory memory, const RunMeasurement& run) {
  if (run.parts <= 1) {
    if (run.updates_per_edge > 0.0) memory.updates_per_edge_alone = run.updates_per_edge;
  } else if (run.updates_per_edge > 0.0 && run.cut_fraction > 1e-6) {
    memory.updates_per_edge_spread = run.updates_per_edge;
    memory.spread_cut_fraction = run.cut_fraction;
  }
  // Several parts needing fewer sweeps than one is noise, not a negative spread.
  if (memory.updates_per_edge_alone && memory.updates_per_edge_spread && memory.spread_cut_fraction) {
    memory.spread_per_cut = std::max(0.0, (*memory.updates_per_edge_spread / *memory.updates_per_edge_alone - 1.0) /
                                              *memory.spread_cut_fraction);
  }
  if (run.delta_fraction) memory.delta_fraction = std::clamp(*run.delta_fraction, 1e-6, 1.0);
  for (const auto& [name, rate] : run.edge_updates_per_s) {
    if (plausible(rate, 1.0, 1e12)) memory.edge_updates_per_s[name] = rate;
  }
  for (const auto& [name, rate] : run.share_edge_updates_per_s) {
    if (plausible(rate, 1.0, 1e12)) memory.share_edge_updates_per_s[name] = rate;
  }
  for (const auto& [name, measured] : run.delta_cost_scale) {
    if (!std::isfinite(measured)) continue;
    // Geometric smoothing: a ratio that doubled and one that halved cancel out.
    const double scale = std::clamp(measured, kDeltaScaleLow, kDeltaScaleHigh);
    const auto known = memory.delta_cost_scale.find(name);
    memory.delta_cost_scale[name] = known == memory.delta_cost_scale.end() ? scale : std::sqrt(known->second * scale);
  }
  if (run.metis_s_per_edge) memory.metis_s_per_edge = *run.metis_s_per_edge;
  if (run.extra_s) {
    // Smoothed over runs: one slow start on a shared machine should not swing the next choice.
    const double measured = std::clamp(*run.extra_s, -10.0, 100.0);
    const auto smooth = [measured](std::optional<double> known) { return known ? 0.5 * (*known + measured) : measured; };
    std::optional<double>& extra = run.parts <= 1 ? memory.extra_alone_s : memory.extra_several_s;
    extra = smooth(extra);
    if (!run.set_key.empty()) {
      const auto known = memory.extra_by_set.find(run.set_key);
      memory.extra_by_set[run.set_key] =
          smooth(known == memory.extra_by_set.end() ? std::nullopt : std::optional<double>(known->second));
    }
  }
  if (!run.set_key.empty() && !run.next_shares.empty()) memory.shares_by_set[run.set_key] = run.next_shares;
  while (memory.shares_by_set.size() > kMaxRemembered) memory.shares_by_set.erase(memory.shares_by_set.begin());
  for (const auto& [key, shape] : run.shapes) memory.shapes[key] = shape;
  // One shape per method and node set; a bounded memory all the same (keys sort, the first go).
  while (memory.shapes.size() > kMaxRemembered) memory.shapes.erase(memory.shapes.begin());
  while (memory.extra_by_set.size() > kMaxRemembered) memory.extra_by_set.erase(memory.extra_by_set.begin());
  return memory;
}

std::vector<double> shares_for_equal_need(const std::vector<PartRun>& parts) {
  if (parts.size() < 2) return {};
  double least_per_edge = 0.0;
  for (const PartRun& part : parts) {
    if (part.edges <= 0 || !(part.edge_updates > 0.0) || !(part.busy_s > 0.0) || !(part.share > 0.0)) return {};
    const double per_edge = part.edge_updates / static_cast<double>(part.edges);
    if (least_per_edge == 0.0 || per_edge < least_per_edge) least_per_edge = per_edge;
  }
  constexpr double kMostChange = 2.0;
  std::vector<double> next;
  double sum = 0.0;
  for (const PartRun& part : parts) {
    const double per_edge = part.edge_updates / static_cast<double>(part.edges);
    const double need_s = part.busy_s * std::min(1.0, least_per_edge / per_edge);
    next.push_back(part.share / need_s);
    sum += next.back();
  }
  double damped_sum = 0.0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const double balanced = next[i] / sum;
    next[i] = std::clamp(std::sqrt(parts[i].share * balanced), parts[i].share / kMostChange, parts[i].share * kMostChange);
    damped_sum += next[i];
  }
  for (double& share : next) share /= damped_sum;
  return next;
}

graphs::GraphWorkload remembered_workload(graphs::GraphWorkload workload, const RunMemory& memory, std::string& source) {
  std::vector<std::string> measured;
  if (memory.updates_per_edge_alone) {
    workload.updates_per_edge_alone = *memory.updates_per_edge_alone;
    measured.push_back(fmt::format("{:.3g} edge updates per edge alone", workload.updates_per_edge_alone));
  }
  if (memory.spread_per_cut) {
    workload.spread_per_cut = *memory.spread_per_cut;
    measured.push_back(fmt::format("spread {:.3g} per cut fraction", workload.spread_per_cut));
  }
  if (memory.delta_fraction) {
    workload.delta_fraction = *memory.delta_fraction;
    measured.push_back(fmt::format("{:.2g} of the ghosts sending per flush", workload.delta_fraction));
  }
  if (memory.extra_alone_s || memory.extra_several_s) {
    workload.extra_alone_s = memory.extra_alone_s.value_or(0.0);
    workload.extra_several_s = memory.extra_several_s.value_or(0.0);
    measured.push_back(fmt::format("start-up beyond the forecast {:.3g} s alone, {:.3g} s on several nodes",
                                   workload.extra_alone_s, workload.extra_several_s));
  }
  if (!memory.edge_updates_per_s.empty()) measured.push_back(fmt::format("{} nodes' edge rates", memory.edge_updates_per_s.size()));
  if (!memory.delta_cost_scale.empty()) measured.push_back(fmt::format("{} nodes' delta costs", memory.delta_cost_scale.size()));
  if (!measured.empty()) {
    std::string joined;
    for (const std::string& item : measured) joined += (joined.empty() ? "" : ", ") + item;
    source = "measured by past runs on this graph: " + joined + (source.empty() ? "" : "; otherwise " + source);
  }
  return workload;
}

namespace {

// `rate` within a band from half the node's expected rate on this graph (its profiled rate times
// the graph's cost factor) to 1.25x its profiled rate (measured over many quota periods). Above:
// a quarter-core node that works in short bursts between waits runs each burst at a whole core's
// speed until its quota runs out, so its busy-time rate can read four times what it sustains.
// Below: a node busy mostly with remote deltas (a Pi on R-MAT) would read as so slow that the
// fastest node ends up with nearly all the edges. Within it, a node whose part fits its caches
// better than another's: a large part runs below the probe's rate and small parts near it, so the
// top is not scaled by the graph's factor, which would hold the small parts' nodes below what they
// do and give the large part's node more than it can do in time.
double within_band(double rate, double expected, double profiled) {
  if (expected <= 0.0 || profiled <= 0.0) return rate;
  return std::clamp(rate, kRememberedRateFloor * expected, kRememberedRateCap * profiled);
}

// What an edge of this graph and algorithm costs against the profile's probe (the engine's
// PageRank sweep on R-MAT), as the nodes that ran it alone measured: the median of their rate over
// their profiled rate. A graph and algorithm can cost many times the probe's per edge (connected
// components' best-first queue does); held to the probe's band, the forecast would put most of
// such a run's edge time into start-up, and a node without its own measurement would look many
// times too fast beside one with it. At most the band's top (a faster graph than the probe is a
// burst).
double graph_cost_factor(const std::vector<graphs::GraphNodeCosts>& costs, const RunMemory& memory) {
  std::vector<double> ratios;
  for (const graphs::GraphNodeCosts& node : costs) {
    const auto at = memory.edge_updates_per_s.find(node.name);
    if (at != memory.edge_updates_per_s.end() && node.rates.edge_updates_per_s > 0.0) {
      ratios.push_back(at->second / node.rates.edge_updates_per_s);
    }
  }
  if (ratios.empty()) return 1.0;
  std::sort(ratios.begin(), ratios.end());
  const std::size_t middle = ratios.size() / 2;
  const double median = ratios.size() % 2 == 1 ? ratios[middle] : 0.5 * (ratios[middle - 1] + ratios[middle]);
  return std::clamp(median, kLowestGraphCostFactor, kRememberedRateCap);
}

}  // namespace

std::vector<graphs::GraphNodeCosts> remembered_costs(std::vector<graphs::GraphNodeCosts> costs, const RunMemory& memory) {
  const double factor = graph_cost_factor(costs, memory);
  for (graphs::GraphNodeCosts& node : costs) {
    const double profiled = node.rates.edge_updates_per_s;
    const double expected = factor * profiled;
    const auto alone = memory.edge_updates_per_s.find(node.name);
    node.rates.edge_updates_per_s =
        alone != memory.edge_updates_per_s.end() ? within_band(alone->second, expected, profiled) : expected;
    const auto with_others = memory.share_edge_updates_per_s.find(node.name);
    node.edge_updates_per_s_with_others =
        with_others != memory.share_edge_updates_per_s.end() ? within_band(with_others->second, expected, profiled) : 0.0;
    if (const auto at = memory.delta_cost_scale.find(node.name); at != memory.delta_cost_scale.end()) {
      node.rates.send_s_per_delta *= at->second;
      node.rates.send_s_per_batch *= at->second;
      node.rates.receive_s_per_delta *= at->second;
      node.rates.receive_s_per_batch *= at->second;
    }
  }
  return costs;
}

std::vector<graphs::GraphNodeCosts> remembered_share_costs(std::vector<graphs::GraphNodeCosts> costs, const RunMemory& memory) {
  costs = remembered_costs(std::move(costs), memory);
  for (graphs::GraphNodeCosts& node : costs) node.rates.edge_updates_per_s = node.edge_rate(/*alone=*/false);
  return costs;
}

}  // namespace tessera::balance::graphs
