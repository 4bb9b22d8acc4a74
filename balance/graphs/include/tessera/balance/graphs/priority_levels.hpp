// The common priority level of an asynchronous PageRank or Katz run: what the coordinator sends
// each node with every poll (graph::PriorityLevel), decided from the polls' counters. A pure value
// with no clock or socket of its own (the caller passes the poll's time), so it is tested without
// workers. Thread-compatible.
//
// Why: every engine works down its own part by priority |dv| / out-degree. Alone, a node whose part
// is already far below the others' keeps polishing it, and every batch of deltas that arrives from
// a slower node makes it polish again, so on several parts async PageRank can spend more edge
// updates than sync Jacobi steps. With a level of f x (summed residual) / (edges), no node updates a
// vertex below the global average priority's share f, so it waits for the others instead.
// Per node the level is f x (the others' residual x exp(-decay x t) + its own residual as it goes)
// / E: its own part it sees at every round, the others' it extrapolates between polls at the rate
// the whole decayed over the last two polls (without it, nodes would sit idle until the next poll).
// A node alone has base 0 and is never held back: some vertex always has |dv| / degree >= R / E.
// If a poll finds that nothing was updated anywhere since the previous one while the residual is
// above the tolerance (every engine waiting below its level: residual on dangling vertices or in
// flight, which the argument above does not cover), the next poll lifts the level.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/balance/graphs/termination.hpp"
#include "tessera/graph/engine.hpp"

namespace tessera::balance::graphs {

class PriorityLevels {
 public:
  // fraction: f in (0, 1]; 0 turns levels off (observe() then always returns zeros). edges: the
  // graph's edge count E (at least 1 is used). tolerance: the run's.
  PriorityLevels(double fraction, uint64_t edges, double tolerance);

  // The levels to send with the next poll, one per node, from this poll's counters (same nodes,
  // same order as the previous call) read at `now`.
  std::vector<graph::PriorityLevel> observe(std::span<const NodeCounters> poll, std::chrono::steady_clock::time_point now);

  // A new placement: forget the previous poll (its nodes and counters are gone).
  void reset();

 private:
  double fraction_;
  double edges_;
  double tolerance_;
  bool have_previous_ = false;
  uint64_t previous_updates_ = 0;
  double previous_residual_ = 0.0;
  std::chrono::steady_clock::time_point previous_at_;
};

}  // namespace tessera::balance::graphs
