// Every field is written and read byte by byte, so the wire format is little-endian whatever the
// host is. Decoders check each length against the bytes actually present and against Limits
// before they allocate anything, and name the message, field and value when they refuse.
#include "tessera/transport/protocol.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tessera/transport/crc32c.hpp"
#include "tessera/transport/payload_io.hpp"

namespace tessera::transport {

namespace {

static_assert(kHelloFixedBytes == 72, "a payload layout changed: bump kProtocolVersion and update the layout comments");
constexpr uint16_t kMaxType = kLastMessageType;
// The only version before this one; its header and ERROR layouts match ours.
constexpr uint16_t kFirstProtocolVersion = 1;

// --- Encoding ------------------------------------------------------------------------------

std::vector<std::byte> encode(const Hello& m) {
  PayloadWriter w(kHelloFixedBytes + m.worker_version.size() + m.arch.size() + m.hostname.size() + kHelloLoadBytes);
  w.u16(m.protocol_version);
  w.string(m.worker_version);
  w.string(m.arch);
  w.string(m.hostname);
  w.u32(m.cores);
  w.u32(m.threads);
  w.u64(m.memory_bytes);
  w.u64(m.tile_memory_cap);
  w.u64(m.capabilities);
  w.array(m.challenge);
  if (m.load_milli) w.u32(*m.load_milli);
  return w.take();
}

std::vector<std::byte> encode(const Auth& m) {
  PayloadWriter w(kAuthPayloadBytes);
  w.array(m.mac);
  w.array(m.challenge);
  return w.take();
}

std::vector<std::byte> encode(const AuthOk& m) {
  PayloadWriter w(kAuthOkPayloadBytes);
  w.array(m.mac);
  return w.take();
}

std::vector<std::byte> encode(const Error& m) {
  PayloadWriter w(kErrorFixedBytes + m.message.size());
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.message);
  return w.take();
}

std::vector<std::byte> encode(const Bye&) { return {}; }

// --- Decoding ------------------------------------------------------------------------------

Result<Message> decode_hello(std::span<const std::byte> payload, const Limits& limits) {
  Hello m;
  PayloadReader r("HELLO", payload);
  if (!r.u16("protocol_version", m.protocol_version)) return r.status();
  // Checked before anything else: another version's layout says nothing about ours.
  if (m.protocol_version != kProtocolVersion) {
    return field_error("HELLO", "protocol_version " + std::to_string(m.protocol_version) + ": " +
                                    version_mismatch(m.protocol_version));
  }
  if (!(r.string("worker_version", limits.max_string_bytes, m.worker_version) &&
        r.string("arch", limits.max_string_bytes, m.arch) &&
        r.string("hostname", limits.max_string_bytes, m.hostname) && r.u32("cores", m.cores) &&
        r.u32("threads", m.threads) && r.u64("memory_bytes", m.memory_bytes) &&
        r.u64("tile_memory_cap", m.tile_memory_cap) && r.u64("capabilities", m.capabilities) &&
        r.array("challenge", m.challenge))) {
    return r.status();
  }
  // Optional: absent from a worker built before it. Once begun, the field must be whole.
  if (r.remaining() > 0) {
    uint32_t load_milli = 0;
    if (!r.u32("load_milli", load_milli)) return r.status();
    m.load_milli = load_milli;
  }
  if (!r.finish()) return r.status();
  return Message(std::move(m));
}

Result<Message> decode_auth(std::span<const std::byte> payload) {
  Auth m;
  PayloadReader r("AUTH", payload);
  if (!(r.array("mac", m.mac) && r.array("challenge", m.challenge) && r.finish())) return r.status();
  return Message(m);
}

Result<Message> decode_auth_ok(std::span<const std::byte> payload) {
  AuthOk m;
  PayloadReader r("AUTH_OK", payload);
  if (!(r.array("mac", m.mac) && r.finish())) return r.status();
  return Message(m);
}

Result<Message> decode_error(std::span<const std::byte> payload, const Limits& limits) {
  Error m;
  uint32_t code = 0;
  PayloadReader r("ERROR", payload);
  if (!(r.u32("code", code) && r.string("message", limits.max_string_bytes, m.message) && r.finish())) {
    return r.status();
  }
  if (code < static_cast<uint32_t>(ErrorCode::kBadFrame) || code > static_cast<uint32_t>(ErrorCode::kThrottled)) {
    return out_of_range("ERROR", "code", code, static_cast<uint32_t>(ErrorCode::kBadFrame),
                        static_cast<uint32_t>(ErrorCode::kThrottled));
  }
  m.code = static_cast<ErrorCode>(code);
  return Message(std::move(m));
}

Result<Message> decode_bye(std::span<const std::byte> payload) {
  PayloadReader r("BYE", payload);
  if (!r.finish()) return r.status();
  return Message(Bye{});
}

struct PayloadBounds {
  uint64_t min = 0;
  uint64_t max = 0;
};

// What a payload of a session type can measure under `limits`; other types are bounded by
// max_payload_bytes alone here, their service's codec checking the rest before the payload is read.
PayloadBounds payload_bounds(MessageType type, const Limits& limits) {
  const uint64_t max_string = std::min<uint64_t>(limits.max_string_bytes, std::numeric_limits<uint16_t>::max());
  switch (type) {
    case MessageType::kHello: return {kHelloFixedBytes, kHelloFixedBytes + 3 * max_string + kHelloLoadBytes};
    case MessageType::kAuth: return {kAuthPayloadBytes, kAuthPayloadBytes};
    case MessageType::kAuthOk: return {kAuthOkPayloadBytes, kAuthOkPayloadBytes};
    case MessageType::kError: return {kErrorFixedBytes, kErrorFixedBytes + max_string};
    case MessageType::kBye: return {0, 0};
    case MessageType::kHeld: return {kHeldPayloadBytes, kHeldPayloadBytes};
    default: return {0, limits.max_payload_bytes};
  }
}

}  // namespace

std::string capability_names(uint64_t capabilities) {
  if (capabilities == 0) return "none";
  std::string names;
  for (unsigned bit = 0; bit < 64; ++bit) {
    const uint64_t mask = uint64_t{1} << bit;
    if ((capabilities & mask) == 0) continue;
    if (!names.empty()) names += ", ";
    switch (mask) {
      case kCapabilityGemm: names += "gemm"; break;
      case kCapabilityGraph: names += "graph"; break;
      case kCapabilityExpression: names += "expression"; break;
      case kCapabilityTls: names += "tls"; break;
      case kCapabilityTransposedJobs: names += "transpose"; break;
      case kCapabilityGraphProbe: names += "graph-probe"; break;
      case kCapabilityForward: names += "forward"; break;
      case kCapabilityTileSend: names += "tile-send"; break;
      case kCapabilityBlockStore: names += "block-store"; break;
      default: names += "bit " + std::to_string(bit); break;
    }
  }
  return names;
}

std::string version_mismatch(uint16_t peer_version) {
  return "peer speaks Tessera protocol v" + std::to_string(peer_version) + ", this build speaks v" +
         std::to_string(kProtocolVersion);
}

std::string message_type_name(uint16_t type) {
  switch (type) {
    case 1: return "HELLO";
    case 2: return "AUTH";
    case 3: return "AUTH_OK";
    case 4: return "PROBE";
    case 5: return "PROBE_RESULT";
    case 6: return "STORE";
    case 7: return "JOB";
    case 8: return "CREDIT";
    case 9: return "RESULT";
    case 10: return "ERROR";
    case 11: return "BYE";
    case 12: return "RELEASE";
    case 13: return "STATS_REQUEST";
    case 14: return "STATS";
    case 15: return "GRAPH_LOAD";
    case 16: return "GRAPH_READY";
    case 17: return "GRAPH_START";
    case 18: return "GRAPH_STEP";
    case 19: return "GRAPH_STEP_DONE";
    case 20: return "GRAPH_PROGRESS_REQUEST";
    case 21: return "GRAPH_PROGRESS";
    case 22: return "GRAPH_VALUES_REQUEST";
    case 23: return "GRAPH_VALUES";
    case 24: return "GRAPH_STOP";
    case 25: return "GRAPH_PEER_HELLO";
    case 26: return "GRAPH_DELTAS";
    case 27: return "GRAPH_PROBE";
    case 28: return "GRAPH_PROBE_RESULT";
    case 29: return "FORWARD_SETUP";
    case 30: return "FORWARD_READY";
    case 31: return "STORED";
    case 32: return "SEND_TILE";
    case 33: return "SENT";
    case 34: return "HELD";
    case 35: return "BLOCK_QUERY";
    case 36: return "BLOCK_HELD";
    case 37: return "BLOCK_LOAD";
    case 38: return "BLOCK_LOADED";
    default: return "UNKNOWN(" + std::to_string(type) + ")";
  }
}

uint64_t capability_of_message(uint16_t type) {
  if (type == static_cast<uint16_t>(MessageType::kGraphProbe) ||
      type == static_cast<uint16_t>(MessageType::kGraphProbeResult)) {
    return kCapabilityGraphProbe;
  }
  if (is_graph_message(type)) return kCapabilityGraph;
  if (type == static_cast<uint16_t>(MessageType::kSendTile) || type == static_cast<uint16_t>(MessageType::kSent)) {
    return kCapabilityTileSend;
  }
  if (is_forward_message(type)) return kCapabilityForward;
  if (is_block_message(type)) return kCapabilityBlockStore;
  switch (static_cast<MessageType>(type)) {
    case MessageType::kProbe:
    case MessageType::kStore:
    case MessageType::kJob:
    case MessageType::kRelease:
    case MessageType::kStatsRequest: return kCapabilityGemm;
    default: return 0;
  }
}

MessageType message_type(const Message& message) {
  static constexpr MessageType kTypes[] = {MessageType::kHello, MessageType::kAuth, MessageType::kAuthOk,
                                           MessageType::kError, MessageType::kBye};
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[message.index()];
}

std::array<std::byte, kHeaderSize> encode_header(const FrameHeader& header) {
  std::array<std::byte, kHeaderSize> bytes{};
  store_le(bytes, 0, kMagic, 4);
  store_le(bytes, 4, header.version, 2);
  store_le(bytes, 6, header.type, 2);
  store_le(bytes, 8, header.flags, 4);
  store_le(bytes, 12, 0, 4);
  store_le(bytes, 16, header.payload_length, 8);
  store_le(bytes, 24, header.request_id, 8);
  return bytes;
}

Result<FrameHeader> decode_header(std::span<const std::byte, kHeaderSize> bytes, const Limits& limits) {
  const auto magic = static_cast<uint32_t>(load_le(bytes.data(), 4));
  if (magic != kMagic) {
    return protocol_error("frame header: magic " + hex32(magic) + " is not " + hex32(kMagic) +
                          " (\"TSRA\"); the peer does not speak the Tessera protocol");
  }
  FrameHeader header;
  header.version = static_cast<uint16_t>(load_le(bytes.data() + 4, 2));
  header.type = static_cast<uint16_t>(load_le(bytes.data() + 6, 2));
  header.flags = static_cast<uint32_t>(load_le(bytes.data() + 8, 4));
  const auto reserved = static_cast<uint32_t>(load_le(bytes.data() + 12, 4));
  header.payload_length = load_le(bytes.data() + 16, 8);
  header.request_id = load_le(bytes.data() + 24, 8);
  if (header.version != kProtocolVersion) return protocol_error("frame header: " + version_mismatch(header.version));
  if (reserved != 0) return protocol_error("frame header: reserved field " + hex32(reserved) + ", must be 0");
  if (header.type < 1 || header.type > kMaxType) {
    return protocol_error("frame header: type " + std::to_string(header.type) + " unknown (valid 1.." +
                          std::to_string(kMaxType) + ")");
  }
  const std::string name = message_type_name(header.type);
  if (header.payload_length > limits.max_payload_bytes) {
    return protocol_error(name + ": payload_length " + std::to_string(header.payload_length) + " exceeds the limit of " +
                          std::to_string(limits.max_payload_bytes) + " bytes");
  }
  const PayloadBounds bounds = payload_bounds(static_cast<MessageType>(header.type), limits);
  if (header.payload_length < bounds.min || header.payload_length > bounds.max) {
    return out_of_range(name, "payload_length", header.payload_length, bounds.min, bounds.max);
  }
  return header;
}

std::optional<uint16_t> foreign_protocol_version(std::span<const std::byte, kHeaderSize> bytes) {
  if (static_cast<uint32_t>(load_le(bytes.data(), 4)) != kMagic) return std::nullopt;
  const auto version = static_cast<uint16_t>(load_le(bytes.data() + 4, 2));
  if (version == kProtocolVersion) return std::nullopt;
  return version;
}

std::vector<std::byte> encode_version_refusal(uint16_t peer_version, std::string_view message) {
  const std::vector<std::byte> payload = encode(Error{ErrorCode::kBadFrame, std::string(message)});
  FrameHeader header;
  // Only versions known to share our header and ERROR layouts get their own; a newer peer
  // understands ours or nothing.
  header.version = peer_version == kFirstProtocolVersion ? peer_version : kProtocolVersion;
  header.type = static_cast<uint16_t>(MessageType::kError);
  header.payload_length = payload.size();
  const auto header_bytes = encode_header(header);
  std::vector<std::byte> frame(kHeaderSize + payload.size());
  std::memcpy(frame.data(), header_bytes.data(), kHeaderSize);
  std::memcpy(frame.data() + kHeaderSize, payload.data(), payload.size());
  return frame;
}

std::vector<std::byte> encode_payload(const Message& message) {
  return std::visit([](const auto& m) { return encode(m); }, message);
}

Result<Message> decode_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits) {
  if (payload.size() > limits.max_payload_bytes) {
    return protocol_error(message_type_name(type) + ": payload of " + std::to_string(payload.size()) +
                          " bytes exceeds the limit of " + std::to_string(limits.max_payload_bytes));
  }
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello: return decode_hello(payload, limits);
    case MessageType::kAuth: return decode_auth(payload);
    case MessageType::kAuthOk: return decode_auth_ok(payload);
    case MessageType::kError: return decode_error(payload, limits);
    case MessageType::kBye: return decode_bye(payload);
    default:
      if (type >= 1 && type <= kMaxType && !is_graph_message(type) && !is_forward_message(type) &&
          !is_block_message(type) && type != static_cast<uint16_t>(MessageType::kHeld)) {
        return protocol_error(message_type_name(type) + ": GEMM payloads are decoded by gemm/codec.hpp");
      }
      if (is_graph_message(type)) {
        return protocol_error(message_type_name(type) + ": GRAPH_* payloads are decoded by the graph service");
      }
      if (is_forward_message(type)) {
        return protocol_error(message_type_name(type) + ": forwarding payloads are decoded by gemm/forward_codec.hpp");
      }
      if (is_block_message(type)) {
        return protocol_error(message_type_name(type) + ": block store payloads are decoded by gemm/block_codec.hpp");
      }
      if (type == static_cast<uint16_t>(MessageType::kHeld)) {
        return protocol_error("HELD: its payload is decoded by decode_held, during the handshake only");
      }
      return protocol_error("message type " + std::to_string(type) + " unknown (valid 1.." + std::to_string(kMaxType) + ")");
  }
}

std::vector<std::byte> encode_held(const Held& held) {
  PayloadWriter w(kHeldPayloadBytes);
  w.u32(held.verdict_within_ms);
  w.u32(held.answers_ahead);
  return w.take();
}

Result<Held> decode_held(std::span<const std::byte> payload) {
  Held held;
  PayloadReader r("HELD", payload);
  if (!(r.u32("verdict_within_ms", held.verdict_within_ms) && r.u32("answers_ahead", held.answers_ahead) &&
        r.finish())) {
    return r.status();
  }
  return held;
}

}  // namespace tessera::transport
