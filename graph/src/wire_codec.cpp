// The graph codec (wire_codec.hpp, probe_messages.hpp): pure functions, no sockets. Fields are
// written and read with transport's PayloadWriter/PayloadReader, byte by byte, so the layout is
// little-endian whatever the host; the big arrays (a part's CSR, values, deltas) are copied or sent
// as host memory, which is the wire layout on the little-endian hosts Tessera runs on (asserted
// below).
#include "tessera/graph/wire_codec.hpp"

#include <algorithm>
#include <cmath>
#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "tessera/transport/payload_io.hpp"

namespace tessera::graph {

namespace tp = tessera::transport;

static_assert(std::endian::native == std::endian::little,
              "graph arrays travel as host memory; add byte swapping for big-endian hosts");
static_assert(std::numeric_limits<double>::is_iec559, "the wire format carries IEEE-754 binary64");
// Ghost references travel as the vector's memory: (u32 owner, u32 slot), nothing between.
static_assert(sizeof(GhostRef) == 8 && offsetof(GhostRef, owner) == 0 && offsetof(GhostRef, slot) == 4 &&
              std::is_trivially_copyable_v<GhostRef>);
static_assert(std::variant_size_v<GraphMessage> ==
              std::size_t{tp::kFirstForwardMessageType} - tp::kFirstGraphMessageType);

namespace {

constexpr uint8_t kSourceFlag = 1u << 0;
constexpr uint8_t kMaxLabelFlag = 1u << 1;
constexpr uint8_t kKnownAlgorithmFlags = kSourceFlag | kMaxLabelFlag;

std::string name_of(uint16_t type) { return tp::message_type_name(type); }

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

// sum of count * size over `arrays`, false when it does not fit in 64 bits.
bool total_bytes(std::initializer_list<std::pair<uint64_t, uint64_t>> arrays, uint64_t& out) {
  out = 0;
  for (const auto& [count, size] : arrays) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, size, &bytes) || __builtin_add_overflow(out, bytes, &out)) return false;
  }
  return true;
}

// --- Encoding ------------------------------------------------------------------------------

void write_algorithm(tp::PayloadWriter& w, const AlgorithmSpec& spec) {
  w.u8(static_cast<uint8_t>(spec.kind));
  w.u8(static_cast<uint8_t>((spec.source ? kSourceFlag : 0) | (spec.max_label ? kMaxLabelFlag : 0)));
  w.zeros(6);
  w.f64(spec.damping);
  w.f64(spec.beta);
  w.u64(static_cast<uint64_t>(spec.source.value_or(0)));
}

void write_engine_options(tp::PayloadWriter& w, const EngineOptions& options) {
  w.u32(options.threads);
  w.u32(options.batch_max_entries);
  w.f64(options.idle_residual);
  w.f64(options.priority_fraction);
  w.u64(static_cast<uint64_t>(options.batch_max_age.count()));
}

void write_progress(tp::PayloadWriter& w, const EngineProgress& p) {
  w.f64(p.value_sum);
  w.f64(p.residual);
  for (uint64_t count : {p.updates, p.edge_updates, p.batches_sent, p.batches_received, p.deltas_sent,
                         p.deltas_received}) {
    w.u64(count);
  }
  w.f64(p.busy_seconds);
  w.f64(p.idle_seconds);
  w.u8(p.running ? 1 : 0);
  w.zeros(7);
}

PayloadParts head_only(std::vector<std::byte> head) {
  PayloadParts parts;
  parts.head = std::move(head);
  if (!parts.head.empty()) parts.parts.push_back(parts.head);
  return parts;
}

// head, then each array that has bytes.
PayloadParts head_and_arrays(std::vector<std::byte> head, std::initializer_list<std::span<const std::byte>> arrays) {
  PayloadParts parts = head_only(std::move(head));
  for (std::span<const std::byte> array : arrays) {
    if (!array.empty()) parts.parts.push_back(array);
  }
  return parts;
}

std::vector<std::byte> encode_fixed(const GraphReady& m) {
  tp::PayloadWriter w(kReadyBytes);
  w.u64(m.run_id);
  w.u64(m.memory_bytes);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphStep& m) {
  tp::PayloadWriter w(kStepBytes);
  w.u64(m.step);
  w.u64(m.expected_batches);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphProgressRequest& m) {
  tp::PayloadWriter w(kProgressRequestBytes);
  w.f64(m.level.base);
  w.f64(m.level.base_decay);
  w.f64(m.level.per_residual);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphStepDone& m) {
  tp::PayloadWriter w(kStepDoneFixedBytes + 8 * m.report.batches_sent_to.size());
  w.u64(m.report.step);
  write_progress(w, m.report.progress);
  w.u32(static_cast<uint32_t>(m.report.batches_sent_to.size()));
  w.zeros(4);
  for (uint64_t count : m.report.batches_sent_to) w.u64(count);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphProgress& m) {
  tp::PayloadWriter w(kNodeProgressBytes);
  write_progress(w, m.progress.engine);
  w.u64(m.progress.peer_bytes_sent);
  w.u64(m.progress.peer_bytes_received);
  w.u64(m.progress.memory_bytes);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphPeerHello& m) {
  tp::PayloadWriter w(kPeerHelloBytes);
  w.u64(m.run_id);
  w.u32(m.from_part);
  w.zeros(4);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphProbe& m) {
  tp::PayloadWriter w(kGraphProbeBytes);
  w.u32(m.scale);
  w.u32(m.edge_factor);
  w.u32(m.small_batch);
  w.u32(m.large_batch);
  w.f64(m.sweep_cpu_seconds);
  w.u64(m.seed);
  return w.take();
}

std::vector<std::byte> encode_fixed(const GraphProbeResult& m) {
  tp::PayloadWriter w(kGraphProbeResultBytes);
  for (double figure : {m.edge_updates_per_s, m.send_s_per_delta, m.send_s_per_batch, m.receive_s_per_delta,
                        m.receive_s_per_batch, m.cpu_share}) {
    w.f64(figure);
  }
  w.u64(m.edges);
  w.f64(m.seconds);
  return w.take();
}

// --- Decoding ------------------------------------------------------------------------------

// The message's own fields are read with a PayloadReader; these add the checks a graph layout
// needs on top: enum values.

bool read_algorithm(tp::PayloadReader& r, AlgorithmSpec& spec) {
  uint8_t kind = 0;
  uint8_t flags = 0;
  uint64_t source = 0;
  if (!(r.u8("algorithm kind", kind) && r.u8("algorithm flags", flags) && r.zero_padding("algorithm pad", 6) &&
        r.f64("damping", spec.damping) && r.f64("beta", spec.beta) && r.u64("source", source))) {
    return false;
  }
  if (kind < static_cast<uint8_t>(AlgorithmKind::kPageRank) || kind > static_cast<uint8_t>(AlgorithmKind::kShortestPaths)) {
    return r.fail("algorithm kind " + std::to_string(kind) + " unknown (1 pagerank, 2 katz, 3 cc, 4 sssp)");
  }
  if ((flags & ~kKnownAlgorithmFlags) != 0) {
    return r.fail("algorithm flags " + std::to_string(flags) + " has unknown bits (1: source set, 2: max label)");
  }
  spec.kind = static_cast<AlgorithmKind>(kind);
  spec.max_label = (flags & kMaxLabelFlag) != 0;
  if ((flags & kSourceFlag) != 0) {
    spec.source = static_cast<int64_t>(source);
  } else if (source != 0) {
    return r.fail("source " + std::to_string(source) + " given without the source flag");
  }
  return true;
}

bool read_engine_options(tp::PayloadReader& r, EngineOptions& options) {
  uint64_t age_us = 0;
  if (!(r.u32("threads", options.threads) && r.u32("batch_max_entries", options.batch_max_entries) &&
        r.f64("idle_residual", options.idle_residual) && r.f64("priority_fraction", options.priority_fraction) &&
        r.u64("batch_max_age_us", age_us))) {
    return false;
  }
  options.batch_max_age = std::chrono::microseconds(static_cast<int64_t>(age_us));
  return true;
}

bool read_progress(tp::PayloadReader& r, EngineProgress& p) {
  return r.f64("value_sum", p.value_sum) && r.f64("residual", p.residual) && r.u64("updates", p.updates) &&
         r.u64("edge_updates", p.edge_updates) && r.u64("batches_sent", p.batches_sent) &&
         r.u64("batches_received", p.batches_received) && r.u64("deltas_sent", p.deltas_sent) &&
         r.u64("deltas_received", p.deltas_received) && r.f64("busy_seconds", p.busy_seconds) &&
         r.f64("idle_seconds", p.idle_seconds) && r.boolean("running", p.running) &&
         r.zero_padding("progress pad", 7);
}

// `count` elements of T copied out of the payload. REQUIRES: the caller checked that they fit in
// what is left, so the allocation is bounded by bytes actually present.
template <typename T>
bool read_array(tp::PayloadReader& r, std::string_view field, uint64_t count, std::vector<T>& out) {
  std::span<const std::byte> bytes;
  if (!r.bytes(field, static_cast<std::size_t>(count * sizeof(T)), bytes)) return false;
  out.resize(static_cast<std::size_t>(count));
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return true;
}

// What is left must be exactly `expected` bytes: the counts read so far decide every length.
bool expect_remaining(tp::PayloadReader& r, bool fits, uint64_t expected, const std::string& what) {
  if (fits && expected == r.remaining()) return true;
  return r.fail(what + " need " + (fits ? std::to_string(expected) : std::string("more than 2^64")) +
                " bytes after offset " + std::to_string(r.offset()) + ", the payload has " +
                std::to_string(r.remaining()));
}

Result<GraphMessage> finish(tp::PayloadReader& r, GraphMessage message) {
  if (!r.finish()) return r.status();
  return message;
}

Result<GraphMessage> decode_load(std::span<const std::byte> payload, const tp::Limits& limits) {
  GraphLoad m;
  GraphPart& part = m.part;
  uint32_t ghost_count = 0;
  uint64_t edge_count = 0;
  bool weighted = false;
  tp::PayloadReader r("GRAPH_LOAD", payload);
  if (!(r.u64("run_id", m.setup.run_id) && read_algorithm(r, m.setup.algorithm) &&
        read_engine_options(r, m.setup.engine) && r.u32("part_index", part.part_index) &&
        r.u32("part_count", part.part_count) && r.u32("local_count", part.local_count) &&
        r.u32("ghost_count", ghost_count) && r.u64("edge_count", edge_count) && r.boolean("weighted", weighted) &&
        r.zero_padding("part pad", 7))) {
    return r.status();
  }
  // The encoder writes the flag from the weights it has, and a part without edges has none: the
  // flag with no edges is a second spelling of "unweighted", refused so that the layout stays canonical.
  if (weighted && edge_count == 0) {
    r.fail("weighted is 1 but edge_count is 0 (a part without edges is sent unweighted)");
    return r.status();
  }
  if (part.part_count < 1 || part.part_count > kMaxGraphParts) {
    r.fail("part_count " + std::to_string(part.part_count) + " out of range 1.." + std::to_string(kMaxGraphParts));
    return r.status();
  }
  if (part.part_index >= part.part_count) {
    r.fail("part_index " + std::to_string(part.part_index) + " is not below part_count " +
           std::to_string(part.part_count));
    return r.status();
  }
  // Each peer takes at least its string length and port: 4 bytes.
  if (uint64_t{part.part_count} * 4 > r.remaining()) {
    r.fail("part_count " + std::to_string(part.part_count) + " peers need at least " +
           std::to_string(uint64_t{part.part_count} * 4) + " bytes, the payload has " + std::to_string(r.remaining()) +
           " left");
    return r.status();
  }
  m.setup.peers.resize(part.part_count);
  for (PeerEndpoint& peer : m.setup.peers) {
    if (!(r.string("peer host", limits.max_string_bytes, peer.host) && r.u16("peer port", peer.port))) {
      return r.status();
    }
  }
  uint64_t array_bytes = 0;
  const uint64_t local = part.local_count;
  const bool fits = total_bytes({{local + 1, sizeof(uint64_t)},
                                 {edge_count, sizeof(uint32_t)},
                                 {weighted ? edge_count : 0, sizeof(double)},
                                 {ghost_count, sizeof(GhostRef)},
                                 {2 * local, sizeof(double)}},
                                array_bytes);
  const std::string counts = "local_count " + std::to_string(local) + ", edge_count " + std::to_string(edge_count) +
                             ", ghost_count " + std::to_string(ghost_count) + (weighted ? " (weighted)" : "");
  if (!expect_remaining(r, fits, array_bytes, counts)) return r.status();
  if (!(read_array(r, "offsets", local + 1, part.offsets) && read_array(r, "targets", edge_count, part.targets) &&
        read_array(r, "weights", weighted ? edge_count : 0, part.weights) &&
        read_array(r, "ghosts", ghost_count, part.ghosts) && read_array(r, "value", local, part.value) &&
        read_array(r, "delta", local, part.delta))) {
    return r.status();
  }
  return finish(r, std::move(m));
}

Result<GraphMessage> decode_ready(std::span<const std::byte> payload) {
  GraphReady m;
  tp::PayloadReader r("GRAPH_READY", payload);
  if (!(r.u64("run_id", m.run_id) && r.u64("memory_bytes", m.memory_bytes))) return r.status();
  return finish(r, m);
}

Result<GraphMessage> decode_step(std::span<const std::byte> payload) {
  GraphStep m;
  tp::PayloadReader r("GRAPH_STEP", payload);
  if (!(r.u64("step", m.step) && r.u64("expected_batches", m.expected_batches))) return r.status();
  return finish(r, m);
}

Result<GraphMessage> decode_progress_request(std::span<const std::byte> payload) {
  GraphProgressRequest m;
  tp::PayloadReader r("GRAPH_PROGRESS_REQUEST", payload);
  if (!(r.f64("level_base", m.level.base) && r.f64("level_base_decay", m.level.base_decay) &&
        r.f64("level_per_residual", m.level.per_residual))) {
    return r.status();
  }
  for (double field : {m.level.base, m.level.base_decay, m.level.per_residual}) {
    if (!(std::isfinite(field) && field >= 0.0)) {
      return protocol_error("GRAPH_PROGRESS_REQUEST: priority level field " + std::to_string(field) +
                            " must be finite and >= 0");
    }
  }
  return finish(r, m);
}

Result<GraphMessage> decode_step_done(std::span<const std::byte> payload) {
  GraphStepDone m;
  uint32_t part_count = 0;
  tp::PayloadReader r("GRAPH_STEP_DONE", payload);
  if (!(r.u64("step", m.report.step) && read_progress(r, m.report.progress) && r.u32("part_count", part_count) &&
        r.zero_padding("pad", 4))) {
    return r.status();
  }
  if (part_count > kMaxGraphParts) {
    r.fail("part_count " + std::to_string(part_count) + " out of range 0.." + std::to_string(kMaxGraphParts));
    return r.status();
  }
  if (!expect_remaining(r, true, uint64_t{part_count} * 8, "part_count " + std::to_string(part_count))) {
    return r.status();
  }
  m.report.batches_sent_to.resize(part_count);
  for (uint64_t& count : m.report.batches_sent_to) r.u64("batches_sent_to", count);
  return finish(r, std::move(m));
}

Result<GraphMessage> decode_progress(std::span<const std::byte> payload) {
  GraphProgress m;
  tp::PayloadReader r("GRAPH_PROGRESS", payload);
  if (!(read_progress(r, m.progress.engine) && r.u64("peer_bytes_sent", m.progress.peer_bytes_sent) &&
        r.u64("peer_bytes_received", m.progress.peer_bytes_received) &&
        r.u64("memory_bytes", m.progress.memory_bytes))) {
    return r.status();
  }
  return finish(r, m);
}

Result<GraphMessage> decode_values(std::span<const std::byte> payload) {
  GraphValues m;
  uint64_t count = 0;
  tp::PayloadReader r("GRAPH_VALUES", payload);
  if (!(r.u64("count", count) && r.boolean("final", m.final) && r.zero_padding("pad", 7))) return r.status();
  uint64_t bytes = 0;
  const bool fits = total_bytes({{count, sizeof(double)}}, bytes);
  if (!expect_remaining(r, fits, bytes, "count " + std::to_string(count) + " values")) return r.status();
  if (!read_array(r, "values", count, m.values)) return r.status();
  return finish(r, std::move(m));
}

Result<GraphMessage> decode_peer_hello(std::span<const std::byte> payload) {
  GraphPeerHello m;
  tp::PayloadReader r("GRAPH_PEER_HELLO", payload);
  if (!(r.u64("run_id", m.run_id) && r.u32("from_part", m.from_part) && r.zero_padding("pad", 4))) {
    return r.status();
  }
  return finish(r, m);
}

Result<GraphMessage> decode_deltas(std::span<const std::byte> payload) {
  GraphDeltas m;
  DeltaBatch& batch = m.batch;
  uint32_t count = 0;
  uint32_t scale_bits = 0;
  tp::PayloadReader r("GRAPH_DELTAS", payload);
  if (!(r.u64("run_id", m.run_id) && r.u64("step", batch.step) && r.u32("from_part", batch.from_part) &&
        r.u32("to_part", batch.to_part) && r.u32("count", count) && r.u32("sender_scale", scale_bits))) {
    return r.status();
  }
  batch.sender_scale = std::bit_cast<float>(scale_bits);
  const uint64_t bytes = uint64_t{count} * (sizeof(uint32_t) + sizeof(double));
  if (!expect_remaining(r, true, bytes, "count " + std::to_string(count) + " deltas")) return r.status();
  if (!(read_array(r, "slots", count, batch.slots) && read_array(r, "deltas", count, batch.deltas))) {
    return r.status();
  }
  return finish(r, std::move(m));
}

Result<GraphMessage> decode_graph_probe(std::span<const std::byte> payload) {
  GraphProbe m;
  tp::PayloadReader r("GRAPH_PROBE", payload);
  if (!(r.u32("scale", m.scale) && r.u32("edge_factor", m.edge_factor) && r.u32("small_batch", m.small_batch) &&
        r.u32("large_batch", m.large_batch) && r.f64("sweep_cpu_seconds", m.sweep_cpu_seconds) &&
        r.u64("seed", m.seed))) {
    return r.status();
  }
  TESSERA_RETURN_IF_ERROR(check_graph_probe(m));
  return finish(r, m);
}

Result<GraphMessage> decode_graph_probe_result(std::span<const std::byte> payload) {
  GraphProbeResult m;
  tp::PayloadReader r("GRAPH_PROBE_RESULT", payload);
  if (!(r.f64("edge_updates_per_s", m.edge_updates_per_s) && r.f64("send_s_per_delta", m.send_s_per_delta) &&
        r.f64("send_s_per_batch", m.send_s_per_batch) && r.f64("receive_s_per_delta", m.receive_s_per_delta) &&
        r.f64("receive_s_per_batch", m.receive_s_per_batch) && r.f64("cpu_share", m.cpu_share) &&
        r.u64("edges", m.edges) && r.f64("seconds", m.seconds))) {
    return r.status();
  }
  return finish(r, m);
}

Result<GraphMessage> decode_empty(uint16_t type, std::span<const std::byte> payload, GraphMessage message) {
  const std::string name = name_of(type);  // the reader keeps a view of it
  tp::PayloadReader r(name, payload);
  return finish(r, std::move(message));
}

}  // namespace


tp::MessageType graph_message_type(const GraphMessage& message) {
  return static_cast<tp::MessageType>(tp::kFirstGraphMessageType + message.index());
}

uint64_t PayloadParts::size() const {
  uint64_t total = 0;
  for (std::span<const std::byte> part : parts) total += part.size();
  return total;
}

std::vector<std::byte> PayloadParts::flatten() const {
  std::vector<std::byte> bytes;
  bytes.reserve(static_cast<std::size_t>(size()));
  for (std::span<const std::byte> part : parts) bytes.insert(bytes.end(), part.begin(), part.end());
  return bytes;
}

PayloadParts encode_load_parts(const RunSetup& setup, const GraphPart& part) {
  std::size_t peer_bytes = 0;
  for (const PeerEndpoint& peer : setup.peers) peer_bytes += 4 + peer.host.size();
  tp::PayloadWriter w(kLoadFixedBytes + peer_bytes);
  w.u64(setup.run_id);
  write_algorithm(w, setup.algorithm);
  write_engine_options(w, setup.engine);
  w.u32(part.part_index);
  w.u32(part.part_count);
  w.u32(part.local_count);
  w.u32(static_cast<uint32_t>(part.ghosts.size()));
  w.u64(part.targets.size());
  w.u8(part.weights.empty() ? 0 : 1);
  w.zeros(7);
  for (const PeerEndpoint& peer : setup.peers) {
    w.string(peer.host);
    w.u16(peer.port);
  }
  return head_and_arrays(w.take(), {bytes_of(part.offsets), bytes_of(part.targets), bytes_of(part.weights),
                                    bytes_of(part.ghosts), bytes_of(part.value), bytes_of(part.delta)});
}

PayloadParts encode_values_parts(bool final, std::span<const double> values) {
  tp::PayloadWriter w(kValuesFixedBytes);
  w.u64(values.size());
  w.u8(final ? 1 : 0);
  w.zeros(7);
  return head_and_arrays(w.take(), {std::as_bytes(values)});
}

PayloadParts encode_deltas_parts(uint64_t run_id, const DeltaBatch& batch) {
  tp::PayloadWriter w(kDeltasFixedBytes);
  w.u64(run_id);
  w.u64(batch.step);
  w.u32(batch.from_part);
  w.u32(batch.to_part);
  w.u32(static_cast<uint32_t>(batch.slots.size()));
  w.u32(std::bit_cast<uint32_t>(batch.sender_scale));
  return head_and_arrays(w.take(), {bytes_of(batch.slots), bytes_of(batch.deltas)});
}

PayloadParts encode_graph_parts(const GraphMessage& message) {
  return std::visit(
      [](const auto& m) -> PayloadParts {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, GraphLoad>) {
          return encode_load_parts(m.setup, m.part);
        } else if constexpr (std::is_same_v<T, GraphValues>) {
          return encode_values_parts(m.final, m.values);
        } else if constexpr (std::is_same_v<T, GraphDeltas>) {
          return encode_deltas_parts(m.run_id, m.batch);
        } else if constexpr (std::is_same_v<T, GraphStart> || std::is_same_v<T, GraphValuesRequest> || std::is_same_v<T, GraphStop>) {
          return PayloadParts{};
        } else {
          return head_only(encode_fixed(m));
        }
      },
      message);
}

std::vector<std::byte> encode_graph_payload(const GraphMessage& message) {
  return encode_graph_parts(message).flatten();
}

Result<GraphMessage> decode_graph_payload(uint16_t type, std::span<const std::byte> payload,
                                          const tp::Limits& limits) {
  if (!tp::is_graph_message(type)) {
    return protocol_error(name_of(type) + " is not a graph message; the graph codec decodes GRAPH_* payloads only");
  }
  if (payload.size() > limits.max_payload_bytes) {
    return protocol_error(name_of(type) + ": payload of " + std::to_string(payload.size()) +
                          " bytes exceeds the limit of " + std::to_string(limits.max_payload_bytes));
  }
  switch (static_cast<tp::MessageType>(type)) {
    case tp::MessageType::kGraphLoad: return decode_load(payload, limits);
    case tp::MessageType::kGraphReady: return decode_ready(payload);
    case tp::MessageType::kGraphStart: return decode_empty(type, payload, GraphStart{});
    case tp::MessageType::kGraphStep: return decode_step(payload);
    case tp::MessageType::kGraphStepDone: return decode_step_done(payload);
    case tp::MessageType::kGraphProgressRequest: return decode_progress_request(payload);
    case tp::MessageType::kGraphProgress: return decode_progress(payload);
    case tp::MessageType::kGraphValuesRequest: return decode_empty(type, payload, GraphValuesRequest{});
    case tp::MessageType::kGraphValues: return decode_values(payload);
    case tp::MessageType::kGraphStop: return decode_empty(type, payload, GraphStop{});
    case tp::MessageType::kGraphPeerHello: return decode_peer_hello(payload);
    case tp::MessageType::kGraphDeltas: return decode_deltas(payload);
    case tp::MessageType::kGraphProbe: return decode_graph_probe(payload);
    case tp::MessageType::kGraphProbeResult: return decode_graph_probe_result(payload);
    default: break;
  }
  return protocol_error(name_of(type) + " is not a graph message");
}

GraphPayloadBounds graph_payload_bounds(uint16_t type, const tp::Limits& limits) {
  const uint64_t max = limits.max_payload_bytes;
  const auto at_least = [max](uint64_t fixed) { return GraphPayloadBounds{fixed, std::max(fixed, max)}; };
  const auto exactly = [](uint64_t fixed) { return GraphPayloadBounds{fixed, fixed}; };
  switch (static_cast<tp::MessageType>(type)) {
    // One peer (4 bytes at least) and one offset.
    case tp::MessageType::kGraphLoad: return at_least(kLoadFixedBytes + 4 + 8);
    case tp::MessageType::kGraphReady: return exactly(kReadyBytes);
    case tp::MessageType::kGraphStep: return exactly(kStepBytes);
    case tp::MessageType::kGraphProgressRequest: return exactly(kProgressRequestBytes);
    case tp::MessageType::kGraphStepDone:
      return {kStepDoneFixedBytes, kStepDoneFixedBytes + 8 * uint64_t{kMaxGraphParts}};
    case tp::MessageType::kGraphProgress: return exactly(kNodeProgressBytes);
    case tp::MessageType::kGraphValues: return at_least(kValuesFixedBytes);
    case tp::MessageType::kGraphPeerHello: return exactly(kPeerHelloBytes);
    case tp::MessageType::kGraphDeltas: return at_least(kDeltasFixedBytes);
    case tp::MessageType::kGraphProbe: return exactly(kGraphProbeBytes);
    case tp::MessageType::kGraphProbeResult: return exactly(kGraphProbeResultBytes);
    default: return exactly(0);  // the requests without a payload, and anything else
  }
}

Status check_graph_payload_length(uint16_t type, uint64_t length, const tp::Limits& limits) {
  const GraphPayloadBounds bounds = graph_payload_bounds(type, limits);
  if (length >= bounds.min && length <= bounds.max) return Status::ok();
  return protocol_error(name_of(type) + ": payload_length " + std::to_string(length) + " out of range " +
                        std::to_string(bounds.min) + ".." + std::to_string(bounds.max));
}

Status check_graph_probe(const GraphProbe& probe) {
  const auto refuse = [](const std::string& what) { return protocol_error("GRAPH_PROBE: " + what); };
  if (probe.scale < kGraphProbeMinScale || probe.scale > kGraphProbeMaxScale) {
    return refuse("scale " + std::to_string(probe.scale) + " out of range " + std::to_string(kGraphProbeMinScale) +
                  ".." + std::to_string(kGraphProbeMaxScale));
  }
  if (probe.edge_factor < 1 || probe.edge_factor > kGraphProbeMaxEdgeFactor) {
    return refuse("edge_factor " + std::to_string(probe.edge_factor) + " out of range 1.." +
                  std::to_string(kGraphProbeMaxEdgeFactor));
  }
  if ((uint64_t{1} << probe.scale) * probe.edge_factor > kGraphProbeMaxEdges) {
    return refuse("rmat:" + std::to_string(probe.scale) + ":" + std::to_string(probe.edge_factor) + " has over " +
                  std::to_string(kGraphProbeMaxEdges) + " edges; a probe graph needs only to outgrow the caches");
  }
  if (probe.small_batch < 1 || probe.small_batch >= probe.large_batch || probe.large_batch > kGraphProbeMaxBatch) {
    return refuse("batch sizes " + std::to_string(probe.small_batch) + " and " + std::to_string(probe.large_batch) +
                  " must satisfy 1 <= small < large <= " + std::to_string(kGraphProbeMaxBatch));
  }
  if (!(probe.sweep_cpu_seconds > 0.0 && probe.sweep_cpu_seconds <= kGraphProbeMaxSweepSeconds)) {
    return refuse("sweep_cpu_seconds " + std::to_string(probe.sweep_cpu_seconds) + " out of range (0, " +
                  std::to_string(kGraphProbeMaxSweepSeconds) + "]");
  }
  return Status::ok();
}

}  // namespace tessera::graph
