// The GEMM service's messages and their pure codec: what a coordinator and a worker's GEMM
// service say to each other (PROBE, STORE, JOB, CREDIT, RESULT, RELEASE, STATS), beside the
// service as the graph codec is beside the graph engine. Transport frames these messages (their
// type numbers are in its registry, transport/protocol.hpp) and knows nothing of their payloads.
//
// Layouts are documented per message below: little-endian, doubles IEEE-754 binary64, strings
// u16 length + UTF-8 bytes. Decoding checks every length, dimension and count against `Limits`
// BEFORE reserving memory, so a peer can never make us allocate what it merely claims. Bulk
// messages (STORE, RESULT) carry matrix data; their decoded form holds a view into the caller's
// payload buffer, so the data is not copied. Every accepted payload re-encodes to its own bytes.
// Pure functions over values: no sockets, no global state, thread-safe. Reading and writing these
// messages over a connection is gemm/wire_io.hpp's; the coordinator's calls are gemm/client.hpp's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::gemm {

using transport::FrameHeader;
using transport::MessageType;

inline constexpr std::size_t kTilePrefixSize = 16;  // tile_id, rows, cols, data_crc32c (u32 each)

// Payload sizes of the layouts below. Code outside the codec that sizes a buffer, bounds a read
// or predicts traffic uses these instead of restating numbers.
inline constexpr std::size_t kProbeFixedBytes = 1 + 3 + 4 + 8 + 4;                   // + echo bytes
inline constexpr std::size_t kProbeResultFixedBytes = 1 + 3 + 4 + 4 + 4 + 8 + 8 + 4;  // + echo bytes
inline constexpr std::size_t kJobPayloadBytes = 8 + 4 * 16;
inline constexpr std::size_t kCreditPayloadBytes = 8 + 4 + 4 + 8;
inline constexpr std::size_t kReleaseFixedBytes = 4;  // + 4 per tile id
inline constexpr std::size_t kStatsPayloadBytes = 4 * 8 + 3 * 8;
constexpr uint64_t release_payload_bytes(uint64_t tile_count) { return kReleaseFixedBytes + 4 * tile_count; }

// Bounds checked before any allocation. Defaults suit a desktop; a worker may lower them. The
// payload and string bounds are the connection's (limits_for).
struct Limits {
  uint64_t max_payload_bytes = transport::Limits{}.max_payload_bytes;
  uint32_t max_string_bytes = transport::Limits{}.max_string_bytes;
  uint32_t max_tile_dim = 1u << 20;      // rows or cols of one tile
  uint32_t max_echo_bytes = 256u << 20;  // PROBE echo payload
  uint32_t max_probe_size = 8192;        // GEMM probe dimension
  double max_probe_seconds = 30.0;       // GEMM probe duration
  uint32_t max_release_tiles = 65536;    // ids in one RELEASE
};
// The GEMM limits over a connection whose frame limits are `wire`: its payload and string bounds,
// the GEMM fields at their defaults.
Limits limits_for(const transport::Limits& wire);

// --- Messages -----------------------------------------------------------------------------

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
// data_crc32c is the CRC32C (transport/crc32c.hpp) of the 8*rows*cols data bytes exactly as sent;
// the sender computes it over the memory it then sends, the receiver over the bytes as they
// arrive, and a mismatch refuses the whole payload (tile_crc_mismatch). The prefix's own fields
// are checked against the header and the limits instead.
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
// time. Time spent blocked counts as neither. jobs counts JOBs finished (CREDIT sent); the byte
// counts are the session's socket traffic in both directions, frame headers included.
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

// One GEMM message, decoded.
using GemmMessage = std::variant<Probe, ProbeResult, Store, Job, Credit, ResultTile, Release, StatsRequest, Stats>;

// The wire type each alternative travels as.
MessageType gemm_message_type(const GemmMessage& message);
// The message type of a GemmMessage alternative, at compile time (bulk ones included).
template <typename T>
constexpr MessageType message_type_of() {
  if constexpr (std::is_same_v<T, Probe>) return MessageType::kProbe;
  else if constexpr (std::is_same_v<T, ProbeResult>) return MessageType::kProbeResult;
  else if constexpr (std::is_same_v<T, Job>) return MessageType::kJob;
  else if constexpr (std::is_same_v<T, Credit>) return MessageType::kCredit;
  else if constexpr (std::is_same_v<T, Release>) return MessageType::kRelease;
  else if constexpr (std::is_same_v<T, StatsRequest>) return MessageType::kStatsRequest;
  else if constexpr (std::is_same_v<T, Stats>) return MessageType::kStats;
  else if constexpr (std::is_same_v<T, Store>) return MessageType::kStore;
  else if constexpr (std::is_same_v<T, ResultTile>) return MessageType::kResult;
  else static_assert(!sizeof(T), "not a GEMM message");
}

// Whether `type` is one of the GEMM service's messages above (not the forwarding ones).
bool is_gemm_message(uint16_t type);

// --- Codec --------------------------------------------------------------------------------

// Payload of a non-bulk message (everything except Store and ResultTile, whose matrix data is
// sent from the caller's memory: see encode_store_prefix / encode_result_prefix).
// REQUIRES: message does not hold Store or ResultTile.
std::vector<std::byte> encode_gemm_payload(const GemmMessage& message);

// Decodes a complete payload of the given GEMM type. Fails with kProtocolError on truncation,
// trailing bytes, out-of-limit sizes, unknown enum values or reserved fields not zero, for a type
// that is not a GEMM message, and for STORE / RESULT with tile_crc_mismatch when the data does not
// match data_crc32c. Store and ResultTile data spans point into `payload`, whose data must
// therefore be 8-byte aligned (kInvalidArgument otherwise; FrameConnection's buffers always are).
Result<GemmMessage> decode_gemm_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits);

// Whether a payload of `length` bytes can be a GEMM message of `type` under `limits`: checked
// from the header alone, before anything is read or allocated. kProtocolError naming the type and
// the bounds otherwise.
Status check_gemm_payload_length(uint16_t type, uint64_t length, const Limits& limits);

// The bytes that precede the matrix data of a STORE / RESULT payload. The full payload is the
// prefix followed by 8*rows*cols bytes of row-major doubles.
std::array<std::byte, kTilePrefixSize> encode_store_prefix(const TilePrefix& tile);
std::array<std::byte, kResultPrefixSize> encode_result_prefix(uint64_t job_id, double compute_seconds,
                                                              const TilePrefix& tile);

// Bytes of a bulk payload for a tile: the prefix plus 8*rows*cols.
uint64_t store_payload_bytes(const TilePrefix& tile);
// The frame header of a STORE of `tile`, for a sender that writes the prefix and the data itself
// (one piece of B encoded once for many nodes; a worker forwarding a tile as it arrives).
std::array<std::byte, transport::kHeaderSize> encode_store_header(const TilePrefix& tile);
uint64_t result_payload_bytes(const TilePrefix& tile);

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

}  // namespace tessera::gemm
