// The graph service's wire as the coordinator speaks it: its calls to a worker, and the frame I/O
// they share with the worker's graph service. The payloads are the codec's (wire_codec.hpp,
// included here; the probe's in probe_messages.hpp): this header adds the connection layer
// (transport/frame_connection.hpp) on top.
//
// Graph messages use the frame header of transport/protocol.hpp with their own message types
// (kGraph* there); their payloads are encoded and decoded by the codec, with every count checked
// against the payload length and the limits BEFORE memory is reserved. Coordinator -> worker:
//   GRAPH_LOAD      run id, algorithm, engine options, peer endpoints, the GraphPart and its state
//                   -> GRAPH_READY (the part validated and held; memory bytes)
//   GRAPH_START     start the async engine; the worker first connects to its peers
//                   -> GRAPH_READY once every peer link is up
//   GRAPH_STEP      sync: step k once `expected_batches` batches of step k-1 have arrived, in total
//                   from all other parts (what their GRAPH_STEP_DONE of step k-1 said they sent to
//                   this part) -> GRAPH_STEP_DONE
//   GRAPH_PROGRESS_REQUEST (the priority level) -> GRAPH_PROGRESS;  GRAPH_VALUES_REQUEST -> GRAPH_VALUES (snapshot or final)
//   GRAPH_STOP      stop the engine, close peer links, keep the values -> GRAPH_READY
//   GRAPH_PROBE     measure this node's graph rates on a graph it generates itself
//                   -> GRAPH_PROBE_RESULT (kCapabilityGraphProbe; layouts in probe_messages.hpp)
// Worker -> worker, on a peer link (authenticated with the peer MAC label, see transport/auth.hpp):
//   GRAPH_PEER_HELLO (run id, sender's part) first, then GRAPH_DELTAS batches; no replies.
// The calls below write a request and wait for its reply on the caller's connection; a peer's
// ERROR comes back as transport::peer_error_status. They are as thread-safe as FrameConnection:
// one caller per connection at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graph/engine.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/probe_messages.hpp"
#include "tessera/graph/wire_codec.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::graph {

// Coordinator-side calls. Each fails with the worker's ERROR as a Status, or the transport's.
Status load_part(transport::FrameConnection& connection, const RunSetup& setup, const GraphPart& part);
Status start_async(transport::FrameConnection& connection);
Result<StepReport> run_step(transport::FrameConnection& connection, uint64_t step, uint64_t expected_batches);
// level: async sum algorithms, the priority level below which the engine does not update
// (Engine::set_priority_level; the default lifts it).
Result<NodeProgress> request_progress(transport::FrameConnection& connection, PriorityLevel level = {});
Result<std::vector<double>> request_values(transport::FrameConnection& connection);
Status stop_run(transport::FrameConnection& connection);
// GRAPH_PROBE -> GRAPH_PROBE_RESULT. REQUIRES: the worker's HELLO has kCapabilityGraphProbe.
// Fails with kInvalidArgument when `probe` is out of range (nothing sent).
Result<GraphProbeResult> probe_graph(transport::FrameConnection& connection, const GraphProbe& probe);

// The frame I/O the calls above and the worker's graph service share.
// Writes one GRAPH_* frame of `type` whose payload is `payload`, in one gathered write.
Status write_graph_frame(transport::FrameConnection& connection, transport::MessageType type,
                         const PayloadParts& payload, uint64_t request_id = 0);
// Reads the payload of a GRAPH_* frame whose header was just read and decodes it (wire_codec.hpp).
// The length is checked against the type's bounds before anything is read, and the buffer grows
// only as bytes arrive. Failure: kProtocolError (length or layout, the payload then possibly
// unread), kResourceExhausted (memory), or the connection's error (kNetworkError).
Result<GraphMessage> read_graph_payload(transport::FrameConnection& connection, const transport::FrameHeader& header);

}  // namespace tessera::graph
