// BucketQueue: the engine's priority queue for min/max algorithms (sssp, cc), one per slice.
// A framework primitive of the engine (GBBS keeps its bucket structure in a file of its own): it
// knows vertices and priorities, nothing of graphs or threads.
// Owns its buckets; not thread-safe (one slice's thread, or the controlling thread in sync mode).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessera::graph::detail {

// A min/max slice's pending vertices in buckets of priority, the best bucket first and last in,
// first out within one: pushing and popping cost O(1), where a heap's log n per improvement costs
// more than the edges relaxed. A vertex is pushed every time its delta improves, so it may sit in
// several buckets; the caller skips an entry whose vertex is no longer pending (updated from a
// better entry already). Buckets span `width` of priority from `anchor` down: sssp's are
// delta-stepping's (distance / mean edge weight; breadth-first levels when unweighted); cc has one
// bucket, a stack, so the largest label popped floods its component depth-first before any lesser
// label moves (the initial entries go in in ascending priority).
struct BucketQueue {
  static constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
  static constexpr std::size_t kMaxBuckets = std::size_t{1} << 16;  // farther priorities share the last
  double anchor = 0.0;
  double width = std::numeric_limits<double>::infinity();
  std::vector<std::vector<uint32_t>> buckets;
  std::size_t best = 0;  // no entry sits in a bucket before this one
  std::size_t entries = 0;

  std::size_t bucket_for(double priority) const {
    const double b = std::floor((anchor - priority) / width);
    if (!(b > 0.0)) return 0;  // better than the anchor, one bucket only, or NaN
    return b >= static_cast<double>(kMaxBuckets - 1) ? kMaxBuckets - 1 : static_cast<std::size_t>(b);
  }
  void push(uint32_t vertex, double priority) {
    const std::size_t b = bucket_for(priority);
    if (b >= buckets.size()) buckets.resize(b + 1);
    buckets[b].push_back(vertex);
    ++entries;
    best = std::min(best, b);
  }
  // The best entry, or kEmpty when there is none.
  uint32_t pop() {
    if (entries == 0) return kEmpty;
    while (buckets[best].empty()) ++best;
    const uint32_t vertex = buckets[best].back();
    buckets[best].pop_back();
    --entries;
    return vertex;
  }
  void clear() {
    for (std::vector<uint32_t>& bucket : buckets) bucket.clear();
    best = 0;
    entries = 0;
  }
  uint64_t memory_bytes() const {
    uint64_t bytes = buckets.capacity() * sizeof(std::vector<uint32_t>);
    for (const std::vector<uint32_t>& bucket : buckets) bytes += bucket.capacity() * sizeof(uint32_t);
    return bytes;
  }
};

}  // namespace tessera::graph::detail
