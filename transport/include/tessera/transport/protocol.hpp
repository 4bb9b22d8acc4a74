// Tessera wire protocol v2: frame layout, the registry of message types, error codes and
// capabilities, and the session's own messages (HELLO, AUTH, AUTH_OK, HELD, ERROR, BYE) with their
// pure codec.
//
// Every frame is a fixed 32-byte little-endian header followed by `payload_length` bytes:
//   magic u32 ("TSRA") | version u16 | type u16 | flags u32 | reserved u32 (must be 0)
//   | payload_length u64 | request_id u64
// Payload layouts are documented per message below; all integers little-endian, doubles IEEE-754
// binary64 little-endian, strings u16 length + UTF-8 bytes.
//
// Versions: both sides speak exactly one version and refuse any other by name ("peer speaks
// Tessera protocol v1, this build speaks v2"). v2 differs from v1 in HELLO, which carries the
// worker's capability set: one bit per service it hosts (GEMM, graph, expression sums), and in the tile prefix of
// STORE and RESULT, whose last u32 (reserved, 0, in v1) is the CRC32C of the tile's data. What a
// worker can do is negotiated through those bits; the version changes only when a layout does.
// Message types are additive within a version: the GRAPH_* types came later in v2, and a
// coordinator sends them only to a worker whose HELLO has kCapabilityGraph.
//
// Transport frames every service's messages but decodes only the session's: the type numbers
// below are a registry (one list, so that no two services' messages collide), and each service's
// payloads are its own codec's (the GEMM service's in gemm/codec.hpp and gemm/forward_codec.hpp,
// the graph service's in graph/wire_codec.hpp). The codec is pure: no sockets, no global state,
// thread-safe. Decoding checks every length against `Limits` BEFORE reserving memory, so a peer
// can never make us allocate what it merely claims.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::transport {

inline constexpr uint32_t kMagic = 0x41525354;  // bytes "TSRA" on the wire
inline constexpr uint16_t kProtocolVersion = 2;
inline constexpr std::size_t kHeaderSize = 32;
inline constexpr std::size_t kChallengeSize = 32;  // random nonce bytes
inline constexpr std::size_t kMacSize = 32;        // HMAC-SHA256 output

// Payload sizes of the layouts below. Code outside the codec that sizes a buffer, bounds a read
// or predicts traffic uses these instead of restating numbers.
inline constexpr std::size_t kHelloFixedBytes = 2 + 3 * 2 + 4 + 4 + 8 + 8 + 8 + kChallengeSize;  // + string bytes
inline constexpr std::size_t kHelloLoadBytes = 4;  // HELLO's optional trailing load_milli
inline constexpr std::size_t kAuthPayloadBytes = kMacSize + kChallengeSize;
inline constexpr std::size_t kAuthOkPayloadBytes = kMacSize;
inline constexpr std::size_t kErrorFixedBytes = 4 + 2;  // + message bytes

// Capability bits, as advertised in HELLO: the union of the bits of the services a worker hosts.
// A coordinator refuses a worker that lacks a capability its run needs. Bits this build does not
// know are accepted and ignored (a newer worker may host more services).
inline constexpr uint64_t kCapabilityGemm = 1ull << 0;  // tiled GEMM: STORE, JOB, RELEASE, PROBE, STATS_REQUEST
// The graph service (asynchronous accumulative updates): GRAPH_LOAD .. GRAPH_STOP from the
// coordinator, GRAPH_PEER_HELLO and GRAPH_DELTAS from other workers (graph/wire_codec.hpp).
inline constexpr uint64_t kCapabilityGraph = 1ull << 1;
// The worker runs JOB op ADD_SCALED (C += s * A on stored tiles), so a matrix expression's sums,
// differences and scalar multiples stay in the tile store instead of coming back to be added.
// It extends the GEMM service's JOB: a worker offering it offers kCapabilityGemm too.
inline constexpr uint64_t kCapabilityExpression = 1ull << 2;
// Not a service: the worker can switch a connection to TLS after AUTH (tls.hpp).
inline constexpr uint64_t kCapabilityTls = 1ull << 3;
// The worker runs JOBs with kJobTransposeA / kJobTransposeB, reading A^T or B^T straight from the
// stored tile, so an expression that reads both A and A' sends A once. It extends the GEMM
// service's JOB like kCapabilityExpression; a worker without it refuses the flags as unknown.
inline constexpr uint64_t kCapabilityTransposedJobs = 1ull << 4;
// The worker answers GRAPH_PROBE (the graph rates `tessera profile` measures on the worker). A
// bit of its own because the type came after GRAPH_*: a worker that has kCapabilityGraph but not
// this would end the session on a GRAPH_PROBE it does not know.
inline constexpr uint64_t kCapabilityGraphProbe = 1ull << 5;
// The worker takes FORWARD_SETUP and forwards B's pieces to the next node of a chain over a peer
// link, and files pieces forwarded to it (forward_codec.hpp). Extends the GEMM service.
inline constexpr uint64_t kCapabilityForward = 1ull << 6;
// The worker takes SEND_TILE: after the jobs before it, it sends a stored tile to another worker
// over a peer link of the current forwarding run and answers SENT (forward_codec.hpp). Expression
// tiles travel worker to worker this way. A bit of its own: it came after kCapabilityForward.
inline constexpr uint64_t kCapabilityTileSend = 1ull << 7;
// The worker has a block store (--store): it answers BLOCK_QUERY and BLOCK_LOAD, and keeps a
// STORE flagged kStoreKeep on disk under its content's key (gemm/block_codec.hpp). Extends the
// GEMM service; offered only by a worker started with a store folder.
inline constexpr uint64_t kCapabilityBlockStore = 1ull << 8;

// "gemm, graph" for a set of bits; "none" for 0; bits without a name as "bit 9".
std::string capability_names(uint64_t capabilities);

// Why a frame or HELLO of another protocol version is refused, naming both versions:
// "peer speaks Tessera protocol v1, this build speaks v2".
std::string version_mismatch(uint16_t peer_version);

// Every type number of the protocol, whoever's payload it carries.
enum class MessageType : uint16_t {
  kHello = 1,        // worker -> coordinator, first frame of every session
  kAuth = 2,         // coordinator -> worker, answer to HELLO's challenge
  kAuthOk = 3,       // worker -> coordinator, proves the worker knows the secret too
  kProbe = 4,        // coordinator -> worker: measure GEMM speed, or echo bytes back
  kProbeResult = 5,  // worker -> coordinator
  kStore = 6,        // coordinator -> worker: a tile of doubles to keep under tile_id
  kJob = 7,          // coordinator -> worker: C[c] += op(A[a]) * op(B[b]) (or += s * op(A[a])) on sub-rectangles
  kCredit = 8,       // worker -> coordinator: a job finished; its queue slot is free again
  kResult = 9,       // worker -> coordinator: a finished output tile
  kError = 10,       // either way: reason; the sender closes the connection after it
  kBye = 11,         // either way: orderly end of session
  kRelease = 12,     // coordinator -> worker: drop tiles from the store
  kStatsRequest = 13,  // coordinator -> worker: send STATS for this session
  kStats = 14,         // worker -> coordinator: the session's cumulative CPU, time and byte figures
  // Types 4..9 and 12..14 are the GEMM service's (gemm/codec.hpp). The graph service's messages
  // follow; transport only frames them, graph/wire_codec.hpp encodes and decodes them.
  kGraphLoad = 15,             // coordinator -> worker: run setup and the worker's part of the graph
  kGraphReady = 16,            // worker -> coordinator: answer to GRAPH_LOAD, GRAPH_START, GRAPH_STOP
  kGraphStart = 17,            // coordinator -> worker: connect to the peers, start the async engine
  kGraphStep = 18,             // coordinator -> worker: one synchronous step
  kGraphStepDone = 19,         // worker -> coordinator: the step's report
  kGraphProgressRequest = 20,  // coordinator -> worker
  kGraphProgress = 21,         // worker -> coordinator: engine figures and peer traffic
  kGraphValuesRequest = 22,    // coordinator -> worker
  kGraphValues = 23,           // worker -> coordinator: the owned vertices' values
  kGraphStop = 24,             // coordinator -> worker: stop the engine, close the peer links
  kGraphPeerHello = 25,        // worker -> worker: first frame of a peer link (run, sender's part)
  kGraphDeltas = 26,           // worker -> worker: a batch of deltas for the receiver's vertices
  kGraphProbe = 27,            // coordinator -> worker: measure the node's graph rates (kCapabilityGraphProbe)
  kGraphProbeResult = 28,      // worker -> coordinator: the measured rates
  // B's pieces forwarded along a chain of workers (kCapabilityForward); payloads in gemm/forward_codec.hpp.
  kForwardSetup = 29,  // coordinator -> worker, and a peer link's first frame
  kForwardReady = 30,  // worker -> coordinator: answer to FORWARD_SETUP
  kStored = 31,        // worker -> coordinator: a forwarded tile arrived
  kSendTile = 32,      // coordinator -> worker: send a stored tile to another worker (kCapabilityTileSend)
  kSent = 33,          // worker -> coordinator: that tile reached the other worker, or why not
  // The handshake's: the worker holds the answer to its challenge (its address failed to
  // authenticate too often); the verdict comes later. Payload below (encode_held / decode_held).
  kHeld = 34,
  // The block store's (kCapabilityBlockStore); payloads in gemm/block_codec.hpp.
  kBlockQuery = 35,   // coordinator -> worker: which of these keys do you hold?
  kBlockHeld = 36,    // worker -> coordinator: one flag per key asked
  kBlockLoad = 37,    // coordinator -> worker: file these held blocks as tiles
  kBlockLoaded = 38,  // worker -> coordinator: one flag per block, whether it is filed
};
// Types are numbered 1..kLastMessageType without gaps; a table indexed by type needs this + 1 slots.
inline constexpr uint16_t kLastMessageType = static_cast<uint16_t>(MessageType::kBlockLoaded);
// The session's own types, whose payloads are Message and decode_payload's: HELLO, AUTH, AUTH_OK,
// ERROR, BYE (HELD has decode_held, read by the handshake alone).
constexpr bool is_session_message(uint16_t type) {
  return type == static_cast<uint16_t>(MessageType::kHello) || type == static_cast<uint16_t>(MessageType::kAuth) ||
         type == static_cast<uint16_t>(MessageType::kAuthOk) || type == static_cast<uint16_t>(MessageType::kError) ||
         type == static_cast<uint16_t>(MessageType::kBye);
}
inline constexpr uint16_t kFirstGraphMessageType = static_cast<uint16_t>(MessageType::kGraphLoad);
constexpr bool is_graph_message(uint16_t type) {
  return type >= kFirstGraphMessageType && type <= static_cast<uint16_t>(MessageType::kGraphProbeResult);
}
inline constexpr uint16_t kFirstForwardMessageType = static_cast<uint16_t>(MessageType::kForwardSetup);
constexpr bool is_forward_message(uint16_t type) {
  return type >= kFirstForwardMessageType && type <= static_cast<uint16_t>(MessageType::kSent);
}
inline constexpr uint16_t kFirstBlockMessageType = static_cast<uint16_t>(MessageType::kBlockQuery);
constexpr bool is_block_message(uint16_t type) {
  return type >= kFirstBlockMessageType && type <= static_cast<uint16_t>(MessageType::kBlockLoaded);
}

// HELD: u32 verdict_within_ms | u32 answers_ahead   (kHeldPayloadBytes, 8)
// Sent by a worker between AUTH and its verdict (AUTH_OK or ERROR), to a client whose address it
// throttles, once when it starts holding the answer and again while the answer waits for a place:
// the verdict is expected within verdict_within_ms from now, behind answers_ahead other answers
// from the same address (0: the hold has started). Sent alike for right and wrong answers, so it
// tells nothing of the verdict; a client uses it to wait that long instead of its usual deadline
// (client_handshake, within a cap of its own). Before it came (later in v2, without a version
// change) a client took any frame but AUTH_OK or ERROR as a broken worker; a worker sends HELD
// only to an address it throttles, where such a client would not get in in time anyway.
struct Held {
  uint32_t verdict_within_ms = 0;
  uint32_t answers_ahead = 0;
  bool operator==(const Held&) const = default;
};
inline constexpr std::size_t kHeldPayloadBytes = 8;
std::vector<std::byte> encode_held(const Held& held);
// kProtocolError unless the payload is exactly kHeldPayloadBytes.
Result<Held> decode_held(std::span<const std::byte> payload);

// The capability bit of the service whose messages include `type` (PROBE, STORE, JOB, RELEASE,
// STATS_REQUEST: gemm; GRAPH_*: graph); 0 for the session's own messages and unknown types. Lets
// a worker that does not host the service say which one is missing.
uint64_t capability_of_message(uint16_t type);

// Name for messages and logs ("STORE"); "UNKNOWN(77)" for values outside the enum.
std::string message_type_name(uint16_t type);

// Bounds checked before any allocation. Defaults suit a desktop; a worker may lower them. A
// service's codec adds its own (gemm::Limits).
struct Limits {
  uint64_t max_payload_bytes = 2ull << 30;  // 2 GiB: one A block of 16384 x 16384 doubles
  uint32_t max_string_bytes = 4096;         // any string field
};

struct FrameHeader {
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;  // a MessageType value; kept raw so unknown types can be reported
  uint32_t flags = 0;
  uint64_t payload_length = 0;
  uint64_t request_id = 0;
};

// --- Messages -----------------------------------------------------------------------------

// HELLO: u16 protocol_version | str worker_version | str arch | str hostname | u32 cores
//        | u32 threads | u64 memory_bytes | u64 tile_memory_cap | u64 capabilities | challenge[32]
//        [| u32 load_milli]
// (kHelloFixedBytes plus the strings, plus kHelloLoadBytes when the load is known). protocol_version
// comes first so that it is checked before the rest of the layout is trusted. capabilities is new
// in v2. load_milli came later in v2 without a version change: it is optional and last, so a
// worker built before it (or one that cannot read its load) sends none, and its HELLO decodes
// with no load; a payload ending inside the field, or anything after it, is refused.
struct Hello {
  uint16_t protocol_version = kProtocolVersion;
  std::string worker_version;
  std::string arch;       // e.g. "x86_64", "aarch64"
  std::string hostname;
  uint32_t cores = 0;     // online CPUs the worker sees
  uint32_t threads = 0;   // compute threads it will use
  uint64_t memory_bytes = 0;     // physical memory
  uint64_t tile_memory_cap = 0;  // bytes the tile store may hold
  uint64_t capabilities = 0;     // kCapability* bits of the services the worker hosts
  std::array<uint8_t, kChallengeSize> challenge{};
  // The host's 1-minute load average x 1000 (rounded); none when the worker did not say. Not 0 for
  // unknown: an idle Pi really does report 0.00.
  std::optional<uint32_t> load_milli;
  bool operator==(const Hello&) const = default;
};

// AUTH: mac[32] | challenge[32]
// mac = HMAC-SHA256(secret, "tessera-v1-coordinator" | hello.challenge | auth.challenge)
struct Auth {
  std::array<uint8_t, kMacSize> mac{};
  std::array<uint8_t, kChallengeSize> challenge{};
  bool operator==(const Auth&) const = default;
};

// AUTH_OK: mac[32] = HMAC-SHA256(secret, "tessera-v1-worker" | auth.challenge | hello.challenge)
struct AuthOk {
  std::array<uint8_t, kMacSize> mac{};
  bool operator==(const AuthOk&) const = default;
};

enum class ErrorCode : uint32_t {
  kBadFrame = 1,      // header or payload failed validation
  kAuthRequired = 2,  // something other than AUTH before authentication
  kAuthFailed = 3,    // wrong MAC
  kBusy = 4,          // another coordinator session is active
  kNoSuchTile = 5,
  kBadJob = 6,        // dimensions out of the referenced tiles, unknown op, ADD_SCALED with k != 0 or B^T
  kOutOfMemory = 7,   // the tile store cap would be exceeded
  kInternal = 8,
  kCorrupt = 9,       // a STORE's data does not match its CRC32C: damaged in transit
  kPeerFailed = 10,   // a worker-to-worker link failed: a peer was unreachable or its data never came
  kThrottled = 11,    // too many answers from this address are held after its failed authentications
};

// ERROR: u32 code | str message
// The layout is the same as in v1, so a v1 peer can be told in its own version why it is refused
// (see encode_version_refusal).
struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  bool operator==(const Error&) const = default;
};

struct Bye {
  bool operator==(const Bye&) const = default;
};

// One of the session's own messages, decoded.
using Message = std::variant<Hello, Auth, AuthOk, Error, Bye>;

MessageType message_type(const Message& message);

// --- Codec --------------------------------------------------------------------------------

std::array<std::byte, kHeaderSize> encode_header(const FrameHeader& header);

// Checks magic, version, reserved bits, known type and payload_length <= limits (the session's
// types against their layouts; every other type only against max_payload_bytes: its layout is its
// service's codec's to check before the payload is read). The error message says which field is
// wrong and its value; another version is refused with version_mismatch().
Result<FrameHeader> decode_header(std::span<const std::byte, kHeaderSize> bytes, const Limits& limits);

// The version a header declares when it carries Tessera's magic but is not this build's version;
// nullopt otherwise. Lets a reader whose decode_header failed tell "a Tessera peer of another
// version" (worth an upgrade hint) from noise.
std::optional<uint16_t> foreign_protocol_version(std::span<const std::byte, kHeaderSize> bytes);

// A whole ERROR(kBadFrame) frame carrying `message`, framed so that a peer speaking
// `peer_version` can read it: a v1 peer gets a v1 header (ERROR's layout is unchanged since v1),
// any other version gets ours.
std::vector<std::byte> encode_version_refusal(uint16_t peer_version, std::string_view message);

// Payload of a session message.
std::vector<std::byte> encode_payload(const Message& message);

// Decodes a complete payload of one of the session's types. Any other type fails with
// kProtocolError naming the codec it belongs to. Fails with kProtocolError on truncation,
// trailing bytes, out-of-limit sizes, unknown enum values or reserved fields not zero.
Result<Message> decode_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits);

}  // namespace tessera::transport
