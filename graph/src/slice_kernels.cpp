// SliceKernels (slice_kernels.hpp): the kernels that run once per round or per step, chosen at
// run time; the per-vertex ones are templates in the header.
#include "slice_kernels.hpp"

#include <limits>

namespace tessera::graph::detail {

Scan SliceKernels::scan(const Slice& slice) const {
  switch (op_) {
    case Accumulate::kSum: return scan<Accumulate::kSum>(slice);
    case Accumulate::kMin: return scan<Accumulate::kMin>(slice);
    case Accumulate::kMax: return scan<Accumulate::kMax>(slice);
  }
  return {};
}

double SliceKernels::outside_residual(const Slice& slice) const {
  if (op_ != Accumulate::kSum) {
    // An outside min/max entry is listed once, when it leaves the identity, and stays off it
    // until flushed.
    std::size_t listed = 0;
    for (const std::vector<uint32_t>& list : slice.dirty) listed += list.size();
    return static_cast<double>(listed);
  }
  const double identity = identity_of(op_);
  double residual = 0.0;
  for (const std::vector<uint32_t>& list : slice.dirty) {
    for (uint32_t o : list) {
      const double a = slice.acc[o];
      if (a != identity) residual += op_ == Accumulate::kSum ? std::abs(a) : 1.0;
    }
  }
  return residual;
}

double SliceKernels::bucket_width() const {
  if (spec_.kind != AlgorithmKind::kShortestPaths) return std::numeric_limits<double>::infinity();
  if (part_.weights.empty()) return 1.0;
  double sum = 0.0;
  for (double w : part_.weights) sum += w;
  const double mean = sum / static_cast<double>(part_.weights.size());
  return mean > 0.0 && std::isfinite(mean) ? mean : 1.0;
}

void SliceKernels::fold_into(Slice& slice, std::span<const uint32_t> slots, std::span<const double> deltas) {
  dispatch_op(op_, [&]<Accumulate kOp>() { fold_into<kOp>(slice, slots, deltas); });
}

void SliceKernels::start_queue(Slice& slice, double width) {
  if (op_ == Accumulate::kSum) return;
  slice.queue.width = width;
  dispatch_op(op_, [&]<Accumulate kOp>() {
    if constexpr (kOp != Accumulate::kSum) count_and_queue<kOp>(slice);
  });
}

void SliceKernels::use_frontier(Slice& slice, bool frontier) {
  if (op_ == Accumulate::kSum || slice.frontier == frontier) return;
  slice.frontier = frontier;
  if (!frontier) {
    slice.queued = {};
    slice.frontier_list = {};
  }
  dispatch_op(op_, [&]<Accumulate kOp>() {
    if constexpr (kOp != Accumulate::kSum) count_and_queue<kOp>(slice);
  });
}

void SliceKernels::fold_dangling(Slice& slice) {
  std::lock_guard lock(slice.value_mutex);
  double* values = part_.value.data() + slice.lo;
  for (uint32_t u : slice.dangling) {
    const double dv = slice.acc[u];
    if (dv == 0.0) continue;
    values[u] += dv;
    slice.acc[u] = 0.0;
    ++slice.updates;
  }
}

}  // namespace tessera::graph::detail
