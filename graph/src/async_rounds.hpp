// AsyncRounds: the two schedules an async update thread runs on its slice until stopped, chosen
// by the accumulate operator:
//  - + (pagerank, katz): Gauss-Seidel sweeps in slot order over every vertex at or above the
//    round's limit (the slice's residual per edge, the peer and coordinator levels of
//    PriorityLevels, or a sampled share when priority_fraction < 1), every outside delta flushed
//    at the end of the sweep. Sweeping walks the CSR in order, so it costs about what a Jacobi
//    step costs per edge, and using each delta as soon as it arrives needs about half the Jacobi
//    steps' edge updates. Ordering by |dv| / degree saves few edge updates over the in-order sweep,
//    far less than a priority queue costs per edge.
//  - min / max (sssp, cc): chunks of work from the slice's BucketQueue, smallest distance or
//    largest label first, so a vertex is mostly updated once, with its final value, as in
//    Dijkstra or delta-stepping; sweeping instead re-sent every intermediate label (hundreds of
//    times per vertex on a 1000 x 1000 mesh). Flushes by count and age between chunks.
// A slice with nothing worth doing flushes everything, publishes, and sleeps on its mailbox until
// deltas arrive, the level moves, or a bounded wait for its peers' deltas ends.
// Owns nothing; works on the engine's slices through its kernels, router, ledger and levels.
// run() is the body of one update thread; each slice is run by one thread at a time.
#pragma once

#include "delta_router.hpp"
#include "priority_levels.hpp"
#include "progress_ledger.hpp"
#include "slice.hpp"
#include "slice_kernels.hpp"
#include "tessera/graph/engine.hpp"
#include "update_threads.hpp"

namespace tessera::graph::detail {

class AsyncRounds {
 public:
  AsyncRounds(SliceKernels& kernels, DeltaRouter& router, PriorityLevels& levels, ProgressLedger& ledger,
              const UpdateThreads& threads, const EngineOptions& options)
      : kernels_(kernels), router_(router), levels_(levels), ledger_(ledger), threads_(threads), options_(options) {}

  // Rounds on `slice` until the threads are asked to stop, then its final figures (after stop()
  // progress() is exact: owned, outside and mailbox deltas).
  void run(Slice& slice);

 private:
  // What a sweep found.
  enum class SweepOutcome : uint8_t { kStopping, kUpdated, kNothingAtFloor };

  template <Accumulate kOp, EdgeMode kMode>
  void run_slice(Slice& slice);
  template <EdgeMode kMode>
  void run_sweeps(Slice& slice);
  template <EdgeMode kMode>
  SweepOutcome sweep(Slice& slice, double limit, double floor);
  template <Accumulate kOp, EdgeMode kMode>
  void run_queue(Slice& slice);
  template <Accumulate kOp, EdgeMode kMode>
  bool update_from_queue(Slice& slice);

  bool wait_for_work(Slice& slice, Clock::time_point round_start, const Scan& figures, const Drained& taken,
                     uint64_t generation, Clock::time_point deadline = Clock::time_point::max());
  bool between_chunks(Slice& slice);
  double pick_limit(Slice& slice);

  SliceKernels& kernels_;
  DeltaRouter& router_;
  PriorityLevels& levels_;
  ProgressLedger& ledger_;
  const UpdateThreads& threads_;
  const EngineOptions& options_;
};

}  // namespace tessera::graph::detail
