// ProgressLedger (progress_ledger.hpp): every figure under one mutex.
#include "progress_ledger.hpp"

namespace tessera::graph::detail {

void ProgressLedger::publish(uint32_t slice, const EngineProgress& figures, double taken_residual,
                             uint64_t taken_pushes) {
  std::lock_guard lock(mutex_);
  EngineProgress& published = published_[slice];
  published.residual = figures.residual;
  published.value_sum = figures.value_sum;
  published.updates = figures.updates;
  published.edge_updates = figures.edge_updates;
  published.sweeps = figures.sweeps;
  published.busy_seconds = figures.busy_seconds;
  published.idle_seconds = figures.idle_seconds;
  if (taken_pushes > 0) mailbox_pending_[slice].remove(taken_residual, taken_pushes);
}

void ProgressLedger::publish_counts(uint32_t slice, uint64_t updates, uint64_t edge_updates) {
  std::lock_guard lock(mutex_);
  published_[slice].updates = updates;
  published_[slice].edge_updates = edge_updates;
}

void ProgressLedger::publish_scans(std::span<const Scan> scans, double held_residual, uint64_t held_batches) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < scans.size(); ++i) {
    published_[i].residual = scans[i].residual;
    published_[i].value_sum = scans[i].value_sum;
  }
  if (held_batches > 0) held_pending_.remove(held_residual, held_batches);
}

void ProgressLedger::count_in_mailbox(uint32_t slice, double residual) {
  std::lock_guard lock(mutex_);
  mailbox_pending_[slice].add(residual);
}

void ProgressLedger::count_held(double residual, uint64_t deltas) {
  std::lock_guard lock(mutex_);
  held_pending_.add(residual);
  ++batches_received_;
  deltas_received_ += deltas;
}

void ProgressLedger::count_received(uint64_t deltas) {
  std::lock_guard lock(mutex_);
  ++batches_received_;
  deltas_received_ += deltas;
}

void ProgressLedger::count_sent(uint64_t deltas) {
  std::lock_guard lock(mutex_);
  ++batches_sent_;
  deltas_sent_ += deltas;
}

EngineProgress ProgressLedger::totals() const {
  EngineProgress figures;
  std::lock_guard lock(mutex_);
  for (const EngineProgress& slice : published_) figures += slice;
  for (const PendingDeltas& mailbox : mailbox_pending_) figures.residual += mailbox.residual;
  figures.residual += held_pending_.residual;
  figures.batches_sent = batches_sent_;
  figures.deltas_sent = deltas_sent_;
  figures.batches_received = batches_received_;
  figures.deltas_received = deltas_received_;
  return figures;
}

}  // namespace tessera::graph::detail
