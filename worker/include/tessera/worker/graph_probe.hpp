// The graph probe: what a graph run costs on this node, measured on the worker itself for
// `tessera profile` (GRAPH_PROBE -> GRAPH_PROBE_RESULT, layouts in graph/probe_messages.hpp) and read by the
// graph placement model as model::GraphRates.
//
// The worker generates the probe graph (R-MAT, bounded by graph::check_graph_probe and charged to
// the tile store's cap before anything is allocated) and measures, one after the other:
//   - the edge updates per CPU second of the engine's asynchronous PageRank sweep, one update
//     thread, the whole graph as one part;
//   - sending: combining deltas into ghost accumulators, flushing them into a DeltaBatch, encoding
//     the GRAPH_DELTAS frame and writing it to a local stream socket that a drain thread empties
//     (a socket, not a memory sink: the system call and the kernel's copy are most of a small
//     batch's cost; a Unix socket rather than loopback TCP, whose sender would also pay the
//     receiving side's TCP processing);
//   - receiving: reading a GRAPH_DELTAS frame from such a socket (a feeder thread writes it),
//     checking its length and decoding it with the graph codec as the graph service does, then
//     what Engine::deliver and the update thread's fold do with it (slots checked, the batch's
//     residual, the mailbox copy, dv[slot] += delta). The engine's fold is private to it, so its
//     kernel is repeated here;
// each at two batch sizes, fitted as time = batches x per_batch + entries x per_delta. Every
// figure is timed on the measuring thread's CPU clock (threads blocked on the socket cost
// nothing) and turned into the node's wall time by the share of a core one thread got over the
// whole probe (process CPU / wall, at most 1): a quarter-core quota then reads 4x slower than an
// idle core without each short window catching more or fewer quota slices than its share.
// Thread-safety: measure_graph_rates is reentrant; the service's handler runs on its session's
// connection thread.
#pragma once

#include <functional>

#include "tessera/core/status.hpp"
#include "tessera/graph/probe_messages.hpp"
#include "tessera/worker/service.hpp"

namespace tessera::worker {

// Bytes the probe holds at its peak for `probe` (the generated edge list and the CSR built from
// it, the part, the engine's state, the batches): what the service charges to the tile store.
uint64_t graph_probe_bytes(const graph::GraphProbe& probe);

// Runs the probe. REQUIRES: graph::check_graph_probe(probe) is OK. `stopping` (optional) is polled
// between phases and during the sweep; when it turns true the probe fails with kCancelled.
Result<graph::GraphProbeResult> measure_graph_rates(const graph::GraphProbe& probe,
                                                    const std::function<bool()>& stopping = {});

// GRAPH_PROBE (capability transport::kCapabilityGraphProbe). A request out of range, or one whose
// probe would not fit under the tile memory cap, is answered with ERROR (the session ends).
Service graph_probe_service();

}  // namespace tessera::worker
