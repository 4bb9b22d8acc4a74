// What a graph run costs on one node, as the profiler measures it and the graph placement model
// reads it: the engine's sweep rate and the CPU cost of a remote delta on each side. All figures
// are the node's own time (wall seconds under its CPU quota, as a run would see them), measured on
// the worker itself so that nothing large crosses the link. A value; thread-safe to copy.
#pragma once

namespace tessera::balance::model {

struct GraphRates {
  // Edge updates per second of the asynchronous PageRank sweep with one update thread, on a probe
  // graph larger than the caches the worker generated itself.
  double edge_updates_per_s = 0.0;
  // Seconds of the node's time to combine, encode and send one remote delta entry (slot + value),
  // and per batch (one frame) on top of its entries.
  double send_s_per_delta = 0.0;
  double send_s_per_batch = 0.0;
  // Seconds to receive, decode and fold in one delta entry, and per batch on top.
  double receive_s_per_delta = 0.0;
  double receive_s_per_batch = 0.0;

  bool measured() const { return edge_updates_per_s > 0.0; }
  bool operator==(const GraphRates&) const = default;
};

}  // namespace tessera::balance::model
