// DeltaRouter: how deltas leave a slice and enter one. Outside accumulators (dirty per
// destination) are flushed by count, by age, at the end of every sweep, and when the slice
// idles: to a sibling slice's mailbox as one push, or to another part through the Outbound in
// batches of at most batch_max_entries. A slice takes its mailbox in with drain() and releases
// what it took from the ledger's count with publish(). Each move is counted at its destination
// before its source's figures drop it (progress_ledger.hpp), and the first Outbound failure is
// kept and stops the update threads.
// Owns only the first failure; the slices, ledger, threads and Outbound are the engine's.
// Thread-safe where the slices are: flush/drain/publish for a slice from its own thread (the
// controlling thread in sync mode), push_to_slice() and failure() from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "progress_ledger.hpp"
#include "slice.hpp"
#include "slice_kernels.hpp"
#include "slice_set.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/engine.hpp"
#include "update_threads.hpp"

namespace tessera::graph::detail {

// What a drain took from a slice's mailbox.
struct Drained {
  double residual = 0.0;
  uint64_t pushes = 0;
  double remote_residual = 0.0;  // the part of `residual` that came from other parts
};

// Which destinations flush_due() empties. kDue: what is full or old; kSweepEnd: everything;
// kIdle: everything, busy links included.
enum class Flush : uint8_t { kDue, kSweepEnd, kIdle };

class DeltaRouter {
 public:
  DeltaRouter(const SliceSet& slices, SliceKernels& kernels, const EngineOptions& options, Outbound& outbound,
              ProgressLedger& ledger, UpdateThreads& threads);

  // Deltas for `to`'s own vertices (its numbering) into its mailbox, counted there first.
  // `remote`: they come from another part (deliver()), not from a sibling slice.
  void push_to_slice(Slice& to, std::vector<uint32_t>&& slots, std::vector<double>&& deltas, bool remote);
  // Takes the slice's mailbox into its accumulators (slots, deltas: reused buffers).
  Drained drain(Slice& slice, std::vector<uint32_t>& slots, std::vector<double>& deltas);
  // Publishes the slice's figures: `scan` of its own vertices plus `outside` (its dirty outside
  // accumulators), its counters, and `drained` released from its mailbox's count.
  void publish(const Slice& slice, const Scan& scan, double outside, const Drained& drained);

  // Empties destination d's dirty accumulators into one mailbox push or remote batches tagged
  // `step`, counting each batch in (*batches_to)[part] when given. False when the Outbound failed
  // (the engine then stops).
  bool flush(Slice& slice, uint32_t d, uint64_t step, std::vector<uint64_t>* batches_to);
  // Flushes the destinations `what` says. Except when idle, deltas for a part whose link is still
  // busy with earlier batches (Outbound::ready) stay in their accumulators: sending them later as
  // one sum moves fewer bytes over a slow link than queueing every sweep's batch behind the last
  // (on 100 Mbit/s links an R-MAT run sent several times a sync run's bytes without this). They
  // count in the published residual meanwhile, so termination waits for them. False: failed.
  bool flush_due(Slice& slice, Flush what);
  // Sync: sibling slice d's deltas for the next step, folded into its accumulators directly.
  void move_to_slice(Slice& from, uint32_t d);

  // The first Outbound failure, OK if none.
  Status failure() const;

 private:
  // Sends the entries to remote part `to_part` in batches of at most batch_max_entries.
  bool send_remote(uint32_t to_part, uint64_t step, std::span<const uint32_t> slots, std::span<const double> deltas,
                   std::vector<uint64_t>* batches_to);
  void record_failure(const Status& status);

  const SliceSet& slices_;
  SliceKernels& kernels_;
  const EngineOptions& options_;
  Outbound& outbound_;
  ProgressLedger& ledger_;
  UpdateThreads& threads_;
  mutable std::mutex failure_mutex_;
  Status first_failure_;
};

}  // namespace tessera::graph::detail
