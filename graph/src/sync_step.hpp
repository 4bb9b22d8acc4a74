// SyncStep: one synchronous Jacobi step of the engine. It folds in exactly the held batches
// tagged before the step (later ones wait), updates every vertex with a pending delta once from
// the deltas as they were at the start of the step (contributions made during step k are applied
// in step k+1), on one thread per slice when there are several, then moves sibling slices'
// deltas into their accumulators and flushes every remote destination as batches tagged k.
// Owns nothing; works on the engine's slices through its kernels, router, ledger and inbox.
// Not thread-safe: the controlling thread, while no update thread runs.
#pragma once

#include <cstdint>

#include "delta_router.hpp"
#include "inbox.hpp"
#include "slice.hpp"
#include "slice_kernels.hpp"
#include "slice_set.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/engine.hpp"

namespace tessera::graph::detail {

class SyncStep {
 public:
  SyncStep(const SliceSet& slices, SliceKernels& kernels, DeltaRouter& router, Inbox& inbox)
      : slices_(slices), kernels_(kernels), router_(router), inbox_(inbox) {}

  // Runs step `step`; the report's batches_sent_to per part, its progress left to the caller.
  // Fails with the Outbound's first failure (the router's).
  Result<StepReport> run(uint64_t step);

 private:
  template <Accumulate kOp, EdgeMode kMode>
  void jacobi(Slice& slice);

  const SliceSet& slices_;
  SliceKernels& kernels_;
  DeltaRouter& router_;
  Inbox& inbox_;
};

}  // namespace tessera::graph::detail
