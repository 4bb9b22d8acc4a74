// Inbox: where batches from other parts enter the engine. deliver() checks a batch (refusing it
// whole with kProtocolError when its parts, slots or deltas are out of range), notes its sender's
// residual per edge for the peer level, and then either routes it to the owning slices' mailboxes
// (async engine running) or holds it for the next start() or step(), which fold held batches in
// with fold_held(). A batch counts as received only once its deltas are in the engine's residual
// (held store or mailboxes): a progress() in between must see it in flight, never nowhere.
// Owns the held batches. Thread-safe: deliver() from any thread; the others from the controlling
// thread while no update thread runs. Lock order: the inbox's mutex, then the ledger's, then a
// mailbox's.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "delta_router.hpp"
#include "priority_levels.hpp"
#include "progress_ledger.hpp"
#include "slice_kernels.hpp"
#include "slice_set.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/engine.hpp"

namespace tessera::graph::detail {

class Inbox {
 public:
  Inbox(const SliceSet& slices, SliceKernels& kernels, DeltaRouter& router, ProgressLedger& ledger,
        PriorityLevels& levels, AlgorithmKind kind)
      : slices_(slices), kernels_(kernels), router_(router), ledger_(ledger), levels_(levels), kind_(kind) {}

  Status deliver(DeltaBatch&& batch);

  // From now on deliver() routes to the mailboxes; returns what was held until now (start()).
  std::vector<DeltaBatch> route_to_mailboxes();
  // From now on deliver() holds batches (stop()).
  void hold();
  // The held batches tagged before `step`, taken out; later ones stay for their step.
  std::vector<DeltaBatch> take_before(uint64_t step);
  // Folds batches taken from the held store into the slices and publishes every slice together
  // with the held store's decrease.
  void fold_held(const std::vector<DeltaBatch>& batches);

 private:
  Status check_batch(const DeltaBatch& batch) const;

  const SliceSet& slices_;
  SliceKernels& kernels_;
  DeltaRouter& router_;
  ProgressLedger& ledger_;
  PriorityLevels& levels_;
  const AlgorithmKind kind_;
  // Whether deliver() routes to mailboxes (async running) or holds batches for the next
  // start()/step().
  std::mutex mutex_;
  bool routing_to_mailboxes_ = false;
  std::vector<DeltaBatch> held_;
};

}  // namespace tessera::graph::detail
