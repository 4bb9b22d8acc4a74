// PriorityLevels: the two floors below which an async sum engine (pagerank, katz) leaves a
// vertex alone. The coordinator's level (PriorityLevel in engine.hpp, set from its polls and
// decaying with time) and the peer level (EngineOptions::peer_level_share x the mean residual
// per edge of this part and of the parts whose batches said theirs, DeltaBatch::sender_scale).
// Both read this engine's own residual from the ProgressLedger, which it does not own.
// Thread-safe: set() and note_peer_scale() from any thread, the readers from update threads. The
// generation moves on every set(); a slice waiting for work wakes for it (the engine wakes the
// mailboxes after set()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "progress_ledger.hpp"
#include "tessera/graph/engine.hpp"

namespace tessera::graph::detail {

using Clock = std::chrono::steady_clock;

class PriorityLevels {
 public:
  // `edges`: the part's edge count (the peer level's per-edge figure of this part).
  PriorityLevels(uint32_t part_count, uint64_t edges, double peer_level_share, const ProgressLedger& ledger);

  // A new coordinator level; fields that are negative or not finite read as 0.
  void set(PriorityLevel wanted);
  uint64_t generation() const { return generation_.load(); }
  // The coordinator's level at `now`, with the engine's residual as last published.
  double current(Clock::time_point now) const;
  // The peer level now; 0 when it is off or no batch said its sender's figure.
  double peer_level() const;
  // A batch from part `from_part` said its sender holds `scale` per edge (> 0).
  void note_peer_scale(uint32_t from_part, float scale);
  // Forgets what the other parts' batches said, until they send again: a part that waited for
  // deltas in vain must not be held back by stale figures.
  void forget_peer_scales();

 private:
  const ProgressLedger& ledger_;
  const uint64_t edges_;
  const double peer_level_share_;
  // The coordinator's level and when it was set, together under mutex_; read per round.
  mutable std::mutex mutex_;
  PriorityLevel level_;
  Clock::time_point set_at_;
  std::vector<double> peer_scales_;  // per part: its residual per edge as its latest batch here said (0: not known)
  std::atomic<uint64_t> generation_{0};
};

}  // namespace tessera::graph::detail
