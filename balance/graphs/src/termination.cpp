#include "tessera/balance/graphs/termination.hpp"

#include <fmt/format.h>

namespace tessera::balance::graphs {

namespace {

struct Sums {
  uint64_t sent = 0;
  uint64_t received = 0;
  double residual = 0.0;
};

Sums sums_of(std::span<const NodeCounters> poll) {
  Sums sums;
  for (const NodeCounters& node : poll) {
    sums.sent += node.batches_sent;
    sums.received += node.batches_received;
    sums.residual += node.residual;
  }
  return sums;
}

bool say(std::string* waiting_for, std::string reason) {
  if (waiting_for != nullptr) *waiting_for = std::move(reason);
  return false;
}

}  // namespace

bool proves_termination(std::span<const NodeCounters> earlier, std::span<const NodeCounters> later, double tolerance,
                        std::string* waiting_for) {
  if (earlier.size() != later.size()) return say(waiting_for, "the nodes changed between polls");
  for (std::size_t i = 0; i < later.size(); ++i) {
    if (later[i].updates != earlier[i].updates) return say(waiting_for, fmt::format("node {} is still updating", i));
  }
  const Sums before = sums_of(earlier);
  const Sums after = sums_of(later);
  if (before.sent != after.sent || before.received != after.received) {
    return say(waiting_for, "batch counters moved between polls");
  }
  if (after.sent != after.received) {
    // Received can exceed sent only for a moment in a poll that read the receiver after the
    // sender; either way something is in flight.
    const uint64_t gap = after.sent > after.received ? after.sent - after.received : after.received - after.sent;
    return say(waiting_for, fmt::format("{} batches in flight", gap));
  }
  if (!(after.residual <= tolerance)) {
    return say(waiting_for, fmt::format("residual {:.3g} > tolerance {:.3g}", after.residual, tolerance));
  }
  if (waiting_for != nullptr) waiting_for->clear();
  return true;
}

bool TerminationDetector::observe(std::span<const NodeCounters> poll) {
  bool done = false;
  if (!previous_ || previous_->size() != poll.size()) {
    waiting_for_ = "first poll";
  } else {
    done = proves_termination(*previous_, poll, tolerance_, &waiting_for_);
  }
  previous_.emplace(poll.begin(), poll.end());
  return done;
}

void TerminationDetector::reset() {
  previous_.reset();
  waiting_for_ = "first poll";
}

std::vector<uint64_t> expected_batches(std::span<const std::vector<uint64_t>> sent_to) {
  std::vector<uint64_t> expected(sent_to.size(), 0);
  for (std::size_t sender = 0; sender < sent_to.size(); ++sender) {
    const std::vector<uint64_t>& row = sent_to[sender];
    for (std::size_t receiver = 0; receiver < expected.size() && receiver < row.size(); ++receiver) {
      if (receiver != sender) expected[receiver] += row[receiver];
    }
  }
  return expected;
}

void SyncLedger::record_step(std::span<const std::vector<uint64_t>> sent_to) {
  expected_ = expected_batches(sent_to);
  expected_.resize(received_total_.size(), 0);
  for (std::size_t i = 0; i < received_total_.size(); ++i) received_total_[i] += expected_[i];
}

}  // namespace tessera::balance::graphs
