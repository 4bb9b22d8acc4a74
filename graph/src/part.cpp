#include "tessera/graph/part.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace tessera::graph {
namespace {

constexpr uint32_t kNotGhost = std::numeric_limits<uint32_t>::max();

template <typename T>
uint64_t array_bytes(const std::vector<T>& array) {
  return static_cast<uint64_t>(array.size()) * sizeof(T);
}

// Sorts one vertex's out-edges by slot (weights follow), so owned targets (slots < local_count)
// come before ghosts and each group is visited in memory order.
void sort_edges_by_slot(std::span<uint32_t> targets, std::span<double> weights) {
  if (weights.empty()) {
    std::sort(targets.begin(), targets.end());
    return;
  }
  std::vector<std::pair<uint32_t, double>> edges(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) edges[i] = {targets[i], weights[i]};
  std::sort(edges.begin(), edges.end());
  for (std::size_t i = 0; i < edges.size(); ++i) {
    targets[i] = edges[i].first;
    weights[i] = edges[i].second;
  }
}

}  // namespace

uint64_t GraphPart::memory_bytes() const {
  return sizeof(GraphPart) + array_bytes(offsets) + array_bytes(targets) + array_bytes(weights) + array_bytes(ghosts) +
         array_bytes(value) + array_bytes(delta);
}

Status GraphPart::validate() const {
  const std::string where = fmt::format("graph part {} of {}", part_index, part_count);
  if (part_count == 0) return invalid_argument(where + ": part count is 0; a run has at least one part");
  if (part_index >= part_count) {
    return invalid_argument(fmt::format("{}: part index {} is not below the part count {}", where, part_index, part_count));
  }
  // Slots are 32-bit: owned plus ghost slots must all be addressable.
  if (static_cast<uint64_t>(local_count) + ghosts.size() > std::numeric_limits<uint32_t>::max()) {
    return invalid_argument(fmt::format("{}: {} owned plus {} ghost vertices exceed the 32-bit slot range", where,
                                        local_count, ghosts.size()));
  }
  if (offsets.size() != static_cast<uint64_t>(local_count) + 1) {
    return invalid_argument(fmt::format("{}: {} offsets for {} vertices; expected {}", where, offsets.size(),
                                        local_count, static_cast<uint64_t>(local_count) + 1));
  }
  if (offsets.front() != 0) return invalid_argument(fmt::format("{}: offsets[0] is {}, not 0", where, offsets.front()));
  for (std::size_t v = 0; v < local_count; ++v) {
    if (offsets[v + 1] < offsets[v]) {
      return invalid_argument(fmt::format("{}: offsets decrease at slot {} ({} then {})", where, v, offsets[v],
                                          offsets[v + 1]));
    }
  }
  if (offsets.back() != targets.size()) {
    return invalid_argument(fmt::format("{}: offsets end at {} but there are {} edge targets", where, offsets.back(),
                                        targets.size()));
  }
  if (!weights.empty() && weights.size() != targets.size()) {
    return invalid_argument(fmt::format("{}: {} weights for {} edges; send one per edge or none", where,
                                        weights.size(), targets.size()));
  }
  const uint64_t slot_count = static_cast<uint64_t>(local_count) + ghosts.size();
  for (std::size_t e = 0; e < targets.size(); ++e) {
    if (targets[e] >= slot_count) {
      return invalid_argument(fmt::format("{}: edge {} targets slot {} but the part has {} slots ({} owned, {} ghosts)",
                                          where, e, targets[e], slot_count, local_count, ghosts.size()));
    }
  }
  for (std::size_t e = 0; e < weights.size(); ++e) {
    if (!std::isfinite(weights[e])) {
      return invalid_argument(fmt::format("{}: edge {} has weight {}; weights must be finite", where, e, weights[e]));
    }
  }
  for (std::size_t g = 0; g < ghosts.size(); ++g) {
    if (ghosts[g].owner >= part_count || ghosts[g].owner == part_index) {
      return invalid_argument(fmt::format("{}: ghost {} names owner part {}; it must be another part below {}", where,
                                          g, ghosts[g].owner, part_count));
    }
  }
  if (value.size() != local_count || delta.size() != local_count) {
    return invalid_argument(fmt::format("{}: {} values and {} deltas for {} vertices", where, value.size(),
                                        delta.size(), local_count));
  }
  // Infinities are legitimate (unreached sssp vertices, cc's identity); NaN never is and would
  // poison every vertex it reaches.
  for (std::size_t v = 0; v < local_count; ++v) {
    if (std::isnan(value[v]) || std::isnan(delta[v])) {
      return invalid_argument(fmt::format("{}: slot {} has value {} and delta {}; NaN is not a vertex state", where, v,
                                          value[v], delta[v]));
    }
  }
  return Status::ok();
}

Placement make_placement(std::span<const int32_t> part_of, uint32_t part_count) {
  Placement placement;
  placement.part_count = part_count;
  placement.part_of.assign(part_of.begin(), part_of.end());
  placement.slot_of.resize(part_of.size());
  placement.vertices.resize(part_count);
  std::vector<std::size_t> sizes(part_count, 0);
  for (int32_t part : part_of) ++sizes[static_cast<std::size_t>(part)];
  for (uint32_t part = 0; part < part_count; ++part) placement.vertices[part].reserve(sizes[part]);
  for (std::size_t v = 0; v < part_of.size(); ++v) {
    std::vector<uint32_t>& owned = placement.vertices[static_cast<std::size_t>(part_of[v])];
    placement.slot_of[v] = static_cast<uint32_t>(owned.size());
    owned.push_back(static_cast<uint32_t>(v));
  }
  return placement;
}

namespace {

// Builds part p; ghost_of (kNotGhost everywhere, one entry per global vertex) is scratch and is
// left as it was found, so one array can serve every part in turn.
GraphPart build_one_part(const graphdata::DirectedGraph& graph, const Placement& placement, uint32_t p,
                         std::span<const double> value, std::span<const double> delta, std::vector<uint32_t>& ghost_of) {
  std::vector<uint32_t> remote;
  {
    GraphPart part;
    const std::vector<uint32_t>& owned = placement.vertices[p];
    part.part_index = p;
    part.part_count = placement.part_count;
    part.local_count = static_cast<uint32_t>(owned.size());

    remote.clear();
    for (uint32_t v : owned) {
      for (uint64_t e = graph.offsets[v]; e < graph.offsets[v + 1]; ++e) {
        const uint32_t w = graph.targets[e];
        if (static_cast<uint32_t>(placement.part_of[w]) != p && ghost_of[w] == kNotGhost) {
          ghost_of[w] = 0;
          remote.push_back(w);
        }
      }
    }
    // Ghosts in (owner, slot) order: the engine's accumulators for one owner are then
    // contiguous and in the owner's memory order.
    std::sort(remote.begin(), remote.end(), [&](uint32_t a, uint32_t b) {
      return std::pair(placement.part_of[a], placement.slot_of[a]) < std::pair(placement.part_of[b], placement.slot_of[b]);
    });
    part.ghosts.resize(remote.size());
    for (std::size_t g = 0; g < remote.size(); ++g) {
      ghost_of[remote[g]] = static_cast<uint32_t>(g);
      part.ghosts[g] = {static_cast<uint32_t>(placement.part_of[remote[g]]), placement.slot_of[remote[g]]};
    }

    part.offsets.resize(owned.size() + 1);
    part.offsets[0] = 0;
    for (std::size_t s = 0; s < owned.size(); ++s) part.offsets[s + 1] = part.offsets[s] + graph.out_degree(owned[s]);
    part.targets.resize(part.offsets.back());
    if (graph.weighted()) part.weights.resize(part.offsets.back());
    for (std::size_t s = 0; s < owned.size(); ++s) {
      const uint32_t v = owned[s];
      bool has_ghost = false;
      uint64_t out = part.offsets[s];
      for (uint64_t e = graph.offsets[v]; e < graph.offsets[v + 1]; ++e, ++out) {
        const uint32_t w = graph.targets[e];
        if (static_cast<uint32_t>(placement.part_of[w]) == p) {
          part.targets[out] = placement.slot_of[w];
        } else {
          part.targets[out] = part.local_count + ghost_of[w];
          has_ghost = true;
        }
        if (graph.weighted()) part.weights[out] = graph.weights[e];
      }
      // Owned slots ascend with global ids, so only a list with ghosts can be out of slot order.
      if (has_ghost) {
        const std::size_t begin = part.offsets[s];
        const std::size_t count = part.offsets[s + 1] - begin;
        sort_edges_by_slot(std::span(part.targets).subspan(begin, count),
                           graph.weighted() ? std::span(part.weights).subspan(begin, count) : std::span<double>());
      }
    }
    for (uint32_t w : remote) ghost_of[w] = kNotGhost;

    part.value.resize(owned.size());
    part.delta.resize(owned.size());
    for (std::size_t s = 0; s < owned.size(); ++s) {
      part.value[s] = value[owned[s]];
      part.delta[s] = delta[owned[s]];
    }
    return part;
  }
}

}  // namespace

std::vector<GraphPart> build_parts(const graphdata::DirectedGraph& graph, const Placement& placement,
                                   std::span<const double> value, std::span<const double> delta) {
  std::vector<GraphPart> parts;
  // One scratch array serves every part: entries set for a part are reset before the next, so the
  // whole build stays O(V + E).
  std::vector<uint32_t> ghost_of(static_cast<std::size_t>(graph.vertex_count), kNotGhost);
  for (uint32_t p = 0; p < placement.part_count; ++p) parts.push_back(build_one_part(graph, placement, p, value, delta, ghost_of));
  return parts;
}

GraphPart build_part(const graphdata::DirectedGraph& graph, const Placement& placement, uint32_t part,
                     std::span<const double> value, std::span<const double> delta) {
  std::vector<uint32_t> ghost_of(static_cast<std::size_t>(graph.vertex_count), kNotGhost);
  return build_one_part(graph, placement, part, value, delta, ghost_of);
}

void scatter_values(const Placement& placement, uint32_t part, std::span<const double> part_values,
                    std::span<double> global_values) {
  const std::vector<uint32_t>& owned = placement.vertices[part];
  for (std::size_t s = 0; s < owned.size() && s < part_values.size(); ++s) global_values[owned[s]] = part_values[s];
}

}  // namespace tessera::graph
