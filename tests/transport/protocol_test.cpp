#include "tessera/transport/protocol.hpp"

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

#include "alloc_counter.hpp"
#include "frame_samples.hpp"
#include "status_assertions.hpp"
#include "lying_payloads.hpp"
#include "stored_frames.hpp"

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

using tessera::testing::fails_with;

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
  check(MessageType::kBye, 0, true);
  check(MessageType::kBye, 1, false);
  check(MessageType::kHello, 72 + 3 * 4096 + 4, true);  // the strings at their limit and a load
  check(MessageType::kHello, 72 + 3 * 4096 + 5, false);
  check(MessageType::kHello, 71, false);
  check(MessageType::kError, 1 << 20, false);
  check(MessageType::kHeld, 8, true);
  check(MessageType::kHeld, 9, false);
  // A service's layouts are its codec's (the GEMM service's lengths are refused by
  // gemm::check_gemm_payload_length, tests/gemm/codec_test.cpp); the header bounds only their length.
  check(MessageType::kJob, 72, true);
  check(MessageType::kJob, 1 << 20, true);
  check(MessageType::kStore, 23, true);
  check(MessageType::kStore, Limits{}.max_payload_bytes, true);
  check(MessageType::kStore, Limits{}.max_payload_bytes + 1, false);
  check(MessageType::kStatsRequest, 1, true);
  check(MessageType::kStats, 55, true);
  check(MessageType::kForwardSetup, 0, true);
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
  const std::vector<Message> all = {Hello{}, Auth{}, AuthOk{}, Error{}, Bye{}};
  const MessageType types[] = {MessageType::kHello, MessageType::kAuth, MessageType::kAuthOk, MessageType::kError,
                               MessageType::kBye};
  ASSERT_EQ(all.size(), std::size(types));
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(message_type(all[i]), types[i]);
    EXPECT_TRUE(is_session_message(static_cast<uint16_t>(types[i])));
  }
  // The registry names every type, the services' too (the GEMM service's are 4..9 and 12..14).
  const char* names[] = {"HELLO", "AUTH",   "AUTH_OK", "PROBE", "PROBE_RESULT", "STORE",         "JOB",
                         "CREDIT", "RESULT", "ERROR",  "BYE",   "RELEASE",      "STATS_REQUEST", "STATS"};
  for (std::size_t i = 0; i < std::size(names); ++i) {
    const auto type = static_cast<uint16_t>(i + 1);
    EXPECT_EQ(message_type_name(type), names[i]);
    const bool session = type <= 3 || type == 10 || type == 11;
    EXPECT_EQ(is_session_message(type), session) << names[i];
  }
  EXPECT_FALSE(is_session_message(0));
  EXPECT_FALSE(is_session_message(kLastMessageType));
  EXPECT_FALSE(is_session_message(kLastMessageType + 1));
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
  EXPECT_FALSE(is_graph_message(static_cast<uint16_t>(MessageType::kStats)));  // the last GEMM type
  EXPECT_FALSE(is_graph_message(kFirstForwardMessageType));
  const char* forward_names[] = {"FORWARD_SETUP", "FORWARD_READY", "STORED", "SEND_TILE", "SENT"};
  const auto held_type = static_cast<uint16_t>(MessageType::kHeld);
  ASSERT_EQ(std::size(forward_names), std::size_t{held_type} - kFirstForwardMessageType);
  for (std::size_t i = 0; i < std::size(forward_names); ++i) {
    const auto type = static_cast<uint16_t>(kFirstForwardMessageType + i);
    EXPECT_EQ(message_type_name(type), forward_names[i]);
    EXPECT_TRUE(is_forward_message(type));
    // SEND_TILE and SENT have their own bit: they came after the chain's messages.
    const bool tile_send = type >= static_cast<uint16_t>(MessageType::kSendTile);
    EXPECT_EQ(capability_of_message(type), tile_send ? kCapabilityTileSend : kCapabilityForward);
  }
  // HELD, the handshake's, came after them: no service's.
  EXPECT_EQ(message_type_name(held_type), "HELD");
  EXPECT_FALSE(is_forward_message(held_type));
  EXPECT_FALSE(is_graph_message(held_type));
  EXPECT_FALSE(is_block_message(held_type));
  EXPECT_EQ(capability_of_message(held_type), 0u);
  // The block store's came last, with a bit of their own.
  const char* block_names[] = {"BLOCK_QUERY", "BLOCK_HELD", "BLOCK_LOAD", "BLOCK_LOADED"};
  ASSERT_EQ(std::size(block_names), std::size_t{kLastMessageType} - held_type);
  for (std::size_t i = 0; i < std::size(block_names); ++i) {
    const auto type = static_cast<uint16_t>(kFirstBlockMessageType + i);
    EXPECT_EQ(message_type_name(type), block_names[i]);
    EXPECT_TRUE(is_block_message(type));
    EXPECT_FALSE(is_forward_message(type));
    EXPECT_EQ(capability_of_message(type), kCapabilityBlockStore);
  }
  EXPECT_FALSE(is_block_message(kLastMessageType + 1));
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
                           message_type_name(type) + ": forwarding payloads are decoded by gemm/forward_codec.hpp"));
  }
}

TEST(ProtocolPayload, GemmPayloadsAreLeftToTheGemmCodec) {
  for (uint16_t type = 1; type < kFirstGraphMessageType; ++type) {
    if (is_session_message(type)) continue;
    EXPECT_TRUE(fails_with(decode_payload(type, {}, Limits{}).status(), StatusCode::kProtocolError,
                           message_type_name(type) + ": GEMM payloads are decoded by gemm/codec.hpp"));
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

TEST(ProtocolAllocation, LyingPayloadsAreRejectedWithoutAllocation) {
  std::vector<tessera::testing::LyingPayload> cases;

  // The GEMM service's lying tiles, echoes and counts are tests/gemm/codec_test.cpp's.
  std::vector<std::byte> error = encode_payload(Error{ErrorCode::kInternal, "short"});
  put_le(error, 4, 4096, 2);
  cases.push_back({"string beyond payload", MessageType::kError, error, "ERROR: truncated at message"});

  std::vector<std::byte> hostname = encode_payload(Hello{});
  put_le(hostname, 6, 4096, 2);  // after two empty strings, hostname claims 4096 bytes, 64 are left
  cases.push_back({"hostname beyond payload", MessageType::kHello, hostname, "HELLO: truncated at hostname"});

  tessera::testing::expect_refused_before_allocating(cases, [](uint16_t type, const std::vector<std::byte>& payload) {
    return decode_payload(type, payload, Limits{}).status();
  });
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
  EXPECT_EQ(capability_names(kCapabilityTileSend << 1), "block-store");
  EXPECT_EQ(capability_names(kCapabilityBlockStore << 1), "bit 9");
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
  // Code outside the codec sizes buffers and predicts traffic with these; they must not drift (the
  // GEMM service's sizes are tests/gemm/codec_test.cpp's).
  EXPECT_EQ(encode_payload(Auth{}).size(), kAuthPayloadBytes);
  EXPECT_EQ(encode_payload(AuthOk{}).size(), kAuthOkPayloadBytes);
  EXPECT_EQ(encode_payload(Hello{}).size(), kHelloFixedBytes);
  EXPECT_EQ(encode_payload(Error{ErrorCode::kBusy, "abc"}).size(), kErrorFixedBytes + 3);
  EXPECT_EQ(encode_payload(Bye{}).size(), 0u);
  EXPECT_EQ(encode_held(Held{}).size(), kHeldPayloadBytes);
}

// --- Stored broken frames ----------------------------------------------------------------

using tessera::testing::read_instance;

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
      {"hello_string_beyond_payload.bin", "HELLO: truncated at hostname"},
      {"hello_truncated.bin", "HELLO: truncated at challenge"},
      {"hello_partial_load.bin", "HELLO: truncated at load_milli"},
  };
  for (const auto& [file, expected] : cases) {
    SCOPED_TRACE(file);
    EXPECT_TRUE(fails_with(decode_frame(read_instance(file)), StatusCode::kProtocolError, expected));
  }
  for (const char* file : {"valid_hello.bin", "valid_hello_load.bin"}) {
    const Status valid = decode_frame(read_instance(file));
    EXPECT_TRUE(valid.is_ok()) << file << ": " << valid.to_string();
  }
  // The GEMM service's frames pass the header and are left to their codec, broken or not
  // (tests/gemm/codec_test.cpp reads them with it).
  for (const char* file : {"store_lying_dims.bin", "job_unknown_flags.bin", "probe_nan_seconds.bin",
                           "release_count_mismatch.bin", "store_bad_crc.bin", "result_bad_crc.bin", "valid_job.bin",
                           "valid_store.bin", "valid_result.bin"}) {
    SCOPED_TRACE(file);
    const std::vector<std::byte> frame = read_instance(file);
    ASSERT_GE(frame.size(), kHeaderSize);
    EXPECT_TRUE(decode_header(header_span(frame), Limits{}));
    EXPECT_TRUE(fails_with(decode_frame(frame), StatusCode::kProtocolError, "GEMM payloads are decoded by gemm/codec.hpp"));
  }
}

TEST(ProtocolInstances, TheFuzzCorpusSeedsOfEverySessionTypeDecode) {
  // tests/fuzz/make_corpus.py encodes one valid frame per message type with its own encoder (HELLO
  // with and without its load); the session's must still decode, so the fuzzer starts from valid
  // frames. frame_* seeds are the instance frames above, graph_* ones the graph codec's, forward_*
  // the forwarding codec's and the GEMM types' the GEMM codec's (tests/gemm/).
  std::set<uint16_t> types;
  int seeds = 0;
  for (const auto& [name, frame] : tessera::testing::encoder_corpus_seeds()) {
    ASSERT_GE(frame.size(), kHeaderSize) << name;
    Result<FrameHeader> header = decode_header(header_span(frame), Limits{});
    ASSERT_TRUE(header) << name << ": " << header.status().to_string();
    if (!is_session_message(header->type)) continue;
    SCOPED_TRACE(name);
    EXPECT_TRUE(decode_frame(frame).is_ok()) << decode_frame(frame).to_string();
    types.insert(header->type);
    ++seeds;
  }
  EXPECT_EQ(types.size(), std::variant_size_v<Message>) << "a seed per session type";
  EXPECT_GE(seeds, static_cast<int>(std::variant_size_v<Message>) + 1) << "and HELLO with a load";
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
