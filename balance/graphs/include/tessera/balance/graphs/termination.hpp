// When an asynchronous graph run is finished, decided by the coordinator from polls of every
// worker's counters; and the synchronous baseline's batch bookkeeping. Pure values; no clocks, no
// sockets, so both are tested without workers. Thread-compatible.
//
// Async termination (Mattern's four-counter method, "Algorithms for distributed termination
// detection", 1987, applied to two consecutive polls). The coordinator polls every node, waits
// until all replies are in, and later polls again. It stops when, between those two polls,
//   (a) no node made an update (each node's `updates` counter is the same in both polls),
//   (b) the sum over nodes of batches_sent equals the sum of batches_received, in both polls, and
//       neither sum changed between them,
//   (c) the summed residual of the second poll is at most the tolerance (0 for cc and sssp).
// Why that is safe although the nodes are read at different moments: counters only grow. Let t
// be any instant after the last reply of poll 1 and before the first request of poll 2. Every
// node's counters at t lie between its two readings, so R1 <= R(t) <= S(t) <= S2, where R is
// the sum of batches received and S the sum sent; R1 == S2 forces R(t) == S(t): no batch was on
// the wire at t. No send, receive or update happened on any node between its two readings, so
// each node's residual at t equals its second reading, and their sum is the global residual of a
// consistent cut with nothing in flight. An idle engine wakes only for an arriving batch, and
// none can arrive, so the run is over with that residual; (a) alone would not do, since a delta
// on the wire revives a node (the "early termination" the four counters exist to rule out).
// REQUIRES of the engines (graph/engine.hpp): a batch counts as sent no later than its deltas
// leave the sender's residual, and as received no earlier than they enter the receiver's, so at
// every instant each delta is in some residual or in a batch sent and not yet received.
//
// Sync bookkeeping: step k on node i must wait for the batches the OTHER nodes sent to it in
// step k-1 (their StepReport::batches_sent_to[i]); SyncLedger adds them up, and also tells how
// many batches each node must have received in total once the last step's batches are in.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessera::balance::graphs {

// What one poll read from one node (graph::EngineProgress, the fields termination needs).
struct NodeCounters {
  uint64_t updates = 0;
  uint64_t batches_sent = 0;
  uint64_t batches_received = 0;
  double residual = 0.0;
  bool operator==(const NodeCounters&) const = default;
};

// True when `earlier` and `later` (two consecutive polls of the same nodes, same order) prove
// termination as the file comment says. Otherwise false, and `waiting_for` (if given) says why in
// words for logs: "node 2 is still updating", "residual 3.1e-05 > tolerance 1e-06", "4 batches
// in flight", "batch counters moved between polls". REQUIRES: equal sizes.
bool proves_termination(std::span<const NodeCounters> earlier, std::span<const NodeCounters> later, double tolerance,
                        std::string* waiting_for = nullptr);

// Feeds polls one by one; terminated once two consecutive ones prove it.
class TerminationDetector {
 public:
  explicit TerminationDetector(double tolerance) : tolerance_(tolerance) {}
  // Returns true when this poll and the previous one prove termination. A poll of a different
  // node count than the previous one starts afresh (the placement changed).
  bool observe(std::span<const NodeCounters> poll);
  // Forgets the previous poll (after a restart).
  void reset();
  // Why the last observe() returned false ("first poll" after a reset).
  const std::string& waiting_for() const { return waiting_for_; }

 private:
  double tolerance_;
  std::optional<std::vector<NodeCounters>> previous_;
  std::string waiting_for_ = "first poll";
};

// expected[i] = sum over senders j != i of sent_to[j][i]: what node i waits for in the next sync
// step. sent_to[j] is node j's StepReport::batches_sent_to (one entry per node; a shorter row
// counts as zeros, a node's entry for itself is ignored).
std::vector<uint64_t> expected_batches(std::span<const std::vector<uint64_t>> sent_to);

class SyncLedger {
 public:
  explicit SyncLedger(std::size_t nodes) : expected_(nodes, 0), received_total_(nodes, 0) {}
  // Batches each node must receive before its next step (all zero before the first step).
  const std::vector<uint64_t>& expected_next() const { return expected_; }
  // Records the reports of a finished step.
  void record_step(std::span<const std::vector<uint64_t>> sent_to);
  // Batches each node has been sent in all recorded steps: once its batches_received reaches
  // this, no batch of the run is still on its way to it.
  const std::vector<uint64_t>& received_total() const { return received_total_; }

 private:
  std::vector<uint64_t> expected_;
  std::vector<uint64_t> received_total_;
};

}  // namespace tessera::balance::graphs
