// SyncStep (sync_step.hpp).
#include "sync_step.hpp"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "tessera/core/time.hpp"

namespace tessera::graph::detail {

// Jacobi: every vertex pending at the step's start is updated once from that delta. Sum
// algorithms walk the whole slice (nearly every vertex is pending at every step); min/max ones
// only the vertices their queue holds, the way a frontier-based engine walks only the active
// ones (without it a step of sssp on a 1000 x 1000 mesh scanned a million vertices to update
// a few hundred).
template <Accumulate kOp, EdgeMode kMode>
void SyncStep::jacobi(Slice& slice) {
  if constexpr (kOp == Accumulate::kSum) {
    const uint32_t n = slice.own_count();
    slice.step_deltas.assign(slice.acc.begin(), slice.acc.begin() + n);
    std::fill(slice.acc.begin(), slice.acc.begin() + n, 0.0);
    const auto visit = [&](uint32_t u) -> uint64_t {
      const double dv = slice.step_deltas[u];
      if (dv == 0.0) return 0;
      ++slice.updates;
      return kernels_.relax<kOp, kMode>(slice, u, dv);
    };
    SliceKernels::chunked_pass(slice, n, visit, [] { return true; });
  } else if (slice.pending_count * 8 >= slice.own_count()) {
    // A dense step (an eighth of the slice or more pending): the sum algorithms' step with a
    // plain relax, then one scan for the counts and the next step's queue.
    const uint32_t n = slice.own_count();
    slice.step_deltas.assign(slice.acc.begin(), slice.acc.begin() + n);
    std::fill(slice.acc.begin(), slice.acc.begin() + n, Op<kOp>::kIdentity);
    const double* values = kernels_.part().value.data() + slice.lo;
    const auto visit = [&](uint32_t u) -> uint64_t {
      const double dv = slice.step_deltas[u];
      if (!Op<kOp>::pending(dv, values[u])) return 0;
      ++slice.updates;
      return kernels_.relax<kOp, kMode, /*kTracked=*/false>(slice, u, dv);
    };
    SliceKernels::chunked_pass(slice, n, visit, [] { return true; });
    kernels_.recount_frontier<kOp>(slice);
  } else {
    // A sparse step: take the queued vertices' deltas (each is queued once in a sync step) and
    // walk them in slot order, which walks the CSR in order.
    std::vector<uint32_t>& pending = slice.step_vertices;
    pending.clear();
    if (slice.frontier_stale) {
      for (uint32_t u = 0; u < slice.own_count(); ++u) {
        if (slice.queued[u] != 0) pending.push_back(u);
      }
      slice.frontier_stale = false;
    } else {
      pending.swap(slice.frontier_list);
      std::sort(pending.begin(), pending.end());
    }
    slice.frontier_list.clear();
    for (uint32_t u : pending) slice.queued[u] = 0;
    std::erase_if(pending, [&](uint32_t u) { return !kernels_.is_pending<kOp>(slice, u); });
    slice.step_deltas.clear();
    for (uint32_t u : pending) slice.step_deltas.push_back(std::exchange(slice.acc[u], Op<kOp>::kIdentity));
    slice.pending_count -= pending.size();
    const auto visit = [&](uint32_t i) -> uint64_t {
      ++slice.updates;
      return kernels_.relax<kOp, kMode>(slice, pending[i], slice.step_deltas[i]);
    };
    SliceKernels::chunked_pass(slice, static_cast<uint32_t>(pending.size()), visit, [] { return true; });
  }
}

Result<StepReport> SyncStep::run(uint64_t step) {
  for (const auto& slice : slices_) kernels_.use_frontier(*slice, true);
  inbox_.fold_held(inbox_.take_before(step));  // batches of step k-1 are this step's input
  // Leftovers of an earlier async run, if any.
  std::vector<uint32_t> inbox_slots;
  std::vector<double> inbox_deltas;
  std::vector<Drained> drained(slices_.count());
  for (const auto& slice : slices_) drained[slice->index] = router_.drain(*slice, inbox_slots, inbox_deltas);

  const auto run_jacobi = [&](Slice& slice) {
    const Clock::time_point begin = Clock::now();
    slice.now = begin;
    kernels_.dispatch([&]<Accumulate kOp, EdgeMode kMode>() { jacobi<kOp, kMode>(slice); });
    slice.busy_seconds += seconds_between(begin, Clock::now());
  };
  if (slices_.count() == 1) {
    run_jacobi(slices_[0]);
  } else {
    std::vector<std::thread> workers;
    for (const auto& slice : slices_) workers.emplace_back([&, s = slice.get()] { run_jacobi(*s); });
    for (std::thread& worker : workers) worker.join();
  }

  StepReport report;
  report.step = step;
  report.batches_sent_to.assign(kernels_.part().part_count, 0);
  for (const auto& slice : slices_) {
    for (uint32_t d = 0; d < slices_.destination_count(); ++d) {
      if (d < slices_.count()) {
        // Another slice of this part: its deltas for the next step, applied directly.
        router_.move_to_slice(*slice, d);
      } else if (!router_.flush(*slice, d, step, &report.batches_sent_to)) {
        return router_.failure();
      }
    }
  }
  for (const auto& slice : slices_) {
    router_.publish(*slice, kernels_.scan(*slice), kernels_.outside_residual(*slice), drained[slice->index]);
  }
  return report;
}

}  // namespace tessera::graph::detail
