// Inbox (inbox.hpp).
#include "inbox.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <span>
#include <utility>

#include <fmt/format.h>

namespace tessera::graph::detail {

Status Inbox::check_batch(const DeltaBatch& batch) const {
  const GraphPart& part = kernels_.part();
  const Accumulate op = kernels_.op();
  if (batch.to_part != part.part_index || batch.from_part >= part.part_count || batch.from_part == part.part_index) {
    return protocol_error(fmt::format("batch from part {} to part {} arrived at part {} of {}", batch.from_part,
                                      batch.to_part, part.part_index, part.part_count));
  }
  if (!(batch.sender_scale >= 0.0f) || !std::isfinite(batch.sender_scale)) {
    return protocol_error(fmt::format("batch from part {} gives its residual per edge as {}; it must be finite "
                                      "and >= 0",
                                      batch.from_part, batch.sender_scale));
  }
  if (batch.slots.size() != batch.deltas.size()) {
    return protocol_error(fmt::format("batch from part {} has {} slots but {} deltas", batch.from_part,
                                      batch.slots.size(), batch.deltas.size()));
  }
  for (std::size_t i = 0; i < batch.slots.size(); ++i) {
    if (batch.slots[i] >= part.local_count) {
      return protocol_error(fmt::format("batch from part {} has slot {} but this part owns {} vertices",
                                        batch.from_part, batch.slots[i], part.local_count));
    }
    const double d = batch.deltas[i];
    if (std::isnan(d) || (op == Accumulate::kSum && !std::isfinite(d))) {
      return protocol_error(fmt::format("batch from part {} has delta {} for slot {}; {} deltas must be {}",
                                        batch.from_part, d, batch.slots[i], algorithm_name(kind_),
                                        op == Accumulate::kSum ? "finite" : "numbers"));
    }
  }
  return Status::ok();
}

Status Inbox::deliver(DeltaBatch&& batch) {
  TESSERA_RETURN_IF_ERROR(check_batch(batch));
  const uint64_t count = batch.slots.size();
  if (batch.sender_scale > 0.0f) levels_.note_peer_scale(batch.from_part, batch.sender_scale);
  std::lock_guard inbox_lock(mutex_);
  if (!routing_to_mailboxes_) {
    ledger_.count_held(batch_residual(kernels_.op(), batch.deltas), count);
    held_.push_back(std::move(batch));
    return Status::ok();
  }
  if (slices_.count() == 1) {
    router_.push_to_slice(slices_[0], std::move(batch.slots), std::move(batch.deltas), /*remote=*/true);
  } else {
    std::vector<std::vector<uint32_t>> slots(slices_.count());
    std::vector<std::vector<double>> deltas(slices_.count());
    for (std::size_t i = 0; i < batch.slots.size(); ++i) {
      const uint32_t s = slices_.slice_of(batch.slots[i]);
      slots[s].push_back(batch.slots[i] - slices_.first_slot(s));
      deltas[s].push_back(batch.deltas[i]);
    }
    for (uint32_t s = 0; s < slices_.count(); ++s) {
      if (!slots[s].empty()) router_.push_to_slice(slices_[s], std::move(slots[s]), std::move(deltas[s]), /*remote=*/true);
    }
  }
  ledger_.count_received(count);
  return Status::ok();
}

std::vector<DeltaBatch> Inbox::route_to_mailboxes() {
  std::lock_guard lock(mutex_);
  routing_to_mailboxes_ = true;
  return std::exchange(held_, {});
}

void Inbox::hold() {
  std::lock_guard lock(mutex_);
  routing_to_mailboxes_ = false;
}

std::vector<DeltaBatch> Inbox::take_before(uint64_t step) {
  std::lock_guard lock(mutex_);
  auto later = std::stable_partition(held_.begin(), held_.end(),
                                     [&](const DeltaBatch& batch) { return batch.step < step; });
  std::vector<DeltaBatch> batches(std::make_move_iterator(held_.begin()), std::make_move_iterator(later));
  held_.erase(held_.begin(), later);
  return batches;
}

void Inbox::fold_held(const std::vector<DeltaBatch>& batches) {
  if (batches.empty()) return;
  double residual = 0.0;
  for (const DeltaBatch& batch : batches) {
    residual += batch_residual(kernels_.op(), batch.deltas);
    for (std::size_t i = 0; i < batch.slots.size(); ++i) {
      Slice& slice = slices_[slices_.slice_of(batch.slots[i])];
      const uint32_t local = batch.slots[i] - slice.lo;
      kernels_.fold_into(slice, std::span(&local, 1), std::span(&batch.deltas[i], 1));
    }
  }
  std::vector<Scan> scans;
  for (const auto& slice : slices_) {
    Scan scan = kernels_.scan(*slice);
    scan.residual += kernels_.outside_residual(*slice);
    scans.push_back(scan);
  }
  ledger_.publish_scans(scans, residual, batches.size());
}

}  // namespace tessera::graph::detail
