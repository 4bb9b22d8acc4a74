// The graph service's payload codec: the layouts of the GRAPH_* messages and pure functions that
// encode and decode them. transport/protocol.hpp frames these messages (types kGraphLoad ..
// kGraphDeltas) but leaves their payloads to this codec, so transport knows nothing of graphs.
//
// Layouts: integers little-endian, f64 IEEE-754 binary64 little-endian, i64 two's complement,
// str = u16 length + UTF-8 bytes, pad = bytes that must be 0.
//   algorithm  u8 kind (1 pagerank, 2 katz, 3 cc, 4 sssp) | u8 flags (bit 0: source set, bit 1:
//              max_label) | pad[6] | f64 damping | f64 beta | i64 source (0 when not set)  [32]
//   engine     u32 threads | u32 batch_max_entries | f64 idle_residual | f64 priority_fraction
//              | i64 batch_max_age_us                                                      [32]
//   progress   f64 value_sum | f64 residual | u64 updates | u64 edge_updates | u64 batches_sent
//              | u64 batches_received | u64 deltas_sent | u64 deltas_received | f64 busy_seconds
//              | f64 idle_seconds | u8 running (0 or 1) | pad[7]                            [88]
//
//   GRAPH_LOAD      u64 run_id | algorithm | engine | u32 part_index | u32 part_count
//                   | u32 local_count | u32 ghost_count | u64 edge_count | u8 weighted (0 or 1)
//                   | pad[7] | part_count x (str host | u16 port)      (the peers, in part order)
//                   | u64 offsets[local_count + 1] | u32 targets[edge_count]
//                   | f64 weights[weighted ? edge_count : 0] | (u32 owner | u32 slot) ghosts[ghost_count]
//                   | f64 value[local_count] | f64 delta[local_count]
//   GRAPH_READY     u64 run_id | u64 memory_bytes                                            [16]
//   GRAPH_START, GRAPH_PROGRESS_REQUEST, GRAPH_VALUES_REQUEST, GRAPH_STOP: empty
//   GRAPH_STEP      u64 step | u64 expected_batches                                          [16]
//   GRAPH_STEP_DONE u64 step | progress | u32 part_count | pad[4] | u64 batches_sent_to[part_count]
//   GRAPH_PROGRESS  progress | u64 peer_bytes_sent | u64 peer_bytes_received | u64 memory_bytes [112]
//   GRAPH_VALUES    u64 count | u8 final (0: a snapshot of a running engine, 1: final) | pad[7]
//                   | f64 values[count]
//   GRAPH_PEER_HELLO u64 run_id | u32 from_part | pad[4]                                     [16]
//   GRAPH_DELTAS    u64 run_id | u64 step | u32 from_part | u32 to_part | u32 count
//                   | f32 sender_scale (IEEE-754 binary32; 0: not known) | u32 slots[count] | f64 deltas[count]
//   GRAPH_PROBE, GRAPH_PROBE_RESULT: see probe_messages.hpp
// A GRAPH_LOAD's arrays follow each other without alignment padding; they are as the GraphPart
// holds them, so the coordinator sends them from its own memory (see PayloadParts).
//
// Decoding checks structure, never semantics: every count against the payload's length (and
// part_count against kMaxGraphParts) BEFORE anything is allocated, so a peer's claim alone never
// allocates; known enum values and flag bits, 0/1 booleans, zero padding, no trailing bytes. What
// a graph must satisfy (offsets monotone, slots in range, finite weights) is
// GraphPart::validate()'s, which the worker runs next; spec and option ranges are check_spec's
// and Engine::create's. Every accepted payload re-encodes to the same bytes. Failures are
// kProtocolError naming the message, the field and the value.
// No sockets: the connection layer (wire.hpp: the coordinator's calls, the frame I/O) includes
// this header, never the other way round. Pure functions, no global state; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graph/engine.hpp"
#include "tessera/graph/part.hpp"
#include "tessera/graph/probe_messages.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::graph {

// Parts of one run (and so peers in GRAPH_LOAD, entries of batches_sent_to). A cluster of Pis and
// desktops has tens of nodes; the bound keeps a lying count from sizing anything.
inline constexpr uint32_t kMaxGraphParts = 4096;

inline constexpr std::size_t kAlgorithmBytes = 32;
inline constexpr std::size_t kEngineOptionsBytes = 32;
inline constexpr std::size_t kProgressBytes = 88;
inline constexpr std::size_t kLoadFixedBytes = 8 + kAlgorithmBytes + kEngineOptionsBytes + 32;  // + peers, arrays
inline constexpr std::size_t kReadyBytes = 16;
inline constexpr std::size_t kStepBytes = 16;
inline constexpr std::size_t kProgressRequestBytes = 24;
inline constexpr std::size_t kStepDoneFixedBytes = 8 + kProgressBytes + 8;  // + 8 per part
inline constexpr std::size_t kNodeProgressBytes = kProgressBytes + 24;
inline constexpr std::size_t kValuesFixedBytes = 16;  // + 8 per value
inline constexpr std::size_t kPeerHelloBytes = 16;
inline constexpr std::size_t kDeltasFixedBytes = 32;  // + 12 per delta

struct PeerEndpoint {
  std::string host;  // as the receiving worker reaches the peer
  uint16_t port = 0;
  bool operator==(const PeerEndpoint&) const = default;
};

// What a GRAPH_LOAD sets up besides the part.
struct RunSetup {
  uint64_t run_id = 0;               // batches of another run are dropped
  AlgorithmSpec algorithm;
  EngineOptions engine;
  std::vector<PeerEndpoint> peers;   // one per part, in part order; the receiver's own is ignored
  bool operator==(const RunSetup&) const = default;
};

// What GRAPH_PROGRESS carries: the engine's figures plus the worker's peer-link traffic.
struct NodeProgress {
  EngineProgress engine;
  uint64_t peer_bytes_sent = 0;
  uint64_t peer_bytes_received = 0;
  uint64_t memory_bytes = 0;  // part + engine state
  bool operator==(const NodeProgress&) const = default;
};

struct GraphLoad {
  RunSetup setup;
  GraphPart part;
  bool operator==(const GraphLoad&) const = default;
};
struct GraphReady {
  uint64_t run_id = 0;
  uint64_t memory_bytes = 0;  // what the worker holds for the run: part + engine state
  bool operator==(const GraphReady&) const = default;
};
struct GraphStart {
  bool operator==(const GraphStart&) const = default;
};
// Sync mode: run step `step` once this part has received `expected_batches` batches tagged
// step - 1, from all other parts together (what they reported sending to it in their
// GRAPH_STEP_DONE of step - 1; 0 for the first step).
struct GraphStep {
  uint64_t step = 0;
  uint64_t expected_batches = 0;
  bool operator==(const GraphStep&) const = default;
};
struct GraphStepDone {
  StepReport report;
  bool operator==(const GraphStepDone& other) const {
    return report.step == other.report.step && report.batches_sent_to == other.report.batches_sent_to &&
           report.progress == other.report.progress;
  }
};
struct GraphProgressRequest {
  // Async sum algorithms: the priority level the engine should not update below (see
  // Engine::set_priority_level); zeros lift it. Finite and >= 0.
  PriorityLevel level;
  bool operator==(const GraphProgressRequest&) const = default;
};
struct GraphProgress {
  NodeProgress progress;
  bool operator==(const GraphProgress&) const = default;
};
struct GraphValuesRequest {
  bool operator==(const GraphValuesRequest&) const = default;
};
struct GraphValues {
  bool final = false;          // false: a snapshot taken while the engine runs
  std::vector<double> values;  // the owned vertices', in slot order
  bool operator==(const GraphValues&) const = default;
};
struct GraphStop {
  bool operator==(const GraphStop&) const = default;
};
struct GraphPeerHello {
  uint64_t run_id = 0;
  uint32_t from_part = 0;
  bool operator==(const GraphPeerHello&) const = default;
};
struct GraphDeltas {
  uint64_t run_id = 0;  // a batch of another run than the receiver's is dropped
  DeltaBatch batch;
  bool operator==(const GraphDeltas& other) const {
    return run_id == other.run_id && batch.step == other.batch.step && batch.from_part == other.batch.from_part &&
           batch.to_part == other.batch.to_part && batch.slots == other.batch.slots &&
           batch.deltas == other.batch.deltas && batch.sender_scale == other.batch.sender_scale;
  }
};

// Every GRAPH_* message (GraphProbe and GraphProbeResult in probe_messages.hpp). Alternatives in
// wire-type order: index + transport::kFirstGraphMessageType == the message type.
using GraphMessage = std::variant<GraphLoad, GraphReady, GraphStart, GraphStep, GraphStepDone, GraphProgressRequest,
                                  GraphProgress, GraphValuesRequest, GraphValues, GraphStop, GraphPeerHello,
                                  GraphDeltas, GraphProbe, GraphProbeResult>;
transport::MessageType graph_message_type(const GraphMessage& message);

// A payload as the pieces one gathered write sends: `head` holds what the codec encoded, `parts`
// lists in order spans of `head` and of the caller's arrays, which must stay alive and unchanged
// until written. Moving keeps the spans valid (head's buffer moves with it); copying is refused.
struct PayloadParts {
  PayloadParts() = default;
  PayloadParts(PayloadParts&&) = default;
  PayloadParts& operator=(PayloadParts&&) = default;
  PayloadParts(const PayloadParts&) = delete;
  PayloadParts& operator=(const PayloadParts&) = delete;

  std::vector<std::byte> head;
  std::vector<std::span<const std::byte>> parts;
  uint64_t size() const;
  std::vector<std::byte> flatten() const;
};

// The big payloads, referencing the caller's arrays instead of copying them.
// REQUIRES (load): setup.peers.size() == part.part_count, part's arrays sized as documented.
PayloadParts encode_load_parts(const RunSetup& setup, const GraphPart& part);
PayloadParts encode_values_parts(bool final, std::span<const double> values);
PayloadParts encode_deltas_parts(uint64_t run_id, const DeltaBatch& batch);
// Any message, as parts (small ones as head only) or as one buffer.
PayloadParts encode_graph_parts(const GraphMessage& message);
std::vector<std::byte> encode_graph_payload(const GraphMessage& message);

// Decodes a whole payload of `type` (a GRAPH_* type; anything else fails naming it). `limits`
// bounds strings (max_string_bytes) and the payload (max_payload_bytes). Failures: see above.
Result<GraphMessage> decode_graph_payload(uint16_t type, std::span<const std::byte> payload,
                                          const transport::Limits& limits);

// The lengths a payload of `type` can have under `limits`, so a reader refuses a frame before
// reading it: exact for the fixed layouts, [fixed part, max_payload_bytes] for the others.
struct GraphPayloadBounds {
  uint64_t min = 0;
  uint64_t max = 0;
};
GraphPayloadBounds graph_payload_bounds(uint16_t type, const transport::Limits& limits);
// OK when `length` is within graph_payload_bounds(type); kProtocolError naming both otherwise.
Status check_graph_payload_length(uint16_t type, uint64_t length, const transport::Limits& limits);

}  // namespace tessera::graph
