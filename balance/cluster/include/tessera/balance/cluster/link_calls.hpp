// One call on every node's link at once, each on its own thread, with the cluster's silent-node
// watchdog cutting off a call whose connection moves no byte for too long: how the graph driver
// loads, starts, polls and stops its parts, and how a resident matrix is placed and multiplied.
// on_links is called from one thread; the calls it runs must touch only their own link.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::cluster {

// Bytes the link's connection moved either way so far; 0 without a connection.
uint64_t link_bytes(const NodeLink& link);

struct CallOutcome {
  Status status;
  bool silent = false;   // shut down by the watchdog: nothing moved for the node timeout
  bool aborted = false;  // shut down because another call of the round failed (abort_after)
};

// Runs call(i) for every link on its own thread and waits for all of them. A call during which
// its connection moves no byte for `silence` has the connection shut down by the cluster's
// silent-node watchdog, which makes the call return; the outcome says it was silent. With
// `abort_after`, once one call has failed the calls still pending get that long and are then shut
// down too (a sync step waits for batches from every other node, so a lost node leaves the others
// waiting). The cancel flag shuts every call down.
std::vector<CallOutcome> on_links(std::span<NodeLink* const> links, std::chrono::milliseconds silence,
                                  const std::atomic<bool>* cancel, const std::function<Status(std::size_t)>& call,
                                  std::optional<std::chrono::milliseconds> abort_after = std::nullopt);

}  // namespace tessera::balance::cluster
