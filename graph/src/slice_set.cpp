// SliceSet (slice_set.hpp): cutting a part into slices and renumbering its edge targets.
#include "slice_set.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace tessera::graph::detail {

namespace {
constexpr uint32_t kNotRenumbered = std::numeric_limits<uint32_t>::max();
}  // namespace

SliceSet SliceSet::cut(GraphPart& part, uint32_t threads, Accumulate op) {
  SliceSet set;
  set.part_count_ = part.part_count;
  const uint32_t n = part.local_count;
  const uint32_t count = std::max<uint32_t>(1, std::min(threads, std::max<uint32_t>(n, 1)));
  // Balance vertices + edges: a vertex costs one visit per round plus one unit per out-edge.
  const uint64_t total_work = part.targets.size() + n;
  uint32_t lo = 0;
  for (uint32_t t = 0; t < count; ++t) {
    const uint64_t goal = total_work * (t + 1) / count;
    uint32_t hi = lo;
    if (t + 1 == count) {
      hi = n;
    } else {
      while (hi < n && part.offsets[hi + 1] + hi + 1 <= goal) ++hi;
    }
    auto slice = std::make_unique<Slice>();
    slice->index = t;
    slice->lo = lo;
    slice->hi = hi;
    slice->random_state = 0x5eed0000ULL + t;
    set.slices_.push_back(std::move(slice));
    set.slice_lo_.push_back(lo);
    lo = hi;
  }
  std::vector<uint32_t> outside_of(static_cast<std::size_t>(n) + part.ghosts.size(), kNotRenumbered);
  for (auto& slice : set.slices_) set.renumber(part, *slice, op, outside_of);
  part.delta.clear();
  part.delta.shrink_to_fit();
  return set;
}

// Renumbers the slice's edge targets in place (own 0..n-1, outside n..), builds its outside
// slots' destinations and its accumulator, and puts each vertex's own targets first.
void SliceSet::renumber(GraphPart& part, Slice& slice, Accumulate op, std::vector<uint32_t>& outside_of) {
  const uint32_t n = slice.own_count();
  const uint64_t edge_lo = part.offsets[slice.lo];
  const uint64_t edge_hi = part.offsets[slice.hi];
  std::vector<uint32_t> outside;
  for (uint64_t e = edge_lo; e < edge_hi; ++e) {
    const uint32_t t = part.targets[e];
    if ((t < slice.lo || t >= slice.hi) && outside_of[t] == kNotRenumbered) {
      outside_of[t] = 0;
      outside.push_back(t);
    }
  }
  // Part slots order other slices by slice and ghosts by (owner, slot): flushes walk memory.
  std::sort(outside.begin(), outside.end());
  slice.outside_destination.resize(outside.size());
  slice.outside_slot.resize(outside.size());
  for (std::size_t k = 0; k < outside.size(); ++k) {
    const uint32_t t = outside[k];
    outside_of[t] = n + static_cast<uint32_t>(k);
    if (t < part.local_count) {
      const uint32_t owner = slice_of(t);
      slice.outside_destination[k] = owner;
      slice.outside_slot[k] = t - slice_lo_[owner];
    } else {
      const GhostRef& ghost = part.ghosts[t - part.local_count];
      slice.outside_destination[k] = count() + ghost.owner;
      slice.outside_slot[k] = ghost.slot;
    }
  }
  const bool weighted = !part.weights.empty();
  std::vector<std::pair<uint32_t, double>> edges;
  for (uint32_t u = slice.lo; u < slice.hi; ++u) {
    bool seen_outside = false;
    bool ordered = true;
    for (uint64_t e = part.offsets[u]; e < part.offsets[u + 1]; ++e) {
      uint32_t& t = part.targets[e];
      t = (t >= slice.lo && t < slice.hi) ? t - slice.lo : outside_of[t];
      if (t >= n) {
        seen_outside = true;
      } else if (seen_outside) {
        ordered = false;
      }
    }
    if (ordered) continue;
    // The kernel walks own targets until the first outside one; restore that order.
    edges.clear();
    for (uint64_t e = part.offsets[u]; e < part.offsets[u + 1]; ++e) {
      edges.emplace_back(part.targets[e], weighted ? part.weights[e] : 0.0);
    }
    std::sort(edges.begin(), edges.end());
    for (uint64_t e = part.offsets[u], i = 0; e < part.offsets[u + 1]; ++e, ++i) {
      part.targets[e] = edges[i].first;
      if (weighted) part.weights[e] = edges[i].second;
    }
  }
  for (uint32_t t : outside) outside_of[t] = kNotRenumbered;
  for (uint32_t u = 0; u < n; ++u) {
    if (part.offsets[slice.lo + u] == part.offsets[slice.lo + u + 1]) slice.dangling.push_back(u);
  }

  slice.acc.assign(static_cast<std::size_t>(n) + outside.size(), identity_of(op));
  std::copy(part.delta.begin() + slice.lo, part.delta.begin() + slice.hi, slice.acc.begin());
  slice.dirty.assign(destination_count(), {});
  slice.dirty_since.assign(destination_count(), Clock::time_point{});
}

}  // namespace tessera::graph::detail
