// AsyncRounds (async_rounds.hpp): the async schedules, and what they do when a slice runs out of
// work. Most constants below trade edge updates spent re-sweeping a part against time spent waiting
// for the other parts' deltas; scripts/bench-graph-engine-ab.sh measures a change to any of them.
#include "async_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "tessera/core/time.hpp"

namespace tessera::graph::detail {

namespace {

constexpr std::size_t kSampleSize = 1000;                   // Maiter's sampled threshold
constexpr auto kIdleWait = std::chrono::milliseconds(50);  // safety net: stop() is never missed
// Below the coordinator's priority level a slice may go this far on its own (halving its floor
// each time nothing is left above it) before it waits for deltas or a new level: enough to keep a
// node busy between polls, not enough to polish its part far below what the others still carry.
constexpr double kLevelLead = 4.0;
// Async sum algorithms: a sweep updates only vertices whose |dv| / degree is at least this share of
// the slice's residual per edge (sum |dv| / out-edges, so some vertex always qualifies). Updating
// every pending vertex in every sweep would have a fast node re-sweep its whole part for every
// batch a slower one sends; at 1, the mean itself, the small deltas a batch leaves wait until they
// add up, while a much higher share leaves more to later sweeps than it saves.
constexpr double kSweepShare = 1.0;
// Holding a part back for its peers' deltas (EngineOptions::combine_share, peer_level_share) is
// off by default: see engine.hpp for what it saves and what it costs.
constexpr double kMinArrivalWait = 0.001;  // seconds
constexpr double kMaxArrivalWait = 0.01;

// splitmix64: enough randomness for sampling priorities, and deterministic per slice.
uint64_t next_random(uint64_t& state) {
  uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Async sum: remote deltas worth `residual` were just taken in.
void note_arrival(Slice& slice, double residual, Clock::time_point now) {
  if (slice.last_arrival != Clock::time_point{}) {
    const double gap = seconds_between(slice.last_arrival, now);
    slice.arrival_gap_seconds = slice.arrival_gap_seconds > 0.0 ? 0.5 * (slice.arrival_gap_seconds + gap) : gap;
  }
  slice.last_arrival = now;
  slice.arrival_residual = residual;
}

// How long a slice with little of its own left waits for the next remote deltas.
Clock::duration arrival_wait(const Slice& slice) {
  const double seconds = std::clamp(2.0 * slice.arrival_gap_seconds, kMinArrivalWait, kMaxArrivalWait);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

template <Accumulate kOp, EdgeMode kMode>
void AsyncRounds::run_slice(Slice& slice) {
  if constexpr (kOp == Accumulate::kSum) {
    run_sweeps<kMode>(slice);
  } else {
    run_queue<kOp, kMode>(slice);
  }
  router_.publish(slice, kernels_.scan<kOp>(slice), kernels_.outside_residual(slice), Drained{});
}

// Sum algorithms: the priority limit of this round, the top `priority_fraction` of a sample of
// pending vertices by |dv| / degree (all of them when the slice is small); every pending
// vertex (kTakeAll) when the fraction is 1.
double AsyncRounds::pick_limit(Slice& slice) {
  using Sum = Op<Accumulate::kSum>;
  if (options_.priority_fraction >= 1.0) return Sum::kTakeAll;
  const uint32_t n = slice.own_count();
  slice.sample.clear();
  const uint64_t* offsets = kernels_.part().offsets.data() + slice.lo;
  const auto consider = [&](uint32_t u) {
    const uint64_t degree = offsets[u + 1] - offsets[u];
    if (degree > 0 && Sum::pending(slice.acc[u], 0.0)) slice.sample.push_back(Sum::priority(slice.acc[u], degree));
  };
  if (n <= kSampleSize) {
    for (uint32_t u = 0; u < n; ++u) consider(u);
  } else {
    for (std::size_t i = 0; i < kSampleSize; ++i) {
      consider(static_cast<uint32_t>(((next_random(slice.random_state) >> 32) * n) >> 32));
    }
  }
  if (slice.sample.empty()) return Sum::kTakeAll;
  const double share = std::ceil(options_.priority_fraction * static_cast<double>(slice.sample.size()));
  const std::size_t k = std::clamp<std::size_t>(static_cast<std::size_t>(share), 1, slice.sample.size());
  std::nth_element(slice.sample.begin(), slice.sample.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   slice.sample.end(), std::greater<>());
  return slice.sample[k - 1];
}

// Between two chunks of an async round: the stop flag, the coarse clock, the moving counters
// and, for cc/sssp, the flushes that are due. A sweep flushes once, at its end: a flush in the
// middle sends again every outside vertex the rest of the sweep touches, so a sweep's peer bytes
// would grow with the number of flushes in it. False: stopping.
bool AsyncRounds::between_chunks(Slice& slice) {
  if (threads_.stop_requested()) return false;
  slice.now = Clock::now();
  // A round long enough to span two polls must not look idle to the coordinator: its residual
  // is published only per round, and for Katz a sweep can raise it (hubs whose out-degree
  // exceeds 1/beta), so the moving update count keeps termination waiting.
  ledger_.publish_counts(slice.index, slice.updates, slice.edge_updates);
  return kernels_.op() == Accumulate::kSum || router_.flush_due(slice, Flush::kDue);
}

// Sum algorithms: one Gauss-Seidel sweep over the slice updating every pending vertex at or
// above `limit`; when that finds none (and limit > floor), once more at `floor`.
template <EdgeMode kMode>
AsyncRounds::SweepOutcome AsyncRounds::sweep(Slice& slice, double limit, double floor) {
  using Sum = Op<Accumulate::kSum>;
  const uint64_t updates_before = slice.updates;
  const uint64_t* offsets = kernels_.part().offsets.data() + slice.lo;
  const auto visit = [&](uint32_t u) -> uint64_t {
    const double dv = slice.acc[u];
    if (!Sum::pending(dv, 0.0) || !Sum::above(dv, offsets[u + 1] - offsets[u], limit)) return 0;
    slice.acc[u] = 0.0;
    ++slice.updates;
    return kernels_.relax<Accumulate::kSum, kMode>(slice, u, dv);
  };
  if (!SliceKernels::chunked_pass(slice, slice.own_count(), visit, [&] { return between_chunks(slice); })) {
    return SweepOutcome::kStopping;
  }
  if (slice.updates != updates_before) return SweepOutcome::kUpdated;
  // The sampled limit is a rounded |dv| / degree that `above` compares as |dv| >= limit *
  // degree; rounding may exclude even the vertex it came from, so a fruitless sweep is
  // repeated at the floor (take-all without a priority level): a round makes progress whenever
  // anything is at or above the floor.
  if (limit > floor) return sweep<kMode>(slice, floor, floor);
  return SweepOutcome::kNothingAtFloor;
}

// min/max: pops and updates queued vertices, best first, for about kChunkWork (an entry popped
// counts 1, plus the edges relaxed), under the value mutex. False: nothing was live.
template <Accumulate kOp, EdgeMode kMode>
bool AsyncRounds::update_from_queue(Slice& slice) {
  std::lock_guard lock(slice.value_mutex);
  bool updated = false;
  for (uint64_t work = 0; work < kChunkWork;) {
    const uint32_t u = slice.queue.pop();
    if (u == BucketQueue::kEmpty) break;
    ++work;
    if (!kernels_.is_pending<kOp>(slice, u)) continue;  // updated from a better entry already
    const double dv = std::exchange(slice.acc[u], Op<kOp>::kIdentity);
    --slice.pending_count;
    ++slice.updates;
    work += kernels_.relax<kOp, kMode>(slice, u, dv);
    updated = true;
  }
  kernels_.compact_queue<kOp>(slice);
  return updated;
}

// Nothing worth doing here: hands every outside delta to its owner, publishes `figures`, then
// sleeps until deltas arrive (or, with a priority level, until the level moves past
// `generation`). With a deadline the sleep ends there too (a bounded wait for deltas worth
// combining). False: stopping.
bool AsyncRounds::wait_for_work(Slice& slice, Clock::time_point round_start, const Scan& figures,
                                const Drained& taken, uint64_t generation, Clock::time_point deadline) {
  if (!router_.flush_due(slice, Flush::kIdle)) return false;
  slice.busy_seconds += seconds_between(round_start, Clock::now());
  router_.publish(slice, figures, 0.0, taken);
  const Clock::time_point idle_start = Clock::now();
  slice.mailbox.wait(deadline, kIdleWait, [&] {
    return threads_.stop_requested_now() || levels_.generation() != generation;
  });
  slice.idle_seconds += seconds_between(idle_start, Clock::now());
  return true;
}

// Sum algorithms: rounds of one sweep each, every outside delta flushed at the end of a round
// (a sweep is the natural generation of deltas: its batches carry each outside vertex once,
// as a Jacobi step's do, while mid-sweep flushes by age would send it again and again).
template <EdgeMode kMode>
void AsyncRounds::run_sweeps(Slice& slice) {
  std::vector<uint32_t> inbox_slots;
  std::vector<double> inbox_deltas;
  while (!threads_.stop_requested()) {
    const Clock::time_point round_start = Clock::now();
    slice.now = round_start;
    const Drained drained = router_.drain(slice, inbox_slots, inbox_deltas);
    if (drained.remote_residual > 0.0) note_arrival(slice, drained.remote_residual, round_start);
    kernels_.fold_dangling(slice);
    const Scan scan = kernels_.scan<Accumulate::kSum>(slice);
    if (scan.residual <= options_.idle_residual) {
      if (!wait_for_work(slice, round_start, scan, drained, levels_.generation())) break;
      continue;
    }
    if (scan.residual < options_.combine_share * slice.arrival_residual) {
      // What is left here is small against what other parts keep sending: sweeping it now
      // would update the same vertices again as soon as their next deltas land (a fast node
      // would polish its part down to the tolerance after every batch from a slower one). Wait,
      // with every outside delta flushed, for the next deltas to add to it; if none come
      // within about two arrival gaps, go on alone until the next arrival.
      const Clock::time_point deadline = round_start + arrival_wait(slice);
      if (!wait_for_work(slice, round_start, scan, drained, levels_.generation(), deadline)) break;
      if (Clock::now() >= deadline) slice.arrival_residual = 0.0;
      continue;
    }
    router_.publish(slice, scan, kernels_.outside_residual(slice), drained);
    const uint64_t generation = levels_.generation();
    if (generation != slice.level_generation) {
      slice.level_generation = generation;
      slice.level_share = 1.0;
    }
    if (drained.remote_residual > 0.0) slice.level_share = 1.0;  // new deltas, a new start
    const double floor = slice.level_share * std::max(levels_.current(round_start), levels_.peer_level());
    // Only vertices holding at least a share of the slice's residual per edge: the small
    // deltas a batch or the last sweep left on many vertices add up until they are worth an
    // update at full out-degree cost (the fixed point does not depend on the order). Per edge
    // of the slice rather than of its pending vertices: no degree to read per vertex in the
    // scan, which would cost more per edge than the filter saves on meshes.
    const double mean = scan.residual / static_cast<double>(std::max<uint64_t>(1, kernels_.slice_edges(slice)));
    const double limit = std::max({pick_limit(slice), floor, kSweepShare * mean});
    const SweepOutcome swept = sweep<kMode>(slice, limit, floor);
    ++slice.sweeps;
    if (swept == SweepOutcome::kStopping) break;
    if (swept == SweepOutcome::kNothingAtFloor) {
      // Everything here is below the level. Under the coordinator's level: go a bounded way
      // further alone (kLevelLead), then wait for its next level or for deltas. Under the peer
      // level: wait at once, but only for about two arrival gaps (if no batch comes, the
      // peers' figures are stale); going further below it first, as under the coordinator's
      // level, would update vertices that the peers' next deltas are about to change again.
      const bool level_from_peers = levels_.current(round_start) < levels_.peer_level();
      if (!level_from_peers && slice.level_share * 0.5 >= 1.0 / kLevelLead) {
        slice.level_share *= 0.5;
      } else {
        const Clock::time_point deadline =
            level_from_peers ? round_start + arrival_wait(slice) : Clock::time_point::max();
        if (!wait_for_work(slice, round_start, scan, Drained{}, generation, deadline)) {
          break;  // a fruitless sweep changed nothing, so `scan` still holds
        }
        if (level_from_peers && Clock::now() >= deadline) {
          levels_.forget_peer_scales();
          slice.level_share = 1.0;
        }
        continue;
      }
    }
    if (!router_.flush_due(slice, Flush::kSweepEnd)) break;
    slice.busy_seconds += seconds_between(round_start, Clock::now());
  }
}

// min/max: rounds of one chunk of queue work each, taking in arrived deltas between chunks so
// that a better delta from elsewhere goes ahead of the queue's worse ones.
template <Accumulate kOp, EdgeMode kMode>
void AsyncRounds::run_queue(Slice& slice) {
  std::vector<uint32_t> inbox_slots;
  std::vector<double> inbox_deltas;
  while (!threads_.stop_requested()) {
    const Clock::time_point round_start = Clock::now();
    slice.now = round_start;
    const Drained drained = router_.drain(slice, inbox_slots, inbox_deltas);
    if (slice.pending_count == 0) {
      slice.queue.clear();  // only stale entries are left
      if (!wait_for_work(slice, round_start, kernels_.scan<kOp>(slice), drained, levels_.generation())) break;
      continue;
    }
    if (drained.pushes > 0) router_.publish(slice, kernels_.scan<kOp>(slice), kernels_.outside_residual(slice), drained);
    update_from_queue<kOp, kMode>(slice);
    if (!between_chunks(slice)) break;
    // The residual (pending vertices and outside entries) is published per chunk: cheap here,
    // as both are counts kept up to date.
    router_.publish(slice, kernels_.scan<kOp>(slice), kernels_.outside_residual(slice), Drained{});
    slice.busy_seconds += seconds_between(round_start, Clock::now());
  }
}

void AsyncRounds::run(Slice& slice) {
  kernels_.dispatch([&]<Accumulate kOp, EdgeMode kMode>() { run_slice<kOp, kMode>(slice); });
}

}  // namespace tessera::graph::detail
