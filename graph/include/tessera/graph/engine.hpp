// Engine: runs one GraphPart's updates, asynchronously (Maiter-style accumulative updates, no
// barriers) or one synchronous Jacobi step at a time, with the same kernels.
//
// Async: start() launches `threads` update threads. Each owns a contiguous slice of the part's
// vertices and repeats rounds: fold in the deltas that arrived, update, and send deltas for
// vertices outside the slice (v (+)= dv; g(dv, e) into each target's dv: own slice directly,
// other slices and ghosts through accumulators flushed in batches at the end of every sweep, or
// by count and age for cc/sssp; see EngineOptions). How a round updates depends on the algorithm:
//   - pagerank, katz (+): a Gauss-Seidel sweep in slot order over the pending vertices whose
//     |dv| / out-degree is at least the slice's residual per edge (or, with
//     priority_fraction < 1, in the top share of a sample), never below the coordinator's priority
//     level (set_priority_level) nor the peer level: the mean residual per edge of this part and
//     of the parts whose batches said theirs (DeltaBatch::sender_scale). Small deltas add up
//     until they are worth an update at full out-degree cost, and a fast part whose residual is
//     far below the others' waits for their deltas instead of polishing its own (each batch
//     would make it polish again); so does a part left with little against what its last remote
//     deltas brought. Those waits are bounded (about two arrival gaps), after which the part goes
//     on alone;
//   - cc, sssp (max, min): best-first from a priority queue (largest label, smallest distance).
// A thread with nothing above its share of the tolerance (nothing pending for cc/sssp) sleeps
// until deltas arrive; so does one with nothing at the priority level, until the level moves.
// stop() joins the threads; after it no batch is sent.
// Sync: step(k) first folds in exactly the batches tagged k-1 (batches of step k that arrive
// early wait), then updates every vertex with a pending delta once from the deltas as they were
// at the start of the step (Jacobi: contributions made during step k are applied in step k+1),
// then flushes every ghost accumulator as batches tagged k.
//
// Remote deltas leave through the Outbound the caller provides (called from update threads; may
// block, which slows this engine down rather than growing memory) and arrive through deliver()
// (any thread, usually the receiving thread of a peer link). A batch whose slots are out of range
// is refused by deliver() with kProtocolError, nothing of it applied.
// Thread-safety: deliver(), progress() and snapshot_values() from any thread; start/stop/step/
// values from one controlling thread. The engine owns its part.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/part.hpp"

namespace tessera::graph {

struct EngineOptions {
  uint32_t threads = 1;                 // update threads, >= 1
  // Async: a thread idles when the sum of |dv| in its slice (sum algorithms) is at most this; the
  // coordinator sets it to 0.9 * tolerance / (parts * threads) so that every idle engine together
  // is below the tolerance (an idle thread has flushed its ghost deltas and wakes for any that
  // arrive). Ignored for cc/sssp, which idle when nothing is pending.
  double idle_residual = 0.0;
  // Async pagerank/katz: share of the pending vertices a sweep updates, (0, 1]. 1 (every pending
  // vertex) needs about the edge updates of Maiter's sampled top quarter, and each is cheaper: the
  // sweep walks the CSR in order with no threshold to sample (tessera-graph-engine-bench --priority
  // measures other shares).
  double priority_fraction = 1.0;
  // Outside deltas leave at the end of every sweep (pagerank, katz), or for cc/sssp, which have no
  // sweeps, when a destination holds batch_max_entries or its oldest is batch_max_age old; at
  // most batch_max_entries go in one batch. 65536 (768 KiB frames) and 10 ms: a smaller or sooner
  // batch sends the same outside vertices again and again, each time with less of what they will
  // gather, which multiplies the bytes a slow node's link must carry.
  uint32_t batch_max_entries = 65536;
  std::chrono::microseconds batch_max_age{10000};
  // Async pagerank/katz: holding a part back for its peers' deltas. combine_share c: a slice whose
  // residual is below c x what the last remote deltas brought waits (about two arrival gaps, 1-10
  // ms) for the next ones instead of sweeping. peer_level_share p: no vertex below p x the mean
  // residual per edge of this part and of the parts whose batches said theirs is updated; with
  // nothing above it the slice waits as long. Both 0 (off) by default: a part held back needs
  // fewer edge updates (the deltas it waits for add up first) but the run takes longer in wall
  // time, spent in more, smaller sweeps and in the waits themselves. Not carried on the wire:
  // workers run with the defaults; the engine bench and tests set them.
  double combine_share = 0.0;
  double peer_level_share = 0.0;
  bool operator==(const EngineOptions&) const = default;
};

// The level below which an async engine leaves a vertex alone, `t` seconds after it was set:
// base x exp(-base_decay x t) + per_residual x this engine's current residual. The coordinator
// sets it from its polls (per_residual = f / E, base = f x the other parts' residual / E, E the
// graph's edges, base_decay the global residual's rate of decay between the last polls) so that it
// tracks the global residual per edge: a node whose part is already far below the others' waits
// for their deltas instead of polishing its own (each delta that arrives later would make it
// polish again), while a node alone (base 0) is never held back, since some vertex always has
// |dv| / degree >= R / E. Zeros: no level.
struct PriorityLevel {
  double base = 0.0;
  double base_decay = 0.0;  // per second
  double per_residual = 0.0;
  bool operator==(const PriorityLevel&) const = default;
};

// Deltas for one part's vertices: slot[i] gets delta[i] accumulated.
struct DeltaBatch {
  uint64_t step = 0;        // sync step that produced it; 0 in async mode
  uint32_t from_part = 0;
  uint32_t to_part = 0;
  std::vector<uint32_t> slots;
  std::vector<double> deltas;
  // The sender's residual per edge when it sent the batch (0: not known). An async receiver
  // leaves alone vertices far below the mean of its own and its senders' (the peer level,
  // src/priority_levels.hpp), so a fast part lets small deltas add up while the slower parts
  // still hold more.
  float sender_scale = 0.0f;
};

class Outbound {
 public:
  virtual ~Outbound() = default;
  // Sends `batch` to batch.to_part. A failure stops the engine's threads (the run is then lost
  // and the coordinator restarts it); the engine records the first failure (see failure()).
  virtual Status send(DeltaBatch&& batch) = 0;
  // Whether a batch for `to_part` would leave now rather than queue behind earlier ones. While a
  // link is busy an async engine keeps accumulating its deltas for that part (only an idle
  // engine sends regardless). Called from update threads; the default: always ready.
  virtual bool ready(uint32_t /*to_part*/) { return true; }
};

// Cumulative figures since the engine was made. Residual: sum of |dv| over owned vertices, ghost
// accumulators and deltas received but not folded in (sum algorithms), or the number of vertices
// and accumulator entries with a delta pending (cc, sssp).
struct EngineProgress {
  double value_sum = 0.0;       // sum of finite values (sum algorithms); vertices reached (others)
  double residual = 0.0;
  uint64_t updates = 0;         // vertex updates
  uint64_t edge_updates = 0;    // g applied along an edge
  uint64_t batches_sent = 0;      // counted before the batch is handed to the Outbound
  uint64_t batches_received = 0;  // delivered and accepted; counted once its deltas are in the residual
  uint64_t deltas_sent = 0;
  uint64_t deltas_received = 0;
  // Async pagerank/katz sweeps (updates / sweeps: vertices touched per sweep). Engine-local: the
  // progress message leaves it out (it is for the worker's log, benches and tests).
  uint64_t sweeps = 0;
  double busy_seconds = 0.0;    // summed over update threads: time in rounds
  double idle_seconds = 0.0;    // summed over update threads: time asleep waiting for deltas
  bool running = false;
  bool operator==(const EngineProgress&) const = default;
  // Adds `other`'s figures to these (running: either); how the coordinator totals its workers.
  EngineProgress& operator+=(const EngineProgress& other);
};

struct StepReport {
  uint64_t step = 0;
  std::vector<uint64_t> batches_sent_to;  // per part
  EngineProgress progress;
};

class Engine {
 public:
  // Fails (kInvalidArgument) when the part does not validate, or spec/options are out of range.
  static Result<std::unique_ptr<Engine>> create(GraphPart part, const AlgorithmSpec& spec,
                                                const EngineOptions& options, Outbound& outbound);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Status deliver(DeltaBatch&& batch);

  // Async mode.
  void start();
  void stop();
  // Async sum algorithms (pagerank, katz): no vertex whose |dv| / out-degree is below the level
  // is updated (see PriorityLevel). A thread with nothing at the level lowers its own floor by
  // halves, at most 4x, then waits for deltas or a new level. Ignored for cc and sssp. Any thread.
  void set_priority_level(PriorityLevel level);
  // Sync mode. REQUIRES: not started. Returns after the batches of this step were handed to the
  // outbound.
  Result<StepReport> step(uint64_t step);

  EngineProgress progress() const;
  // A copy of the owned vertices' values taken between rounds (consistent per thread slice).
  std::vector<double> snapshot_values() const;
  // REQUIRES: stopped (or never started).
  const std::vector<double>& values() const;
  // The first outbound failure, OK if none.
  Status failure() const;
  uint64_t memory_bytes() const;  // part + engine state

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::graph
