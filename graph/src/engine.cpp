#include "tessera/graph/engine.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "tessera/core/time.hpp"

#include "tessera/graph/state.hpp"

// How the engine is laid out (why it is fast and race-free):
//  - The part's vertices are cut into contiguous slices, one per update thread, balanced by
//    vertices + edges. Each slice renumbers the targets of its own edges in place: its own
//    vertices 0 .. n-1, then "outside" slots n .. for every vertex it reaches that another slice
//    or another part owns. One accumulator array per slice holds both, so the inner loop is
//    `acc[target] (+)= c` whatever the target is; with one thread and one part the numbering is
//    the part's own and there are no outside slots at all.
//  - Outside slots are remembered in a dirty list per destination (another slice's mailbox, or
//    a remote part through the Outbound) and flushed by count, by age, at the end of every
//    sweep, and when the slice idles.
//  - Two schedules, chosen by the accumulate operator:
//    * + (pagerank, katz): Gauss-Seidel sweeps in slot order over every vertex at or above the
//      round's limit (the slice's residual per edge, the peer and coordinator levels, or a
//      sampled share when priority_fraction < 1). Sweeping walks the CSR in order, so it costs
//      about what a Jacobi step costs per edge, and using each delta as soon as it arrives needs about half the
//      Jacobi steps' edge updates. Ordering by |dv| / degree bought at most 5% fewer edge
//      updates on the graphs measured (docs/graphs.md), far less than a priority queue costs per edge.
//    * min / max (sssp, cc): a bucket queue per slice (BucketQueue), smallest distance or largest
//      label first, so a vertex is mostly updated once, with its final value, as in Dijkstra or
//      delta-stepping; sweeping instead re-sent every intermediate label (hundreds of times per
//      vertex on a 1000 x 1000 mesh). The pending and reached counts are kept as deltas arrive,
//      so no round scans the slice, and a sync step walks only the vertices queued.
//  - Everything a slice's thread touches in a round is its own; other threads reach it only
//    through its mailbox (a mutex and a swap) and its value mutex (held per chunk of work, so
//    snapshot_values waits at most one chunk and never for a network send).
//  - Residual accounting never loses a delta: a delta moved elsewhere is counted at the
//    destination (mailbox or held counter, or as a batch on the wire) before the source
//    publishes a figure without it, and a destination stops counting it as pending only when it
//    publishes a figure that includes it. progress() reads all figures under one mutex.

namespace tessera::graph {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();
constexpr std::size_t kSampleSize = 1000;        // Maiter's sampled threshold
constexpr uint64_t kChunkWork = 4096;            // edge updates + vertices scanned between clock looks
constexpr auto kIdleWait = std::chrono::milliseconds(50);  // safety net: stop() is never missed
// Below the coordinator's priority level a slice may go this far on its own (halving its floor
// each time nothing is left above it) before it waits for deltas or a new level: enough to keep a
// node busy between polls, not enough to polish its part far below what the others still carry.
constexpr double kLevelLead = 4.0;
// Async sum algorithms (figures: PageRank on rmat:18 over the four nodes of local-mixed-lan,
// single runs, where updating every pending vertex in every sweep took 1.96x the sync run's edge
// updates, most of them on the desktop, which re-swept its whole part for every batch).
// A sweep updates only vertices whose |dv| / degree is at least this share of the slice's residual
// per edge (sum |dv| / out-edges, so some vertex always qualifies). Over the pending vertices'
// edges instead, 1 gave 1.19x sync with kCombineShare alone; 0.5 and 2 did no better, 4 worse
// (1.61x).
constexpr double kSweepShare = 1.0;
// Holding a part back for its peers' deltas (EngineOptions::combine_share, peer_level_share) is
// off by default: see engine.hpp for what it saves and what it costs.
constexpr double kMinArrivalWait = 0.001;  // seconds
constexpr double kMaxArrivalWait = 0.01;

// What a sweep found.
enum class SweepOutcome : uint8_t { kStopping, kUpdated, kNothingAtFloor };

// How g(dv, e) depends on the edge: not at all (pagerank, unweighted katz, cc, unweighted sssp
// with unit weights folded into the per-vertex constant), scaled by the weight (weighted katz) or
// plus the weight (weighted sssp).
enum class EdgeMode : uint8_t { kConstant, kScaledByWeight, kPlusWeight };

template <Accumulate kOp>
struct Op;

template <>
struct Op<Accumulate::kSum> {
  static constexpr double kIdentity = 0.0;
  static constexpr double kTakeAll = 0.0;  // priority limit that selects every pending vertex
  static void apply(double& acc, double c) { acc += c; }
  static bool pending(double dv, double) { return dv != 0.0; }
  // Residual removed per edge updated: an update takes |dv| out and puts back at most d|dv| (for
  // pagerank) at a cost of `degree` edges. Against plain |dv| (Maiter's choice) this needs 25%
  // fewer edge updates on rmat:20, where |dv| keeps picking hubs of huge out-degree. Dangling
  // vertices are never selected here: the round folds them in beforehand, at no edge cost.
  static double priority(double dv, uint64_t degree) { return std::abs(dv) / static_cast<double>(degree); }
  static bool above(double dv, uint64_t degree, double limit) {
    return degree != 0 && std::abs(dv) >= limit * static_cast<double>(degree);  // no division per vertex
  }
  static void fold(double& v, double dv) { v += dv; }
  static double residual(double dv, double) { return std::abs(dv); }
};

template <>
struct Op<Accumulate::kMin> {
  static constexpr double kIdentity = std::numeric_limits<double>::infinity();
  static bool better(double c, double acc) { return c < acc; }
  static void apply(double& acc, double c) { acc = c < acc ? c : acc; }
  static bool pending(double dv, double v) { return dv < v; }
  static double priority(double dv) { return -dv; }  // smaller tentative value first
  static void fold(double& v, double dv) { v = dv; }
  static double residual(double dv, double v) { return dv < v ? 1.0 : 0.0; }
};

template <>
struct Op<Accumulate::kMax> {
  static constexpr double kIdentity = -std::numeric_limits<double>::infinity();
  static bool better(double c, double acc) { return c > acc; }
  static void apply(double& acc, double c) { acc = c > acc ? c : acc; }
  static bool pending(double dv, double v) { return dv > v; }
  static double priority(double dv) { return dv; }  // larger label first
  static void fold(double& v, double dv) { v = dv; }
  static double residual(double dv, double v) { return dv > v ? 1.0 : 0.0; }
};

// A min/max slice's pending vertices in buckets of priority, the best bucket first and last in,
// first out within one: pushing and popping cost O(1), where a heap's log n per improvement cost
// more than the edges relaxed. A vertex is pushed every time its delta improves, so it may sit in
// several buckets; the caller skips an entry whose vertex is no longer pending (updated from a
// better entry already). Buckets span `width` of priority from `anchor` down: sssp's are
// delta-stepping's (distance / mean edge weight; breadth-first levels when unweighted); cc has one
// bucket, a stack, so the largest label popped floods its component depth-first before any lesser
// label moves (the initial entries go in in ascending priority).
struct BucketQueue {
  static constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
  static constexpr std::size_t kMaxBuckets = std::size_t{1} << 16;  // farther priorities share the last
  double anchor = 0.0;
  double width = std::numeric_limits<double>::infinity();
  std::vector<std::vector<uint32_t>> buckets;
  std::size_t best = 0;  // no entry sits in a bucket before this one
  std::size_t entries = 0;

  std::size_t bucket_for(double priority) const {
    const double b = std::floor((anchor - priority) / width);
    if (!(b > 0.0)) return 0;  // better than the anchor, one bucket only, or NaN
    return b >= static_cast<double>(kMaxBuckets - 1) ? kMaxBuckets - 1 : static_cast<std::size_t>(b);
  }
  void push(uint32_t vertex, double priority) {
    const std::size_t b = bucket_for(priority);
    if (b >= buckets.size()) buckets.resize(b + 1);
    buckets[b].push_back(vertex);
    ++entries;
    best = std::min(best, b);
  }
  uint32_t pop() {
    if (entries == 0) return kEmpty;
    while (buckets[best].empty()) ++best;
    const uint32_t vertex = buckets[best].back();
    buckets[best].pop_back();
    --entries;
    return vertex;
  }
  void clear() {
    for (std::vector<uint32_t>& bucket : buckets) bucket.clear();
    best = 0;
    entries = 0;
  }
  uint64_t memory_bytes() const {
    uint64_t bytes = buckets.capacity() * sizeof(std::vector<uint32_t>);
    for (const std::vector<uint32_t>& bucket : buckets) bytes += bucket.capacity() * sizeof(uint32_t);
    return bytes;
  }
};

// What a batch of deltas counts for in the residual: sum |d| (sum), or entries (min/max).
double batch_residual(Accumulate op, std::span<const double> deltas) {
  if (op != Accumulate::kSum) return static_cast<double>(deltas.size());
  double sum = 0.0;
  for (double d : deltas) sum += std::abs(d);
  return sum;
}

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

struct Scan {
  double residual = 0.0;
  double value_sum = 0.0;
};

// splitmix64: enough randomness for sampling priorities, and deterministic per slice.
uint64_t next_random(uint64_t& state) {
  uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

struct Engine::Impl {
  struct Slice {
    uint32_t index = 0;
    uint32_t lo = 0;  // owned part slots [lo, hi)
    uint32_t hi = 0;
    uint32_t own_count() const { return hi - lo; }

    // Owned by the slice's thread (or by the controlling thread in sync mode).
    std::vector<double> acc;                  // own deltas, then outside accumulators
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
    // run_sweeps). 0: nothing to wait for (none arrived since the last wait ran out).
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

    // Mailbox: deltas for this slice's own vertices (own numbering), from other slices and from
    // deliver().
    std::mutex mailbox_mutex;
    std::condition_variable mailbox_wake;
    std::vector<uint32_t> mailbox_slots;
    std::vector<double> mailbox_deltas;
    uint64_t mailbox_pushes = 0;
    double mailbox_remote_residual = 0.0;  // what the pushes from deliver() (other parts) carry

    std::mutex value_mutex;  // guards the slice's values against snapshot_values
  };

  Impl(GraphPart graph_part, const AlgorithmSpec& algorithm, const EngineOptions& engine_options, Outbound& out)
      : part(std::move(graph_part)), spec(algorithm), options(engine_options), outbound(out), op(accumulate_of(spec)) {
    const bool weighted = !part.weights.empty();
    if (spec.kind == AlgorithmKind::kKatz && weighted) {
      mode = EdgeMode::kScaledByWeight;
    } else if (spec.kind == AlgorithmKind::kShortestPaths && weighted) {
      mode = EdgeMode::kPlusWeight;
    } else {
      mode = EdgeMode::kConstant;
    }
  }

  GraphPart part;  // targets renumbered per slice; delta moved into the slices' accumulators
  AlgorithmSpec spec;
  EngineOptions options;
  Outbound& outbound;
  Accumulate op;
  EdgeMode mode = EdgeMode::kConstant;
  std::vector<std::unique_ptr<Slice>> slices;
  std::vector<uint32_t> slice_lo;  // first slot of each slice, for routing delivered slots

  // Controlling thread only.
  std::vector<std::thread> threads;
  bool started = false;

  std::atomic<bool> stop_requested{false};
  std::atomic<uint32_t> live_threads{0};
  // The coordinator's priority level (async sum algorithms) and how often it was set; a slice
  // waiting for work also wakes when the generation moves.
  // Set together under level_mutex; read per round.
  mutable std::mutex level_mutex;
  PriorityLevel level;
  Clock::time_point level_set_at;
  // Async sum: per part, its residual per edge as its latest batch here said (0: not known).
  std::vector<double> peer_scales;
  std::atomic<uint64_t> level_generation{0};

  // inbox_mutex: whether deliver() routes to mailboxes (async running) or holds batches for the
  // next start()/step(). Lock order: inbox_mutex, then progress_mutex, then a mailbox mutex.
  mutable std::mutex inbox_mutex;
  bool routing_to_mailboxes = false;
  std::vector<DeltaBatch> held;

  mutable std::mutex progress_mutex;
  std::vector<EngineProgress> published;  // per slice: its figures as its thread last published them
  std::vector<PendingDeltas> mailbox_pending;  // per slice
  PendingDeltas held_pending;
  uint64_t batches_sent = 0;
  uint64_t deltas_sent = 0;
  uint64_t batches_received = 0;
  uint64_t deltas_received = 0;

  mutable std::mutex failure_mutex;
  Status first_failure;

  uint32_t slice_count() const { return static_cast<uint32_t>(slices.size()); }
  uint32_t destination_count() const { return slice_count() + part.part_count; }

  // --- Setup --------------------------------------------------------------------------------

  void build_slices() {
    const uint32_t n = part.local_count;
    const uint32_t count = std::max<uint32_t>(1, std::min(options.threads, std::max<uint32_t>(n, 1)));
    // Balance vertices + edges: a vertex costs one visit per round plus one unit per out-edge.
    const uint64_t total_work = part.targets.size() + n;
    uint32_t lo = 0;
    for (uint32_t t = 0; t < count; ++t) {
      const uint64_t goal = total_work * (t + 1) / count;
      uint32_t hi = lo;
      if (t + 1 == count) {
        hi = n;
      } else {
        while (hi < n && part.offsets[hi + 1] + hi + 1 <= goal) ++hi;
      }
      auto slice = std::make_unique<Slice>();
      slice->index = t;
      slice->lo = lo;
      slice->hi = hi;
      slice->random_state = 0x5eed0000ULL + t;
      slices.push_back(std::move(slice));
      slice_lo.push_back(lo);
      lo = hi;
    }
    std::vector<uint32_t> outside_of(static_cast<std::size_t>(n) + part.ghosts.size(), kNoSlot);
    for (auto& slice : slices) renumber(*slice, outside_of);
    published.resize(slices.size());
    peer_scales.assign(part.part_count, 0.0);
    mailbox_pending.resize(slices.size());
    part.delta.clear();
    part.delta.shrink_to_fit();
    if (op != Accumulate::kSum) {
      const double width = bucket_width();
      for (auto& slice : slices) {
        slice->queue.width = width;
        dispatch_op([&]<Accumulate kOp>() {
          if constexpr (kOp != Accumulate::kSum) count_and_queue<kOp>(*slice);
        });
      }
    }
    for (auto& slice : slices) {
      const Scan scan = scan_slice(*slice);
      published[slice->index].residual = scan.residual;
      published[slice->index].value_sum = scan.value_sum;
    }
  }

  // The priority span of one bucket of a min/max queue (BucketQueue): sssp's distances in
  // buckets of the part's mean edge weight (1 when unweighted), cc's labels in one bucket.
  double bucket_width() const {
    if (spec.kind != AlgorithmKind::kShortestPaths) return std::numeric_limits<double>::infinity();
    if (part.weights.empty()) return 1.0;
    double sum = 0.0;
    for (double w : part.weights) sum += w;
    const double mean = sum / static_cast<double>(part.weights.size());
    return mean > 0.0 && std::isfinite(mean) ? mean : 1.0;
  }

  uint32_t slice_of(uint32_t slot) const {
    if (slices.size() == 1) return 0;
    return static_cast<uint32_t>(std::upper_bound(slice_lo.begin(), slice_lo.end(), slot) - slice_lo.begin()) - 1;
  }

  // Renumbers the slice's edge targets in place (own 0..n-1, outside n..), builds its outside
  // slots' destinations and its accumulator, and puts each vertex's own targets first.
  void renumber(Slice& slice, std::vector<uint32_t>& outside_of) {
    const uint32_t n = slice.own_count();
    const uint64_t edge_lo = part.offsets[slice.lo];
    const uint64_t edge_hi = part.offsets[slice.hi];
    std::vector<uint32_t> outside;
    for (uint64_t e = edge_lo; e < edge_hi; ++e) {
      const uint32_t t = part.targets[e];
      if ((t < slice.lo || t >= slice.hi) && outside_of[t] == kNoSlot) {
        outside_of[t] = 0;
        outside.push_back(t);
      }
    }
    // Part slots order other slices by slice and ghosts by (owner, slot): flushes walk memory.
    std::sort(outside.begin(), outside.end());
    slice.outside_destination.resize(outside.size());
    slice.outside_slot.resize(outside.size());
    for (std::size_t k = 0; k < outside.size(); ++k) {
      const uint32_t t = outside[k];
      outside_of[t] = n + static_cast<uint32_t>(k);
      if (t < part.local_count) {
        const uint32_t owner = slice_of(t);
        slice.outside_destination[k] = owner;
        slice.outside_slot[k] = t - slice_lo[owner];
      } else {
        const GhostRef& ghost = part.ghosts[t - part.local_count];
        slice.outside_destination[k] = slice_count() + ghost.owner;
        slice.outside_slot[k] = ghost.slot;
      }
    }
    const bool weighted = !part.weights.empty();
    std::vector<std::pair<uint32_t, double>> edges;
    for (uint32_t u = slice.lo; u < slice.hi; ++u) {
      bool seen_outside = false;
      bool ordered = true;
      for (uint64_t e = part.offsets[u]; e < part.offsets[u + 1]; ++e) {
        uint32_t& t = part.targets[e];
        t = (t >= slice.lo && t < slice.hi) ? t - slice.lo : outside_of[t];
        if (t >= n) {
          seen_outside = true;
        } else if (seen_outside) {
          ordered = false;
        }
      }
      if (ordered) continue;
      // The kernel walks own targets until the first outside one; restore that order.
      edges.clear();
      for (uint64_t e = part.offsets[u]; e < part.offsets[u + 1]; ++e) {
        edges.emplace_back(part.targets[e], weighted ? part.weights[e] : 0.0);
      }
      std::sort(edges.begin(), edges.end());
      for (uint64_t e = part.offsets[u], i = 0; e < part.offsets[u + 1]; ++e, ++i) {
        part.targets[e] = edges[i].first;
        if (weighted) part.weights[e] = edges[i].second;
      }
    }
    for (uint32_t t : outside) outside_of[t] = kNoSlot;
    for (uint32_t u = 0; u < n; ++u) {
      if (part.offsets[slice.lo + u] == part.offsets[slice.lo + u + 1]) slice.dangling.push_back(u);
    }

    slice.acc.assign(static_cast<std::size_t>(n) + outside.size(), identity_of(op));
    std::copy(part.delta.begin() + slice.lo, part.delta.begin() + slice.hi, slice.acc.begin());
    slice.dirty.assign(destination_count(), {});
    slice.dirty_since.assign(destination_count(), Clock::time_point{});
  }

  // --- Kernels ------------------------------------------------------------------------------

  template <Accumulate kOp>
  Scan scan_slice(const Slice& slice) const {
    if constexpr (kOp != Accumulate::kSum) {
      return {static_cast<double>(slice.pending_count), static_cast<double>(slice.reached_count)};
    }
    Scan scan;
    const double* values = part.value.data() + slice.lo;
    for (uint32_t u = 0; u < slice.own_count(); ++u) {
      scan.residual += std::abs(slice.acc[u]);
      if (std::isfinite(values[u])) scan.value_sum += values[u];
    }
    return scan;
  }

  Scan scan_slice(const Slice& slice) const {
    switch (op) {
      case Accumulate::kSum: return scan_slice<Accumulate::kSum>(slice);
      case Accumulate::kMin: return scan_slice<Accumulate::kMin>(slice);
      case Accumulate::kMax: return scan_slice<Accumulate::kMax>(slice);
    }
    return {};
  }

  // What the slice's dirty outside accumulators hold (an entry listed twice counts twice: the
  // figure may only err upwards).
  double outside_residual(const Slice& slice) const {
    if (op != Accumulate::kSum) {
      // An outside min/max entry is listed once, when it leaves the identity, and stays off it
      // until flushed.
      std::size_t listed = 0;
      for (const std::vector<uint32_t>& list : slice.dirty) listed += list.size();
      return static_cast<double>(listed);
    }
    const double identity = identity_of(op);
    double residual = 0.0;
    for (const std::vector<uint32_t>& list : slice.dirty) {
      for (uint32_t o : list) {
        const double a = slice.acc[o];
        if (a != identity) residual += op == Accumulate::kSum ? std::abs(a) : 1.0;
      }
    }
    return residual;
  }

  // Deltas for own vertices (own numbering) into their accumulators.
  template <Accumulate kOp>
  void fold_into(Slice& slice, std::span<const uint32_t> slots, std::span<const double> deltas) {
    double* acc = slice.acc.data();
    if constexpr (kOp == Accumulate::kSum) {
      for (std::size_t i = 0; i < slots.size(); ++i) acc[slots[i]] += deltas[i];
    } else {
      const double* values = part.value.data() + slice.lo;
      for (std::size_t i = 0; i < slots.size(); ++i) arrive<kOp>(slice, acc, values, slots[i], deltas[i]);
    }
  }

  void fold_into(Slice& slice, std::span<const uint32_t> slots, std::span<const double> deltas) {
    dispatch_op([&]<Accumulate kOp>() { fold_into<kOp>(slice, slots, deltas); });
  }

  // min/max: c arrives for own vertex t. When it improves t's delta and the delta improves on
  // t's value, t is pending: counted when it becomes so, and queued at its new priority (the
  // entry it had, if any, is stale from now on).
  template <Accumulate kOp>
  static void arrive(Slice& slice, double* acc, const double* values, uint32_t t, double c) {
    double& a = acc[t];
    if (!Op<kOp>::better(c, a)) return;
    const bool was_pending = Op<kOp>::pending(a, values[t]);
    a = c;
    if (!Op<kOp>::pending(c, values[t])) return;
    if (!was_pending) ++slice.pending_count;
    if (!slice.frontier) {
      slice.queue.push(t, Op<kOp>::priority(c));
    } else if (slice.queued[t] == 0) {
      slice.queued[t] = 1;
      slice.frontier_list.push_back(t);
    }
  }

  // min/max: the pending and reached counts from a scan, and the queue rebuilt with every pending
  // vertex once, the best pushed last (popped first).
  template <Accumulate kOp>
  void count_and_queue(Slice& slice) {
    if (slice.frontier) {
      recount_frontier<kOp>(slice);
      return;
    }
    const double* values = part.value.data() + slice.lo;
    slice.reached_count = 0;
    std::vector<std::pair<double, uint32_t>> pending;
    for (uint32_t u = 0; u < slice.own_count(); ++u) {
      if (std::isfinite(values[u])) ++slice.reached_count;
      if (Op<kOp>::pending(slice.acc[u], values[u])) pending.emplace_back(Op<kOp>::priority(slice.acc[u]), u);
    }
    slice.pending_count = pending.size();
    std::sort(pending.begin(), pending.end());
    slice.queue.clear();
    for (const auto& [priority, u] : pending) slice.queue.push(u, priority);
  }

  // Sync min/max: the counts and the queued flags from one scan of the slice; the frontier list
  // is left stale (a dense step scans instead; a sparse one rebuilds it from the flags).
  template <Accumulate kOp>
  void recount_frontier(Slice& slice) {
    const double* values = part.value.data() + slice.lo;
    slice.pending_count = 0;
    slice.reached_count = 0;
    slice.queued.resize(slice.own_count());
    for (uint32_t u = 0; u < slice.own_count(); ++u) {
      if (std::isfinite(values[u])) ++slice.reached_count;
      const bool pending = Op<kOp>::pending(slice.acc[u], values[u]);
      slice.queued[u] = pending ? 1 : 0;
      slice.pending_count += pending ? 1 : 0;
    }
    slice.frontier_list.clear();
    slice.frontier_stale = true;
  }

  // min/max: switches a slice's queue between the async buckets and the sync frontier.
  void use_frontier(Slice& slice, bool frontier) {
    if (op == Accumulate::kSum || slice.frontier == frontier) return;
    slice.frontier = frontier;
    if (!frontier) {
      slice.queued = {};
      slice.frontier_list = {};
    }
    dispatch_op([&]<Accumulate kOp>() {
      if constexpr (kOp != Accumulate::kSum) count_and_queue<kOp>(slice);
    });
  }

  // min/max: whether vertex u (own numbering) has a delta that improves on its value.
  template <Accumulate kOp>
  bool is_pending(const Slice& slice, uint32_t u) const {
    return Op<kOp>::pending(slice.acc[u], part.value[slice.lo + u]);
  }

  // min/max: a queue that has grown well past the slice (every improvement pushes an entry) is
  // rebuilt with one entry per pending vertex, so its memory stays proportional to the part.
  template <Accumulate kOp>
  void compact_queue(Slice& slice) {
    if (slice.queue.entries <= 4 * static_cast<std::size_t>(slice.own_count()) + 1024) return;
    count_and_queue<kOp>(slice);
  }

  template <Accumulate kOp>
  static void mark_outside(Slice& slice, uint32_t o, double c) {
    double& a = slice.acc[o];
    if constexpr (kOp == Accumulate::kSum) {
      if (a == 0.0) {
        const uint32_t d = slice.outside_destination[o - slice.own_count()];
        if (slice.dirty[d].empty()) slice.dirty_since[d] = slice.now;
        slice.dirty[d].push_back(o);
      }
      a += c;
    } else {
      double updated = a;
      Op<kOp>::apply(updated, c);
      if (updated == a) return;
      if (a == Op<kOp>::kIdentity) {
        const uint32_t d = slice.outside_destination[o - slice.own_count()];
        if (slice.dirty[d].empty()) slice.dirty_since[d] = slice.now;
        slice.dirty[d].push_back(o);
      }
      a = updated;
    }
  }

  // v (+)= dv and g(dv, e) into every out-edge's target; returns the edges updated. The caller
  // has already taken dv out of the accumulator (a self-loop adds to it again). kTracked (min/max):
  // keep the pending and reached counts and the queue as targets improve; a dense sync step
  // leaves them and recounts after the step (tracking costs more than the scan then).
  template <Accumulate kOp, EdgeMode kMode, bool kTracked = true>
  uint64_t relax(Slice& slice, uint32_t u, double dv) {
    double* values = part.value.data() + slice.lo;
    double* acc = slice.acc.data();
    if constexpr (kOp == Accumulate::kSum || !kTracked) {
      Op<kOp>::fold(values[u], dv);
    } else {
      // In a sync step u's accumulator may already hold a delta for the next step; whether it
      // still counts as pending depends on the value folded now.
      const bool was_pending = Op<kOp>::pending(acc[u], values[u]);
      if (!std::isfinite(values[u]) && std::isfinite(dv)) ++slice.reached_count;
      Op<kOp>::fold(values[u], dv);
      if (was_pending && !Op<kOp>::pending(acc[u], values[u])) --slice.pending_count;
    }
    const uint64_t begin = part.offsets[slice.lo + u];
    const uint64_t end = part.offsets[slice.lo + u + 1];
    if (begin == end) return 0;  // pagerank's dangling vertices drop their mass here
    // One definition of g (state.hpp): the per-vertex factor; per edge only * w or + w remains.
    const double c = kMode == EdgeMode::kPlusWeight ? dv : propagate(spec, dv, end - begin, 1.0);
    const uint32_t n = slice.own_count();
    const uint32_t* target = part.targets.data() + begin;
    const uint32_t* const target_end = part.targets.data() + end;
    const auto local = [&](uint32_t t, double value) {
      if constexpr (kOp == Accumulate::kSum) {
        acc[t] += value;
      } else if constexpr (!kTracked) {
        Op<kOp>::apply(acc[t], value);
      } else {
        arrive<kOp>(slice, acc, values, t, value);
      }
    };
    if constexpr (kMode == EdgeMode::kConstant) {
      for (; target != target_end && *target < n; ++target) local(*target, c);
      for (; target != target_end; ++target) mark_outside<kOp>(slice, *target, c);
    } else {
      const double* weight = part.weights.data() + begin;
      const auto edge_value = [c](double w) { return kMode == EdgeMode::kScaledByWeight ? c * w : c + w; };
      for (; target != target_end && *target < n; ++target, ++weight) local(*target, edge_value(*weight));
      for (; target != target_end; ++target, ++weight) mark_outside<kOp>(slice, *target, edge_value(*weight));
    }
    slice.edge_updates += end - begin;
    return end - begin;
  }

  // Sum algorithms: the priority limit of this round, the top `priority_fraction` of a sample of
  // pending vertices by |dv| / degree (all of them when the slice is small); every pending
  // vertex (kTakeAll) when the fraction is 1.
  double pick_limit(Slice& slice) {
    using Sum = Op<Accumulate::kSum>;
    if (options.priority_fraction >= 1.0) return Sum::kTakeAll;
    const uint32_t n = slice.own_count();
    slice.sample.clear();
    const uint64_t* offsets = part.offsets.data() + slice.lo;
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
    const double share = std::ceil(options.priority_fraction * static_cast<double>(slice.sample.size()));
    const std::size_t k = std::clamp<std::size_t>(static_cast<std::size_t>(share), 1, slice.sample.size());
    std::nth_element(slice.sample.begin(), slice.sample.begin() + static_cast<std::ptrdiff_t>(k - 1),
                     slice.sample.end(), std::greater<>());
    return slice.sample[k - 1];
  }

  // Sum algorithms: a dangling vertex's update changes nothing but its own value, so the round
  // starts by folding them all in one tight pass instead of selecting them one by one.
  void fold_dangling(Slice& slice) {
    std::lock_guard lock(slice.value_mutex);
    double* values = part.value.data() + slice.lo;
    for (uint32_t u : slice.dangling) {
      const double dv = slice.acc[u];
      if (dv == 0.0) continue;
      values[u] += dv;
      slice.acc[u] = 0.0;
      ++slice.updates;
    }
  }

  // Visits the slice's vertices in slot order, in chunks of about kChunkWork (a vertex scanned
  // counts 1, plus the edges `visit` returns) with the value mutex held per chunk, so
  // snapshot_values waits one chunk at most. `between` runs between chunks; false stops the pass.
  template <typename Visit, typename Between>
  static bool chunked_pass(Slice& slice, uint32_t count, Visit&& visit, Between&& between) {
    uint32_t i = 0;
    while (i < count) {
      {
        std::lock_guard lock(slice.value_mutex);
        for (uint64_t work = 0; i < count && work < kChunkWork; ++i) work += 1 + visit(i);
      }
      if (!between()) return false;
    }
    return true;
  }

  // Between two chunks of an async round: the stop flag, the coarse clock, the moving counters
  // and, for cc/sssp, the flushes that are due. A sweep flushes once, at its end: a flush in the
  // middle sends every outside vertex the rest of the sweep touches again (two uncapped workers
  // on rmat:20 sent 1.9 GB each, flushing every 10 ms of 100 ms sweeps). False: stopping.
  bool between_chunks(Slice& slice) {
    if (stop_requested.load(std::memory_order_relaxed)) return false;
    slice.now = Clock::now();
    {
      // A round long enough to span two polls must not look idle to the coordinator: its
      // residual is published only per round, and for Katz a sweep can raise it (hubs whose
      // out-degree exceeds 1/beta), so the moving update count keeps termination waiting.
      std::lock_guard lock(progress_mutex);
      published[slice.index].updates = slice.updates;
      published[slice.index].edge_updates = slice.edge_updates;
    }
    return op == Accumulate::kSum || flush_due(slice, Flush::kDue);
  }

  // Sum algorithms: one Gauss-Seidel sweep over the slice updating every pending vertex at or
  // above `limit`; when that finds none (and limit > floor), once more at `floor`.
  template <EdgeMode kMode>
  SweepOutcome sweep(Slice& slice, double limit, double floor) {
    using Sum = Op<Accumulate::kSum>;
    const uint64_t updates_before = slice.updates;
    const uint64_t* offsets = part.offsets.data() + slice.lo;
    const auto visit = [&](uint32_t u) -> uint64_t {
      const double dv = slice.acc[u];
      if (!Sum::pending(dv, 0.0) || !Sum::above(dv, offsets[u + 1] - offsets[u], limit)) return 0;
      slice.acc[u] = 0.0;
      ++slice.updates;
      return relax<Accumulate::kSum, kMode>(slice, u, dv);
    };
    if (!chunked_pass(slice, slice.own_count(), visit, [&] { return between_chunks(slice); })) {
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
  bool update_from_queue(Slice& slice) {
    std::lock_guard lock(slice.value_mutex);
    bool updated = false;
    for (uint64_t work = 0; work < kChunkWork;) {
      const uint32_t u = slice.queue.pop();
      if (u == BucketQueue::kEmpty) break;
      ++work;
      if (!is_pending<kOp>(slice, u)) continue;  // updated from a better entry already
      const double dv = std::exchange(slice.acc[u], Op<kOp>::kIdentity);
      --slice.pending_count;
      ++slice.updates;
      work += relax<kOp, kMode>(slice, u, dv);
      updated = true;
    }
    compact_queue<kOp>(slice);
    return updated;
  }

  // Jacobi: every vertex pending at the step's start is updated once from that delta. Sum
  // algorithms walk the whole slice (nearly every vertex is pending at every step); min/max ones
  // only the vertices their queue holds, the way a frontier-based engine walks only the active
  // ones (without it a step of sssp on a 1000 x 1000 mesh scanned a million vertices to update
  // a few hundred).
  template <Accumulate kOp, EdgeMode kMode>
  void jacobi(Slice& slice) {
    if constexpr (kOp == Accumulate::kSum) {
      const uint32_t n = slice.own_count();
      slice.step_deltas.assign(slice.acc.begin(), slice.acc.begin() + n);
      std::fill(slice.acc.begin(), slice.acc.begin() + n, 0.0);
      const auto visit = [&](uint32_t u) -> uint64_t {
        const double dv = slice.step_deltas[u];
        if (dv == 0.0) return 0;
        ++slice.updates;
        return relax<kOp, kMode>(slice, u, dv);
      };
      chunked_pass(slice, n, visit, [] { return true; });
    } else if (slice.pending_count * 8 >= slice.own_count()) {
      // A dense step (an eighth of the slice or more pending): the sum algorithms' step with a
      // plain relax, then one scan for the counts and the next step's queue.
      const uint32_t n = slice.own_count();
      slice.step_deltas.assign(slice.acc.begin(), slice.acc.begin() + n);
      std::fill(slice.acc.begin(), slice.acc.begin() + n, Op<kOp>::kIdentity);
      const double* values = part.value.data() + slice.lo;
      const auto visit = [&](uint32_t u) -> uint64_t {
        const double dv = slice.step_deltas[u];
        if (!Op<kOp>::pending(dv, values[u])) return 0;
        ++slice.updates;
        return relax<kOp, kMode, /*kTracked=*/false>(slice, u, dv);
      };
      chunked_pass(slice, n, visit, [] { return true; });
      recount_frontier<kOp>(slice);
    } else {
      // A sparse step: take the queued vertices' deltas (each is queued once in a sync step) and
      // walk them in slot order, which walks the CSR in order.
      std::vector<uint32_t>& pending = slice.step_vertices;
      pending.clear();
      if (slice.frontier_stale) {
        for (uint32_t u = 0; u < slice.own_count(); ++u) {
          if (slice.queued[u] != 0) pending.push_back(u);
        }
        slice.frontier_stale = false;
      } else {
        pending.swap(slice.frontier_list);
        std::sort(pending.begin(), pending.end());
      }
      slice.frontier_list.clear();
      for (uint32_t u : pending) slice.queued[u] = 0;
      std::erase_if(pending, [&](uint32_t u) { return !is_pending<kOp>(slice, u); });
      slice.step_deltas.clear();
      for (uint32_t u : pending) slice.step_deltas.push_back(std::exchange(slice.acc[u], Op<kOp>::kIdentity));
      slice.pending_count -= pending.size();
      const auto visit = [&](uint32_t i) -> uint64_t {
        ++slice.updates;
        return relax<kOp, kMode>(slice, pending[i], slice.step_deltas[i]);
      };
      chunked_pass(slice, static_cast<uint32_t>(pending.size()), visit, [] { return true; });
    }
  }

  template <typename Body>
  void dispatch(Body&& body) {
    switch (op) {
      case Accumulate::kSum:
        if (mode == EdgeMode::kScaledByWeight) return body.template operator()<Accumulate::kSum, EdgeMode::kScaledByWeight>();
        return body.template operator()<Accumulate::kSum, EdgeMode::kConstant>();
      case Accumulate::kMin:
        if (mode == EdgeMode::kPlusWeight) return body.template operator()<Accumulate::kMin, EdgeMode::kPlusWeight>();
        return body.template operator()<Accumulate::kMin, EdgeMode::kConstant>();
      case Accumulate::kMax: return body.template operator()<Accumulate::kMax, EdgeMode::kConstant>();
    }
  }

  template <typename Body>
  void dispatch_op(Body&& body) const {
    switch (op) {
      case Accumulate::kSum: return body.template operator()<Accumulate::kSum>();
      case Accumulate::kMin: return body.template operator()<Accumulate::kMin>();
      case Accumulate::kMax: return body.template operator()<Accumulate::kMax>();
    }
  }

  // --- Moving deltas ------------------------------------------------------------------------

  void record_failure(const Status& status) {
    {
      std::lock_guard lock(failure_mutex);
      if (first_failure.is_ok()) first_failure = status;
    }
    request_stop();
  }

  void request_stop() {
    stop_requested.store(true);
    for (auto& slice : slices) {
      { std::lock_guard lock(slice->mailbox_mutex); }  // a waiter either sees the flag or gets the notify
      slice->mailbox_wake.notify_all();
    }
  }

  // Counted at the destination before it can be drained there (see the accounting note above).
  // `remote`: the deltas come from another part (deliver()), not from a sibling slice.
  void push_to_mailbox(Slice& to, std::vector<uint32_t>&& slots, std::vector<double>&& deltas, bool remote) {
    const double residual = batch_residual(op, deltas);
    {
      std::lock_guard lock(progress_mutex);
      mailbox_pending[to.index].add(residual);
    }
    {
      std::lock_guard lock(to.mailbox_mutex);
      if (remote) to.mailbox_remote_residual += residual;
      if (to.mailbox_slots.empty()) {
        to.mailbox_slots = std::move(slots);
        to.mailbox_deltas = std::move(deltas);
      } else {
        to.mailbox_slots.insert(to.mailbox_slots.end(), slots.begin(), slots.end());
        to.mailbox_deltas.insert(to.mailbox_deltas.end(), deltas.begin(), deltas.end());
      }
      ++to.mailbox_pushes;
    }
    to.mailbox_wake.notify_one();
  }

  struct Drained {
    double residual = 0.0;
    uint64_t pushes = 0;
    double remote_residual = 0.0;  // the part of `residual` that came from other parts
  };

  Drained drain_mailbox(Slice& slice, std::vector<uint32_t>& slots, std::vector<double>& deltas) {
    Drained drained;
    slots.clear();
    deltas.clear();
    {
      std::lock_guard lock(slice.mailbox_mutex);
      std::swap(slots, slice.mailbox_slots);
      std::swap(deltas, slice.mailbox_deltas);
      drained.pushes = std::exchange(slice.mailbox_pushes, 0);
      drained.remote_residual = std::exchange(slice.mailbox_remote_residual, 0.0);
    }
    if (drained.pushes == 0) return drained;
    drained.residual = batch_residual(op, deltas);
    fold_into(slice, slots, deltas);
    return drained;
  }

  void publish(const Slice& slice, const Scan& scan, double outside, const Drained& drained) {
    std::lock_guard lock(progress_mutex);
    EngineProgress& figures = published[slice.index];
    figures.residual = scan.residual + outside;
    figures.value_sum = scan.value_sum;
    figures.updates = slice.updates;
    figures.edge_updates = slice.edge_updates;
    figures.sweeps = slice.sweeps;
    figures.busy_seconds = slice.busy_seconds;
    figures.idle_seconds = slice.idle_seconds;
    if (drained.pushes > 0) mailbox_pending[slice.index].remove(drained.residual, drained.pushes);
  }

  // Sends the entries to remote part `to_part` in batches of at most batch_max_entries. False
  // when the outbound failed (the engine then stops).
  bool send_remote(uint32_t to_part, uint64_t step, std::span<const uint32_t> slots, std::span<const double> deltas,
                   std::vector<uint64_t>* batches_to) {
    const std::size_t limit = std::max<uint32_t>(1, options.batch_max_entries);
    // What this part still holds per edge, for the receiver's level (float: the figure steers,
    // it is never summed; clamped so that a huge residual stays finite).
    const double per_edge = progress().residual / static_cast<double>(std::max<uint64_t>(1, part.edge_count()));
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
      {
        // Counted as sent before it can arrive, so sent == received never hides it.
        std::lock_guard lock(progress_mutex);
        ++batches_sent;
        deltas_sent += count;
      }
      if (batches_to != nullptr) ++(*batches_to)[to_part];
      Status status = outbound.send(std::move(batch));
      if (!status.is_ok()) {
        record_failure(status.with_context(fmt::format("part {}: sending deltas to part {}: ", part.part_index, to_part)));
        return false;
      }
    }
    return true;
  }

  // Empties destination d's dirty accumulators into one mailbox push or remote batches.
  bool flush(Slice& slice, uint32_t d, uint64_t step, std::vector<uint64_t>* batches_to) {
    std::vector<uint32_t>& list = slice.dirty[d];
    if (list.empty()) return true;
    const double identity = identity_of(op);
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
    if (d < slice_count()) {
      push_to_mailbox(*slices[d], std::vector<uint32_t>(slice.flush_slots), std::vector<double>(slice.flush_deltas),
                      /*remote=*/false);
      return true;
    }
    return send_remote(d - slice_count(), step, slice.flush_slots, slice.flush_deltas, batches_to);
  }

  // Flushes every destination that is full or old (or all of them).
  // kDue: what is full or old; kSweepEnd: everything; kIdle: everything, busy links included.
  // Except when idle, deltas for a part whose link is still busy with earlier batches
  // (Outbound::ready) stay in their accumulators: sending them later as one sum moves fewer bytes
  // over a slow link than queueing every sweep's batch behind the last (on 100 Mbit/s links an
  // R-MAT run sent several times a sync run's bytes without this). They count in the published
  // residual meanwhile, so termination waits for them.
  enum class Flush : uint8_t { kDue, kSweepEnd, kIdle };
  bool flush_due(Slice& slice, Flush what) {
    for (uint32_t d = 0; d < destination_count(); ++d) {
      const std::vector<uint32_t>& list = slice.dirty[d];
      if (list.empty()) continue;
      const bool due = what != Flush::kDue || list.size() >= options.batch_max_entries ||
                       slice.now - slice.dirty_since[d] >= options.batch_max_age;
      if (!due) continue;
      if (what != Flush::kIdle && d >= slice_count() && !outbound.ready(d - slice_count())) continue;
      if (!flush(slice, d, 0, nullptr)) return false;
    }
    return true;
  }

  // --- Async --------------------------------------------------------------------------------

  // Nothing worth doing here: hands every outside delta to its owner, publishes `figures`, then
  // sleeps until deltas arrive (or, with a priority level, until the level moves past
  // `generation`). False: stopping.
  // With a deadline the sleep ends there too (a bounded wait for deltas worth combining).
  bool wait_for_work(Slice& slice, Clock::time_point round_start, const Scan& figures, const Drained& taken,
                     uint64_t generation, Clock::time_point deadline = Clock::time_point::max()) {
    if (!flush_due(slice, Flush::kIdle)) return false;
    slice.busy_seconds += seconds_between(round_start, Clock::now());
    publish(slice, figures, 0.0, taken);
    const Clock::time_point idle_start = Clock::now();
    {
      std::unique_lock lock(slice.mailbox_mutex);
      while (slice.mailbox_pushes == 0 && !stop_requested.load() && level_generation.load() == generation) {
        const Clock::time_point now = Clock::now();
        if (now >= deadline) break;
        slice.mailbox_wake.wait_for(lock, std::min<Clock::duration>(kIdleWait, deadline - now));
      }
    }
    slice.idle_seconds += seconds_between(idle_start, Clock::now());
    return true;
  }

  uint64_t slice_edges(const Slice& slice) const { return part.offsets[slice.hi] - part.offsets[slice.lo]; }

  // Async sum: remote deltas worth `residual` were just taken in.
  static void note_arrival(Slice& slice, double residual, Clock::time_point now) {
    if (slice.last_arrival != Clock::time_point{}) {
      const double gap = seconds_between(slice.last_arrival, now);
      slice.arrival_gap_seconds = slice.arrival_gap_seconds > 0.0 ? 0.5 * (slice.arrival_gap_seconds + gap) : gap;
    }
    slice.last_arrival = now;
    slice.arrival_residual = residual;
  }

  // How long a slice with little of its own left waits for the next remote deltas.
  static Clock::duration arrival_wait(const Slice& slice) {
    const double seconds = std::clamp(2.0 * slice.arrival_gap_seconds, kMinArrivalWait, kMaxArrivalWait);
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  // Sum algorithms: rounds of one sweep each, every outside delta flushed at the end of a round
  // (a sweep is the natural generation of deltas: its batches carry each outside vertex once,
  // as a Jacobi step's do, while mid-sweep flushes by age would send it again and again).
  template <EdgeMode kMode>
  void run_sweeps(Slice& slice) {
    std::vector<uint32_t> inbox_slots;
    std::vector<double> inbox_deltas;
    while (!stop_requested.load(std::memory_order_relaxed)) {
      const Clock::time_point round_start = Clock::now();
      slice.now = round_start;
      const Drained drained = drain_mailbox(slice, inbox_slots, inbox_deltas);
      if (drained.remote_residual > 0.0) note_arrival(slice, drained.remote_residual, round_start);
      fold_dangling(slice);
      const Scan scan = scan_slice<Accumulate::kSum>(slice);
      if (scan.residual <= options.idle_residual) {
        if (!wait_for_work(slice, round_start, scan, drained, level_generation.load())) break;
        continue;
      }
      if (scan.residual < options.combine_share * slice.arrival_residual) {
        // What is left here is small against what other parts keep sending: sweeping it now
        // would update the same vertices again as soon as their next deltas land (a fast node
        // polished its part down to the tolerance after every batch from a slower one). Wait,
        // with every outside delta flushed, for the next deltas to add to it; if none come
        // within about two arrival gaps, go on alone until the next arrival.
        const Clock::time_point deadline = round_start + arrival_wait(slice);
        if (!wait_for_work(slice, round_start, scan, drained, level_generation.load(), deadline)) break;
        if (Clock::now() >= deadline) slice.arrival_residual = 0.0;
        continue;
      }
      publish(slice, scan, outside_residual(slice), drained);
      const uint64_t generation = level_generation.load();
      if (generation != slice.level_generation) {
        slice.level_generation = generation;
        slice.level_share = 1.0;
      }
      if (drained.remote_residual > 0.0) slice.level_share = 1.0;  // new deltas, a new start
      const double floor = slice.level_share * std::max(current_level(round_start), peer_level());
      // Only vertices holding at least a share of the slice's residual per edge: the small
      // deltas a batch or the last sweep left on many vertices add up until they are worth an
      // update at full out-degree cost (the fixed point does not depend on the order). Per edge
      // of the slice rather than of its pending vertices: no degree to read per vertex in the
      // scan, which cost more per edge than the filter saved on meshes.
      const double mean = scan.residual / static_cast<double>(std::max<uint64_t>(1, slice_edges(slice)));
      const double limit = std::max({pick_limit(slice), floor, kSweepShare * mean});
      const SweepOutcome swept = sweep<kMode>(slice, limit, floor);
      ++slice.sweeps;
      if (swept == SweepOutcome::kStopping) break;
      if (swept == SweepOutcome::kNothingAtFloor) {
        // Everything here is below the level. Under the coordinator's level: go a bounded way
        // further alone (kLevelLead), then wait for its next level or for deltas. Under the peer
        // level: wait at once, but only for about two arrival gaps (if no batch comes, the
        // peers' figures are stale); going 4x below it first cost rmat:18 on local-mixed-lan
        // 0.88-0.93x sync's edge updates against 0.79x without.
        const bool level_from_peers = current_level(round_start) < peer_level();
        if (!level_from_peers && slice.level_share * 0.5 >= 1.0 / kLevelLead) {
          slice.level_share *= 0.5;
        } else {
          const Clock::time_point deadline =
              level_from_peers ? round_start + arrival_wait(slice) : Clock::time_point::max();
          if (!wait_for_work(slice, round_start, scan, Drained{}, generation, deadline)) {
            break;  // a fruitless sweep changed nothing, so `scan` still holds
          }
          if (level_from_peers && Clock::now() >= deadline) {
            forget_peer_scales();
            slice.level_share = 1.0;
          }
          continue;
        }
      }
      if (!flush_due(slice, Flush::kSweepEnd)) break;
      slice.busy_seconds += seconds_between(round_start, Clock::now());
    }
  }

  // min/max: rounds of one chunk of queue work each, taking in arrived deltas between chunks so
  // that a better delta from elsewhere goes ahead of the queue's worse ones.
  template <Accumulate kOp, EdgeMode kMode>
  void run_queue(Slice& slice) {
    std::vector<uint32_t> inbox_slots;
    std::vector<double> inbox_deltas;
    while (!stop_requested.load(std::memory_order_relaxed)) {
      const Clock::time_point round_start = Clock::now();
      slice.now = round_start;
      const Drained drained = drain_mailbox(slice, inbox_slots, inbox_deltas);
      if (slice.pending_count == 0) {
        slice.queue.clear();  // only stale entries are left
        if (!wait_for_work(slice, round_start, scan_slice<kOp>(slice), drained, level_generation.load())) break;
        continue;
      }
      if (drained.pushes > 0) publish(slice, scan_slice<kOp>(slice), outside_residual(slice), drained);
      update_from_queue<kOp, kMode>(slice);
      if (!between_chunks(slice)) break;
      // The residual (pending vertices and outside entries) is published per chunk: cheap here,
      // as both are counts kept up to date.
      publish(slice, scan_slice<kOp>(slice), outside_residual(slice), Drained{});
      slice.busy_seconds += seconds_between(round_start, Clock::now());
    }
  }

  template <Accumulate kOp, EdgeMode kMode>
  void run_slice(Slice& slice) {
    if constexpr (kOp == Accumulate::kSum) {
      run_sweeps<kMode>(slice);
    } else {
      run_queue<kOp, kMode>(slice);
    }
    // Final figures: after stop() progress() is exact (owned, outside and mailbox deltas).
    publish(slice, scan_slice<kOp>(slice), outside_residual(slice), Drained{});
    live_threads.fetch_sub(1);
  }

  void start() {
    if (started) return;
    for (auto& slice : slices) use_frontier(*slice, false);
    std::vector<DeltaBatch> batches;
    {
      std::lock_guard lock(inbox_mutex);
      batches = std::exchange(held, {});
      routing_to_mailboxes = true;
    }
    fold_held(batches);
    stop_requested.store(false);
    live_threads.store(slice_count());
    started = true;
    for (auto& slice : slices) {
      Slice* s = slice.get();
      threads.emplace_back([this, s] {
        dispatch([&]<Accumulate kOp, EdgeMode kMode>() { run_slice<kOp, kMode>(*s); });
      });
    }
  }

  void stop() {
    if (!started) return;
    {
      std::lock_guard lock(inbox_mutex);
      routing_to_mailboxes = false;
    }
    request_stop();
    for (std::thread& thread : threads) thread.join();
    threads.clear();
    started = false;
  }

  // Folds batches taken from the held store into the slices and publishes the slices that
  // changed together with the held store's decrease.
  void fold_held(const std::vector<DeltaBatch>& batches) {
    if (batches.empty()) return;
    double residual = 0.0;
    for (const DeltaBatch& batch : batches) {
      residual += batch_residual(op, batch.deltas);
      for (std::size_t i = 0; i < batch.slots.size(); ++i) {
        Slice& slice = *slices[slice_of(batch.slots[i])];
        const uint32_t local = batch.slots[i] - slice.lo;
        fold_into(slice, std::span(&local, 1), std::span(&batch.deltas[i], 1));
      }
    }
    std::vector<Scan> scans;
    for (auto& slice : slices) scans.push_back(scan_slice(*slice));
    std::lock_guard lock(progress_mutex);
    for (auto& slice : slices) {
      published[slice->index].residual = scans[slice->index].residual + outside_residual(*slice);
      published[slice->index].value_sum = scans[slice->index].value_sum;
    }
    held_pending.remove(residual, batches.size());
  }

  void set_priority_level(PriorityLevel wanted) {
    const auto usable = [](double x) { return std::isfinite(x) && x >= 0.0 ? x : 0.0; };
    {
      std::lock_guard lock(level_mutex);
      level = {usable(wanted.base), usable(wanted.base_decay), usable(wanted.per_residual)};
      level_set_at = Clock::now();
    }
    level_generation.fetch_add(1);
    for (auto& slice : slices) {
      std::lock_guard lock(slice->mailbox_mutex);  // a slice between its check and its wait sees it
      slice->mailbox_wake.notify_all();
    }
  }

  // The priority level now (PriorityLevel), with the engine's residual as last published.
  double current_level(Clock::time_point now) const {
    PriorityLevel l;
    Clock::time_point set_at;
    {
      std::lock_guard lock(level_mutex);
      l = level;
      set_at = level_set_at;
    }
    double value = l.base;
    if (l.base_decay > 0.0) value *= std::exp(-l.base_decay * seconds_between(set_at, now));
    if (l.per_residual > 0.0) value += l.per_residual * progress().residual;
    return value;
  }

  // Async sum: peer_level_share x the residual per edge over this part and every part whose
  // batches said theirs (DeltaBatch); 0 when none did. Parts that hold little of the residual
  // against the others then leave their small deltas to add up.
  double peer_level() const {
    if (options.peer_level_share <= 0.0) return 0.0;
    double sum = 0.0;
    uint32_t known = 0;
    {
      std::lock_guard lock(level_mutex);
      for (double scale : peer_scales) {
        sum += scale;
        known += scale > 0.0 ? 1 : 0;
      }
    }
    if (known == 0) return 0.0;
    sum += progress().residual / static_cast<double>(std::max<uint64_t>(1, part.edge_count()));
    return options.peer_level_share * sum / static_cast<double>(known + 1);
  }

  // Forgets what the other parts' batches said, until they send again: a part that waited for
  // deltas in vain must not be held back by stale figures.
  void forget_peer_scales() {
    std::lock_guard lock(level_mutex);
    std::fill(peer_scales.begin(), peer_scales.end(), 0.0);
  }

  // --- Sync ---------------------------------------------------------------------------------

  Result<StepReport> step(uint64_t step_index) {
    if (started) return internal_error("Engine::step called while the async engine runs; stop() it first");
    for (auto& slice : slices) use_frontier(*slice, true);
    std::vector<DeltaBatch> batches;
    {
      std::lock_guard lock(inbox_mutex);
      // Batches of step k-1 are this step's input; later ones wait for their step.
      auto later = std::stable_partition(held.begin(), held.end(),
                                         [&](const DeltaBatch& batch) { return batch.step < step_index; });
      batches.assign(std::make_move_iterator(held.begin()), std::make_move_iterator(later));
      held.erase(held.begin(), later);
    }
    fold_held(batches);
    // Leftovers of an earlier async run, if any.
    std::vector<uint32_t> inbox_slots;
    std::vector<double> inbox_deltas;
    std::vector<Drained> drained(slices.size());
    for (auto& slice : slices) drained[slice->index] = drain_mailbox(*slice, inbox_slots, inbox_deltas);

    const auto run_jacobi = [&](Slice& slice) {
      const Clock::time_point begin = Clock::now();
      slice.now = begin;
      dispatch([&]<Accumulate kOp, EdgeMode kMode>() { jacobi<kOp, kMode>(slice); });
      slice.busy_seconds += seconds_between(begin, Clock::now());
    };
    if (slices.size() == 1) {
      run_jacobi(*slices[0]);
    } else {
      std::vector<std::thread> workers;
      for (auto& slice : slices) workers.emplace_back([&, s = slice.get()] { run_jacobi(*s); });
      for (std::thread& worker : workers) worker.join();
    }

    StepReport report;
    report.step = step_index;
    report.batches_sent_to.assign(part.part_count, 0);
    for (auto& slice : slices) {
      for (uint32_t d = 0; d < destination_count(); ++d) {
        if (d < slice_count()) {
          // Another slice of this part: its deltas for the next step, applied directly.
          move_to_slice(*slice, d);
        } else if (!flush(*slice, d, step_index, &report.batches_sent_to)) {
          return failure();
        }
      }
    }
    for (auto& slice : slices) publish(*slice, scan_slice(*slice), outside_residual(*slice), drained[slice->index]);
    report.progress = progress();
    return report;
  }

  void move_to_slice(Slice& from, uint32_t d) {
    std::vector<uint32_t>& list = from.dirty[d];
    const double identity = identity_of(op);
    const uint32_t n = from.own_count();
    for (uint32_t o : list) {
      double& a = from.acc[o];
      if (a == identity) continue;
      fold_into(*slices[d], std::span(&from.outside_slot[o - n], 1), std::span(&a, 1));
      a = identity;
    }
    list.clear();
  }

  // --- Inbound ------------------------------------------------------------------------------

  Status check_batch(const DeltaBatch& batch) const {
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
                                          batch.from_part, d, batch.slots[i], algorithm_name(spec.kind),
                                          op == Accumulate::kSum ? "finite" : "numbers"));
      }
    }
    return Status::ok();
  }

  // A batch counts as received only once its deltas are in this engine's residual (held store
  // or mailboxes): a progress() in between must see it in flight, never nowhere (termination.hpp).
  Status deliver(DeltaBatch&& batch) {
    TESSERA_RETURN_IF_ERROR(check_batch(batch));
    const uint64_t count = batch.slots.size();
    const auto count_received = [&] {
      ++batches_received;
      deltas_received += count;
    };
    if (batch.sender_scale > 0.0f) {
      std::lock_guard lock(level_mutex);
      peer_scales[batch.from_part] = batch.sender_scale;
    }
    std::lock_guard inbox_lock(inbox_mutex);
    if (!routing_to_mailboxes) {
      {
        std::lock_guard lock(progress_mutex);
        held_pending.add(batch_residual(op, batch.deltas));
        count_received();
      }
      held.push_back(std::move(batch));
      return Status::ok();
    }
    if (slices.size() == 1) {
      push_to_mailbox(*slices[0], std::move(batch.slots), std::move(batch.deltas), /*remote=*/true);
    } else {
      std::vector<std::vector<uint32_t>> slots(slices.size());
      std::vector<std::vector<double>> deltas(slices.size());
      for (std::size_t i = 0; i < batch.slots.size(); ++i) {
        const uint32_t s = slice_of(batch.slots[i]);
        slots[s].push_back(batch.slots[i] - slice_lo[s]);
        deltas[s].push_back(batch.deltas[i]);
      }
      for (uint32_t s = 0; s < slice_count(); ++s) {
        if (!slots[s].empty()) push_to_mailbox(*slices[s], std::move(slots[s]), std::move(deltas[s]), /*remote=*/true);
      }
    }
    std::lock_guard lock(progress_mutex);
    count_received();
    return Status::ok();
  }

  // --- Observers ----------------------------------------------------------------------------

  EngineProgress progress() const {
    EngineProgress figures;
    std::lock_guard lock(progress_mutex);
    for (const EngineProgress& slice : published) figures += slice;
    for (const PendingDeltas& mailbox : mailbox_pending) figures.residual += mailbox.residual;
    figures.residual += held_pending.residual;
    figures.batches_sent = batches_sent;
    figures.deltas_sent = deltas_sent;
    figures.batches_received = batches_received;
    figures.deltas_received = deltas_received;
    figures.running = live_threads.load() > 0;
    return figures;
  }

  std::vector<double> snapshot_values() const {
    std::vector<double> copy(part.local_count);
    for (const auto& slice : slices) {
      std::lock_guard lock(slice->value_mutex);
      std::copy(part.value.begin() + slice->lo, part.value.begin() + slice->hi, copy.begin() + slice->lo);
    }
    return copy;
  }

  Status failure() const {
    std::lock_guard lock(failure_mutex);
    return first_failure;
  }

  uint64_t memory_bytes() const {
    uint64_t bytes = part.memory_bytes() + sizeof(Impl);
    for (const auto& slice : slices) {
      bytes += sizeof(Slice) + slice->acc.capacity() * sizeof(double) +
               (slice->outside_destination.capacity() + slice->outside_slot.capacity()) * sizeof(uint32_t) +
               slice->step_deltas.capacity() * sizeof(double) + slice->step_vertices.capacity() * sizeof(uint32_t) +
               slice->queued.capacity() + slice->frontier_list.capacity() * sizeof(uint32_t) +
               slice->queue.memory_bytes();
      bytes += slice->dangling.capacity() * sizeof(uint32_t);
      for (const std::vector<uint32_t>& list : slice->dirty) bytes += list.capacity() * sizeof(uint32_t);
    }
    return bytes;
  }
};

Result<std::unique_ptr<Engine>> Engine::create(GraphPart part, const AlgorithmSpec& spec, const EngineOptions& options,
                                               Outbound& outbound) {
  TESSERA_RETURN_IF_ERROR(part.validate());
  TESSERA_RETURN_IF_ERROR(check_spec(spec));
  if (options.threads < 1) return invalid_argument("engine threads is 0; use at least 1 update thread");
  if (!(options.combine_share >= 0.0 && std::isfinite(options.combine_share)) ||
      !(options.peer_level_share >= 0.0 && std::isfinite(options.peer_level_share))) {
    return invalid_argument("combine_share and peer_level_share must be finite and >= 0 (0: off)");
  }
  if (!(options.priority_fraction > 0.0 && options.priority_fraction <= 1.0)) {
    return invalid_argument(fmt::format("priority fraction {} is out of range; use a value in (0, 1], e.g. 0.25",
                                        options.priority_fraction));
  }
  if (!(options.idle_residual >= 0.0) || !std::isfinite(options.idle_residual)) {
    return invalid_argument(fmt::format("idle residual {} is out of range; use a finite value >= 0 (tolerance / "
                                        "(parts * threads))",
                                        options.idle_residual));
  }
  if (options.batch_max_entries < 1) return invalid_argument("batch max entries is 0; use at least 1");
  if (options.batch_max_age.count() < 0) return invalid_argument("batch max age is negative; use 0 or more");
  if (spec.kind == AlgorithmKind::kShortestPaths) {
    for (std::size_t e = 0; e < part.weights.size(); ++e) {
      if (part.weights[e] < 0.0) {
        return invalid_argument(fmt::format("graph part {}: edge {} has weight {}; sssp needs non-negative weights",
                                            part.part_index, e, part.weights[e]));
      }
    }
  }
  auto impl = std::make_unique<Impl>(std::move(part), spec, options, outbound);
  impl->build_slices();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

EngineProgress& EngineProgress::operator+=(const EngineProgress& other) {
  value_sum += other.value_sum;
  residual += other.residual;
  updates += other.updates;
  edge_updates += other.edge_updates;
  batches_sent += other.batches_sent;
  batches_received += other.batches_received;
  deltas_sent += other.deltas_sent;
  deltas_received += other.deltas_received;
  sweeps += other.sweeps;
  busy_seconds += other.busy_seconds;
  idle_seconds += other.idle_seconds;
  running = running || other.running;
  return *this;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { impl_->stop(); }

Status Engine::deliver(DeltaBatch&& batch) { return impl_->deliver(std::move(batch)); }
void Engine::start() { impl_->start(); }
void Engine::stop() { impl_->stop(); }
void Engine::set_priority_level(PriorityLevel level) { impl_->set_priority_level(level); }
Result<StepReport> Engine::step(uint64_t step) { return impl_->step(step); }
EngineProgress Engine::progress() const { return impl_->progress(); }
std::vector<double> Engine::snapshot_values() const { return impl_->snapshot_values(); }
const std::vector<double>& Engine::values() const { return impl_->part.value; }
Status Engine::failure() const { return impl_->failure(); }
uint64_t Engine::memory_bytes() const { return impl_->memory_bytes(); }

}  // namespace tessera::graph
