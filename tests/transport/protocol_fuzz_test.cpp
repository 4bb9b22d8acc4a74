// The session codec under random damage (the GEMM codec's fuzz test is tests/gemm/codec_fuzz_test.cpp).
#include "tessera/transport/protocol.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "alloc_counter.hpp"
#include "frame_mutator.hpp"
#include "frame_samples.hpp"

namespace tessera::transport {
namespace {

using testing::AllocationCounter;
using testing::FuzzStats;
using testing::fuzz_mutated;

constexpr int kIterations = 20000;
constexpr uint64_t kSeed = 0x7E55E4A;
// Decoding may copy what is present (strings, echo bytes, tile ids) plus bookkeeping, never more.
constexpr uint64_t kAllocationSlack = 64 * 1024;

// Decodes the frame the way a reader would and checks the codec's promises on the way.
void decode_and_check(const std::vector<std::byte>& frame, const Limits& limits, FuzzStats& stats) {
  if (frame.size() < kHeaderSize) return;
  const std::span<const std::byte, kHeaderSize> header_bytes(frame.data(), kHeaderSize);
  uint16_t type = 0;
  std::memcpy(&type, frame.data() + 6, sizeof type);  // the fuzz host is little-endian (static_assert in the codec)
  // A fresh vector gives the payload operator new's alignment, as FrameConnection's buffer has.
  const std::vector<std::byte> payload(frame.begin() + kHeaderSize, frame.end());

  try {
    AllocationCounter counter;
    Result<FrameHeader> header = decode_header(header_bytes, limits);
    if (header) {
      EXPECT_LE(header->payload_length, limits.max_payload_bytes);
      type = header->type;
    }
    Result<Message> message = decode_payload(type, payload, limits);
    EXPECT_LE(counter.bytes(), payload.size() + kAllocationSlack) << message_type_name(type);
    if (!message) {
      ++stats.rejected;
      EXPECT_EQ(message.status().code(), StatusCode::kProtocolError) << message.status().to_string();
      return;
    }
    ++stats.decoded;
    EXPECT_TRUE(is_session_message(type)) << message_type_name(type);
    EXPECT_EQ(static_cast<uint16_t>(message_type(*message)), type);
    // Whatever decodes is canonical: encoding it again gives back the same bytes.
    EXPECT_EQ(encode_payload(*message), payload) << message_type_name(type);
  } catch (...) {
    ++stats.exceptions;
  }
}

TEST(ProtocolFuzz, MutatedFramesNeverCrashThrowOrOverAllocate) {
  std::vector<std::vector<std::byte>> corpus;
  for (const testing::SamplePayload& sample : testing::sample_payloads()) {
    corpus.push_back(testing::whole_frame(sample.type, sample.payload, 99));
  }
  Limits tight;
  tight.max_payload_bytes = 256;
  tight.max_string_bytes = 8;

  const FuzzStats stats = fuzz_mutated(corpus, kIterations, kSeed, [&](const std::vector<std::byte>& frame, int i, FuzzStats& seen) {
    decode_and_check(frame, i % 4 == 0 ? tight : Limits{}, seen);
  });
  // The mutations must exercise both outcomes, or the loop proves nothing. AUTH and AUTH_OK are
  // fixed-size opaque bytes, so most damage inside them still decodes: fewer frames are refused
  // than in the GEMM codec's corpus of checked fields (tests/gemm/codec_fuzz_test.cpp).
  EXPECT_GT(stats.decoded, kIterations / 50);
  EXPECT_GT(stats.rejected, kIterations / 3);
}

TEST(ProtocolFuzz, RandomBytesAreRejectedQuietly) {
  std::mt19937_64 random(kSeed + 1);
  FuzzStats stats;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> frame(kHeaderSize + random() % 200);
    for (std::byte& b : frame) b = static_cast<std::byte>(random());
    testing::put_le(frame, 0, kMagic, 4);  // get past the magic so deeper checks run
    testing::put_le(frame, 4, 1, 2);
    testing::put_le(frame, 6, 1 + random() % kLastMessageType, 2);
    decode_and_check(frame, Limits{}, stats);
  }
  EXPECT_EQ(stats.exceptions, 0);
}

}  // namespace
}  // namespace tessera::transport
