// Slice: one update thread's share of a part, a contiguous range of its vertices, and everything
// that thread touches in a round: the accumulators of its own vertices and of the outside slots
// its edges reach (SliceSet renumbers them), the dirty lists of outside slots per destination,
// the min/max queue or sync frontier, its counters, its mailbox and its value mutex.
// Plain data. Owned by the SliceSet; the fields are the slice's thread's (the controlling
// thread's in sync mode), except `mailbox` (thread-safe) and the part's values of the slice,
// which other threads read only under `value_mutex`.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "bucket_queue.hpp"
#include "delta_mailbox.hpp"

namespace tessera::graph::detail {

struct Slice {
  uint32_t index = 0;
  uint32_t lo = 0;  // owned part slots [lo, hi)
  uint32_t hi = 0;
  uint32_t own_count() const { return hi - lo; }

  // Owned by the slice's thread (or by the controlling thread in sync mode).
  std::vector<double> acc;                    // own deltas, then outside accumulators
  std::vector<uint32_t> outside_destination;  // per outside slot: slice index, or slices + part
  std::vector<uint32_t> outside_slot;         // per outside slot: its slot at the destination
  std::vector<std::vector<uint32_t>> dirty;   // per destination: acc indices with a delta
  std::vector<Clock::time_point> dirty_since;  // per destination: when its list became non-empty
  Clock::time_point now;                     // coarse clock, refreshed per chunk
  std::vector<double> sample;
  std::vector<uint32_t> dangling;            // own vertices without out-edges
  std::vector<double> step_deltas;           // sync: the deltas as they were at the step's start
  std::vector<uint32_t> step_vertices;       // sync min/max: the vertices pending at its start
  // Sync min/max use a frontier instead of the queue: each pending vertex listed once
  // (queued[u]); after a dense step only the flags are kept and the list is rebuilt from them
  // if a sparse step follows (frontier_stale).
  bool frontier = false;
  std::vector<uint8_t> queued;
  std::vector<uint32_t> frontier_list;
  bool frontier_stale = false;
  // min/max only: the queue of pending vertices and the figures a scan would give, kept exact
  // as deltas arrive and vertices are updated.
  BucketQueue queue;
  uint64_t pending_count = 0;   // own vertices whose delta improves on their value
  uint64_t reached_count = 0;   // own vertices with a finite value
  std::vector<uint32_t> flush_slots;
  std::vector<double> flush_deltas;
  uint64_t random_state = 0;
  // Async sum: what the remote deltas drained last brought to the residual, and when; while
  // the slice's own residual is small against it, the slice waits for the next ones (see
  // AsyncRounds::run_sweeps). 0: nothing to wait for (none arrived since the last wait ran out).
  double arrival_residual = 0.0;
  Clock::time_point last_arrival{};
  double arrival_gap_seconds = 0.0;  // smoothed time between remote arrivals
  double level_share = 1.0;       // async sum: the floor is this share of the priority level
  uint64_t level_generation = 0;  // of the priority level level_share was set for
  uint64_t updates = 0;
  uint64_t edge_updates = 0;
  uint64_t sweeps = 0;
  double busy_seconds = 0.0;
  double idle_seconds = 0.0;

  // Deltas for this slice's own vertices (own numbering), from other slices and from deliver().
  DeltaMailbox mailbox;

  std::mutex value_mutex;  // guards the slice's values against snapshot_values

  // What the slice holds besides its share of the part (sizeof(Slice) included).
  uint64_t memory_bytes() const {
    uint64_t bytes = sizeof(Slice) + acc.capacity() * sizeof(double) +
                     (outside_destination.capacity() + outside_slot.capacity()) * sizeof(uint32_t) +
                     step_deltas.capacity() * sizeof(double) + step_vertices.capacity() * sizeof(uint32_t) +
                     queued.capacity() + frontier_list.capacity() * sizeof(uint32_t) + queue.memory_bytes();
    bytes += dangling.capacity() * sizeof(uint32_t);
    for (const std::vector<uint32_t>& list : dirty) bytes += list.capacity() * sizeof(uint32_t);
    return bytes;
  }
};

}  // namespace tessera::graph::detail
