// The GEMM service's codec: every message round trips to its own bytes, the documented layouts and
// sizes, the length check a reader makes from the header alone, and the refusals a hostile peer
// meets (truncations, trailing bytes, out-of-limit fields, lying lengths) before any allocation.
#include "tessera/gemm/codec.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "../transport/alloc_counter.hpp"
#include "gemm_samples.hpp"
#include "../transport/status_assertions.hpp"
#include "../transport/lying_payloads.hpp"
#include "../transport/stored_frames.hpp"

namespace tessera::gemm {
namespace {

using transport::testing::AllocationCounter;
using transport::testing::counted;
using transport::testing::kSmallAllocation;
using testing::put_le;
using testing::sample_messages;
using testing::sample_payloads;


std::span<const std::byte, transport::kHeaderSize> header_span(const std::vector<std::byte>& bytes) {
  return std::span<const std::byte, transport::kHeaderSize>(bytes.data(), transport::kHeaderSize);
}

using tessera::testing::fails_with;

Status decode_status(MessageType type, const std::vector<std::byte>& payload, const Limits& limits = {}) {
  return decode_gemm_payload(static_cast<uint16_t>(type), payload, limits).status();
}

// --- Lengths from the header alone -------------------------------------------------------

// The frame header bounds a GEMM payload by max_payload_bytes only; the codec knows the layouts
// and refuses, from the header alone, a length the type cannot have.
TEST(GemmHeader, RejectsPayloadLengthsTheTypeCannotHave) {
  auto check = [](MessageType type, uint64_t length, bool ok) {
    const auto raw = static_cast<uint16_t>(type);
    const Status status = check_gemm_payload_length(raw, length, Limits{});
    EXPECT_EQ(status.is_ok(), ok) << transport::message_type_name(raw) << " length " << length << ": "
                                  << status.to_string();
    if (!ok) {
      EXPECT_EQ(status.code(), StatusCode::kProtocolError) << status.to_string();
    }
    // The header itself admits every length up to the frame limit: this check is the codec's.
    transport::FrameHeader header;
    header.type = raw;
    header.payload_length = length;
    const bool within_frame_limit = length <= transport::Limits{}.max_payload_bytes;
    EXPECT_EQ(transport::decode_header(transport::encode_header(header), transport::Limits{}).is_ok(),
              within_frame_limit)
        << transport::message_type_name(raw) << " length " << length;
  };
  check(MessageType::kJob, 72, true);
  check(MessageType::kJob, 1 << 20, false);
  check(MessageType::kStore, 24, true);
  check(MessageType::kStore, 23, false);
  check(MessageType::kStore, Limits{}.max_payload_bytes, true);
  check(MessageType::kStore, Limits{}.max_payload_bytes + 1, false);
  check(MessageType::kStatsRequest, 0, true);
  check(MessageType::kStatsRequest, 1, false);
  check(MessageType::kStats, 56, true);
  check(MessageType::kStats, 55, false);
  check(MessageType::kStats, 57, false);
  EXPECT_TRUE(fails_with(check_gemm_payload_length(static_cast<uint16_t>(MessageType::kJob), 73, Limits{}),
                         StatusCode::kProtocolError, "JOB: payload_length 73 out of range 72..72"));
}

TEST(GemmHeader, LengthsOfOtherServicesTypesAreRefused) {
  for (MessageType type : {MessageType::kHello, MessageType::kError, MessageType::kBye, MessageType::kGraphLoad,
                           MessageType::kForwardSetup, MessageType::kHeld}) {
    const auto raw = static_cast<uint16_t>(type);
    EXPECT_TRUE(fails_with(check_gemm_payload_length(raw, 0, Limits{}), StatusCode::kProtocolError,
                           transport::message_type_name(raw) + " is not a message of the GEMM service"));
  }
}

TEST(GemmHeader, HugeClaimedLengthIsRejectedWithoutAllocation) {
  const auto [status, allocated] = counted([&] { return check_gemm_payload_length(static_cast<uint16_t>(MessageType::kStore), 1ull << 63, Limits{}); });
  EXPECT_LT(allocated, kSmallAllocation);
  EXPECT_TRUE(fails_with(status, StatusCode::kProtocolError,
                         "STORE: payload_length 9223372036854775808 exceeds the limit of 2147483648"));
}

TEST(GemmHeader, LimitsForAConnectionTakeItsFrameBounds) {
  transport::Limits wire;
  wire.max_payload_bytes = 1 << 20;
  wire.max_string_bytes = 17;
  const Limits limits = limits_for(wire);
  EXPECT_EQ(limits.max_payload_bytes, wire.max_payload_bytes);
  EXPECT_EQ(limits.max_string_bytes, wire.max_string_bytes);
  EXPECT_EQ(limits.max_tile_dim, Limits{}.max_tile_dim);
  EXPECT_EQ(limits.max_echo_bytes, Limits{}.max_echo_bytes);
  EXPECT_EQ(limits.max_probe_size, Limits{}.max_probe_size);
  EXPECT_EQ(limits.max_probe_seconds, Limits{}.max_probe_seconds);
  EXPECT_EQ(limits.max_release_tiles, Limits{}.max_release_tiles);
  EXPECT_EQ(Limits{}.max_payload_bytes, transport::Limits{}.max_payload_bytes);
  EXPECT_TRUE(fails_with(check_gemm_payload_length(static_cast<uint16_t>(MessageType::kStore), (1 << 20) + 1, limits),
                         StatusCode::kProtocolError, "exceeds the limit of 1048576"));
}

// --- Payload round trips -----------------------------------------------------------------

TEST(GemmPayload, EveryNonBulkMessageRoundTrips) {
  for (const GemmMessage& message : sample_messages()) {
    const auto type = static_cast<uint16_t>(gemm_message_type(message));
    SCOPED_TRACE(transport::message_type_name(type));
    EXPECT_TRUE(is_gemm_message(type));
    const std::vector<std::byte> payload = encode_gemm_payload(message);
    EXPECT_TRUE(check_gemm_payload_length(type, payload.size(), Limits{}).is_ok())
        << "the length check must admit a valid payload";
    Result<GemmMessage> decoded = decode_gemm_payload(type, payload, Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(decoded->index(), message.index());
    EXPECT_TRUE(testing::same_message(*decoded, message));
    EXPECT_EQ(encode_gemm_payload(*decoded), payload);
  }
}

TEST(GemmPayload, MessageTypesAndNames) {
  const std::vector<GemmMessage> all = {Probe{}, ProbeResult{}, Store{},        Job{},  Credit{},
                                        ResultTile{}, Release{}, StatsRequest{}, Stats{}};
  const std::pair<MessageType, const char*> expected[] = {
      {MessageType::kProbe, "PROBE"},   {MessageType::kProbeResult, "PROBE_RESULT"},
      {MessageType::kStore, "STORE"},   {MessageType::kJob, "JOB"},
      {MessageType::kCredit, "CREDIT"}, {MessageType::kResult, "RESULT"},
      {MessageType::kRelease, "RELEASE"}, {MessageType::kStatsRequest, "STATS_REQUEST"},
      {MessageType::kStats, "STATS"}};
  ASSERT_EQ(all.size(), std::size(expected));
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(gemm_message_type(all[i]), expected[i].first);
    EXPECT_EQ(transport::message_type_name(static_cast<uint16_t>(expected[i].first)), expected[i].second);
    EXPECT_TRUE(is_gemm_message(static_cast<uint16_t>(expected[i].first)));
    EXPECT_FALSE(transport::is_session_message(static_cast<uint16_t>(expected[i].first)));
  }
  // The GEMM types are 4..9 and 12..14 of the registry; nothing else is the GEMM service's.
  for (uint16_t type = 0; type <= transport::kLastMessageType + 1; ++type) {
    const bool gemm = (type >= 4 && type <= 9) || (type >= 12 && type <= 14);
    EXPECT_EQ(is_gemm_message(type), gemm) << transport::message_type_name(type);
  }
  // What the worker needs hosted to take them: the GEMM service, for the coordinator's.
  for (MessageType type : {MessageType::kProbe, MessageType::kStore, MessageType::kJob, MessageType::kRelease,
                           MessageType::kStatsRequest}) {
    EXPECT_EQ(transport::capability_of_message(static_cast<uint16_t>(type)), transport::kCapabilityGemm);
  }
}

TEST(GemmPayload, StoreRoundTripsAndViewsThePayload) {
  const TilePrefix tile{7, 13, 11};
  const std::vector<double> data = testing::sample_tile_data(tile);
  const std::vector<std::byte> payload = testing::store_payload(tile, data);
  ASSERT_EQ(payload.size(), store_payload_bytes(tile));
  EXPECT_EQ(store_payload_bytes(tile), 16u + 8u * 13 * 11);

  Result<GemmMessage> decoded = decode_gemm_payload(static_cast<uint16_t>(MessageType::kStore), payload, Limits{});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  const Store& store = std::get<Store>(*decoded);
  EXPECT_EQ(store.tile, testing::with_crc(tile, data));
  ASSERT_EQ(store.data.size(), data.size());
  EXPECT_EQ(static_cast<const void*>(store.data.data()), static_cast<const void*>(payload.data() + kTilePrefixSize));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), store.data.begin()));

  Result<TilePrefix> prefix =
      decode_store_prefix(std::span<const std::byte, kTilePrefixSize>(payload.data(), kTilePrefixSize), payload.size(), {});
  ASSERT_TRUE(prefix);
  EXPECT_EQ(*prefix, testing::with_crc(tile, data));
}

TEST(GemmPayload, ResultRoundTripsAndViewsThePayload) {
  const TilePrefix tile{9, 1, 17};
  const std::vector<double> data = testing::sample_tile_data(tile);
  const std::vector<std::byte> payload = testing::result_payload(55, 2.5, tile, data);
  ASSERT_EQ(payload.size(), result_payload_bytes(tile));

  Result<GemmMessage> decoded = decode_gemm_payload(static_cast<uint16_t>(MessageType::kResult), payload, Limits{});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  const ResultTile& result = std::get<ResultTile>(*decoded);
  EXPECT_EQ(result.job_id, 55u);
  EXPECT_EQ(result.compute_seconds, 2.5);
  EXPECT_EQ(result.tile, testing::with_crc(tile, data));
  EXPECT_EQ(static_cast<const void*>(result.data.data()), static_cast<const void*>(payload.data() + kResultPrefixSize));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), result.data.begin(), result.data.end()));

  Result<ResultPrefix> prefix = decode_result_prefix(
      std::span<const std::byte, kResultPrefixSize>(payload.data(), kResultPrefixSize), payload.size(), {});
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->job_id, 55u);
  EXPECT_EQ(prefix->tile, testing::with_crc(tile, data));
}

TEST(GemmPayload, MisalignedBulkPayloadIsRefusedNotMisread) {
  const TilePrefix tile{1, 2, 2};
  const std::vector<std::byte> payload = testing::store_payload(tile, testing::sample_tile_data(tile));
  std::vector<std::byte> shifted(payload.size() + 1);
  std::memcpy(shifted.data() + 1, payload.data(), payload.size());
  const Status status =
      decode_gemm_payload(static_cast<uint16_t>(MessageType::kStore), std::span(shifted).subspan(1), Limits{}).status();
  EXPECT_TRUE(fails_with(status, StatusCode::kInvalidArgument, "aligned"));
}

TEST(GemmValidation, StoreDimensionsAndReserved) {
  const TilePrefix tile{1, 2, 3};
  const std::vector<std::byte> valid = testing::store_payload(tile, testing::sample_tile_data(tile));

  std::vector<std::byte> zero_rows = valid;
  put_le(zero_rows, 4, 0, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStore, zero_rows), StatusCode::kProtocolError,
                         "STORE: rows 0 out of range 1..1048576"));

  std::vector<std::byte> wide = valid;
  put_le(wide, 8, (1u << 20) + 1, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStore, wide), StatusCode::kProtocolError,
                         "STORE: cols 1048577 out of range 1..1048576"));

  // v2: the prefix's last u32 is the data's CRC32C; another value refuses the data.
  std::vector<std::byte> wrong_crc = valid;
  put_le(wrong_crc, 12, 5, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStore, wrong_crc), StatusCode::kNetworkError,
                         "checksum mismatch"));
  std::vector<std::byte> flipped_data = valid;
  flipped_data.back() ^= std::byte{0x01};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStore, flipped_data), StatusCode::kNetworkError,
                         "checksum mismatch"));

  std::vector<std::byte> mismatched = valid;
  put_le(mismatched, 4, 3, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStore, mismatched), StatusCode::kProtocolError,
                         "payload_length 64 does not match tile 3 x 3 (needs 88 bytes)"));

  Limits small;
  small.max_tile_dim = 2;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStore, valid, small), StatusCode::kProtocolError,
                         "STORE: cols 3 out of range 1..2"));
}

TEST(GemmValidation, TileSizeArithmeticDoesNotOverflow) {
  Limits unlimited;
  unlimited.max_tile_dim = std::numeric_limits<uint32_t>::max();
  unlimited.max_payload_bytes = std::numeric_limits<uint64_t>::max();
  std::array<std::byte, kTilePrefixSize> prefix = encode_store_prefix(TilePrefix{1, 0xFFFFFFFFu, 0xFFFFFFFFu});
  // 8 * (2^32-1)^2 + 16 wraps around 2^64; a wrapped value must not be mistaken for a match.
  const uint64_t wrapped = 16 + 8 * (uint64_t{0xFFFFFFFFu} * 0xFFFFFFFFu);
  EXPECT_TRUE(fails_with(decode_store_prefix(prefix, wrapped, unlimited).status(), StatusCode::kProtocolError,
                         "more than 2^64"));
  EXPECT_EQ(store_payload_bytes(TilePrefix{1, 0xFFFFFFFFu, 0xFFFFFFFFu}), std::numeric_limits<uint64_t>::max());
}

TEST(GemmValidation, ResultComputeSecondsMustBeFiniteAndNonNegative) {
  const TilePrefix tile{1, 1, 1};
  for (double seconds : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const std::vector<std::byte> payload = testing::result_payload(1, seconds, tile, {1.0});
    EXPECT_TRUE(fails_with(decode_status(MessageType::kResult, payload), StatusCode::kProtocolError,
                           "RESULT: compute_seconds"));
  }
}

TEST(GemmValidation, ProbeFields) {
  const Probe valid{ProbeKind::kGemm, 256, 1.0, {}};
  const std::vector<std::byte> payload = encode_gemm_payload(valid);

  std::vector<std::byte> kind = payload;
  kind[0] = std::byte{2};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, kind), StatusCode::kProtocolError, "PROBE: kind 2 unknown"));

  std::vector<std::byte> pad = payload;
  pad[2] = std::byte{1};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, pad), StatusCode::kProtocolError, "PROBE: pad byte 1 is 1"));

  for (uint32_t size : {0u, 8193u}) {
    std::vector<std::byte> bad = payload;
    put_le(bad, 4, size, 4);
    EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, bad), StatusCode::kProtocolError,
                           "PROBE: size " + std::to_string(size) + " out of range 1..8192"));
  }
  for (double seconds : {-0.5, 31.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    Probe probe = valid;
    probe.min_seconds = seconds;
    EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, encode_gemm_payload(probe)), StatusCode::kProtocolError,
                           "PROBE: min_seconds"))
        << seconds;
  }
  Limits small_echo;
  small_echo.max_echo_bytes = 4;
  const Probe echo{ProbeKind::kEcho, 0, 0.0, std::vector<uint8_t>(5)};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, encode_gemm_payload(echo), small_echo),
                         StatusCode::kProtocolError, "PROBE: echo_length 5 out of range 0..4"));
}

TEST(GemmValidation, ProbeResultFields) {
  const ProbeResult valid{ProbeKind::kGemm, 256, 3, 1.0, 4.0, {}};
  std::vector<std::byte> pad = encode_gemm_payload(valid);
  pad[14] = std::byte{9};  // second padding word
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbeResult, pad), StatusCode::kProtocolError, "pad"));
  ProbeResult negative = valid;
  negative.gflops = -1.0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbeResult, encode_gemm_payload(negative)), StatusCode::kProtocolError,
                         "PROBE_RESULT: gflops -1"));
}

TEST(GemmValidation, JobFields) {
  Job valid;
  valid.m = valid.n = valid.k = 8;
  ASSERT_TRUE(decode_gemm_payload(static_cast<uint16_t>(MessageType::kJob), encode_gemm_payload(valid), {}));

  std::vector<std::byte> op = encode_gemm_payload(valid);
  put_le(op, 8, 3, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, op), StatusCode::kProtocolError,
                         "JOB: op 3 unknown (1 = gemm_accumulate, 2 = add_scaled)"));
  put_le(op, 8, 0, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, op), StatusCode::kProtocolError, "JOB: op 0 unknown"));

  Job flags = valid;
  flags.flags = 0x40 | kJobReleaseA;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(flags)), StatusCode::kProtocolError,
                         "JOB: flags 0x00000042 has unknown bits 0x00000040"));

  Job empty = valid;
  empty.k = 0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(empty)), StatusCode::kProtocolError,
                         "JOB: k 0 out of range 1..1048576"));

  Job beyond = valid;
  beyond.a_row = (1u << 20) - 4;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(beyond)), StatusCode::kProtocolError,
                         "JOB: a_row 1048572 + m 8 exceeds"));

  Job create = valid;
  create.flags = kJobCreateOutput;
  create.c_rows = 8;
  create.c_cols = 0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(create)), StatusCode::kProtocolError,
                         "JOB: c_cols 0 out of range"));
  create.c_cols = 8;
  create.c_row = 1;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(create)), StatusCode::kProtocolError,
                         "does not fit the new c_tile of 8 x 8"));
}

// ADD_SCALED: C[m x n] += B[b_row][b_col] * A[m x n]. A's block has C's shape, B holds one entry,
// and k must be 0.
TEST(GemmValidation, AddScaledJobFields) {
  Job valid;
  valid.job_id = 77;
  valid.op = JobOp::kAddScaled;
  valid.flags = kJobCreateOutput | kJobReleaseA | kJobSendResult;
  valid.a_tile = 1;
  valid.b_tile = 2;
  valid.c_tile = 3;
  valid.a_row = 1;
  valid.a_col = 2;
  valid.b_row = 0;
  valid.b_col = 5;  // a scalar inside a wider tile is fine
  valid.c_row = 4;
  valid.m = 3;
  valid.n = 6;
  valid.c_rows = 7;
  valid.c_cols = 6;
  const std::vector<std::byte> payload = encode_gemm_payload(valid);
  ASSERT_EQ(payload.size(), kJobPayloadBytes);
  EXPECT_EQ(std::to_integer<int>(payload[8]), 2) << "op travels as u32 2";
  Result<GemmMessage> decoded = decode_gemm_payload(static_cast<uint16_t>(MessageType::kJob), payload, {});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(std::get<Job>(*decoded), valid);
  EXPECT_EQ(std::get<Job>(*decoded).op, JobOp::kAddScaled);
  EXPECT_EQ(encode_gemm_payload(*decoded), payload);

  for (uint32_t k : {1u, 6u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(k);
    Job with_k = valid;
    with_k.k = k;
    EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(with_k)), StatusCode::kProtocolError,
                           "JOB: k " + std::to_string(k) + " must be 0 for op 2 (add_scaled)"));
  }
  // The same fields with op 1 need k >= 1: k = 0 is refused there, as before.
  Job gemm = valid;
  gemm.op = JobOp::kGemmAccumulate;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(gemm)), StatusCode::kProtocolError,
                         "JOB: k 0 out of range 1..1048576"));

  Job empty = valid;
  empty.n = 0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(empty)), StatusCode::kProtocolError,
                         "JOB: n 0 out of range 1..1048576"));
  Job a_beyond = valid;
  a_beyond.a_col = (1u << 20) - 2;  // a_col + n, not a_col + k, is A's extent
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(a_beyond)), StatusCode::kProtocolError,
                         "JOB: a_col 1048574 + n 6 exceeds"));
  Job scalar_beyond = valid;
  scalar_beyond.b_row = 1u << 20;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(scalar_beyond)), StatusCode::kProtocolError,
                         "JOB: b_row 1048576 out of range 0..1048575"));
  scalar_beyond = valid;
  scalar_beyond.b_col = 0xFFFFFFFFu;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(scalar_beyond)), StatusCode::kProtocolError,
                         "JOB: b_col 4294967295 out of range"));
  Job flags = valid;
  flags.flags = 0x80;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(flags)), StatusCode::kProtocolError,
                         "JOB: flags 0x00000080 has unknown bits"));
  Job outside = valid;
  outside.c_rows = 6;  // c_row 4 + m 3 > 6
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(outside)), StatusCode::kProtocolError,
                         "does not fit the new c_tile of 6 x 6"));
}

// The transpose flags: op(A) = A^T and op(B) = B^T, read from blocks given as stored, so the
// decoder checks A's block as k x m (n x m for ADD_SCALED) and B's as n x k.
TEST(GemmValidation, TransposedJobFields) {
  EXPECT_EQ(kJobTransposeA, 0x10u);
  EXPECT_EQ(kJobTransposeB, 0x20u);
  EXPECT_EQ(kJobKnownFlags, 0x3Fu) << "every flag bit, and no other";

  Job gemm;
  gemm.job_id = 31;
  gemm.a_tile = 1;
  gemm.b_tile = 2;
  gemm.c_tile = 3;
  gemm.a_row = 1;
  gemm.a_col = 2;
  gemm.b_row = 3;
  gemm.b_col = 4;
  gemm.m = 5;
  gemm.n = 6;
  gemm.k = 7;
  Job add_scaled = gemm;
  add_scaled.op = JobOp::kAddScaled;
  add_scaled.k = 0;
  for (const auto& [job, flags] : {std::pair{gemm, kJobTransposeA}, std::pair{gemm, kJobTransposeB},
                                   std::pair{gemm, kJobTransposeA | kJobTransposeB | kJobSendResult},
                                   std::pair{add_scaled, kJobTransposeA | kJobCreateOutput}}) {
    Job transposed = job;
    transposed.flags = flags;
    transposed.c_rows = 8;
    transposed.c_cols = 9;
    SCOPED_TRACE(flags);
    const std::vector<std::byte> payload = encode_gemm_payload(transposed);
    ASSERT_EQ(payload.size(), kJobPayloadBytes);
    EXPECT_EQ(std::to_integer<uint32_t>(payload[12]), flags) << "flags travel as u32 at offset 12";
    Result<GemmMessage> decoded = decode_gemm_payload(static_cast<uint16_t>(MessageType::kJob), payload, {});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(std::get<Job>(*decoded), transposed);
    EXPECT_EQ(encode_gemm_payload(*decoded), payload);
  }

  // Offsets near the limit: an extent is checked against the size it spans when transposed, not
  // the one it would span otherwise. Each case passes or fails only because of its flag.
  constexpr uint32_t kNear = (1u << 20) - 4;
  struct Case {
    const char* name;
    Job job;
    const char* refusal;  // nullptr: accepted
  };
  auto with = [](Job job, uint32_t flags, auto edit) {
    job.flags = flags;
    edit(job);
    return job;
  };
  const Case cases[] = {
      {"A^T rows span k", with(gemm, kJobTransposeA, [](Job& j) { j.a_row = kNear; j.m = 2; j.k = 8; }),
       "JOB: a_row 1048572 + k 8 exceeds max tile dim 1048576"},
      {"A^T rows do not span m", with(gemm, kJobTransposeA, [](Job& j) { j.a_row = kNear; j.m = 8; j.k = 2; }),
       nullptr},
      {"A^T cols span m", with(gemm, kJobTransposeA, [](Job& j) { j.a_col = kNear; j.m = 8; j.k = 2; }),
       "JOB: a_col 1048572 + m 8 exceeds"},
      {"A^T cols do not span k", with(gemm, kJobTransposeA, [](Job& j) { j.a_col = kNear; j.m = 2; j.k = 8; }),
       nullptr},
      {"B^T rows span n", with(gemm, kJobTransposeB, [](Job& j) { j.b_row = kNear; j.n = 8; j.k = 2; }),
       "JOB: b_row 1048572 + n 8 exceeds"},
      {"B^T rows do not span k", with(gemm, kJobTransposeB, [](Job& j) { j.b_row = kNear; j.n = 2; j.k = 8; }),
       nullptr},
      {"B^T cols span k", with(gemm, kJobTransposeB, [](Job& j) { j.b_col = kNear; j.n = 2; j.k = 8; }),
       "JOB: b_col 1048572 + k 8 exceeds"},
      {"B^T cols do not span n", with(gemm, kJobTransposeB, [](Job& j) { j.b_col = kNear; j.n = 8; j.k = 2; }),
       nullptr},
      {"B plain is unaffected by A^T", with(gemm, kJobTransposeA, [](Job& j) { j.b_row = kNear; j.k = 8; }),
       "JOB: b_row 1048572 + k 8 exceeds"},
      {"ADD_SCALED A^T rows span n",
       with(add_scaled, kJobTransposeA, [](Job& j) { j.a_row = kNear; j.m = 2; j.n = 8; }),
       "JOB: a_row 1048572 + n 8 exceeds"},
      {"ADD_SCALED A^T rows do not span m",
       with(add_scaled, kJobTransposeA, [](Job& j) { j.a_row = kNear; j.m = 8; j.n = 2; }), nullptr},
      {"ADD_SCALED A^T cols span m",
       with(add_scaled, kJobTransposeA, [](Job& j) { j.a_col = kNear; j.m = 8; j.n = 2; }),
       "JOB: a_col 1048572 + m 8 exceeds"},
      {"ADD_SCALED A^T cols do not span n",
       with(add_scaled, kJobTransposeA, [](Job& j) { j.a_col = kNear; j.m = 2; j.n = 8; }), nullptr},
      {"k 0 is refused transposed too", with(gemm, kJobTransposeA | kJobTransposeB, [](Job& j) { j.k = 0; }),
       "JOB: k 0 out of range 1..1048576"},
      {"C is never transposed",
       with(gemm, kJobTransposeA | kJobTransposeB, [](Job& j) { j.c_row = kNear; j.m = 8; j.n = 2; j.k = 2; }),
       "JOB: c_row 1048572 + m 8 exceeds"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Status status = decode_status(MessageType::kJob, encode_gemm_payload(c.job));
    if (c.refusal == nullptr) {
      EXPECT_TRUE(status.is_ok()) << status.to_string();
      // The same offsets without the flag put the block beyond the limit.
      Job plain = c.job;
      plain.flags = 0;
      EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(plain)), StatusCode::kProtocolError,
                             "exceeds max tile dim"));
    } else {
      EXPECT_TRUE(fails_with(status, StatusCode::kProtocolError, c.refusal));
    }
  }

  // ADD_SCALED's B is one scalar: there is no B^T to read.
  for (uint32_t flags : {kJobTransposeB, kJobTransposeA | kJobTransposeB}) {
    Job refused = add_scaled;
    refused.flags = flags;
    EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(refused)), StatusCode::kProtocolError,
                           "JOB: flags " + std::string(flags == kJobTransposeB ? "0x00000020" : "0x00000030") +
                               " set transpose_b 0x00000020, which op 2 (add_scaled) refuses"));
  }
  // Bit 6 is the first unknown one: a worker that predates a flag refuses it the same way.
  Job unknown = gemm;
  unknown.flags = kJobTransposeA | (1u << 6);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_gemm_payload(unknown)), StatusCode::kProtocolError,
                         "JOB: flags 0x00000050 has unknown bits 0x00000040"));
}

TEST(GemmValidation, CreditFields) {
  std::vector<std::byte> pad = encode_gemm_payload(Credit{1, 1, 0.5});
  pad[13] = std::byte{1};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kCredit, pad), StatusCode::kProtocolError, "CREDIT: pad"));
  EXPECT_TRUE(fails_with(decode_status(MessageType::kCredit, encode_gemm_payload(Credit{1, 1, -2.0})),
                         StatusCode::kProtocolError, "CREDIT: compute_seconds -2"));
}

TEST(GemmValidation, ReleaseCount) {
  Limits small;
  small.max_release_tiles = 2;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kRelease, encode_gemm_payload(Release{{1, 2, 3}}), small),
                         StatusCode::kProtocolError, "RELEASE: count 3 out of range 0..2"));
  std::vector<std::byte> inconsistent = encode_gemm_payload(Release{{1, 2, 3}});
  put_le(inconsistent, 0, 2, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kRelease, inconsistent), StatusCode::kProtocolError,
                         "RELEASE: count 2 needs a payload of 12 bytes, got 16"));
}

TEST(GemmPayload, StatsRoundTripsWithItsLayout) {
  const Stats stats{1.5, 0.25, 2.75, 1.25, 0x0102030405060708ull, 9, 0xFFFFFFFFFFFFFFFFull};
  const std::vector<std::byte> payload = encode_gemm_payload(stats);
  ASSERT_EQ(payload.size(), 56u);
  // f64 session_seconds | f64 io_cpu | f64 compute_cpu | f64 compute_wall | u64 jobs | u64 in | u64 out
  const double doubles[] = {1.5, 0.25, 2.75, 1.25};
  for (std::size_t i = 0; i < 4; ++i) {
    double value = 0.0;
    std::memcpy(&value, payload.data() + 8 * i, sizeof value);  // the host is little-endian
    EXPECT_EQ(value, doubles[i]) << "field " << i;
  }
  EXPECT_EQ(std::to_integer<int>(payload[32]), 0x08);  // jobs, least significant byte first
  EXPECT_EQ(std::to_integer<int>(payload[39]), 0x01);
  EXPECT_EQ(std::to_integer<int>(payload[40]), 9);
  EXPECT_EQ(std::to_integer<int>(payload[55]), 0xFF);
  Result<GemmMessage> decoded = decode_gemm_payload(static_cast<uint16_t>(MessageType::kStats), payload, Limits{});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(std::get<Stats>(*decoded), stats);

  EXPECT_TRUE(encode_gemm_payload(StatsRequest{}).empty());
  Result<GemmMessage> request = decode_gemm_payload(static_cast<uint16_t>(MessageType::kStatsRequest), {}, Limits{});
  ASSERT_TRUE(request) << request.status().to_string();
  EXPECT_TRUE(std::holds_alternative<StatsRequest>(*request));
}

TEST(GemmValidation, StatsLengthAndValues) {
  const std::vector<std::byte> valid = encode_gemm_payload(Stats{1.0, 0.5, 1.5, 1.0, 3, 100, 200});
  ASSERT_TRUE(decode_status(MessageType::kStats, valid).is_ok());

  std::vector<std::byte> short_payload(valid.begin(), valid.end() - 1);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStats, short_payload), StatusCode::kProtocolError,
                         "STATS: truncated at bytes_sent"));
  std::vector<std::byte> long_payload = valid;
  long_payload.push_back(std::byte{0});
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStats, long_payload), StatusCode::kProtocolError,
                         "STATS: 1 trailing bytes"));
  EXPECT_TRUE(fails_with(decode_status(MessageType::kStats, {}), StatusCode::kProtocolError,
                         "STATS: truncated at session_seconds"));

  const char* fields[] = {"session_seconds", "io_cpu_seconds", "compute_cpu_seconds", "compute_wall_seconds"};
  for (std::size_t field = 0; field < std::size(fields); ++field) {
    for (double bad : {-1.0, -1e-300, std::nan(""), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
      std::vector<std::byte> payload = valid;
      std::memcpy(payload.data() + 8 * field, &bad, sizeof bad);
      SCOPED_TRACE(std::string(fields[field]) + " = " + std::to_string(bad));
      EXPECT_TRUE(fails_with(decode_status(MessageType::kStats, payload), StatusCode::kProtocolError,
                             std::string("STATS: ") + fields[field]));
    }
  }

  EXPECT_TRUE(fails_with(decode_status(MessageType::kStatsRequest, std::vector<std::byte>(1)),
                         StatusCode::kProtocolError, "STATS_REQUEST: 1 trailing bytes"));
}

// --- Lying frames must not cost memory ---------------------------------------------------

// --- Truncation, trailing bytes and types that are not the codec's -----------------------

TEST(GemmPayload, EveryTruncationIsRejected) {
  for (const testing::SamplePayload& sample : sample_payloads()) {
    SCOPED_TRACE(transport::message_type_name(sample.type));
    for (std::size_t length = 0; length < sample.payload.size(); ++length) {
      std::vector<std::byte> truncated(sample.payload.begin(), sample.payload.begin() + static_cast<std::ptrdiff_t>(length));
      const Status status = decode_gemm_payload(sample.type, truncated, Limits{}).status();
      EXPECT_EQ(status.code(), StatusCode::kProtocolError) << "length " << length << ": " << status.to_string();
    }
  }
}

TEST(GemmPayload, TrailingBytesAreRejected) {
  for (const testing::SamplePayload& sample : sample_payloads()) {
    SCOPED_TRACE(transport::message_type_name(sample.type));
    for (std::size_t extra : {1u, 7u, 8u}) {
      std::vector<std::byte> longer = sample.payload;
      longer.resize(longer.size() + extra, std::byte{0});
      const Status status = decode_gemm_payload(sample.type, longer, Limits{}).status();
      EXPECT_EQ(status.code(), StatusCode::kProtocolError) << "+" << extra << ": " << status.to_string();
    }
  }
}

TEST(GemmPayload, TypesThatAreNotTheGemmServicesAreRejected) {
  EXPECT_TRUE(fails_with(decode_gemm_payload(0, {}, Limits{}).status(), StatusCode::kProtocolError,
                         "UNKNOWN(0) is not a message of the GEMM service"));
  const uint16_t unknown = transport::kLastMessageType + 1;
  EXPECT_TRUE(fails_with(decode_gemm_payload(unknown, {}, Limits{}).status(), StatusCode::kProtocolError,
                         "UNKNOWN(" + std::to_string(unknown) + ") is not a message of the GEMM service"));
  // The session's, the graph service's, the forwarding codec's and the handshake's HELD.
  for (uint16_t type = 1; type <= transport::kLastMessageType; ++type) {
    if (is_gemm_message(type)) continue;
    EXPECT_TRUE(fails_with(decode_gemm_payload(type, {}, Limits{}).status(), StatusCode::kProtocolError,
                           transport::message_type_name(type) + " is not a message of the GEMM service"));
  }
}

// --- Lying frames must not cost memory ---------------------------------------------------

TEST(GemmAllocation, LyingPayloadsAreRejectedWithoutAllocation) {
  std::vector<tessera::testing::LyingPayload> cases;

  // STORE prefix claiming a 1e6 x 1e6 tile, in a 64-byte payload.
  std::vector<std::byte> store(64, std::byte{0});
  put_le(store, 0, 1, 4);
  put_le(store, 4, 1000000, 4);
  put_le(store, 8, 1000000, 4);
  cases.push_back({"store 1e6 x 1e6", MessageType::kStore, store, "needs 8000000000016 bytes"});

  std::vector<std::byte> result(64, std::byte{0});
  put_le(result, 20, 1000000, 4);
  put_le(result, 24, 1000000, 4);
  cases.push_back({"result 1e6 x 1e6", MessageType::kResult, result, "needs 8000000000032 bytes"});

  std::vector<std::byte> echo = encode_gemm_payload(Probe{ProbeKind::kEcho, 0, 0.0, {1, 2}});
  put_le(echo, 16, 200u << 20, 4);
  cases.push_back({"echo beyond payload", MessageType::kProbe, echo, "PROBE: truncated at echo"});

  std::vector<std::byte> release = encode_gemm_payload(Release{{1}});
  put_le(release, 0, 60000, 4);
  cases.push_back({"release count beyond payload", MessageType::kRelease, release, "needs a payload of 240004"});

  tessera::testing::expect_refused_before_allocating(cases, [](uint16_t type, const std::vector<std::byte>& payload) {
    return decode_gemm_payload(type, payload, Limits{}).status();
  });
}

TEST(GemmSizes, ExportedSizesAreTheEncodedSizes) {
  // Code outside the codec sizes buffers and predicts traffic with these; they must not drift.
  EXPECT_EQ(encode_gemm_payload(Job{}).size(), kJobPayloadBytes);
  EXPECT_EQ(encode_gemm_payload(Credit{}).size(), kCreditPayloadBytes);
  EXPECT_EQ(encode_gemm_payload(Stats{}).size(), kStatsPayloadBytes);
  EXPECT_EQ(encode_gemm_payload(Probe{ProbeKind::kEcho, 0, 0.0, {1, 2, 3}}).size(), kProbeFixedBytes + 3);
  EXPECT_EQ(encode_gemm_payload(ProbeResult{ProbeKind::kEcho, 0, 0, 0.0, 0.0, {1, 2}}).size(), kProbeResultFixedBytes + 2);
  EXPECT_EQ(encode_gemm_payload(Release{{1, 2, 3}}).size(), release_payload_bytes(3));
  EXPECT_EQ(encode_gemm_payload(StatsRequest{}).size(), 0u);
  const TilePrefix tile{1, 3, 4};
  EXPECT_EQ(encode_store_prefix(tile).size(), kTilePrefixSize);
  EXPECT_EQ(encode_result_prefix(1, 0.0, tile).size(), kResultPrefixSize);
  EXPECT_EQ(store_payload_bytes(tile), kTilePrefixSize + 8 * 12);
  EXPECT_EQ(result_payload_bytes(tile), kResultPrefixSize + 8 * 12);
}

TEST(GemmSizes, StoreHeaderFramesAStoreOfItsTile) {
  const TilePrefix tile{5, 6, 7};
  const auto bytes = encode_store_header(tile);
  Result<FrameHeader> header = transport::decode_header(bytes, transport::Limits{});
  ASSERT_TRUE(header) << header.status().to_string();
  EXPECT_EQ(header->type, static_cast<uint16_t>(MessageType::kStore));
  EXPECT_EQ(header->payload_length, store_payload_bytes(tile));
  EXPECT_TRUE(check_gemm_payload_length(header->type, header->payload_length, Limits{}).is_ok());
}

// --- Stored broken frames ----------------------------------------------------------------

using tessera::testing::read_instance;

// Decodes a whole GEMM frame as a reader would: header, the codec's length check, then exactly
// payload_length bytes.
Status decode_frame(const std::vector<std::byte>& frame) {
  if (frame.size() < transport::kHeaderSize) return protocol_error("frame shorter than its header");
  Result<FrameHeader> header = transport::decode_header(header_span(frame), transport::Limits{});
  if (!header) return header.status();
  TESSERA_RETURN_IF_ERROR(check_gemm_payload_length(header->type, header->payload_length, Limits{}));
  if (frame.size() - transport::kHeaderSize != header->payload_length) {
    return protocol_error("frame has " + std::to_string(frame.size() - transport::kHeaderSize) +
                          " payload bytes, header says " + std::to_string(header->payload_length));
  }
  std::vector<std::byte> payload(frame.begin() + transport::kHeaderSize, frame.end());
  return decode_gemm_payload(header->type, payload, Limits{}).status();
}

TEST(GemmInstances, BrokenFramesAreRejectedWithTheirReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"huge_length.bin", "exceeds the limit"},
      {"store_lying_dims.bin", "does not match tile 1000000 x 1000000"},
      {"job_unknown_flags.bin", "JOB: flags 0x00000100 has unknown bits"},
      {"probe_nan_seconds.bin", "PROBE: min_seconds nan"},
      {"release_count_mismatch.bin", "RELEASE: count 3 needs a payload of 16 bytes, got 12"},
  };
  for (const auto& [file, expected] : cases) {
    SCOPED_TRACE(file);
    EXPECT_TRUE(fails_with(decode_frame(read_instance(file)), StatusCode::kProtocolError, expected));
  }
  for (const auto& [file, expected] : {std::pair{"store_bad_crc.bin", "STORE tile 5 (2 x 3): checksum mismatch"},
                                      std::pair{"result_bad_crc.bin", "RESULT tile 8 (2 x 2): checksum mismatch"}}) {
    SCOPED_TRACE(file);
    EXPECT_TRUE(fails_with(decode_frame(read_instance(file)), StatusCode::kNetworkError, expected));
  }
  for (const char* file : {"valid_job.bin", "valid_store.bin", "valid_result.bin"}) {
    const Status valid = decode_frame(read_instance(file));
    EXPECT_TRUE(valid.is_ok()) << file << ": " << valid.to_string();
  }
  // A session frame is not the codec's.
  EXPECT_TRUE(fails_with(decode_frame(read_instance("valid_hello.bin")), StatusCode::kProtocolError,
                         "HELLO is not a message of the GEMM service"));
}

TEST(GemmInstances, TheFuzzCorpusSeedsOfEveryGemmTypeDecode) {
  // tests/fuzz/make_corpus.py encodes one valid frame per message type with its own encoder (JOB
  // in each op and with each transpose flag); the GEMM ones must still decode, so the fuzzer starts
  // from valid frames. frame_* seeds are the instance frames above, graph_* ones the graph codec's,
  // forward_* the forwarding codec's (forward_codec_test.cpp), the session's seeds transport's
  // (tests/transport/protocol_test.cpp).
  std::set<uint16_t> types;
  int seeds = 0;
  for (const auto& [name, frame] : tessera::testing::encoder_corpus_seeds()) {
    ASSERT_GE(frame.size(), transport::kHeaderSize) << name;
    Result<FrameHeader> header = transport::decode_header(header_span(frame), transport::Limits{});
    ASSERT_TRUE(header) << name << ": " << header.status().to_string();
    const uint16_t type = header->type;
    if (!is_gemm_message(type)) continue;
    SCOPED_TRACE(name);
    EXPECT_TRUE(decode_frame(frame).is_ok()) << decode_frame(frame).to_string();
    types.insert(type);
    ++seeds;
  }
  EXPECT_EQ(types.size(), std::variant_size_v<GemmMessage>) << "a seed per GEMM type";
  EXPECT_GE(seeds, static_cast<int>(std::variant_size_v<GemmMessage>) + 5) << "and JOB in each op and transpose";
}

}  // namespace
}  // namespace tessera::gemm
