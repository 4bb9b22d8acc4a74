// The forwarding messages' codec: round trips to the same bytes, the documented sizes, and the
// refusals a hostile peer meets (lengths, padding, inconsistent fields).
#include "tessera/gemm/forward_codec.hpp"

#include <gtest/gtest.h>

#include "corpus_seeds.hpp"

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tessera::gemm {

namespace {

bool refused(uint16_t type, const std::vector<std::byte>& payload, const std::string& text) {
  Result<ForwardMessage> decoded = decode_forward_payload(type, payload, Limits{});
  if (decoded) return false;
  return decoded.status().code() == StatusCode::kProtocolError &&
         decoded.status().message().find(text) != std::string::npos;
}

constexpr auto kSetup = static_cast<uint16_t>(MessageType::kForwardSetup);
constexpr auto kReady = static_cast<uint16_t>(MessageType::kForwardReady);
constexpr auto kStoredType = static_cast<uint16_t>(MessageType::kStored);
constexpr auto kSendTileType = static_cast<uint16_t>(MessageType::kSendTile);
constexpr auto kSentType = static_cast<uint16_t>(MessageType::kSent);

TEST(ForwardCodec, EveryMessageRoundTripsToTheSameBytes) {
  const std::vector<ForwardMessage> samples = {
      ForwardSetup{0x0123456789abcdefull, 16, 48, "pi-3.local", 7003}, ForwardSetup{7, 16, 16, "", 0},
      ForwardReady{7, true, ""}, ForwardReady{7, false, "pi-3:7003: connection refused"}, Stored{7, 31},
      SendTile{7, 0x40000003, "10.77.0.3", 7003}, Sent{7, 0x40000003, true, ""},
      Sent{7, 0x40000003, false, "10.77.0.3:7003: connection refused"}};
  for (const ForwardMessage& message : samples) {
    const std::vector<std::byte> payload = encode_forward_payload(message);
    const auto type = static_cast<uint16_t>(forward_message_type(message));
    EXPECT_TRUE(transport::is_forward_message(type));
    EXPECT_TRUE(check_forward_payload_length(type, payload.size(), Limits{}).is_ok());
    Result<ForwardMessage> decoded = decode_forward_payload(type, payload, Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(*decoded, message);
    EXPECT_EQ(encode_forward_payload(*decoded), payload);
  }
  EXPECT_EQ(encode_forward_payload(ForwardSetup{1, 2, 3, "ab", 9}).size(), kForwardSetupFixedBytes + 2);
  EXPECT_EQ(encode_forward_payload(ForwardReady{1, false, "abc"}).size(), kForwardReadyFixedBytes + 3);
  EXPECT_EQ(encode_forward_payload(Stored{1, 2}).size(), kStoredPayloadBytes);
  EXPECT_EQ(encode_forward_payload(SendTile{1, 2, "pi", 9}).size(), kSendTileFixedBytes + 2);
  EXPECT_EQ(encode_forward_payload(Sent{1, 2, false, "gone"}).size(), kSentFixedBytes + 4);
}

TEST(ForwardCodec, ATileSendNamesItsPeerAndASentSaysWhyItFailed) {
  EXPECT_TRUE(refused(kSendTileType, encode_forward_payload(SendTile{1, 2, "", 7000}), "the host is empty"));
  EXPECT_TRUE(refused(kSendTileType, encode_forward_payload(SendTile{1, 2, "pi", 0}), "port 0 given with the host"));
  std::vector<std::byte> send = encode_forward_payload(SendTile{1, 2, "pi", 7000});
  send[15] = std::byte{4};
  EXPECT_TRUE(refused(kSendTileType, send, "pad byte 1 is 4"));
  std::vector<std::byte> sent = encode_forward_payload(Sent{1, 2, true, ""});
  sent[12] = std::byte{2};
  EXPECT_TRUE(refused(kSentType, sent, "delivered 2 is neither 0 nor 1"));
  EXPECT_TRUE(refused(kSentType, encode_forward_payload(Sent{1, 2, true, "x"}), "a delivered tile gives no reason"));
  EXPECT_TRUE(refused(kSentType, encode_forward_payload(Sent{1, 2, false, ""}), "an undelivered tile gives its reason"));
  sent = encode_forward_payload(Sent{1, 2, false, "x"});
  sent[14] = std::byte{1};
  EXPECT_TRUE(refused(kSentType, sent, "pad byte 1 is 1"));
  EXPECT_FALSE(check_forward_payload_length(kSendTileType, kSendTileFixedBytes - 1, Limits{}).is_ok());
  EXPECT_FALSE(check_forward_payload_length(kSentType, kSentFixedBytes + Limits{}.max_string_bytes + 1, Limits{}).is_ok());
}

TEST(ForwardCodec, InconsistentFieldsAreRefused) {
  std::vector<std::byte> setup = encode_forward_payload(ForwardSetup{1, 40, 30, "", 0});
  EXPECT_TRUE(refused(kSetup, setup, "first_tile_id 40 is above last_tile_id 30"));
  EXPECT_TRUE(refused(kSetup, encode_forward_payload(ForwardSetup{1, 0, 1, "", 7000}), "next_port 7000 given without"));
  EXPECT_TRUE(refused(kSetup, encode_forward_payload(ForwardSetup{1, 0, 1, "pi", 0}), "next_host given with next_port 0"));
  setup = encode_forward_payload(ForwardSetup{1, 0, 1, "", 0});
  setup[18] = std::byte{1};
  EXPECT_TRUE(refused(kSetup, setup, "pad byte 0 is 1"));
  std::vector<std::byte> ready = encode_forward_payload(ForwardReady{1, true, ""});
  ready[8] = std::byte{2};
  EXPECT_TRUE(refused(kReady, ready, "linked 2 is neither 0 nor 1"));
  ready = encode_forward_payload(ForwardReady{1, false, "x"});
  ready[8] = std::byte{1};
  EXPECT_TRUE(refused(kReady, ready, "a linked node gives no reason"));
  std::vector<std::byte> stored = encode_forward_payload(Stored{1, 2});
  stored[15] = std::byte{3};
  EXPECT_TRUE(refused(kStoredType, stored, "pad byte 3 is 3"));
  stored = encode_forward_payload(Stored{1, 2});
  stored.push_back(std::byte{0});
  EXPECT_TRUE(refused(kStoredType, stored, "trailing"));
  for (std::size_t cut = 0; cut < kStoredPayloadBytes; ++cut) {
    EXPECT_FALSE(decode_forward_payload(kStoredType, std::vector<std::byte>(cut), Limits{})) << cut;
  }
}

TEST(ForwardCodec, LengthsAndTypesOutsideTheCodecAreRefused) {
  const Limits limits;
  EXPECT_TRUE(check_forward_payload_length(kStoredType, kStoredPayloadBytes, limits).is_ok());
  EXPECT_FALSE(check_forward_payload_length(kStoredType, kStoredPayloadBytes + 1, limits).is_ok());
  EXPECT_FALSE(check_forward_payload_length(kSetup, kForwardSetupFixedBytes - 1, limits).is_ok());
  EXPECT_FALSE(check_forward_payload_length(kSetup, kForwardSetupFixedBytes + limits.max_string_bytes + 1, limits).is_ok());
  EXPECT_FALSE(check_forward_payload_length(static_cast<uint16_t>(MessageType::kStore), 16, limits).is_ok());
  EXPECT_TRUE(refused(static_cast<uint16_t>(MessageType::kGraphLoad), {}, "GRAPH_LOAD is not a forwarding message"));
  std::vector<std::byte> long_host = encode_forward_payload(ForwardSetup{1, 0, 1, std::string(100, 'h'), 1});
  Limits tight;
  tight.max_string_bytes = 50;
  EXPECT_FALSE(decode_forward_payload(kSetup, long_host, tight));
}

TEST(ForwardCodec, TheFuzzCorpusSeedsDecodeAsTheirTypes) {
  // tests/fuzz/make_corpus.py writes one frame per forwarding type from the layouts documented in
  // forward_codec.hpp, with its own encoder: the two must agree.
  int seeds = 0;
  for (const testing::CorpusSeed& seed : testing::corpus_seeds("forward_")) {
    SCOPED_TRACE(seed.name);
    Result<ForwardMessage> message = decode_forward_payload(seed.type, seed.payload, Limits{});
    ASSERT_TRUE(message) << message.status().to_string();
    EXPECT_EQ(encode_forward_payload(*message), seed.payload);
    ++seeds;
  }
  EXPECT_EQ(seeds, static_cast<int>(std::variant_size_v<ForwardMessage>));
}

}  // namespace
}  // namespace tessera::gemm
