// The block store messages' codec: round trips to the same bytes, the documented sizes, and the
// refusals a hostile peer meets (counts, lengths, flags, shapes), before anything is reserved.
#include "tessera/gemm/block_codec.hpp"

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

constexpr auto kQuery = static_cast<uint16_t>(MessageType::kBlockQuery);
constexpr auto kHeldType = static_cast<uint16_t>(MessageType::kBlockHeld);
constexpr auto kLoad = static_cast<uint16_t>(MessageType::kBlockLoad);
constexpr auto kLoaded = static_cast<uint16_t>(MessageType::kBlockLoaded);

transport::BlockKey key_of(double value) { return *transport::block_key(1, 1, std::vector<double>{value}); }

bool block_refused(uint16_t type, const std::vector<std::byte>& payload, const std::string& text) {
  Result<BlockMessage> decoded = decode_block_payload(type, payload, Limits{});
  if (decoded) return false;
  return decoded.status().code() == StatusCode::kProtocolError &&
         decoded.status().message().find(text) != std::string::npos;
}

TEST(BlockCodec, EveryMessageRoundTripsToTheSameBytes) {
  const std::vector<BlockMessage> messages{
      BlockQuery{{key_of(1.0), key_of(2.0)}},
      BlockHeld{{true, false, true}},
      BlockLoad{{{key_of(1.0), 0xA0000001u, 20, 100}, {key_of(3.0), 7, 1, 1}}},
      BlockLoaded{{false}},
  };
  for (const BlockMessage& message : messages) {
    const uint16_t type = static_cast<uint16_t>(block_message_type(message));
    SCOPED_TRACE(transport::message_type_name(type));
    const std::vector<std::byte> payload = encode_block_payload(message);
    EXPECT_TRUE(check_block_payload_length(type, payload.size()).is_ok());
    Result<BlockMessage> decoded = decode_block_payload(type, payload, Limits{});
    ASSERT_TRUE(decoded) << decoded.status().to_string();
    EXPECT_EQ(*decoded, message);
    EXPECT_EQ(encode_block_payload(*decoded), payload);
  }
  EXPECT_EQ(encode_block_payload(BlockQuery{{key_of(1.0)}}).size(), kBlockCountBytes + kBlockQueryEntryBytes);
  EXPECT_EQ(encode_block_payload(BlockLoad{{{key_of(1.0), 1, 1, 1}}}).size(), kBlockCountBytes + kBlockLoadEntryBytes);
  // The largest load fits a worker's bound on control payloads (64 KiB).
  EXPECT_LE(kBlockCountBytes + kMaxBlocksPerMessage * kBlockLoadEntryBytes, 64u * 1024u);
}

TEST(BlockCodec, CountsLengthsFlagsAndShapesAreCheckedBeforeAnythingIsReserved) {
  // A count of zero, or above the bound, or one the payload does not hold.
  std::vector<std::byte> none(4, std::byte{0});
  EXPECT_TRUE(block_refused(kQuery, none, "count 0 out of range"));
  std::vector<std::byte> huge = encode_block_payload(BlockHeld{{true}});
  huge[0] = std::byte{0xFF};
  huge[1] = std::byte{0xFF};
  huge[2] = std::byte{0xFF};
  huge[3] = std::byte{0x7F};
  EXPECT_TRUE(block_refused(kHeldType, huge, "out of range 1..1024"));
  std::vector<std::byte> short_query = encode_block_payload(BlockQuery{{key_of(1.0), key_of(2.0)}});
  short_query.pop_back();
  EXPECT_TRUE(block_refused(kQuery, short_query, "does not hold 2 entries"));
  std::vector<std::byte> long_loaded = encode_block_payload(BlockLoaded{{true}});
  long_loaded.push_back(std::byte{1});
  EXPECT_TRUE(block_refused(kLoaded, long_loaded, "does not hold 1 entries"));
  // A flag that is neither 0 nor 1.
  std::vector<std::byte> two = encode_block_payload(BlockHeld{{true}});
  two.back() = std::byte{2};
  EXPECT_TRUE(block_refused(kHeldType, two, "held 2 is neither 0 nor 1"));
  // A load of an empty or oversized shape.
  EXPECT_TRUE(block_refused(kLoad, encode_block_payload(BlockLoad{{{key_of(1.0), 1, 0, 5}}}), "a block of 0 x 5"));
  Limits tight;
  tight.max_tile_dim = 64;
  EXPECT_FALSE(decode_block_payload(kLoad, encode_block_payload(BlockLoad{{{key_of(1.0), 1, 65, 1}}}), tight));
  // Lengths from the header alone, and types outside the codec.
  EXPECT_FALSE(check_block_payload_length(kQuery, kBlockCountBytes).is_ok());
  EXPECT_FALSE(check_block_payload_length(kQuery, kBlockCountBytes + (kMaxBlocksPerMessage + 1) * 32).is_ok());
  EXPECT_FALSE(check_block_payload_length(static_cast<uint16_t>(MessageType::kStore), 16).is_ok());
  EXPECT_TRUE(block_refused(static_cast<uint16_t>(MessageType::kSent), encode_block_payload(BlockLoaded{{true}}),
                      "SENT is not a block store message"));
}

TEST(BlockCodec, TheFuzzCorpusSeedsDecodeAsTheirTypes) {
  // tests/fuzz/make_corpus.py writes one frame per block type from the layouts documented in
  // block_codec.hpp, with its own encoder: the two must agree.
  int seeds = 0;
  for (const testing::CorpusSeed& seed : testing::corpus_seeds("block_")) {
    SCOPED_TRACE(seed.name);
    Result<BlockMessage> message = decode_block_payload(seed.type, seed.payload, Limits{});
    ASSERT_TRUE(message) << message.status().to_string();
    EXPECT_EQ(encode_block_payload(*message), seed.payload);
    ++seeds;
  }
  EXPECT_EQ(seeds, static_cast<int>(std::variant_size_v<BlockMessage>));
}

}  // namespace
}  // namespace tessera::gemm
