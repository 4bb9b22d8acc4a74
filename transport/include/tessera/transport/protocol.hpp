// Tessera wire protocol v2: frame layout, message types, capabilities and the pure codec.
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
// The codec is pure: no sockets, no global state, thread-safe. Decoding checks every length,
// dimension and count against `Limits` BEFORE reserving memory, so a peer can never make us
// allocate what it merely claims. Bulk messages (STORE, RESULT) carry matrix data; their decoded
// form holds a view into the caller's payload buffer, so the data is not copied.
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
inline constexpr std::size_t kTilePrefixSize = 16;  // tile_id, rows, cols, data_crc32c (u32 each)

// Payload sizes of the layouts below. Code outside the codec that sizes a buffer, bounds a read
// or predicts traffic uses these instead of restating numbers.
inline constexpr std::size_t kHelloFixedBytes = 2 + 3 * 2 + 4 + 4 + 8 + 8 + 8 + kChallengeSize;  // + string bytes
inline constexpr std::size_t kHelloLoadBytes = 4;  // HELLO's optional trailing load_milli
inline constexpr std::size_t kAuthPayloadBytes = kMacSize + kChallengeSize;
inline constexpr std::size_t kAuthOkPayloadBytes = kMacSize;
inline constexpr std::size_t kProbeFixedBytes = 1 + 3 + 4 + 8 + 4;                   // + echo bytes
inline constexpr std::size_t kProbeResultFixedBytes = 1 + 3 + 4 + 4 + 4 + 8 + 8 + 4;  // + echo bytes
inline constexpr std::size_t kJobPayloadBytes = 8 + 4 * 16;
inline constexpr std::size_t kCreditPayloadBytes = 8 + 4 + 4 + 8;
inline constexpr std::size_t kErrorFixedBytes = 4 + 2;  // + message bytes
inline constexpr std::size_t kReleaseFixedBytes = 4;    // + 4 per tile id
inline constexpr std::size_t kStatsPayloadBytes = 4 * 8 + 3 * 8;
constexpr uint64_t release_payload_bytes(uint64_t tile_count) { return kReleaseFixedBytes + 4 * tile_count; }

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

// "gemm, graph" for a set of bits; "none" for 0; bits without a name as "bit 9".
std::string capability_names(uint64_t capabilities);

// Why a frame or HELLO of another protocol version is refused, naming both versions:
// "peer speaks Tessera protocol v1, this build speaks v2".
std::string version_mismatch(uint16_t peer_version);

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
  // The graph service's messages. Their payloads are not part of Message: transport only frames
  // them, graph/wire_codec.hpp encodes and decodes them (layouts documented there).
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
  // B's pieces forwarded along a chain of workers (kCapabilityForward); payloads in forward_codec.hpp.
  kForwardSetup = 29,  // coordinator -> worker, and a peer link's first frame
  kForwardReady = 30,  // worker -> coordinator: answer to FORWARD_SETUP
  kStored = 31,        // worker -> coordinator: a forwarded tile arrived
  kSendTile = 32,      // coordinator -> worker: send a stored tile to another worker (kCapabilityTileSend)
  kSent = 33,          // worker -> coordinator: that tile reached the other worker, or why not
  // The handshake's: the worker holds the answer to its challenge (its address failed to
  // authenticate too often); the verdict comes later. Payload below (encode_held / decode_held).
  kHeld = 34,
};
// Types are numbered 1..kLastMessageType without gaps; a table indexed by type needs this + 1 slots.
inline constexpr uint16_t kLastMessageType = static_cast<uint16_t>(MessageType::kHeld);
// Types 1..kLastTransportMessageType have their payloads in Message and decode_payload; the ones
// after it belong to a service's own codec (the graph service's, today).
inline constexpr uint16_t kLastTransportMessageType = static_cast<uint16_t>(MessageType::kStats);
inline constexpr uint16_t kFirstGraphMessageType = static_cast<uint16_t>(MessageType::kGraphLoad);
constexpr bool is_graph_message(uint16_t type) {
  return type >= kFirstGraphMessageType && type <= static_cast<uint16_t>(MessageType::kGraphProbeResult);
}
inline constexpr uint16_t kFirstForwardMessageType = static_cast<uint16_t>(MessageType::kForwardSetup);
constexpr bool is_forward_message(uint16_t type) {
  return type >= kFirstForwardMessageType && type <= static_cast<uint16_t>(MessageType::kSent);
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

// Bounds checked before any allocation. Defaults suit a desktop; a worker may lower them.
struct Limits {
  uint64_t max_payload_bytes = 2ull << 30;  // 2 GiB: one A block of 16384 x 16384 doubles
  uint32_t max_tile_dim = 1u << 20;         // rows or cols of one tile
  uint32_t max_string_bytes = 4096;         // any string field
  uint32_t max_echo_bytes = 256u << 20;     // PROBE echo payload
  uint32_t max_probe_size = 8192;           // GEMM probe dimension
  double max_probe_seconds = 30.0;          // GEMM probe duration
  uint32_t max_release_tiles = 65536;       // ids in one RELEASE
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

// kEcho: the worker returns the echo bytes unchanged (round-trip latency).
// kGemm: the worker multiplies size x size matrices repeatedly on all its compute threads for at
//        least min_seconds of wall time (after a short untimed warm-up) and reports the rate.
// Link bandwidth is measured with STORE and RESULT themselves, the path a multiply's data takes.
enum class ProbeKind : uint8_t { kEcho = 0, kGemm = 1 };

// PROBE: u8 kind | u8 pad[3] | u32 size | f64 min_seconds | u32 echo_length | bytes echo
//        (kProbeFixedBytes plus the echo)
// size: the GEMM dimension (kGemm, 1..max_probe_size); 0..max_probe_size and unused for kEcho.
struct Probe {
  ProbeKind kind = ProbeKind::kGemm;
  uint32_t size = 0;
  double min_seconds = 0.0;
  std::vector<uint8_t> echo;
  bool operator==(const Probe&) const = default;
};

// PROBE_RESULT: u8 kind | u8 pad[3] | u32 size | u32 repetitions | u32 pad | f64 seconds
//               | f64 gflops | u32 echo_length | bytes echo   (kProbeResultFixedBytes plus the echo)
// kGemm: size, repetitions, seconds and gflops describe the measurement. kEcho: echo is the
// request's.
struct ProbeResult {
  ProbeKind kind = ProbeKind::kGemm;
  uint32_t size = 0;
  uint32_t repetitions = 0;
  double seconds = 0.0;
  double gflops = 0.0;
  std::vector<uint8_t> echo;
  bool operator==(const ProbeResult&) const = default;
};

// Tile prefix shared by STORE and RESULT: u32 tile_id | u32 rows | u32 cols | u32 data_crc32c,
// followed by rows*cols doubles in row-major order. payload_length must equal
// kTilePrefixSize + 8*rows*cols (+ 16 for RESULT's job_id and compute_seconds, see below).
// data_crc32c is the CRC32C (crc32c.hpp) of the 8*rows*cols data bytes exactly as sent; the
// sender computes it over the memory it then sends, the receiver over the bytes as they arrive,
// and a mismatch refuses the whole payload (tile_crc_mismatch). The prefix's own fields are
// checked against the header and the limits instead.
struct TilePrefix {
  uint32_t tile_id = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  uint32_t data_crc32c = 0;
  bool operator==(const TilePrefix&) const = default;
};

// CRC32C of a tile's data as it travels (host doubles, little-endian).
uint32_t tile_crc32c(std::span<const double> data);

// The refusal of a tile whose data does not match its prefix's CRC: kNetworkError (the bytes were
// damaged between the sender's memory and ours, a lost transfer) whose message contains
// "checksum mismatch" and names `message` ("STORE", "RESULT"), the tile and both values.
Status tile_crc_mismatch(std::string_view message, const TilePrefix& tile, uint32_t computed);

// STORE: tile prefix | data   (store_payload_bytes). `data` views the decoded payload buffer.
struct Store {
  TilePrefix tile;
  std::span<const double> data;
};

// What a JOB computes (see the layout below). kAddScaled needs kCapabilityExpression.
enum class JobOp : uint32_t { kGemmAccumulate = 1, kAddScaled = 2 };

// JOB flag bits.
inline constexpr uint32_t kJobCreateOutput = 1u << 0;  // create c_tile zero-filled, c_rows x c_cols
inline constexpr uint32_t kJobReleaseA = 1u << 1;      // drop a_tile from the store after the job
inline constexpr uint32_t kJobReleaseB = 1u << 2;      // drop b_tile from the store after the job
inline constexpr uint32_t kJobSendResult = 1u << 3;    // send c_tile as RESULT after the job
inline constexpr uint32_t kJobTransposeA = 1u << 4;    // the job reads op(A) = A^T (kCapabilityTransposedJobs)
inline constexpr uint32_t kJobTransposeB = 1u << 5;    // op(B) = B^T; GEMM_ACCUMULATE only
inline constexpr uint32_t kJobKnownFlags = 0x3F;

// JOB: u64 job_id | u32 op | u32 flags | u32 a_tile | u32 b_tile | u32 c_tile
//      | u32 a_row | u32 a_col | u32 b_row | u32 b_col | u32 c_row | u32 c_col
//      | u32 m | u32 n | u32 k | u32 c_rows | u32 c_cols            (kJobPayloadBytes, 72)
// op kGemmAccumulate (1), k >= 1:
//   C[c_row:c_row+m, c_col:c_col+n] += A[a_row:a_row+m, a_col:a_col+k] * B[b_row:b_row+k, b_col:b_col+n]
// op kAddScaled (2), k == 0 (anything else is refused):
//   C[c_row:c_row+m, c_col:c_col+n] += s * A[a_row:a_row+m, a_col:a_col+n], s = B[b_row][b_col]
//   The coordinator keeps scalars as 1x1 tiles, so s = -1 makes a difference and s = 1 a sum;
//   s is read when the job runs, like the operands of a product.
// Jobs of both ops run in arrival order with respect to each other, so a job reading a C sees
// every earlier job's accumulation; the accumulation is in place, so c_tile must differ from
// a_tile and b_tile. The flags mean the same for both ops (with kJobCreateOutput, C starts at
// zero, so ADD_SCALED then writes C = s * A).
// Transposed operands: with kJobTransposeA a job reads op(A) = A^T, and (a_row, a_col) place the
// block of A as stored, so its extents swap:
//   op 1: C[c_row:+m, c_col:+n] += A[a_row:a_row+k, a_col:a_col+m]^T * op(B)   (A's block k x m)
//   op 2: C[c_row:+m, c_col:+n] += s * A[a_row:a_row+n, a_col:a_col+m]^T       (A's block n x m)
// kJobTransposeB, op 1 only (op 2 refuses it: B holds its scalar), reads op(B) = B^T, the n x k
// block B[b_row:b_row+n, b_col:b_col+k]. The decoder checks each block's extents as stored.
struct Job {
  uint64_t job_id = 0;
  JobOp op = JobOp::kGemmAccumulate;
  uint32_t flags = 0;
  uint32_t a_tile = 0, b_tile = 0, c_tile = 0;
  uint32_t a_row = 0, a_col = 0;
  uint32_t b_row = 0, b_col = 0;
  uint32_t c_row = 0, c_col = 0;
  uint32_t m = 0, n = 0, k = 0;
  uint32_t c_rows = 0, c_cols = 0;  // only read with kJobCreateOutput
  bool operator==(const Job&) const = default;
};

// CREDIT: u64 job_id | u32 credits | u32 pad | f64 compute_seconds   (kCreditPayloadBytes, 24)
struct Credit {
  uint64_t job_id = 0;
  uint32_t credits = 1;
  double compute_seconds = 0.0;  // wall time the job spent in the compute pool
  bool operator==(const Credit&) const = default;
};

// RESULT: u64 job_id | f64 compute_seconds | tile prefix | data   (result_payload_bytes)
// compute_seconds: total compute time spent on this tile's jobs.
struct ResultTile {
  uint64_t job_id = 0;
  double compute_seconds = 0.0;
  TilePrefix tile;
  std::span<const double> data;
};
inline constexpr std::size_t kResultPrefixSize = 16 + kTilePrefixSize;

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

// RELEASE: u32 count | u32 tile_id[count]   (release_payload_bytes(count))
struct Release {
  std::vector<uint32_t> tile_ids;
  bool operator==(const Release&) const = default;
};

// STATS_REQUEST: empty payload. Answered with STATS carrying the same request_id.
struct StatsRequest {
  bool operator==(const StatsRequest&) const = default;
};

// STATS: f64 session_seconds | f64 io_cpu_seconds | f64 compute_cpu_seconds
//        | f64 compute_wall_seconds | u64 jobs | u64 bytes_received | u64 bytes_sent
//        (kStatsPayloadBytes, 56)
// Cumulative figures of the current session, counted from the moment the worker accepted the
// authenticated session (the handshake itself is not included). Every double is finite and >= 0.
// io_cpu_seconds is thread CPU time spent on communication: the session's connection thread
// (reading, decoding and checking frames, filing tiles) plus the CREDIT/RESULT writes that run on
// compute threads. compute_cpu_seconds is the compute threads' CPU time on JOBs (of every op) and
// GEMM probes, with the bookkeeping after each job; compute_wall_seconds sums that work's wall
// time. Time spent blocked counts as neither. jobs counts JOBs finished (CREDIT sent); the byte counts are the
// session's socket traffic in both directions, frame headers included.
struct Stats {
  double session_seconds = 0.0;
  double io_cpu_seconds = 0.0;
  double compute_cpu_seconds = 0.0;
  double compute_wall_seconds = 0.0;
  uint64_t jobs = 0;
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
  bool operator==(const Stats&) const = default;
};

// Alternatives are listed in wire-type order (index + 1 == MessageType), types 1 ..
// kLastTransportMessageType; GRAPH_* payloads are the graph codec's.
using Message = std::variant<Hello, Auth, AuthOk, Probe, ProbeResult, Store, Job, Credit,
                             ResultTile, Error, Bye, Release, StatsRequest, Stats>;

MessageType message_type(const Message& message);

// --- Codec --------------------------------------------------------------------------------

std::array<std::byte, kHeaderSize> encode_header(const FrameHeader& header);

// Checks magic, version, reserved bits, known type and payload_length <= limits (for GRAPH_* types
// only max_payload_bytes: their layouts are the graph codec's to check). The error
// message says which field is wrong and its value; another version is refused with
// version_mismatch().
Result<FrameHeader> decode_header(std::span<const std::byte, kHeaderSize> bytes, const Limits& limits);

// The version a header declares when it carries Tessera's magic but is not this build's version;
// nullopt otherwise. Lets a reader whose decode_header failed tell "a Tessera peer of another
// version" (worth an upgrade hint) from noise.
std::optional<uint16_t> foreign_protocol_version(std::span<const std::byte, kHeaderSize> bytes);

// A whole ERROR(kBadFrame) frame carrying `message`, framed so that a peer speaking
// `peer_version` can read it: a v1 peer gets a v1 header (ERROR's layout is unchanged since v1),
// any other version gets ours.
std::vector<std::byte> encode_version_refusal(uint16_t peer_version, std::string_view message);

// Payload of a non-bulk message (everything except Store and ResultTile, whose matrix data is
// sent from the caller's memory: see encode_tile_prefix / encode_result_prefix).
// REQUIRES: message does not hold Store or ResultTile.
std::vector<std::byte> encode_payload(const Message& message);

// The bytes that precede the matrix data of a STORE / RESULT payload. The full payload is the
// prefix followed by 8*rows*cols bytes of row-major doubles.
std::array<std::byte, kTilePrefixSize> encode_store_prefix(const TilePrefix& tile);
std::array<std::byte, kResultPrefixSize> encode_result_prefix(uint64_t job_id, double compute_seconds,
                                                              const TilePrefix& tile);

// Bytes of a bulk payload for a tile: the prefix plus 8*rows*cols.
uint64_t store_payload_bytes(const TilePrefix& tile);
// The frame header of a STORE of `tile`, for a sender that writes the prefix and the data itself
// (one piece of B encoded once for many nodes; a worker forwarding a tile as it arrives).
std::array<std::byte, kHeaderSize> encode_store_header(const TilePrefix& tile);
uint64_t result_payload_bytes(const TilePrefix& tile);

// Decodes a complete payload of the given type. A GRAPH_* type fails with kProtocolError "GRAPH_*
// payloads are decoded by the graph service" (see graph/wire_codec.hpp). Fails with kProtocolError on truncation,
// trailing bytes, out-of-limit sizes, unknown enum values or reserved fields not zero, and for
// STORE / RESULT with tile_crc_mismatch when the data does not match data_crc32c. Store and
// ResultTile data spans point into `payload`, whose data must therefore be 8-byte aligned
// (kInvalidArgument otherwise; FrameConnection's buffers always are).
Result<Message> decode_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits);

// Bulk prefixes alone, for readers that stream the matrix data straight into its destination.
// `payload_length` is the header's; it must match the prefix's dimensions exactly. The data's
// CRC is the reader's to check once the data is in (Crc32c over the bytes as they arrive).
Result<TilePrefix> decode_store_prefix(std::span<const std::byte, kTilePrefixSize> prefix,
                                       uint64_t payload_length, const Limits& limits);
// PROBE's fixed part alone (echo left empty), for a reader that streams the echo bytes into memory
// it has charged first. Its echo_length must equal payload_length - kProbeFixedBytes.
Result<Probe> decode_probe_prefix(std::span<const std::byte, kProbeFixedBytes> prefix, uint64_t payload_length,
                                  const Limits& limits);
// PROBE_RESULT's fixed part for `result` (its echo is ignored) followed by `echo_length` echo
// bytes the caller sends from its own memory.
std::array<std::byte, kProbeResultFixedBytes> encode_probe_result_prefix(const ProbeResult& result,
                                                                        uint32_t echo_length);

struct ResultPrefix {
  uint64_t job_id = 0;
  double compute_seconds = 0.0;
  TilePrefix tile;
};
Result<ResultPrefix> decode_result_prefix(std::span<const std::byte, kResultPrefixSize> prefix,
                                          uint64_t payload_length, const Limits& limits);

}  // namespace tessera::transport
