// Every field is written and read byte by byte, so the wire format is little-endian whatever the
// host is. Decoders check each length against the bytes actually present and against Limits
// before they allocate anything, and name the message, field and value when they refuse.
#include "tessera/gemm/codec.hpp"

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

namespace tessera::gemm {

using transport::field_error;
using transport::hex32;
using transport::out_of_range;
using transport::store_le;
using transport::load_le;
using transport::PayloadReader;
using transport::PayloadWriter;

// STORE/RESULT data is viewed (decode) and sent (scatter-gather) in place as host doubles; a
// big-endian port would have to byte-swap tile data explicitly.
static_assert(std::endian::native == std::endian::little,
              "tile data travels as host doubles; add byte swapping for big-endian hosts");
static_assert(std::numeric_limits<double>::is_iec559, "the wire format carries IEEE-754 binary64");

namespace {

static_assert(kJobPayloadBytes == 72 && kProbeFixedBytes == 20 && kCreditPayloadBytes == 24 && kStatsPayloadBytes == 56,
              "a payload layout changed: bump kProtocolVersion and update the layout comments");

std::string format_double(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc()) return "?";
  return std::string(buffer, end);
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

Result<GemmMessage> decode_probe(std::span<const std::byte> payload, const Limits& limits) {
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
  return GemmMessage(std::move(m));
}

Result<GemmMessage> decode_probe_result(std::span<const std::byte> payload, const Limits& limits) {
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
  return GemmMessage(std::move(m));
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

Result<GemmMessage> decode_job(std::span<const std::byte> payload, const Limits& limits) {
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
  return GemmMessage(m);
}

Result<GemmMessage> decode_credit(std::span<const std::byte> payload) {
  Credit m;
  PayloadReader r("CREDIT", payload);
  if (!(r.u64("job_id", m.job_id) && r.u32("credits", m.credits) && r.zero_padding("pad", 4) &&
        r.f64("compute_seconds", m.compute_seconds) && r.finish())) {
    return r.status();
  }
  TESSERA_RETURN_IF_ERROR(
      check_seconds("CREDIT", "compute_seconds", m.compute_seconds, std::numeric_limits<double>::max()));
  return GemmMessage(m);
}

Result<GemmMessage> decode_release(std::span<const std::byte> payload, const Limits& limits) {
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
  return GemmMessage(std::move(m));
}

Result<GemmMessage> decode_stats_request(std::span<const std::byte> payload) {
  PayloadReader r("STATS_REQUEST", payload);
  if (!r.finish()) return r.status();
  return GemmMessage(StatsRequest{});
}

Result<GemmMessage> decode_stats(std::span<const std::byte> payload) {
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
  return GemmMessage(m);
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

Result<GemmMessage> decode_store(std::span<const std::byte> payload, const Limits& limits) {
  if (payload.size() < kTilePrefixSize) {
    return field_error("STORE", "truncated tile prefix: needs " + std::to_string(kTilePrefixSize) +
                                    " bytes, payload has " + std::to_string(payload.size()));
  }
  Result<TilePrefix> tile = decode_store_prefix(payload.first<kTilePrefixSize>(), payload.size(), limits);
  if (!tile) return tile.status();
  Result<std::span<const double>> data = tile_data("STORE", payload, kTilePrefixSize, *tile);
  if (!data) return data.status();
  if (const uint32_t crc = tile_crc32c(*data); crc != tile->data_crc32c) return tile_crc_mismatch("STORE", *tile, crc);
  return GemmMessage(Store{*tile, *data});
}

Result<GemmMessage> decode_result(std::span<const std::byte> payload, const Limits& limits) {
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
  return GemmMessage(ResultTile{prefix->job_id, prefix->compute_seconds, prefix->tile, *data});
}

struct PayloadBounds {
  uint64_t min = 0;
  uint64_t max = 0;
};

// What a payload of this GEMM type can possibly measure under `limits`; lets readers refuse a
// frame before allocating its claimed length.
PayloadBounds payload_bounds(MessageType type, const Limits& limits) {
  const uint64_t max_dim = limits.max_tile_dim;
  switch (type) {
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
    case MessageType::kRelease: return {kReleaseFixedBytes, release_payload_bytes(limits.max_release_tiles)};
    case MessageType::kStatsRequest: return {0, 0};
    case MessageType::kStats: return {kStatsPayloadBytes, kStatsPayloadBytes};
    default: return {1, 0};  // not a GEMM message: nothing fits
  }
}

}  // namespace

Limits limits_for(const transport::Limits& wire) {
  Limits limits;
  limits.max_payload_bytes = wire.max_payload_bytes;
  limits.max_string_bytes = wire.max_string_bytes;
  return limits;
}

uint32_t tile_crc32c(std::span<const double> data) { return transport::crc32c(std::as_bytes(data)); }

Status tile_crc_mismatch(std::string_view message, const TilePrefix& tile, uint32_t computed) {
  return network_error(std::string(message) + " tile " + std::to_string(tile.tile_id) + " (" + std::to_string(tile.rows) +
                       " x " + std::to_string(tile.cols) + "): checksum mismatch: the data's CRC32C is " + hex32(computed) +
                       ", the sender's " + hex32(tile.data_crc32c) + "; the data was damaged in transit");
}

MessageType gemm_message_type(const GemmMessage& message) {
  static constexpr MessageType kTypes[] = {MessageType::kProbe,  MessageType::kProbeResult, MessageType::kStore,
                                           MessageType::kJob,    MessageType::kCredit,      MessageType::kResult,
                                           MessageType::kRelease, MessageType::kStatsRequest, MessageType::kStats};
  static_assert(std::size(kTypes) == std::variant_size_v<GemmMessage>);
  return kTypes[message.index()];
}

bool is_gemm_message(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kProbe:
    case MessageType::kProbeResult:
    case MessageType::kStore:
    case MessageType::kJob:
    case MessageType::kCredit:
    case MessageType::kResult:
    case MessageType::kRelease:
    case MessageType::kStatsRequest:
    case MessageType::kStats: return true;
    default: return false;
  }
}

std::vector<std::byte> encode_gemm_payload(const GemmMessage& message) {
  return std::visit([](const auto& m) { return encode(m); }, message);
}

Result<GemmMessage> decode_gemm_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits) {
  if (payload.size() > limits.max_payload_bytes) {
    return protocol_error(transport::message_type_name(type) + ": payload of " + std::to_string(payload.size()) +
                          " bytes exceeds the limit of " + std::to_string(limits.max_payload_bytes));
  }
  switch (static_cast<MessageType>(type)) {
    case MessageType::kProbe: return decode_probe(payload, limits);
    case MessageType::kProbeResult: return decode_probe_result(payload, limits);
    case MessageType::kStore: return decode_store(payload, limits);
    case MessageType::kJob: return decode_job(payload, limits);
    case MessageType::kCredit: return decode_credit(payload);
    case MessageType::kResult: return decode_result(payload, limits);
    case MessageType::kRelease: return decode_release(payload, limits);
    case MessageType::kStatsRequest: return decode_stats_request(payload);
    case MessageType::kStats: return decode_stats(payload);
    default:
      return protocol_error(transport::message_type_name(type) + " is not a message of the GEMM service");
  }
}

Status check_gemm_payload_length(uint16_t type, uint64_t length, const Limits& limits) {
  const std::string name = transport::message_type_name(type);
  if (!is_gemm_message(type)) return protocol_error(name + " is not a message of the GEMM service");
  if (length > limits.max_payload_bytes) {
    return protocol_error(name + ": payload_length " + std::to_string(length) + " exceeds the limit of " +
                          std::to_string(limits.max_payload_bytes) + " bytes");
  }
  const PayloadBounds bounds = payload_bounds(static_cast<MessageType>(type), limits);
  if (length < bounds.min || length > bounds.max) return out_of_range(name, "payload_length", length, bounds.min, bounds.max);
  return Status::ok();
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

std::array<std::byte, transport::kHeaderSize> encode_store_header(const TilePrefix& tile) {
  transport::FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  header.payload_length = store_payload_bytes(tile);
  return transport::encode_header(header);
}

uint64_t result_payload_bytes(const TilePrefix& tile) {
  return saturating_mul_add(uint64_t{tile.rows} * tile.cols, sizeof(double), kResultPrefixSize);
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

}  // namespace tessera::gemm
