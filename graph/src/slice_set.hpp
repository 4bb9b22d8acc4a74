// SliceSet: a part's vertices cut into contiguous slices, one per update thread, and the part's
// edge targets renumbered per slice so that the kernels' inner loop is `acc[target] (+)= c`
// whatever the target is:
//  - slices are balanced by vertices + edges (a vertex costs one visit per round plus one unit
//    per out-edge);
//  - each slice numbers its own vertices 0 .. n-1, then "outside" slots n .. for every vertex it
//    reaches that another slice or another part owns (sorted, so flushes walk memory), and puts
//    each vertex's own targets before its outside ones; with one thread and one part the
//    numbering is the part's own and there are no outside slots at all;
//  - each outside slot knows its destination (a slice index, or slice count + part) and its slot
//    there.
// Owns the slices. cut() rewrites the part's targets (and weights, when it reorders a vertex's
// edges) and moves its deltas into the slices' accumulators. Not thread-safe to build; afterwards
// the set itself is immutable and any thread may look slices up.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "slice.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/part.hpp"

namespace tessera::graph::detail {

class SliceSet {
 public:
  // REQUIRES: part.validate() ok; threads >= 1. Makes min(threads, local_count) slices (at least
  // one), with accumulators at `op`'s identity but for the part's deltas, which it takes (part.delta
  // is left empty).
  static SliceSet cut(GraphPart& part, uint32_t threads, Accumulate op);

  uint32_t count() const { return static_cast<uint32_t>(slices_.size()); }
  // Slices, then the parts: what an outside slot's destination indexes.
  uint32_t destination_count() const { return count() + part_count_; }
  Slice& operator[](uint32_t index) const { return *slices_[index]; }
  // The slice that owns part slot `slot` (< local_count), and its first slot.
  uint32_t slice_of(uint32_t slot) const {
    if (slices_.size() == 1) return 0;
    return static_cast<uint32_t>(std::upper_bound(slice_lo_.begin(), slice_lo_.end(), slot) - slice_lo_.begin()) - 1;
  }
  uint32_t first_slot(uint32_t slice) const { return slice_lo_[slice]; }

  auto begin() const { return slices_.begin(); }
  auto end() const { return slices_.end(); }

 private:
  void renumber(GraphPart& part, Slice& slice, Accumulate op, std::vector<uint32_t>& outside_of);

  std::vector<std::unique_ptr<Slice>> slices_;
  std::vector<uint32_t> slice_lo_;  // first slot of each slice, for routing delivered slots
  uint32_t part_count_ = 0;
};

}  // namespace tessera::graph::detail
