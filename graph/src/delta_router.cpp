// DeltaRouter (delta_router.hpp).
#include "delta_router.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace tessera::graph::detail {

DeltaRouter::DeltaRouter(const SliceSet& slices, SliceKernels& kernels, const EngineOptions& options,
                         Outbound& outbound, ProgressLedger& ledger, UpdateThreads& threads)
    : slices_(slices), kernels_(kernels), options_(options), outbound_(outbound), ledger_(ledger), threads_(threads) {}

// Counted at the destination before it can be drained there (see the ledger's note).
void DeltaRouter::push_to_slice(Slice& to, std::vector<uint32_t>&& slots, std::vector<double>&& deltas,
                                bool remote) {
  const double residual = batch_residual(kernels_.op(), deltas);
  ledger_.count_in_mailbox(to.index, residual);
  to.mailbox.push(std::move(slots), std::move(deltas), remote, residual);
}

Drained DeltaRouter::drain(Slice& slice, std::vector<uint32_t>& slots, std::vector<double>& deltas) {
  Drained drained;
  const DeltaMailbox::Taken taken = slice.mailbox.take(slots, deltas);
  drained.pushes = taken.pushes;
  drained.remote_residual = taken.remote_residual;
  if (drained.pushes == 0) return drained;
  drained.residual = batch_residual(kernels_.op(), deltas);
  kernels_.fold_into(slice, slots, deltas);
  return drained;
}

void DeltaRouter::publish(const Slice& slice, const Scan& scan, double outside, const Drained& drained) {
  EngineProgress figures;
  figures.residual = scan.residual + outside;
  figures.value_sum = scan.value_sum;
  figures.updates = slice.updates;
  figures.edge_updates = slice.edge_updates;
  figures.sweeps = slice.sweeps;
  figures.busy_seconds = slice.busy_seconds;
  figures.idle_seconds = slice.idle_seconds;
  ledger_.publish(slice.index, figures, drained.residual, drained.pushes);
}

bool DeltaRouter::send_remote(uint32_t to_part, uint64_t step, std::span<const uint32_t> slots,
                              std::span<const double> deltas, std::vector<uint64_t>* batches_to) {
  const GraphPart& part = kernels_.part();
  const std::size_t limit = std::max<uint32_t>(1, options_.batch_max_entries);
  // What this part still holds per edge, for the receiver's level (float: the figure steers,
  // it is never summed; clamped so that a huge residual stays finite).
  const double per_edge = ledger_.totals().residual / static_cast<double>(std::max<uint64_t>(1, part.edge_count()));
  const float sender_scale = static_cast<float>(std::min(per_edge, 1e30));
  for (std::size_t begin = 0; begin < slots.size(); begin += limit) {
    const std::size_t count = std::min(limit, slots.size() - begin);
    DeltaBatch batch;
    batch.step = step;
    batch.from_part = part.part_index;
    batch.to_part = to_part;
    batch.sender_scale = sender_scale;
    batch.slots.assign(slots.begin() + static_cast<std::ptrdiff_t>(begin),
                       slots.begin() + static_cast<std::ptrdiff_t>(begin + count));
    batch.deltas.assign(deltas.begin() + static_cast<std::ptrdiff_t>(begin),
                        deltas.begin() + static_cast<std::ptrdiff_t>(begin + count));
    // Counted as sent before it can arrive, so sent == received never hides it.
    ledger_.count_sent(count);
    if (batches_to != nullptr) ++(*batches_to)[to_part];
    Status status = outbound_.send(std::move(batch));
    if (!status.is_ok()) {
      record_failure(status.with_context(fmt::format("part {}: sending deltas to part {}: ", part.part_index, to_part)));
      return false;
    }
  }
  return true;
}

bool DeltaRouter::flush(Slice& slice, uint32_t d, uint64_t step, std::vector<uint64_t>* batches_to) {
  std::vector<uint32_t>& list = slice.dirty[d];
  if (list.empty()) return true;
  const double identity = identity_of(kernels_.op());
  const uint32_t n = slice.own_count();
  slice.flush_slots.clear();
  slice.flush_deltas.clear();
  for (uint32_t o : list) {
    double& a = slice.acc[o];
    if (a == identity) continue;  // listed twice, or a sum that came back to 0
    slice.flush_slots.push_back(slice.outside_slot[o - n]);
    slice.flush_deltas.push_back(a);
    a = identity;
  }
  list.clear();
  if (slice.flush_slots.empty()) return true;
  if (d < slices_.count()) {
    push_to_slice(slices_[d], std::vector<uint32_t>(slice.flush_slots), std::vector<double>(slice.flush_deltas),
                  /*remote=*/false);
    return true;
  }
  return send_remote(d - slices_.count(), step, slice.flush_slots, slice.flush_deltas, batches_to);
}

bool DeltaRouter::flush_due(Slice& slice, Flush what) {
  for (uint32_t d = 0; d < slices_.destination_count(); ++d) {
    const std::vector<uint32_t>& list = slice.dirty[d];
    if (list.empty()) continue;
    const bool due = what != Flush::kDue || list.size() >= options_.batch_max_entries ||
                     slice.now - slice.dirty_since[d] >= options_.batch_max_age;
    if (!due) continue;
    if (what != Flush::kIdle && d >= slices_.count() && !outbound_.ready(d - slices_.count())) continue;
    if (!flush(slice, d, 0, nullptr)) return false;
  }
  return true;
}

void DeltaRouter::move_to_slice(Slice& from, uint32_t d) {
  std::vector<uint32_t>& list = from.dirty[d];
  const double identity = identity_of(kernels_.op());
  const uint32_t n = from.own_count();
  for (uint32_t o : list) {
    double& a = from.acc[o];
    if (a == identity) continue;
    kernels_.fold_into(slices_[d], std::span(&from.outside_slot[o - n], 1), std::span(&a, 1));
    a = identity;
  }
  list.clear();
}

void DeltaRouter::record_failure(const Status& status) {
  {
    std::lock_guard lock(failure_mutex_);
    if (first_failure_.is_ok()) first_failure_ = status;
  }
  threads_.request_stop();
}

Status DeltaRouter::failure() const {
  std::lock_guard lock(failure_mutex_);
  return first_failure_;
}

}  // namespace tessera::graph::detail
