#include "tessera/transport/protocol.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "alloc_counter.hpp"
#include "frame_samples.hpp"

namespace tessera::transport {
namespace {

using testing::AllocationCounter;
using testing::kSmallAllocation;
using testing::put_le;
using testing::sample_messages;
using testing::sample_payloads;

std::span<const std::byte, kHeaderSize> header_span(const std::vector<std::byte>& bytes) {
  return std::span<const std::byte, kHeaderSize>(bytes.data(), kHeaderSize);
}

std::vector<std::byte> header_bytes(const FrameHeader& header) {
  const auto bytes = encode_header(header);
  return {bytes.begin(), bytes.end()};
}

::testing::AssertionResult fails_with(const Status& status, StatusCode code, std::string_view needle) {
  if (status.is_ok()) return ::testing::AssertionFailure() << "expected failure containing '" << needle << "', got OK";
  if (status.code() != code || status.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "expected " << status_code_name(code) << " containing '" << needle
                                         << "', got " << status.to_string();
  }
  return ::testing::AssertionSuccess();
}

Status decode_status(MessageType type, const std::vector<std::byte>& payload, const Limits& limits = {}) {
  return decode_payload(static_cast<uint16_t>(type), payload, limits).status();
}

// --- Header ------------------------------------------------------------------------------

TEST(ProtocolHeader, RoundTripsAllFields) {
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kJob);
  header.flags = 0xA5A5A5A5u;
  header.payload_length = 72;
  header.request_id = 0xFEDCBA9876543210ull;
  Result<FrameHeader> decoded = decode_header(encode_header(header), Limits{});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(decoded->version, kProtocolVersion);
  EXPECT_EQ(decoded->type, header.type);
  EXPECT_EQ(decoded->flags, header.flags);
  EXPECT_EQ(decoded->payload_length, header.payload_length);
  EXPECT_EQ(decoded->request_id, header.request_id);
}

TEST(ProtocolHeader, LayoutIsLittleEndian) {
  FrameHeader header;
  header.type = 0x0007;
  header.flags = 0x04030201u;
  header.payload_length = 0x0000000000000110ull;
  header.request_id = 0x1122334455667788ull;
  const auto bytes = encode_header(header);
  const std::array<uint8_t, kHeaderSize> expected = {
      'T', 'S', 'R', 'A', 2, 0, 7, 0, 1, 2, 3, 4, 0, 0, 0, 0,  //
      0x10, 0x01, 0, 0, 0, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
  for (std::size_t i = 0; i < kHeaderSize; ++i) EXPECT_EQ(std::to_integer<uint8_t>(bytes[i]), expected[i]) << "byte " << i;
}

TEST(ProtocolHeader, RejectsBadMagicVersionReservedAndType) {
  FrameHeader valid;
  valid.type = static_cast<uint16_t>(MessageType::kBye);
  std::vector<std::byte> bytes = header_bytes(valid);

  std::vector<std::byte> bad_magic = bytes;
  bad_magic[0] = std::byte{'G'};
  EXPECT_TRUE(fails_with(decode_header(header_span(bad_magic), {}).status(), StatusCode::kProtocolError, "magic"));

  for (uint16_t version : {uint16_t{0}, uint16_t{1}, uint16_t{3}}) {
    std::vector<std::byte> bad_version = bytes;
    put_le(bad_version, 4, version, 2);
    EXPECT_TRUE(fails_with(decode_header(header_span(bad_version), {}).status(), StatusCode::kProtocolError,
                           "peer speaks Tessera protocol v" + std::to_string(version) + ", this build speaks v2"));
  }

  std::vector<std::byte> bad_reserved = bytes;
  put_le(bad_reserved, 12, 1, 4);
  EXPECT_TRUE(fails_with(decode_header(header_span(bad_reserved), {}).status(), StatusCode::kProtocolError, "reserved"));

  for (uint16_t type : {uint16_t{0}, uint16_t{kLastMessageType + 1}, uint16_t{0xFFFF}}) {
    std::vector<std::byte> bad_type = bytes;
    put_le(bad_type, 6, type, 2);
    EXPECT_TRUE(fails_with(decode_header(header_span(bad_type), {}).status(), StatusCode::kProtocolError,
                           "type " + std::to_string(type) + " unknown"));
  }
}

TEST(ProtocolHeader, RejectsPayloadLengthsTheTypeCannotHave) {
  auto check = [](MessageType type, uint64_t length, bool ok) {
    FrameHeader header;
    header.type = static_cast<uint16_t>(type);
    header.payload_length = length;
    Result<FrameHeader> decoded = decode_header(encode_header(header), Limits{});
    EXPECT_EQ(decoded.is_ok(), ok) << message_type_name(header.type) << " length " << length << ": "
                                   << decoded.status().to_string();
  };
  check(MessageType::kAuth, 64, true);
  check(MessageType::kAuth, 65, false);
  check(MessageType::kAuthOk, 31, false);
  check(MessageType::kJob, 72, true);
  check(MessageType::kJob, 1 << 20, false);
  check(MessageType::kBye, 0, true);
  check(MessageType::kBye, 1, false);
  check(MessageType::kHello, 72 + 3 * 4096 + 4, true);  // the strings at their limit and a load
  check(MessageType::kHello, 72 + 3 * 4096 + 5, false);
  check(MessageType::kHello, 71, false);
  check(MessageType::kError, 1 << 20, false);
  check(MessageType::kStore, 24, true);
  check(MessageType::kStore, 23, false);
  check(MessageType::kStore, Limits{}.max_payload_bytes, true);
  check(MessageType::kStore, Limits{}.max_payload_bytes + 1, false);
  check(MessageType::kStatsRequest, 0, true);
  check(MessageType::kStatsRequest, 1, false);
  check(MessageType::kStats, 56, true);
  check(MessageType::kStats, 55, false);
  check(MessageType::kStats, 57, false);
  // GRAPH_* layouts are the graph codec's; the header bounds only their length.
  check(MessageType::kGraphLoad, 0, true);
  check(MessageType::kGraphLoad, Limits{}.max_payload_bytes, true);
  check(MessageType::kGraphLoad, Limits{}.max_payload_bytes + 1, false);
  check(MessageType::kGraphDeltas, 1 << 20, true);
}

TEST(ProtocolHeader, HugeClaimedLengthIsRejectedWithoutAllocation) {
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  header.payload_length = 1ull << 63;
  const auto bytes = encode_header(header);
  AllocationCounter counter;
  Result<FrameHeader> decoded = decode_header(bytes, Limits{});
  EXPECT_LT(counter.bytes(), kSmallAllocation);
  EXPECT_TRUE(fails_with(decoded.status(), StatusCode::kProtocolError,
                         "STORE: payload_length 9223372036854775808 exceeds the limit of 2147483648"));
}

// --- Payload round trips -----------------------------------------------------------------

TEST(ProtocolPayload, EveryNonBulkMessageRoundTrips) {
  for (const Message& message : sample_messages()) {
    const auto type = static_cast<uint16_t>(message_type(message));
    SCOPED_TRACE(message_type_name(type));
    const std::vector<std::byte> payload = encode_payload(message);
    FrameHeader header;
    header.type = type;
    header.payload_length = payload.size();
    EXPECT_TRUE(decode_header(encode_header(header), Limits{})) << "header bounds must admit a valid payload";
    Result<Message> decoded = decode_payload(type, payload, Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(decoded->index(), message.index());
    EXPECT_TRUE(testing::same_message(*decoded, message));
    EXPECT_EQ(encode_payload(*decoded), payload);
  }
}

TEST(ProtocolPayload, MessageTypesAndNames) {
  const std::vector<Message> all = {Hello{},  Auth{},       AuthOk{}, Probe{}, ProbeResult{}, Store{},
                                    Job{},    Credit{},     ResultTile{}, Error{}, Bye{},    Release{},
                                    StatsRequest{}, Stats{}};
  const char* names[] = {"HELLO", "AUTH",   "AUTH_OK", "PROBE", "PROBE_RESULT", "STORE",         "JOB",
                         "CREDIT", "RESULT", "ERROR",  "BYE",   "RELEASE",      "STATS_REQUEST", "STATS"};
  ASSERT_EQ(all.size(), std::size(names));
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(message_type(all[i])), i + 1);
    EXPECT_EQ(message_type_name(static_cast<uint16_t>(i + 1)), names[i]);
  }
  EXPECT_EQ(message_type_name(0), "UNKNOWN(0)");
  const char* graph_names[] = {"GRAPH_LOAD",          "GRAPH_READY",  "GRAPH_START",
                               "GRAPH_STEP",          "GRAPH_STEP_DONE", "GRAPH_PROGRESS_REQUEST",
                               "GRAPH_PROGRESS",      "GRAPH_VALUES_REQUEST", "GRAPH_VALUES",
                               "GRAPH_STOP",          "GRAPH_PEER_HELLO", "GRAPH_DELTAS",
                               "GRAPH_PROBE",         "GRAPH_PROBE_RESULT"};
  ASSERT_EQ(std::size(graph_names), std::size_t{kFirstForwardMessageType} - kFirstGraphMessageType);
  for (std::size_t i = 0; i < std::size(graph_names); ++i) {
    const auto type = static_cast<uint16_t>(kFirstGraphMessageType + i);
    EXPECT_EQ(message_type_name(type), graph_names[i]);
    EXPECT_TRUE(is_graph_message(type));
    // The probe has its own bit: it came after the rest of the graph service.
    const bool probe = type >= static_cast<uint16_t>(MessageType::kGraphProbe);
    EXPECT_EQ(capability_of_message(type), probe ? kCapabilityGraphProbe : kCapabilityGraph);
  }
  EXPECT_FALSE(is_graph_message(kLastTransportMessageType));
  EXPECT_FALSE(is_graph_message(kFirstForwardMessageType));
  const char* forward_names[] = {"FORWARD_SETUP", "FORWARD_READY", "STORED", "SEND_TILE", "SENT"};
  ASSERT_EQ(std::size(forward_names), std::size_t{kLastMessageType} - kFirstForwardMessageType);
  for (std::size_t i = 0; i < std::size(forward_names); ++i) {
    const auto type = static_cast<uint16_t>(kFirstForwardMessageType + i);
    EXPECT_EQ(message_type_name(type), forward_names[i]);
    EXPECT_TRUE(is_forward_message(type));
    // SEND_TILE and SENT have their own bit: they came after the chain's messages.
    const bool tile_send = type >= static_cast<uint16_t>(MessageType::kSendTile);
    EXPECT_EQ(capability_of_message(type), tile_send ? kCapabilityTileSend : kCapabilityForward);
  }
  // HELD, the handshake's, came last: no service's.
  EXPECT_EQ(message_type_name(kLastMessageType), "HELD");
  EXPECT_FALSE(is_forward_message(kLastMessageType));
  EXPECT_FALSE(is_graph_message(kLastMessageType));
  EXPECT_EQ(capability_of_message(kLastMessageType), 0u);
  EXPECT_FALSE(is_forward_message(kLastMessageType + 1));
  EXPECT_FALSE(is_graph_message(kLastMessageType + 1));
  EXPECT_EQ(capability_of_message(static_cast<uint16_t>(MessageType::kStore)), kCapabilityGemm);
  EXPECT_EQ(capability_of_message(static_cast<uint16_t>(MessageType::kBye)), 0u);
  EXPECT_EQ(message_type_name(kLastMessageType + 1), "UNKNOWN(" + std::to_string(kLastMessageType + 1) + ")");
  EXPECT_EQ(message_type_name(77), "UNKNOWN(77)");
}

TEST(ProtocolPayload, HelloBytesAreLittleEndian) {
  Hello hello;
  hello.worker_version = "v";
  hello.cores = 0x01020304;
  hello.capabilities = 0x0807060504030201ull;
  const std::vector<std::byte> payload = encode_payload(hello);
  ASSERT_EQ(payload.size(), 72u + 1);
  EXPECT_EQ(std::to_integer<int>(payload[0]), 2);  // protocol_version
  EXPECT_EQ(std::to_integer<int>(payload[2]), 1);  // worker_version length
  EXPECT_EQ(std::to_integer<char>(payload[4]), 'v');
  EXPECT_EQ(std::to_integer<int>(payload[9]), 4);  // cores, low byte first
  EXPECT_EQ(std::to_integer<int>(payload[12]), 1);
  // capabilities: after cores, threads, memory_bytes and tile_memory_cap; before the challenge.
  const std::size_t capabilities_at = 9 + 4 + 4 + 8 + 8;
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(std::to_integer<int>(payload[capabilities_at + i]), static_cast<int>(i + 1)) << "capability byte " << i;
  }
  EXPECT_EQ(payload.size() - (capabilities_at + 8), kChallengeSize);
}

TEST(ProtocolPayload, StoreRoundTripsAndViewsThePayload) {
  const TilePrefix tile{7, 13, 11};
  const std::vector<double> data = testing::sample_tile_data(tile);
  const std::vector<std::byte> payload = testing::store_payload(tile, data);
  ASSERT_EQ(payload.size(), store_payload_bytes(tile));
  EXPECT_EQ(store_payload_bytes(tile), 16u + 8u * 13 * 11);

  Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kStore), payload, Limits{});
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

TEST(ProtocolPayload, ResultRoundTripsAndViewsThePayload) {
  const TilePrefix tile{9, 1, 17};
  const std::vector<double> data = testing::sample_tile_data(tile);
  const std::vector<std::byte> payload = testing::result_payload(55, 2.5, tile, data);
  ASSERT_EQ(payload.size(), result_payload_bytes(tile));

  Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kResult), payload, Limits{});
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

TEST(ProtocolPayload, MisalignedBulkPayloadIsRefusedNotMisread) {
  const TilePrefix tile{1, 2, 2};
  const std::vector<std::byte> payload = testing::store_payload(tile, testing::sample_tile_data(tile));
  std::vector<std::byte> shifted(payload.size() + 1);
  std::memcpy(shifted.data() + 1, payload.data(), payload.size());
  const Status status =
      decode_payload(static_cast<uint16_t>(MessageType::kStore), std::span(shifted).subspan(1), Limits{}).status();
  EXPECT_TRUE(fails_with(status, StatusCode::kInvalidArgument, "aligned"));
}

TEST(ProtocolPayload, EncoderCutsOverlongStringsAtACharacterBoundary) {
  std::string message(4095, 'x');
  message.append("\xcf\x80tail");  // a two-byte character across the 4096-byte limit
  Error error{ErrorCode::kInternal, std::move(message)};
  Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kError), encode_payload(error), {});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(std::get<Error>(*decoded).message, std::string(4095, 'x'));
}

// --- Truncation and trailing bytes -------------------------------------------------------

TEST(ProtocolPayload, EveryTruncationIsRejected) {
  for (const testing::SamplePayload& sample : sample_payloads()) {
    SCOPED_TRACE(message_type_name(sample.type));
    // A HELLO cut exactly before its optional load is a HELLO without one, as older workers send.
    std::optional<std::size_t> valid_shorter;
    if (sample.type == static_cast<uint16_t>(MessageType::kHello) &&
        std::get<Hello>(*decode_payload(sample.type, sample.payload, Limits{})).load_milli) {
      valid_shorter = sample.payload.size() - kHelloLoadBytes;
    }
    for (std::size_t length = 0; length < sample.payload.size(); ++length) {
      std::vector<std::byte> truncated(sample.payload.begin(), sample.payload.begin() + static_cast<std::ptrdiff_t>(length));
      const Status status = decode_payload(sample.type, truncated, Limits{}).status();
      if (valid_shorter == length) {
        EXPECT_TRUE(status.is_ok()) << status.to_string();
        continue;
      }
      EXPECT_EQ(status.code(), StatusCode::kProtocolError) << "length " << length << ": " << status.to_string();
    }
  }
}

TEST(ProtocolPayload, TrailingBytesAreRejected) {
  for (const testing::SamplePayload& sample : sample_payloads()) {
    SCOPED_TRACE(message_type_name(sample.type));
    for (std::size_t extra : {1u, 7u, 8u}) {
      std::vector<std::byte> longer = sample.payload;
      longer.resize(longer.size() + extra, std::byte{0});
      const Status status = decode_payload(sample.type, longer, Limits{}).status();
      EXPECT_EQ(status.code(), StatusCode::kProtocolError) << "+" << extra << ": " << status.to_string();
    }
  }
}

TEST(ProtocolPayload, UnknownTypeIsRejected) {
  EXPECT_TRUE(fails_with(decode_payload(0, {}, Limits{}).status(), StatusCode::kProtocolError, "type 0 unknown"));
  const uint16_t unknown = kLastMessageType + 1;
  EXPECT_TRUE(fails_with(decode_payload(unknown, {}, Limits{}).status(), StatusCode::kProtocolError,
                         "type " + std::to_string(unknown) + " unknown"));
}

TEST(ProtocolPayload, ForwardingPayloadsAreLeftToTheirCodec) {
  for (uint16_t type = kFirstForwardMessageType; type <= static_cast<uint16_t>(MessageType::kSent); ++type) {
    EXPECT_TRUE(fails_with(decode_payload(type, {}, Limits{}).status(), StatusCode::kProtocolError,
                           message_type_name(type) + ": forwarding payloads are decoded by forward_codec.hpp"));
  }
}

// HELD has a layout of its own, read by the client's handshake alone.
TEST(ProtocolPayload, HeldRoundTripsWithItsLayoutAndNothingElse) {
  const std::vector<std::byte> bytes = encode_held(Held{3200, 7});
  ASSERT_EQ(bytes.size(), kHeldPayloadBytes);
  EXPECT_EQ(bytes[0], std::byte{0x80});  // 3200 = 0x0C80, little-endian
  EXPECT_EQ(bytes[1], std::byte{0x0C});
  EXPECT_EQ(bytes[4], std::byte{7});
  Result<Held> decoded = decode_held(bytes);
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(*decoded, (Held{3200, 7}));
  std::vector<std::byte> longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(decode_held(longer));
  EXPECT_FALSE(decode_held(std::span(bytes).first(7)));
  EXPECT_TRUE(fails_with(decode_payload(static_cast<uint16_t>(MessageType::kHeld), bytes, Limits{}).status(),
                         StatusCode::kProtocolError, "HELD: its payload is decoded by decode_held"));
}

TEST(ProtocolPayload, GraphPayloadsAreLeftToTheGraphCodec) {
  for (uint16_t type = kFirstGraphMessageType; type < kFirstForwardMessageType; ++type) {
    EXPECT_TRUE(fails_with(decode_payload(type, {}, Limits{}).status(), StatusCode::kProtocolError,
                           message_type_name(type) + ": GRAPH_* payloads are decoded by the graph service"));
  }
}

// --- Field validation --------------------------------------------------------------------

TEST(ProtocolValidation, StoreDimensionsAndReserved) {
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

TEST(ProtocolValidation, TileSizeArithmeticDoesNotOverflow) {
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

TEST(ProtocolValidation, ResultComputeSecondsMustBeFiniteAndNonNegative) {
  const TilePrefix tile{1, 1, 1};
  for (double seconds : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const std::vector<std::byte> payload = testing::result_payload(1, seconds, tile, {1.0});
    EXPECT_TRUE(fails_with(decode_status(MessageType::kResult, payload), StatusCode::kProtocolError,
                           "RESULT: compute_seconds"));
  }
}

TEST(ProtocolValidation, ProbeFields) {
  const Probe valid{ProbeKind::kGemm, 256, 1.0, {}};
  const std::vector<std::byte> payload = encode_payload(valid);

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
    EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, encode_payload(probe)), StatusCode::kProtocolError,
                           "PROBE: min_seconds"))
        << seconds;
  }
  Limits small_echo;
  small_echo.max_echo_bytes = 4;
  const Probe echo{ProbeKind::kEcho, 0, 0.0, std::vector<uint8_t>(5)};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbe, encode_payload(echo), small_echo),
                         StatusCode::kProtocolError, "PROBE: echo_length 5 out of range 0..4"));
}

TEST(ProtocolValidation, ProbeResultFields) {
  const ProbeResult valid{ProbeKind::kGemm, 256, 3, 1.0, 4.0, {}};
  std::vector<std::byte> pad = encode_payload(valid);
  pad[14] = std::byte{9};  // second padding word
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbeResult, pad), StatusCode::kProtocolError, "pad"));
  ProbeResult negative = valid;
  negative.gflops = -1.0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kProbeResult, encode_payload(negative)), StatusCode::kProtocolError,
                         "PROBE_RESULT: gflops -1"));
}

TEST(ProtocolValidation, JobFields) {
  Job valid;
  valid.m = valid.n = valid.k = 8;
  ASSERT_TRUE(decode_payload(static_cast<uint16_t>(MessageType::kJob), encode_payload(valid), {}));

  std::vector<std::byte> op = encode_payload(valid);
  put_le(op, 8, 3, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, op), StatusCode::kProtocolError,
                         "JOB: op 3 unknown (1 = gemm_accumulate, 2 = add_scaled)"));
  put_le(op, 8, 0, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, op), StatusCode::kProtocolError, "JOB: op 0 unknown"));

  Job flags = valid;
  flags.flags = 0x40 | kJobReleaseA;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(flags)), StatusCode::kProtocolError,
                         "JOB: flags 0x00000042 has unknown bits 0x00000040"));

  Job empty = valid;
  empty.k = 0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(empty)), StatusCode::kProtocolError,
                         "JOB: k 0 out of range 1..1048576"));

  Job beyond = valid;
  beyond.a_row = (1u << 20) - 4;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(beyond)), StatusCode::kProtocolError,
                         "JOB: a_row 1048572 + m 8 exceeds"));

  Job create = valid;
  create.flags = kJobCreateOutput;
  create.c_rows = 8;
  create.c_cols = 0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(create)), StatusCode::kProtocolError,
                         "JOB: c_cols 0 out of range"));
  create.c_cols = 8;
  create.c_row = 1;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(create)), StatusCode::kProtocolError,
                         "does not fit the new c_tile of 8 x 8"));
}

// ADD_SCALED: C[m x n] += B[b_row][b_col] * A[m x n]. A's block has C's shape, B holds one entry,
// and k must be 0.
TEST(ProtocolValidation, AddScaledJobFields) {
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
  const std::vector<std::byte> payload = encode_payload(valid);
  ASSERT_EQ(payload.size(), kJobPayloadBytes);
  EXPECT_EQ(std::to_integer<int>(payload[8]), 2) << "op travels as u32 2";
  Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kJob), payload, {});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(std::get<Job>(*decoded), valid);
  EXPECT_EQ(std::get<Job>(*decoded).op, JobOp::kAddScaled);
  EXPECT_EQ(encode_payload(*decoded), payload);

  for (uint32_t k : {1u, 6u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(k);
    Job with_k = valid;
    with_k.k = k;
    EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(with_k)), StatusCode::kProtocolError,
                           "JOB: k " + std::to_string(k) + " must be 0 for op 2 (add_scaled)"));
  }
  // The same fields with op 1 need k >= 1: k = 0 is refused there, as before.
  Job gemm = valid;
  gemm.op = JobOp::kGemmAccumulate;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(gemm)), StatusCode::kProtocolError,
                         "JOB: k 0 out of range 1..1048576"));

  Job empty = valid;
  empty.n = 0;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(empty)), StatusCode::kProtocolError,
                         "JOB: n 0 out of range 1..1048576"));
  Job a_beyond = valid;
  a_beyond.a_col = (1u << 20) - 2;  // a_col + n, not a_col + k, is A's extent
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(a_beyond)), StatusCode::kProtocolError,
                         "JOB: a_col 1048574 + n 6 exceeds"));
  Job scalar_beyond = valid;
  scalar_beyond.b_row = 1u << 20;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(scalar_beyond)), StatusCode::kProtocolError,
                         "JOB: b_row 1048576 out of range 0..1048575"));
  scalar_beyond = valid;
  scalar_beyond.b_col = 0xFFFFFFFFu;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(scalar_beyond)), StatusCode::kProtocolError,
                         "JOB: b_col 4294967295 out of range"));
  Job flags = valid;
  flags.flags = 0x80;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(flags)), StatusCode::kProtocolError,
                         "JOB: flags 0x00000080 has unknown bits"));
  Job outside = valid;
  outside.c_rows = 6;  // c_row 4 + m 3 > 6
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(outside)), StatusCode::kProtocolError,
                         "does not fit the new c_tile of 6 x 6"));
}

// The transpose flags: op(A) = A^T and op(B) = B^T, read from blocks given as stored, so the
// decoder checks A's block as k x m (n x m for ADD_SCALED) and B's as n x k.
TEST(ProtocolValidation, TransposedJobFields) {
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
    const std::vector<std::byte> payload = encode_payload(transposed);
    ASSERT_EQ(payload.size(), kJobPayloadBytes);
    EXPECT_EQ(std::to_integer<uint32_t>(payload[12]), flags) << "flags travel as u32 at offset 12";
    Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kJob), payload, {});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(std::get<Job>(*decoded), transposed);
    EXPECT_EQ(encode_payload(*decoded), payload);
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
    const Status status = decode_status(MessageType::kJob, encode_payload(c.job));
    if (c.refusal == nullptr) {
      EXPECT_TRUE(status.is_ok()) << status.to_string();
      // The same offsets without the flag put the block beyond the limit.
      Job plain = c.job;
      plain.flags = 0;
      EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(plain)), StatusCode::kProtocolError,
                             "exceeds max tile dim"));
    } else {
      EXPECT_TRUE(fails_with(status, StatusCode::kProtocolError, c.refusal));
    }
  }

  // ADD_SCALED's B is one scalar: there is no B^T to read.
  for (uint32_t flags : {kJobTransposeB, kJobTransposeA | kJobTransposeB}) {
    Job refused = add_scaled;
    refused.flags = flags;
    EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(refused)), StatusCode::kProtocolError,
                           "JOB: flags " + std::string(flags == kJobTransposeB ? "0x00000020" : "0x00000030") +
                               " set transpose_b 0x00000020, which op 2 (add_scaled) refuses"));
  }
  // Bit 6 is the first unknown one: a worker that predates a flag refuses it the same way.
  Job unknown = gemm;
  unknown.flags = kJobTransposeA | (1u << 6);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kJob, encode_payload(unknown)), StatusCode::kProtocolError,
                         "JOB: flags 0x00000050 has unknown bits 0x00000040"));
}

TEST(ProtocolValidation, CreditFields) {
  std::vector<std::byte> pad = encode_payload(Credit{1, 1, 0.5});
  pad[13] = std::byte{1};
  EXPECT_TRUE(fails_with(decode_status(MessageType::kCredit, pad), StatusCode::kProtocolError, "CREDIT: pad"));
  EXPECT_TRUE(fails_with(decode_status(MessageType::kCredit, encode_payload(Credit{1, 1, -2.0})),
                         StatusCode::kProtocolError, "CREDIT: compute_seconds -2"));
}

TEST(ProtocolValidation, ErrorCodesAndStrings) {
  for (uint32_t code : {0u, 12u, 0xFFFFFFFFu}) {
    std::vector<std::byte> payload = encode_payload(Error{ErrorCode::kBusy, "x"});
    put_le(payload, 0, code, 4);
    EXPECT_TRUE(fails_with(decode_status(MessageType::kError, payload), StatusCode::kProtocolError,
                           "ERROR: code " + std::to_string(code) + " out of range 1..11"));
  }
  Limits small;
  small.max_string_bytes = 3;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kError, encode_payload(Error{ErrorCode::kBusy, "four"}), small),
                         StatusCode::kProtocolError, "ERROR: message length 4 out of range 0..3"));
}

TEST(ProtocolValidation, HelloVersionAndStrings) {
  Hello hello = std::get<Hello>(sample_messages()[0]);
  hello.protocol_version = 1;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kHello, encode_payload(hello)), StatusCode::kProtocolError,
                         "HELLO: protocol_version 1: peer speaks Tessera protocol v1, this build speaks v2"));

  std::vector<std::byte> lying = encode_payload(Hello{});
  put_le(lying, 2, 4000, 2);  // worker_version claims 4000 bytes; the payload has 70 left
  EXPECT_TRUE(fails_with(decode_status(MessageType::kHello, lying), StatusCode::kProtocolError,
                         "HELLO: truncated at worker_version"));
}

TEST(ProtocolValidation, ReleaseCount) {
  Limits small;
  small.max_release_tiles = 2;
  EXPECT_TRUE(fails_with(decode_status(MessageType::kRelease, encode_payload(Release{{1, 2, 3}}), small),
                         StatusCode::kProtocolError, "RELEASE: count 3 out of range 0..2"));
  std::vector<std::byte> inconsistent = encode_payload(Release{{1, 2, 3}});
  put_le(inconsistent, 0, 2, 4);
  EXPECT_TRUE(fails_with(decode_status(MessageType::kRelease, inconsistent), StatusCode::kProtocolError,
                         "RELEASE: count 2 needs a payload of 12 bytes, got 16"));
}

TEST(ProtocolPayload, StatsRoundTripsWithItsLayout) {
  const Stats stats{1.5, 0.25, 2.75, 1.25, 0x0102030405060708ull, 9, 0xFFFFFFFFFFFFFFFFull};
  const std::vector<std::byte> payload = encode_payload(stats);
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
  Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kStats), payload, Limits{});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(std::get<Stats>(*decoded), stats);

  EXPECT_TRUE(encode_payload(StatsRequest{}).empty());
  Result<Message> request = decode_payload(static_cast<uint16_t>(MessageType::kStatsRequest), {}, Limits{});
  ASSERT_TRUE(request) << request.status().to_string();
  EXPECT_TRUE(std::holds_alternative<StatsRequest>(*request));
}

TEST(ProtocolValidation, StatsLengthAndValues) {
  const std::vector<std::byte> valid = encode_payload(Stats{1.0, 0.5, 1.5, 1.0, 3, 100, 200});
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

TEST(ProtocolAllocation, LyingPayloadsAreRejectedWithoutAllocation) {
  struct Case {
    const char* name;
    MessageType type;
    std::vector<std::byte> payload;
    const char* expected;
  };
  std::vector<Case> cases;

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

  std::vector<std::byte> error = encode_payload(Error{ErrorCode::kInternal, "short"});
  put_le(error, 4, 4096, 2);
  cases.push_back({"string beyond payload", MessageType::kError, error, "ERROR: truncated at message"});

  std::vector<std::byte> echo = encode_payload(Probe{ProbeKind::kEcho, 0, 0.0, {1, 2}});
  put_le(echo, 16, 200u << 20, 4);
  cases.push_back({"echo beyond payload", MessageType::kProbe, echo, "PROBE: truncated at echo"});

  std::vector<std::byte> release = encode_payload(Release{{1}});
  put_le(release, 0, 60000, 4);
  cases.push_back({"release count beyond payload", MessageType::kRelease, release, "needs a payload of 240004"});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Status status;
    uint64_t allocated = 0;
    {
      AllocationCounter counter;
      status = decode_payload(static_cast<uint16_t>(c.type), c.payload, Limits{}).status();
      allocated = counter.bytes();
    }
    EXPECT_TRUE(fails_with(status, StatusCode::kProtocolError, c.expected));
    EXPECT_LT(allocated, kSmallAllocation);
  }
}

// --- Version 2: capabilities and refusing other versions -----------------------------------

TEST(ProtocolVersion2, HelloRoundTripsItsCapabilities) {
  for (uint64_t capabilities : {uint64_t{0}, kCapabilityGemm, kCapabilityGemm | kCapabilityGraph | kCapabilityExpression,
                                kCapabilityGemm | kCapabilityExpression | kCapabilityTransposedJobs | kCapabilityTls,
                                (uint64_t{1} << 63) | kCapabilityGemm}) {
    Hello hello = std::get<Hello>(sample_messages()[0]);
    hello.capabilities = capabilities;
    const std::vector<std::byte> payload = encode_payload(hello);
    EXPECT_EQ(payload.size(),
              kHelloFixedBytes + hello.worker_version.size() + hello.arch.size() + hello.hostname.size());
    Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kHello), payload, Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    // Bits this build has no name for survive: a newer worker may host more services.
    EXPECT_EQ(std::get<Hello>(*decoded).capabilities, capabilities);
    EXPECT_EQ(std::get<Hello>(*decoded), hello);
  }
}

TEST(ProtocolVersion2, HelloRoundTripsItsLoadAndDecodesWithoutIt) {
  for (uint32_t load_milli : {0u, 420u, 3999u, UINT32_MAX}) {
    Hello hello = std::get<Hello>(sample_messages()[0]);
    hello.load_milli = load_milli;
    const std::vector<std::byte> payload = encode_payload(hello);
    EXPECT_EQ(payload.size(), encode_payload(std::get<Hello>(sample_messages()[0])).size() + kHelloLoadBytes);
    Result<Message> decoded = decode_payload(static_cast<uint16_t>(MessageType::kHello), payload, Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(std::get<Hello>(*decoded).load_milli, std::optional<uint32_t>(load_milli));
    EXPECT_EQ(std::get<Hello>(*decoded), hello);
  }
  // A worker built before the field (or one that cannot read its load) sends none: still a HELLO,
  // with no load rather than a load of 0.
  const Hello old_form = std::get<Hello>(sample_messages()[0]);
  ASSERT_FALSE(old_form.load_milli.has_value());
  Result<Message> decoded =
      decode_payload(static_cast<uint16_t>(MessageType::kHello), encode_payload(old_form), Limits{});
  ASSERT_TRUE(decoded) << decoded.status().to_string();
  EXPECT_EQ(std::get<Hello>(*decoded).load_milli, std::nullopt);
  EXPECT_EQ(std::get<Hello>(*decoded), old_form);
}

TEST(ProtocolVersion2, HelloWithAPartialLoadFieldIsRefused) {
  Hello hello = std::get<Hello>(sample_messages()[0]);
  hello.load_milli = 1500;
  const std::vector<std::byte> whole = encode_payload(hello);
  for (std::size_t cut = 1; cut < kHelloLoadBytes; ++cut) {
    SCOPED_TRACE(cut);
    const std::vector<std::byte> partial(whole.begin(), whole.end() - static_cast<std::ptrdiff_t>(cut));
    EXPECT_TRUE(fails_with(decode_status(MessageType::kHello, partial), StatusCode::kProtocolError,
                           "HELLO: truncated at load_milli"));
  }
  std::vector<std::byte> longer = whole;
  longer.push_back(std::byte{0});
  EXPECT_TRUE(fails_with(decode_status(MessageType::kHello, longer), StatusCode::kProtocolError,
                         "HELLO: 1 trailing bytes after the last field"));
}

TEST(ProtocolVersion2, CapabilityNames) {
  EXPECT_EQ(capability_names(0), "none");
  EXPECT_EQ(capability_names(kCapabilityGemm), "gemm");
  EXPECT_EQ(capability_names(kCapabilityGemm | kCapabilityGraph | kCapabilityExpression), "gemm, graph, expression");
  EXPECT_EQ(capability_names(kCapabilityGemm | kCapabilityExpression | kCapabilityTls | kCapabilityTransposedJobs),
            "gemm, expression, tls, transpose");
  // Bits are named in order; the transpose bit follows TLS's, the last one used before it.
  EXPECT_EQ(kCapabilityTransposedJobs, kCapabilityTls << 1);
  EXPECT_EQ(capability_names(kCapabilityTransposedJobs << 1), "graph-probe");
  EXPECT_EQ(capability_names(kCapabilityGraphProbe << 1), "forward");
  EXPECT_EQ(capability_names(kCapabilityForward << 1), "tile-send");
  EXPECT_EQ(capability_names(kCapabilityTileSend << 1), "bit 8");
  EXPECT_EQ(capability_names(kCapabilityGraph | (uint64_t{1} << 9)), "graph, bit 9");
}

TEST(ProtocolVersion2, HelloOfAnotherVersionIsRefusedBeforeItsLayoutIsRead) {
  // A v1 HELLO is 8 bytes shorter (no capabilities); the version must be what is reported.
  Hello hello = std::get<Hello>(sample_messages()[0]);
  hello.protocol_version = 1;
  std::vector<std::byte> v1_payload = encode_payload(hello);
  v1_payload.erase(v1_payload.end() - static_cast<std::ptrdiff_t>(kChallengeSize + 8),
                   v1_payload.end() - static_cast<std::ptrdiff_t>(kChallengeSize));
  EXPECT_TRUE(fails_with(decode_status(MessageType::kHello, v1_payload), StatusCode::kProtocolError,
                         "HELLO: protocol_version 1: peer speaks Tessera protocol v1, this build speaks v2"));
}

TEST(ProtocolVersion2, RefusalReachesAV1PeerInItsOwnVersion) {
  const std::vector<std::byte> frame = encode_version_refusal(1, version_mismatch(1));
  ASSERT_GT(frame.size(), kHeaderSize);
  // What a v1 reader checks: magic, version 1, type ERROR, length matching the rest.
  const std::array<uint8_t, 8> v1_error_start = {'T', 'S', 'R', 'A', 1, 0, 10, 0};
  for (std::size_t i = 0; i < v1_error_start.size(); ++i) {
    EXPECT_EQ(std::to_integer<uint8_t>(frame[i]), v1_error_start[i]) << "byte " << i;
  }
  EXPECT_EQ(foreign_protocol_version(header_span(frame)), std::optional<uint16_t>(1));
  uint64_t length = 0;
  std::memcpy(&length, frame.data() + 16, sizeof length);  // the host is little-endian
  ASSERT_EQ(length, frame.size() - kHeaderSize);
  const std::vector<std::byte> payload(frame.begin() + kHeaderSize, frame.end());
  Result<Message> error = decode_payload(static_cast<uint16_t>(MessageType::kError), payload, Limits{});
  ASSERT_TRUE(error) << error.status().to_string();
  EXPECT_EQ(std::get<Error>(*error).code, ErrorCode::kBadFrame);
  EXPECT_EQ(std::get<Error>(*error).message, "peer speaks Tessera protocol v1, this build speaks v2");

  // A version this build knows nothing about gets our framing, which it may understand.
  const std::vector<std::byte> newer = encode_version_refusal(7, version_mismatch(7));
  Result<FrameHeader> ours = decode_header(header_span(newer), Limits{});
  ASSERT_TRUE(ours) << ours.status().to_string();
  EXPECT_EQ(ours->type, static_cast<uint16_t>(MessageType::kError));
}

TEST(ProtocolVersion2, ExportedSizesAreTheEncodedSizes) {
  // Code outside the codec sizes buffers and predicts traffic with these; they must not drift.
  EXPECT_EQ(encode_payload(Job{}).size(), kJobPayloadBytes);
  EXPECT_EQ(encode_payload(Credit{}).size(), kCreditPayloadBytes);
  EXPECT_EQ(encode_payload(Stats{}).size(), kStatsPayloadBytes);
  EXPECT_EQ(encode_payload(Auth{}).size(), kAuthPayloadBytes);
  EXPECT_EQ(encode_payload(AuthOk{}).size(), kAuthOkPayloadBytes);
  EXPECT_EQ(encode_payload(Hello{}).size(), kHelloFixedBytes);
  EXPECT_EQ(encode_payload(Probe{ProbeKind::kEcho, 0, 0.0, {1, 2, 3}}).size(), kProbeFixedBytes + 3);
  EXPECT_EQ(encode_payload(ProbeResult{ProbeKind::kEcho, 0, 0, 0.0, 0.0, {1, 2}}).size(), kProbeResultFixedBytes + 2);
  EXPECT_EQ(encode_payload(Error{ErrorCode::kBusy, "abc"}).size(), kErrorFixedBytes + 3);
  EXPECT_EQ(encode_payload(Release{{1, 2, 3}}).size(), release_payload_bytes(3));
}

// --- Stored broken frames ----------------------------------------------------------------

std::vector<std::byte> read_instance(const std::string& name) {
  std::ifstream in(std::string(TESSERA_TEST_INSTANCES) + "/frames/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing instance frames/" << name;
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// Decodes a whole frame as a reader would: header, then exactly payload_length bytes.
Status decode_frame(const std::vector<std::byte>& frame) {
  if (frame.size() < kHeaderSize) return protocol_error("frame shorter than its header");
  Result<FrameHeader> header = decode_header(header_span(frame), Limits{});
  if (!header) return header.status();
  if (frame.size() - kHeaderSize != header->payload_length) {
    return protocol_error("frame has " + std::to_string(frame.size() - kHeaderSize) + " payload bytes, header says " +
                          std::to_string(header->payload_length));
  }
  std::vector<std::byte> payload(frame.begin() + kHeaderSize, frame.end());
  return decode_payload(header->type, payload, Limits{}).status();
}

TEST(ProtocolInstances, BrokenFramesAreRejectedWithTheirReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"http_request.bin", "magic"},
      {"version_1.bin", "peer speaks Tessera protocol v1, this build speaks v2"},
      {"unknown_type.bin", "type 99 unknown"},
      {"huge_length.bin", "exceeds the limit"},
      {"store_lying_dims.bin", "does not match tile 1000000 x 1000000"},
      {"hello_string_beyond_payload.bin", "HELLO: truncated at hostname"},
      {"hello_truncated.bin", "HELLO: truncated at challenge"},
      {"hello_partial_load.bin", "HELLO: truncated at load_milli"},
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
  for (const char* file :
       {"valid_job.bin", "valid_hello.bin", "valid_hello_load.bin", "valid_store.bin", "valid_result.bin"}) {
    const Status valid = decode_frame(read_instance(file));
    EXPECT_TRUE(valid.is_ok()) << file << ": " << valid.to_string();
  }
}

TEST(ProtocolInstances, TheFuzzCorpusSeedsOfEveryTransportTypeDecode) {
  // tests/fuzz/make_corpus.py encodes one valid frame per transport type with its own encoder
  // (HELLO with and without its load); they must still decode, so the fuzzer starts from valid
  // frames. frame_* seeds are the instance frames above, graph_* ones the graph codec's, forward_*
  // the forwarding codec's (forward_codec_test.cpp).
  const std::filesystem::path corpus =
      std::filesystem::path(TESSERA_TEST_INSTANCES) / ".." / "fuzz" / "corpus" / "fuzz_codec";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("frame_", 0) == 0 || name.rfind("graph_", 0) == 0 || name.rfind("forward_", 0) == 0) continue;
    SCOPED_TRACE(name);
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> frame(chars.size());
    std::memcpy(frame.data(), chars.data(), chars.size());
    EXPECT_TRUE(decode_frame(frame).is_ok()) << decode_frame(frame).to_string();
    ++seeds;
  }
  EXPECT_GE(seeds, static_cast<int>(kLastTransportMessageType) + 1) << "a seed per type, and HELLO with a load";
}

TEST(ProtocolInstances, ValidHelloCarriesItsCapabilitiesAndV1IsRecognised) {
  const std::vector<std::byte> hello_frame = read_instance("valid_hello.bin");
  ASSERT_GE(hello_frame.size(), kHeaderSize);
  Result<FrameHeader> header = decode_header(header_span(hello_frame), Limits{});
  ASSERT_TRUE(header) << header.status().to_string();
  const std::vector<std::byte> payload(hello_frame.begin() + kHeaderSize, hello_frame.end());
  Result<Message> hello = decode_payload(header->type, payload, Limits{});
  ASSERT_TRUE(hello) << hello.status().to_string();
  EXPECT_EQ(std::get<Hello>(*hello).capabilities, kCapabilityGemm);
  EXPECT_EQ(std::get<Hello>(*hello).hostname, "pi3");
  EXPECT_EQ(std::get<Hello>(*hello).load_milli, std::nullopt) << "written before HELLO carried a load";

  const std::vector<std::byte> loaded_frame = read_instance("valid_hello_load.bin");
  ASSERT_GE(loaded_frame.size(), kHeaderSize);
  const std::vector<std::byte> loaded_payload(loaded_frame.begin() + kHeaderSize, loaded_frame.end());
  Result<Message> loaded = decode_payload(static_cast<uint16_t>(MessageType::kHello), loaded_payload, Limits{});
  ASSERT_TRUE(loaded) << loaded.status().to_string();
  EXPECT_EQ(std::get<Hello>(*loaded).load_milli, std::optional<uint32_t>(1234));

  const std::vector<std::byte> old_frame = read_instance("version_1.bin");
  ASSERT_GE(old_frame.size(), kHeaderSize);
  EXPECT_EQ(foreign_protocol_version(header_span(old_frame)), std::optional<uint16_t>(1));
  EXPECT_EQ(foreign_protocol_version(header_span(hello_frame)), std::nullopt);
  EXPECT_EQ(foreign_protocol_version(header_span(read_instance("http_request.bin"))), std::nullopt);
}

}  // namespace
}  // namespace tessera::transport
