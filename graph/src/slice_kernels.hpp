// SliceKernels: what the engine does to one slice's vertices, shared by the async rounds and the
// sync step: scanning a slice for its residual, taking deltas into its accumulators, keeping a
// min/max slice's pending and reached counts and its queue (or sync frontier) exact, and the
// update itself (relax: v (+)= dv, then g(dv, e) into every out-edge's target accumulator, own or
// outside, an outside one listed dirty for its destination the first time it leaves the identity).
// Templates on the accumulate operator and edge mode so that the inner loops are compiled per
// algorithm; header-only where they are hot, so they inline into the schedules.
// Holds the part (owned by the engine, targets renumbered by SliceSet) by reference and the spec
// by value. Not thread-safe: a slice is worked on only by its own thread (the controlling thread
// in sync mode); the part's values are written under the slice's value mutex where a kernel says.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "accumulate_ops.hpp"
#include "progress_ledger.hpp"
#include "slice.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/state.hpp"

namespace tessera::graph::detail {

// Edge updates + vertices scanned between two looks at the clock, the stop flag and the value
// mutex (snapshot_values waits at most this much work).
inline constexpr uint64_t kChunkWork = 4096;

class SliceKernels {
 public:
  SliceKernels(GraphPart& part, const AlgorithmSpec& spec)
      : part_(part), spec_(spec), op_(accumulate_of(spec)), mode_(edge_mode_of(spec, !part.weights.empty())) {}

  Accumulate op() const { return op_; }
  EdgeMode mode() const { return mode_; }
  const GraphPart& part() const { return part_; }

  // body.template operator()<kOp, kMode>() for this engine's algorithm.
  template <typename Body>
  void dispatch(Body&& body) const {
    dispatch_op_and_mode(op_, mode_, std::forward<Body>(body));
  }

  // --- Figures --------------------------------------------------------------------------------

  template <Accumulate kOp>
  Scan scan(const Slice& slice) const {
    if constexpr (kOp != Accumulate::kSum) {
      return {static_cast<double>(slice.pending_count), static_cast<double>(slice.reached_count)};
    }
    Scan result;
    const double* values = part_.value.data() + slice.lo;
    for (uint32_t u = 0; u < slice.own_count(); ++u) {
      result.residual += std::abs(slice.acc[u]);
      if (std::isfinite(values[u])) result.value_sum += values[u];
    }
    return result;
  }
  Scan scan(const Slice& slice) const;

  // What the slice's dirty outside accumulators hold (an entry listed twice counts twice: the
  // figure may only err upwards).
  double outside_residual(const Slice& slice) const;

  uint64_t slice_edges(const Slice& slice) const { return part_.offsets[slice.hi] - part_.offsets[slice.lo]; }

  // The priority span of one bucket of a min/max queue (BucketQueue): sssp's distances in
  // buckets of the part's mean edge weight (1 when unweighted), cc's labels in one bucket.
  double bucket_width() const;

  // --- Taking deltas in ------------------------------------------------------------------------

  // Deltas for own vertices (own numbering) into their accumulators.
  template <Accumulate kOp>
  void fold_into(Slice& slice, std::span<const uint32_t> slots, std::span<const double> deltas) {
    double* acc = slice.acc.data();
    if constexpr (kOp == Accumulate::kSum) {
      for (std::size_t i = 0; i < slots.size(); ++i) acc[slots[i]] += deltas[i];
    } else {
      const double* values = part_.value.data() + slice.lo;
      for (std::size_t i = 0; i < slots.size(); ++i) arrive<kOp>(slice, acc, values, slots[i], deltas[i]);
    }
  }
  void fold_into(Slice& slice, std::span<const uint32_t> slots, std::span<const double> deltas);

  // min/max: c arrives for own vertex t. When it improves t's delta and the delta improves on
  // t's value, t is pending: counted when it becomes so, and queued at its new priority (the
  // entry it had, if any, is stale from now on).
  template <Accumulate kOp>
  static void arrive(Slice& slice, double* acc, const double* values, uint32_t t, double c) {
    double& a = acc[t];
    if (!Op<kOp>::better(c, a)) return;
    const bool was_pending = Op<kOp>::pending(a, values[t]);
    a = c;
    if (!Op<kOp>::pending(c, values[t])) return;
    if (!was_pending) ++slice.pending_count;
    if (!slice.frontier) {
      slice.queue.push(t, Op<kOp>::priority(c));
    } else if (slice.queued[t] == 0) {
      slice.queued[t] = 1;
      slice.frontier_list.push_back(t);
    }
  }

  // --- min/max bookkeeping ---------------------------------------------------------------------

  // min/max: the pending and reached counts from a scan, and the queue rebuilt with every pending
  // vertex once, the best pushed last (popped first).
  template <Accumulate kOp>
  void count_and_queue(Slice& slice) {
    if (slice.frontier) {
      recount_frontier<kOp>(slice);
      return;
    }
    const double* values = part_.value.data() + slice.lo;
    slice.reached_count = 0;
    std::vector<std::pair<double, uint32_t>> pending;
    for (uint32_t u = 0; u < slice.own_count(); ++u) {
      if (std::isfinite(values[u])) ++slice.reached_count;
      if (Op<kOp>::pending(slice.acc[u], values[u])) pending.emplace_back(Op<kOp>::priority(slice.acc[u]), u);
    }
    slice.pending_count = pending.size();
    std::sort(pending.begin(), pending.end());
    slice.queue.clear();
    for (const auto& [priority, u] : pending) slice.queue.push(u, priority);
  }

  // min/max: the queue's bucket width (bucket_width(), computed once for all slices) and the
  // counts and queue from a scan, after SliceSet::cut. Sum algorithms: nothing.
  void start_queue(Slice& slice, double width);

  // Sync min/max: the counts and the queued flags from one scan of the slice; the frontier list
  // is left stale (a dense step scans instead; a sparse one rebuilds it from the flags).
  template <Accumulate kOp>
  void recount_frontier(Slice& slice) {
    const double* values = part_.value.data() + slice.lo;
    slice.pending_count = 0;
    slice.reached_count = 0;
    slice.queued.resize(slice.own_count());
    for (uint32_t u = 0; u < slice.own_count(); ++u) {
      if (std::isfinite(values[u])) ++slice.reached_count;
      const bool pending = Op<kOp>::pending(slice.acc[u], values[u]);
      slice.queued[u] = pending ? 1 : 0;
      slice.pending_count += pending ? 1 : 0;
    }
    slice.frontier_list.clear();
    slice.frontier_stale = true;
  }

  // min/max: switches a slice's queue between the async buckets and the sync frontier.
  void use_frontier(Slice& slice, bool frontier);

  // min/max: whether vertex u (own numbering) has a delta that improves on its value.
  template <Accumulate kOp>
  bool is_pending(const Slice& slice, uint32_t u) const {
    return Op<kOp>::pending(slice.acc[u], part_.value[slice.lo + u]);
  }

  // min/max: a queue that has grown well past the slice (every improvement pushes an entry) is
  // rebuilt with one entry per pending vertex, so its memory stays proportional to the part.
  template <Accumulate kOp>
  void compact_queue(Slice& slice) {
    if (slice.queue.entries <= 4 * static_cast<std::size_t>(slice.own_count()) + 1024) return;
    count_and_queue<kOp>(slice);
  }

  // --- Updates ---------------------------------------------------------------------------------

  template <Accumulate kOp>
  static void mark_outside(Slice& slice, uint32_t o, double c) {
    double& a = slice.acc[o];
    if constexpr (kOp == Accumulate::kSum) {
      if (a == 0.0) {
        const uint32_t d = slice.outside_destination[o - slice.own_count()];
        if (slice.dirty[d].empty()) slice.dirty_since[d] = slice.now;
        slice.dirty[d].push_back(o);
      }
      a += c;
    } else {
      double updated = a;
      Op<kOp>::apply(updated, c);
      if (updated == a) return;
      if (a == Op<kOp>::kIdentity) {
        const uint32_t d = slice.outside_destination[o - slice.own_count()];
        if (slice.dirty[d].empty()) slice.dirty_since[d] = slice.now;
        slice.dirty[d].push_back(o);
      }
      a = updated;
    }
  }

  // v (+)= dv and g(dv, e) into every out-edge's target; returns the edges updated. The caller
  // has already taken dv out of the accumulator (a self-loop adds to it again). kTracked (min/max):
  // keep the pending and reached counts and the queue as targets improve; a dense sync step
  // leaves them and recounts after the step (tracking costs more than the scan then).
  template <Accumulate kOp, EdgeMode kMode, bool kTracked = true>
  uint64_t relax(Slice& slice, uint32_t u, double dv) {
    double* values = part_.value.data() + slice.lo;
    double* acc = slice.acc.data();
    if constexpr (kOp == Accumulate::kSum || !kTracked) {
      Op<kOp>::fold(values[u], dv);
    } else {
      // In a sync step u's accumulator may already hold a delta for the next step; whether it
      // still counts as pending depends on the value folded now.
      const bool was_pending = Op<kOp>::pending(acc[u], values[u]);
      if (!std::isfinite(values[u]) && std::isfinite(dv)) ++slice.reached_count;
      Op<kOp>::fold(values[u], dv);
      if (was_pending && !Op<kOp>::pending(acc[u], values[u])) --slice.pending_count;
    }
    const uint64_t begin = part_.offsets[slice.lo + u];
    const uint64_t end = part_.offsets[slice.lo + u + 1];
    if (begin == end) return 0;  // pagerank's dangling vertices drop their mass here
    // One definition of g (state.hpp): the per-vertex factor; per edge only * w or + w remains.
    const double c = kMode == EdgeMode::kPlusWeight ? dv : propagate(spec_, dv, end - begin, 1.0);
    const uint32_t n = slice.own_count();
    const uint32_t* target = part_.targets.data() + begin;
    const uint32_t* const target_end = part_.targets.data() + end;
    const auto local = [&](uint32_t t, double value) {
      if constexpr (kOp == Accumulate::kSum) {
        acc[t] += value;
      } else if constexpr (!kTracked) {
        Op<kOp>::apply(acc[t], value);
      } else {
        arrive<kOp>(slice, acc, values, t, value);
      }
    };
    if constexpr (kMode == EdgeMode::kConstant) {
      for (; target != target_end && *target < n; ++target) local(*target, c);
      for (; target != target_end; ++target) mark_outside<kOp>(slice, *target, c);
    } else {
      const double* weight = part_.weights.data() + begin;
      const auto edge_value = [c](double w) { return kMode == EdgeMode::kScaledByWeight ? c * w : c + w; };
      for (; target != target_end && *target < n; ++target, ++weight) local(*target, edge_value(*weight));
      for (; target != target_end; ++target, ++weight) mark_outside<kOp>(slice, *target, edge_value(*weight));
    }
    slice.edge_updates += end - begin;
    return end - begin;
  }

  // Sum algorithms: a dangling vertex's update changes nothing but its own value, so a round
  // starts by folding them all in one tight pass instead of selecting them one by one.
  void fold_dangling(Slice& slice);

  // Visits the slice's vertices in slot order, in chunks of about kChunkWork (a vertex scanned
  // counts 1, plus the edges `visit` returns) with the value mutex held per chunk, so
  // snapshot_values waits one chunk at most. `between` runs between chunks; false stops the pass.
  template <typename Visit, typename Between>
  static bool chunked_pass(Slice& slice, uint32_t count, Visit&& visit, Between&& between) {
    uint32_t i = 0;
    while (i < count) {
      {
        std::lock_guard lock(slice.value_mutex);
        for (uint64_t work = 0; i < count && work < kChunkWork; ++i) work += 1 + visit(i);
      }
      if (!between()) return false;
    }
    return true;
  }

 private:
  GraphPart& part_;  // targets renumbered per slice; delta moved into the slices' accumulators
  const AlgorithmSpec spec_;
  const Accumulate op_;
  const EdgeMode mode_;
};

}  // namespace tessera::graph::detail
