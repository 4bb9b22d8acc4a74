// ProgressLedger: the engine's figures as progress() reports them, kept so that residual
// accounting never loses a delta. A delta moved elsewhere is counted at its destination (a
// slice's mailbox or the held store here, or as a batch sent) before its source publishes a
// figure without it, and a destination stops counting it as pending only when it publishes a
// figure that includes it; totals() reads every figure at once, so a poll sees each delta once
// (at its source, in flight, or at its destination), never nowhere (termination.hpp).
// Owns per-slice copies of the figures, not the slices. Thread-safe (one mutex); in the engine's
// lock order it comes after the inbox's mutex and before any mailbox's.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "tessera/graph/engine.hpp"

namespace tessera::graph::detail {

// Deltas counted while they sit somewhere a publish does not cover (a mailbox, the held store).
// `pushes` makes the float sum return to exactly 0 once everything pushed has been published.
struct PendingDeltas {
  double residual = 0.0;
  uint64_t pushes = 0;
  void add(double r) {
    residual += r;
    ++pushes;
  }
  void remove(double r, uint64_t count) {
    residual -= r;
    pushes -= count;
    if (pushes == 0 || residual < 0.0) residual = 0.0;
  }
};

// A slice's residual and value sum, as a scan of it gives them.
struct Scan {
  double residual = 0.0;
  double value_sum = 0.0;
};

class ProgressLedger {
 public:
  explicit ProgressLedger(uint32_t slices) : published_(slices), mailbox_pending_(slices) {}

  // A slice's figures as its thread (or the controlling thread) publishes them: residual,
  // value_sum, updates, edge_updates, sweeps, busy and idle seconds of `figures`; the other
  // fields are ignored. `taken_residual` over `taken_pushes` mailbox pushes leave the slice's
  // mailbox count, since the figures now include them.
  void publish(uint32_t slice, const EngineProgress& figures, double taken_residual, uint64_t taken_pushes);
  // The moving counters alone, between the chunks of a long round.
  void publish_counts(uint32_t slice, uint64_t updates, uint64_t edge_updates);
  // Every slice's residual and value sum at once (scans[i] for slice i), and the held store's
  // decrease by what was folded from it (`batches` batches worth `residual`).
  void publish_scans(std::span<const Scan> scans, double held_residual, uint64_t held_batches);

  // Deltas worth `residual` pushed to slice `slice`'s mailbox.
  void count_in_mailbox(uint32_t slice, double residual);
  // A batch of `deltas` worth `residual` delivered and held for the next start() or step().
  void count_held(double residual, uint64_t deltas);
  // A batch of `deltas` delivered straight to mailboxes (already counted there).
  void count_received(uint64_t deltas);
  // A batch of `deltas` about to be handed to the Outbound.
  void count_sent(uint64_t deltas);

  // Every figure but `running`, which the ledger does not know.
  EngineProgress totals() const;

 private:
  mutable std::mutex mutex_;
  std::vector<EngineProgress> published_;      // per slice: its figures as last published
  std::vector<PendingDeltas> mailbox_pending_;  // per slice
  PendingDeltas held_pending_;
  uint64_t batches_sent_ = 0;
  uint64_t deltas_sent_ = 0;
  uint64_t batches_received_ = 0;
  uint64_t deltas_received_ = 0;
};

}  // namespace tessera::graph::detail
