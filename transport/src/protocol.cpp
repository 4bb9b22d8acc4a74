// Every field is written and read byte by byte, so the wire format is little-endian whatever the
// host is. Decoders check each length against the bytes actually present and against Limits
// before they allocate anything, and name the message, field and value when they refuse.
#include "tessera/transport/protocol.hpp"

#include "tessera/transport/forward_codec.hpp"

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

// STORE/RESULT data is viewed (decode) and sent (scatter-gather) in place as host doubles; a
// big-endian port would have to byte-swap tile data explicitly.
static_assert(std::endian::native == std::endian::little,
              "tile data travels as host doubles; add byte swapping for big-endian hosts");
static_assert(std::numeric_limits<double>::is_iec559, "the wire format carries IEEE-754 binary64");

namespace {

static_assert(kHelloFixedBytes == 72 && kJobPayloadBytes == 72 && kProbeFixedBytes == 20 &&
              kCreditPayloadBytes == 24 && kStatsPayloadBytes == 56,
              "a payload layout changed: bump kProtocolVersion and update the layout comments");
constexpr uint16_t kMaxType = kLastMessageType;
constexpr uint16_t kMaxTransportType = kLastTransportMessageType;
// The only version before this one; its header and ERROR layouts match ours.
constexpr uint16_t kFirstProtocolVersion = 1;

std::string format_double(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc()) return "?";
  return std::string(buffer, end);
}

std::string hex32(uint32_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += kDigits[(value >> shift) & 0xF];
  return out;
}

Status out_of_range(std::string_view message, std::string_view field, uint64_t value, uint64_t low,
                    uint64_t high) {
  return field_error(message, std::string(field) + " " + std::to_string(value) + " out of range " +
                                  std::to_string(low) + ".." + std::to_string(high));
}

// a * b + c, or nullopt-like false when it does not fit in 64 bits.
bool checked_mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t& out) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return false;
  return !__builtin_add_overflow(product, c, &out);
}

uint64_t saturating_mul_add(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t out = 0;
  return checked_mul_add(a, b, c, out) ? out : std::numeric_limits<uint64_t>::max();
}

// --- Encoding ------------------------------------------------------------------------------

template <std::size_t N>
void store_le(std::array<std::byte, N>& out, std::size_t offset, uint64_t value, int size) {
  for (int i = 0; i < size; ++i) out[offset + static_cast<std::size_t>(i)] = static_cast<std::byte>(value >> (8 * i));
}

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

std::vector<std::byte> encode(const Probe& m) {
  assert(m.echo.size() <= std::numeric_limits<uint32_t>::max());
  PayloadWriter w(kProbeFixedBytes + m.echo.size());
  w.u8(static_cast<uint8_t>(m.kind));
  w.zeros(3);
  w.u32(m.size);
  w.f64(m.min_seconds);
  w.u32(static_cast<uint32_t>(m.echo.size()));
  w.raw(m.echo.data(), m.echo.size());
  return w.take();
}

std::vector<std::byte> encode(const ProbeResult& m) {
  assert(m.echo.size() <= std::numeric_limits<uint32_t>::max());
  PayloadWriter w(kProbeResultFixedBytes + m.echo.size());
  w.u8(static_cast<uint8_t>(m.kind));
  w.zeros(3);
  w.u32(m.size);
  w.u32(m.repetitions);
  w.zeros(4);
  w.f64(m.seconds);
  w.f64(m.gflops);
  w.u32(static_cast<uint32_t>(m.echo.size()));
  w.raw(m.echo.data(), m.echo.size());
  return w.take();
}

std::vector<std::byte> encode(const Job& m) {
  PayloadWriter w(kJobPayloadBytes);
  w.u64(m.job_id);
  w.u32(static_cast<uint32_t>(m.op));
  w.u32(m.flags);
  for (uint32_t field : {m.a_tile, m.b_tile, m.c_tile, m.a_row, m.a_col, m.b_row, m.b_col, m.c_row,
                         m.c_col, m.m, m.n, m.k, m.c_rows, m.c_cols}) {
    w.u32(field);
  }
  return w.take();
}

std::vector<std::byte> encode(const Credit& m) {
  PayloadWriter w(kCreditPayloadBytes);
  w.u64(m.job_id);
  w.u32(m.credits);
  w.zeros(4);
  w.f64(m.compute_seconds);
  return w.take();
}

std::vector<std::byte> encode(const Error& m) {
  PayloadWriter w(kErrorFixedBytes + m.message.size());
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.message);
  return w.take();
}

std::vector<std::byte> encode(const Bye&) { return {}; }

std::vector<std::byte> encode(const Release& m) {
  assert(m.tile_ids.size() <= std::numeric_limits<uint32_t>::max() / 4);
  PayloadWriter w(release_payload_bytes(m.tile_ids.size()));
  w.u32(static_cast<uint32_t>(m.tile_ids.size()));
  for (uint32_t id : m.tile_ids) w.u32(id);
  return w.take();
}

std::vector<std::byte> encode(const StatsRequest&) { return {}; }

std::vector<std::byte> encode(const Stats& m) {
  PayloadWriter w(kStatsPayloadBytes);
  w.f64(m.session_seconds);
  w.f64(m.io_cpu_seconds);
  w.f64(m.compute_cpu_seconds);
  w.f64(m.compute_wall_seconds);
  w.u64(m.jobs);
  w.u64(m.bytes_received);
  w.u64(m.bytes_sent);
  return w.take();
}

// Bulk messages are sent as prefix + caller memory; see encode_store_prefix.
std::vector<std::byte> encode(const Store&) {
  assert(false && "encode_payload: STORE is sent with encode_store_prefix + data");
  return {};
}
std::vector<std::byte> encode(const ResultTile&) {
  assert(false && "encode_payload: RESULT is sent with encode_result_prefix + data");
  return {};
}

// --- Decoding ------------------------------------------------------------------------------

Status check_seconds(std::string_view message, std::string_view field, double value, double max) {
  if (std::isfinite(value) && value >= 0.0 && value <= max) return Status::ok();
  return field_error(message, std::string(field) + " " + format_double(value) + " out of range 0.." +
                                  format_double(max));
}

Status check_probe_kind(std::string_view message, uint8_t kind) {
  if (kind == static_cast<uint8_t>(ProbeKind::kEcho) || kind == static_cast<uint8_t>(ProbeKind::kGemm)) {
    return Status::ok();
  }
  return field_error(message, "kind " + std::to_string(kind) + " unknown (0 = echo, 1 = gemm)");
}

Status check_probe_size(std::string_view message, ProbeKind kind, uint32_t size, const Limits& limits) {
  const uint32_t low = kind == ProbeKind::kGemm ? 1 : 0;
  if (size < low || size > limits.max_probe_size) {
    return out_of_range(message, "size", size, low, limits.max_probe_size);
  }
  return Status::ok();
}

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

Result<Message> decode_probe(std::span<const std::byte> payload, const Limits& limits) {
  Probe m;
  uint8_t kind = 0;
  PayloadReader r("PROBE", payload);
  if (!r.u8("kind", kind)) return r.status();
  TESSERA_RETURN_IF_ERROR(check_probe_kind("PROBE", kind));
  m.kind = static_cast<ProbeKind>(kind);
  if (!(r.zero_padding("pad", 3) && r.u32("size", m.size) && r.f64("min_seconds", m.min_seconds))) {
    return r.status();
  }
  TESSERA_RETURN_IF_ERROR(check_probe_size("PROBE", m.kind, m.size, limits));
  TESSERA_RETURN_IF_ERROR(check_seconds("PROBE", "min_seconds", m.min_seconds, limits.max_probe_seconds));
  if (!(r.byte_vector("echo", limits.max_echo_bytes, m.echo) && r.finish())) return r.status();
  return Message(std::move(m));
}

Result<Message> decode_probe_result(std::span<const std::byte> payload, const Limits& limits) {
  ProbeResult m;
  uint8_t kind = 0;
  PayloadReader r("PROBE_RESULT", payload);
  if (!r.u8("kind", kind)) return r.status();
  TESSERA_RETURN_IF_ERROR(check_probe_kind("PROBE_RESULT", kind));
  m.kind = static_cast<ProbeKind>(kind);
  if (!(r.zero_padding("pad", 3) && r.u32("size", m.size) && r.u32("repetitions", m.repetitions) &&
        r.zero_padding("pad", 4) && r.f64("seconds", m.seconds) && r.f64("gflops", m.gflops))) {
    return r.status();
  }
  TESSERA_RETURN_IF_ERROR(check_probe_size("PROBE_RESULT", m.kind, m.size, limits));
  constexpr double kUnbounded = std::numeric_limits<double>::max();
  TESSERA_RETURN_IF_ERROR(check_seconds("PROBE_RESULT", "seconds", m.seconds, kUnbounded));
  TESSERA_RETURN_IF_ERROR(check_seconds("PROBE_RESULT", "gflops", m.gflops, kUnbounded));
  if (!(r.byte_vector("echo", limits.max_echo_bytes, m.echo) && r.finish())) return r.status();
  return Message(std::move(m));
}

// An extent [offset, offset + size) inside a tile dimension of at most max_dim.
Status check_extent(std::string_view offset_field, uint32_t offset, std::string_view size_field, uint32_t size,
                    uint32_t max_dim) {
  if (size < 1 || size > max_dim) return out_of_range("JOB", size_field, size, 1, max_dim);
  if (uint64_t{offset} + size > max_dim) {
    return field_error("JOB", std::string(offset_field) + " " + std::to_string(offset) + " + " +
                                  std::string(size_field) + " " + std::to_string(size) + " exceeds max tile dim " +
                                  std::to_string(max_dim));
  }
  return Status::ok();
}

Result<Message> decode_job(std::span<const std::byte> payload, const Limits& limits) {
  Job m;
  uint32_t op = 0;
  PayloadReader r("JOB", payload);
  if (!(r.u64("job_id", m.job_id) && r.u32("op", op) && r.u32("flags", m.flags) && r.u32("a_tile", m.a_tile) &&
        r.u32("b_tile", m.b_tile) && r.u32("c_tile", m.c_tile) && r.u32("a_row", m.a_row) &&
        r.u32("a_col", m.a_col) && r.u32("b_row", m.b_row) && r.u32("b_col", m.b_col) &&
        r.u32("c_row", m.c_row) && r.u32("c_col", m.c_col) && r.u32("m", m.m) && r.u32("n", m.n) &&
        r.u32("k", m.k) && r.u32("c_rows", m.c_rows) && r.u32("c_cols", m.c_cols) && r.finish())) {
    return r.status();
  }
  if (op != static_cast<uint32_t>(JobOp::kGemmAccumulate) && op != static_cast<uint32_t>(JobOp::kAddScaled)) {
    return field_error("JOB", "op " + std::to_string(op) + " unknown (1 = gemm_accumulate, 2 = add_scaled)");
  }
  m.op = static_cast<JobOp>(op);
  if ((m.flags & ~kJobKnownFlags) != 0) {
    return field_error("JOB", "flags " + hex32(m.flags) + " has unknown bits " + hex32(m.flags & ~kJobKnownFlags));
  }
  const uint32_t max_dim = limits.max_tile_dim;
  const bool add_scaled = m.op == JobOp::kAddScaled;
  const bool transpose_a = (m.flags & kJobTransposeA) != 0;
  const bool transpose_b = (m.flags & kJobTransposeB) != 0;
  if (add_scaled) {
    // B holds only the scalar, one entry at (b_row, b_col): no inner size, nothing to transpose.
    if (m.k != 0) return field_error("JOB", "k " + std::to_string(m.k) + " must be 0 for op 2 (add_scaled)");
    if (transpose_b) {
      return field_error("JOB", "flags " + hex32(m.flags) + " set transpose_b " + hex32(kJobTransposeB) +
                                    ", which op 2 (add_scaled) refuses: B holds its scalar");
    }
  }
  // op(A) is m x k, or m x n (C's shape) for ADD_SCALED; A's block as stored is op(A)'s transpose
  // when the job reads A^T, and B's is n x k when it reads B^T.
  const char* const a_inner_field = add_scaled ? "n" : "k";
  const uint32_t a_inner = add_scaled ? m.n : m.k;
  if (transpose_a) {
    TESSERA_RETURN_IF_ERROR(check_extent("a_row", m.a_row, a_inner_field, a_inner, max_dim));
    TESSERA_RETURN_IF_ERROR(check_extent("a_col", m.a_col, "m", m.m, max_dim));
  } else {
    TESSERA_RETURN_IF_ERROR(check_extent("a_row", m.a_row, "m", m.m, max_dim));
    TESSERA_RETURN_IF_ERROR(check_extent("a_col", m.a_col, a_inner_field, a_inner, max_dim));
  }
  if (add_scaled) {
    if (m.b_row >= max_dim) return out_of_range("JOB", "b_row", m.b_row, 0, max_dim - 1);
    if (m.b_col >= max_dim) return out_of_range("JOB", "b_col", m.b_col, 0, max_dim - 1);
  } else if (transpose_b) {
    TESSERA_RETURN_IF_ERROR(check_extent("b_row", m.b_row, "n", m.n, max_dim));
    TESSERA_RETURN_IF_ERROR(check_extent("b_col", m.b_col, "k", m.k, max_dim));
  } else {
    TESSERA_RETURN_IF_ERROR(check_extent("b_row", m.b_row, "k", m.k, max_dim));
    TESSERA_RETURN_IF_ERROR(check_extent("b_col", m.b_col, "n", m.n, max_dim));
  }
  TESSERA_RETURN_IF_ERROR(check_extent("c_row", m.c_row, "m", m.m, max_dim));
  TESSERA_RETURN_IF_ERROR(check_extent("c_col", m.c_col, "n", m.n, max_dim));
  if ((m.flags & kJobCreateOutput) != 0) {
    if (m.c_rows < 1 || m.c_rows > max_dim) return out_of_range("JOB", "c_rows", m.c_rows, 1, max_dim);
    if (m.c_cols < 1 || m.c_cols > max_dim) return out_of_range("JOB", "c_cols", m.c_cols, 1, max_dim);
    if (uint64_t{m.c_row} + m.m > m.c_rows || uint64_t{m.c_col} + m.n > m.c_cols) {
      return field_error("JOB", "output block rows " + std::to_string(m.c_row) + "+" + std::to_string(m.m) +
                                    ", cols " + std::to_string(m.c_col) + "+" + std::to_string(m.n) +
                                    " does not fit the new c_tile of " + std::to_string(m.c_rows) + " x " +
                                    std::to_string(m.c_cols));
    }
  }
  return Message(m);
}

Result<Message> decode_credit(std::span<const std::byte> payload) {
  Credit m;
  PayloadReader r("CREDIT", payload);
  if (!(r.u64("job_id", m.job_id) && r.u32("credits", m.credits) && r.zero_padding("pad", 4) &&
        r.f64("compute_seconds", m.compute_seconds) && r.finish())) {
    return r.status();
  }
  TESSERA_RETURN_IF_ERROR(
      check_seconds("CREDIT", "compute_seconds", m.compute_seconds, std::numeric_limits<double>::max()));
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

Result<Message> decode_release(std::span<const std::byte> payload, const Limits& limits) {
  Release m;
  uint32_t count = 0;
  PayloadReader r("RELEASE", payload);
  if (!r.u32("count", count)) return r.status();
  if (count > limits.max_release_tiles) return out_of_range("RELEASE", "count", count, 0, limits.max_release_tiles);
  const uint64_t expected = release_payload_bytes(count);
  if (expected != payload.size()) {
    return field_error("RELEASE", "count " + std::to_string(count) + " needs a payload of " +
                                      std::to_string(expected) + " bytes, got " + std::to_string(payload.size()));
  }
  m.tile_ids.resize(count);
  for (uint32_t& id : m.tile_ids) r.u32("tile_id", id);
  if (!r.finish()) return r.status();
  return Message(std::move(m));
}

Result<Message> decode_stats_request(std::span<const std::byte> payload) {
  PayloadReader r("STATS_REQUEST", payload);
  if (!r.finish()) return r.status();
  return Message(StatsRequest{});
}

Result<Message> decode_stats(std::span<const std::byte> payload) {
  Stats m;
  PayloadReader r("STATS", payload);
  if (!(r.f64("session_seconds", m.session_seconds) && r.f64("io_cpu_seconds", m.io_cpu_seconds) &&
        r.f64("compute_cpu_seconds", m.compute_cpu_seconds) &&
        r.f64("compute_wall_seconds", m.compute_wall_seconds) && r.u64("jobs", m.jobs) &&
        r.u64("bytes_received", m.bytes_received) && r.u64("bytes_sent", m.bytes_sent) && r.finish())) {
    return r.status();
  }
  constexpr double kUnbounded = std::numeric_limits<double>::max();
  TESSERA_RETURN_IF_ERROR(check_seconds("STATS", "session_seconds", m.session_seconds, kUnbounded));
  TESSERA_RETURN_IF_ERROR(check_seconds("STATS", "io_cpu_seconds", m.io_cpu_seconds, kUnbounded));
  TESSERA_RETURN_IF_ERROR(check_seconds("STATS", "compute_cpu_seconds", m.compute_cpu_seconds, kUnbounded));
  TESSERA_RETURN_IF_ERROR(check_seconds("STATS", "compute_wall_seconds", m.compute_wall_seconds, kUnbounded));
  return Message(m);
}

TilePrefix load_tile_prefix(const std::byte* data) {
  TilePrefix tile;
  tile.tile_id = static_cast<uint32_t>(load_le(data, 4));
  tile.rows = static_cast<uint32_t>(load_le(data + 4, 4));
  tile.cols = static_cast<uint32_t>(load_le(data + 8, 4));
  tile.data_crc32c = static_cast<uint32_t>(load_le(data + 12, 4));
  return tile;
}

void store_tile_prefix(std::span<std::byte> out, const TilePrefix& tile) {
  std::array<std::byte, kTilePrefixSize> bytes{};
  store_le(bytes, 0, tile.tile_id, 4);
  store_le(bytes, 4, tile.rows, 4);
  store_le(bytes, 8, tile.cols, 4);
  store_le(bytes, 12, tile.data_crc32c, 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
}

Status check_tile(std::string_view message, const TilePrefix& tile, std::size_t prefix_size,
                  uint64_t payload_length, const Limits& limits) {
  if (tile.rows < 1 || tile.rows > limits.max_tile_dim) {
    return out_of_range(message, "rows", tile.rows, 1, limits.max_tile_dim);
  }
  if (tile.cols < 1 || tile.cols > limits.max_tile_dim) {
    return out_of_range(message, "cols", tile.cols, 1, limits.max_tile_dim);
  }
  uint64_t expected = 0;
  const bool fits = checked_mul_add(uint64_t{tile.rows} * tile.cols, sizeof(double), prefix_size, expected);
  if (!fits || expected != payload_length) {
    return field_error(message, "payload_length " + std::to_string(payload_length) + " does not match tile " +
                                    std::to_string(tile.rows) + " x " + std::to_string(tile.cols) + " (needs " +
                                    (fits ? std::to_string(expected) : std::string("more than 2^64")) + " bytes)");
  }
  return Status::ok();
}

// The data span views the payload in place, which is only valid for double-aligned memory.
Result<std::span<const double>> tile_data(std::string_view message, std::span<const std::byte> payload,
                                          std::size_t prefix_size, const TilePrefix& tile) {
  const std::byte* first = payload.data() + prefix_size;
  if (reinterpret_cast<std::uintptr_t>(first) % alignof(double) != 0) {
    return invalid_argument(std::string(message) + ": payload buffer is not " + std::to_string(alignof(double)) +
                            "-byte aligned; tile data cannot be viewed in place");
  }
  return std::span<const double>(reinterpret_cast<const double*>(first), std::size_t{tile.rows} * tile.cols);
}

Result<Message> decode_store(std::span<const std::byte> payload, const Limits& limits) {
  if (payload.size() < kTilePrefixSize) {
    return field_error("STORE", "truncated tile prefix: needs " + std::to_string(kTilePrefixSize) +
                                    " bytes, payload has " + std::to_string(payload.size()));
  }
  Result<TilePrefix> tile = decode_store_prefix(payload.first<kTilePrefixSize>(), payload.size(), limits);
  if (!tile) return tile.status();
  Result<std::span<const double>> data = tile_data("STORE", payload, kTilePrefixSize, *tile);
  if (!data) return data.status();
  if (const uint32_t crc = tile_crc32c(*data); crc != tile->data_crc32c) return tile_crc_mismatch("STORE", *tile, crc);
  return Message(Store{*tile, *data});
}

Result<Message> decode_result(std::span<const std::byte> payload, const Limits& limits) {
  if (payload.size() < kResultPrefixSize) {
    return field_error("RESULT", "truncated prefix: needs " + std::to_string(kResultPrefixSize) +
                                     " bytes, payload has " + std::to_string(payload.size()));
  }
  Result<ResultPrefix> prefix = decode_result_prefix(payload.first<kResultPrefixSize>(), payload.size(), limits);
  if (!prefix) return prefix.status();
  Result<std::span<const double>> data = tile_data("RESULT", payload, kResultPrefixSize, prefix->tile);
  if (!data) return data.status();
  if (const uint32_t crc = tile_crc32c(*data); crc != prefix->tile.data_crc32c) {
    return tile_crc_mismatch("RESULT", prefix->tile, crc);
  }
  return Message(ResultTile{prefix->job_id, prefix->compute_seconds, prefix->tile, *data});
}

struct PayloadBounds {
  uint64_t min = 0;
  uint64_t max = 0;
};

// What a payload of this type can possibly measure under `limits`; lets readers refuse a frame
// before allocating its claimed length.
PayloadBounds payload_bounds(MessageType type, const Limits& limits) {
  const uint64_t max_string = std::min<uint64_t>(limits.max_string_bytes, std::numeric_limits<uint16_t>::max());
  const uint64_t max_dim = limits.max_tile_dim;
  switch (type) {
    case MessageType::kHello: return {kHelloFixedBytes, kHelloFixedBytes + 3 * max_string + kHelloLoadBytes};
    case MessageType::kAuth: return {kAuthPayloadBytes, kAuthPayloadBytes};
    case MessageType::kAuthOk: return {kAuthOkPayloadBytes, kAuthOkPayloadBytes};
    case MessageType::kProbe: return {kProbeFixedBytes, kProbeFixedBytes + uint64_t{limits.max_echo_bytes}};
    case MessageType::kProbeResult:
      return {kProbeResultFixedBytes, kProbeResultFixedBytes + uint64_t{limits.max_echo_bytes}};
    case MessageType::kStore:
      return {kTilePrefixSize + sizeof(double), saturating_mul_add(max_dim * max_dim, sizeof(double), kTilePrefixSize)};
    case MessageType::kJob: return {kJobPayloadBytes, kJobPayloadBytes};
    case MessageType::kCredit: return {kCreditPayloadBytes, kCreditPayloadBytes};
    case MessageType::kResult:
      return {kResultPrefixSize + sizeof(double),
              saturating_mul_add(max_dim * max_dim, sizeof(double), kResultPrefixSize)};
    case MessageType::kError: return {kErrorFixedBytes, kErrorFixedBytes + max_string};
    case MessageType::kBye: return {0, 0};
    case MessageType::kRelease:
      return {kReleaseFixedBytes, release_payload_bytes(limits.max_release_tiles)};
    case MessageType::kStatsRequest: return {0, 0};
    case MessageType::kStats: return {kStatsPayloadBytes, kStatsPayloadBytes};
    // The graph codec checks these layouts; the header only bounds their length.
    case MessageType::kGraphLoad:
    case MessageType::kGraphReady:
    case MessageType::kGraphStart:
    case MessageType::kGraphStep:
    case MessageType::kGraphStepDone:
    case MessageType::kGraphProgressRequest:
    case MessageType::kGraphProgress:
    case MessageType::kGraphValuesRequest:
    case MessageType::kGraphValues:
    case MessageType::kGraphStop:
    case MessageType::kGraphPeerHello:
    case MessageType::kGraphDeltas:
    case MessageType::kGraphProbe:
    case MessageType::kGraphProbeResult: return {0, limits.max_payload_bytes};
    // Small control frames: the header already bounds them as forward_codec.hpp does.
    case MessageType::kForwardSetup: return {kForwardSetupFixedBytes, kForwardSetupFixedBytes + max_string};
    case MessageType::kForwardReady: return {kForwardReadyFixedBytes, kForwardReadyFixedBytes + max_string};
    case MessageType::kStored: return {kStoredPayloadBytes, kStoredPayloadBytes};
    case MessageType::kSendTile: return {kSendTileFixedBytes, kSendTileFixedBytes + max_string};
    case MessageType::kSent: return {kSentFixedBytes, kSentFixedBytes + max_string};
    case MessageType::kHeld: return {kHeldPayloadBytes, kHeldPayloadBytes};
  }
  return {0, 0};
}

// Message's alternatives are listed in wire-type order, so the index gives the type.
template <std::size_t I, MessageType kType>
constexpr bool kAlternativeIs = static_cast<uint16_t>(kType) == I + 1;
static_assert(std::is_same_v<std::variant_alternative_t<0, Message>, Hello> && kAlternativeIs<0, MessageType::kHello>);
static_assert(std::is_same_v<std::variant_alternative_t<5, Message>, Store> && kAlternativeIs<5, MessageType::kStore>);
static_assert(std::is_same_v<std::variant_alternative_t<8, Message>, ResultTile> &&
              kAlternativeIs<8, MessageType::kResult>);
static_assert(std::is_same_v<std::variant_alternative_t<11, Message>, Release> &&
              kAlternativeIs<11, MessageType::kRelease>);
static_assert(std::is_same_v<std::variant_alternative_t<12, Message>, StatsRequest> &&
              kAlternativeIs<12, MessageType::kStatsRequest>);
static_assert(std::is_same_v<std::variant_alternative_t<13, Message>, Stats> &&
              kAlternativeIs<13, MessageType::kStats>);
static_assert(std::variant_size_v<Message> == kMaxTransportType);

}  // namespace

uint32_t tile_crc32c(std::span<const double> data) { return crc32c(std::as_bytes(data)); }

Status tile_crc_mismatch(std::string_view message, const TilePrefix& tile, uint32_t computed) {
  return network_error(std::string(message) + " tile " + std::to_string(tile.tile_id) + " (" + std::to_string(tile.rows) +
                       " x " + std::to_string(tile.cols) + "): checksum mismatch: the data's CRC32C is " + hex32(computed) +
                       ", the sender's " + hex32(tile.data_crc32c) + "; the data was damaged in transit");
}

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
  return static_cast<MessageType>(message.index() + 1);
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

std::array<std::byte, kTilePrefixSize> encode_store_prefix(const TilePrefix& tile) {
  std::array<std::byte, kTilePrefixSize> bytes{};
  store_tile_prefix(bytes, tile);
  return bytes;
}

std::array<std::byte, kResultPrefixSize> encode_result_prefix(uint64_t job_id, double compute_seconds,
                                                              const TilePrefix& tile) {
  std::array<std::byte, kResultPrefixSize> bytes{};
  store_le(bytes, 0, job_id, 8);
  store_le(bytes, 8, std::bit_cast<uint64_t>(compute_seconds), 8);
  store_tile_prefix(std::span(bytes).subspan(16), tile);
  return bytes;
}

uint64_t store_payload_bytes(const TilePrefix& tile) {
  return saturating_mul_add(uint64_t{tile.rows} * tile.cols, sizeof(double), kTilePrefixSize);
}

std::array<std::byte, kHeaderSize> encode_store_header(const TilePrefix& tile) {
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  header.payload_length = store_payload_bytes(tile);
  return encode_header(header);
}

uint64_t result_payload_bytes(const TilePrefix& tile) {
  return saturating_mul_add(uint64_t{tile.rows} * tile.cols, sizeof(double), kResultPrefixSize);
}

Result<Message> decode_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits) {
  if (payload.size() > limits.max_payload_bytes) {
    return protocol_error(message_type_name(type) + ": payload of " + std::to_string(payload.size()) +
                          " bytes exceeds the limit of " + std::to_string(limits.max_payload_bytes));
  }
  switch (type) {
    case 1: return decode_hello(payload, limits);
    case 2: return decode_auth(payload);
    case 3: return decode_auth_ok(payload);
    case 4: return decode_probe(payload, limits);
    case 5: return decode_probe_result(payload, limits);
    case 6: return decode_store(payload, limits);
    case 7: return decode_job(payload, limits);
    case 8: return decode_credit(payload);
    case 9: return decode_result(payload, limits);
    case 10: return decode_error(payload, limits);
    case 11: return decode_bye(payload);
    case 12: return decode_release(payload, limits);
    case 13: return decode_stats_request(payload);
    case 14: return decode_stats(payload);
    default:
      if (is_graph_message(type)) {
        return protocol_error(message_type_name(type) + ": GRAPH_* payloads are decoded by the graph service");
      }
      if (is_forward_message(type)) {
        return protocol_error(message_type_name(type) + ": forwarding payloads are decoded by forward_codec.hpp");
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

Result<TilePrefix> decode_store_prefix(std::span<const std::byte, kTilePrefixSize> prefix, uint64_t payload_length,
                                       const Limits& limits) {
  const TilePrefix tile = load_tile_prefix(prefix.data());
  TESSERA_RETURN_IF_ERROR(check_tile("STORE", tile, kTilePrefixSize, payload_length, limits));
  return tile;
}

Result<Probe> decode_probe_prefix(std::span<const std::byte, kProbeFixedBytes> prefix, uint64_t payload_length,
                                  const Limits& limits) {
  Probe m;
  uint8_t kind = 0;
  uint32_t echo_length = 0;
  PayloadReader r("PROBE", prefix);
  if (!r.u8("kind", kind)) return r.status();
  TESSERA_RETURN_IF_ERROR(check_probe_kind("PROBE", kind));
  m.kind = static_cast<ProbeKind>(kind);
  if (!(r.zero_padding("pad", 3) && r.u32("size", m.size) && r.f64("min_seconds", m.min_seconds) &&
        r.u32("echo_length", echo_length) && r.finish())) {
    return r.status();
  }
  TESSERA_RETURN_IF_ERROR(check_probe_size("PROBE", m.kind, m.size, limits));
  TESSERA_RETURN_IF_ERROR(check_seconds("PROBE", "min_seconds", m.min_seconds, limits.max_probe_seconds));
  if (echo_length > limits.max_echo_bytes) {
    return out_of_range("PROBE", "echo_length", echo_length, 0, limits.max_echo_bytes);
  }
  if (payload_length < kProbeFixedBytes || payload_length - kProbeFixedBytes != echo_length) {
    return field_error("PROBE", "payload_length " + std::to_string(payload_length) + " does not match echo_length " +
                                    std::to_string(echo_length) + " (needs " +
                                    std::to_string(kProbeFixedBytes + uint64_t{echo_length}) + " bytes)");
  }
  return m;
}

std::array<std::byte, kProbeResultFixedBytes> encode_probe_result_prefix(const ProbeResult& result,
                                                                        uint32_t echo_length) {
  ProbeResult fixed = result;
  fixed.echo.clear();
  const std::vector<std::byte> encoded = encode(fixed);  // ends with echo_length 0
  std::array<std::byte, kProbeResultFixedBytes> bytes{};
  std::memcpy(bytes.data(), encoded.data(), kProbeResultFixedBytes);
  store_le(bytes, kProbeResultFixedBytes - 4, echo_length, 4);
  return bytes;
}

Result<ResultPrefix> decode_result_prefix(std::span<const std::byte, kResultPrefixSize> prefix,
                                          uint64_t payload_length, const Limits& limits) {
  ResultPrefix result;
  result.job_id = load_le(prefix.data(), 8);
  result.compute_seconds = std::bit_cast<double>(load_le(prefix.data() + 8, 8));
  TESSERA_RETURN_IF_ERROR(
      check_seconds("RESULT", "compute_seconds", result.compute_seconds, std::numeric_limits<double>::max()));
  result.tile = load_tile_prefix(prefix.data() + 16);
  TESSERA_RETURN_IF_ERROR(check_tile("RESULT", result.tile, kResultPrefixSize, payload_length, limits));
  return result;
}

}  // namespace tessera::transport
