// The GEMM codec under random damage: mutated frames of every GEMM type, bulk ones included, and
// random bytes, decoded as a reader would (the header, the codec's length check, the payload). No
// crash, no exception, no allocation beyond what is present, and whatever decodes re-encodes to
// its own bytes.
#include "tessera/gemm/codec.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "../transport/alloc_counter.hpp"
#include "../transport/frame_mutator.hpp"
#include "gemm_samples.hpp"

namespace tessera::gemm {
namespace {

using transport::testing::AllocationCounter;
using transport::testing::FuzzStats;
using transport::testing::fuzz_mutated;

constexpr int kIterations = 20000;
constexpr uint64_t kSeed = 0x7E55E4A;
// Decoding may copy what is present (echo bytes, tile ids) plus bookkeeping, never more.
constexpr uint64_t kAllocationSlack = 64 * 1024;

// Decodes the frame the way a reader would and checks the codec's promises on the way.
void decode_and_check(const std::vector<std::byte>& frame, const Limits& limits, FuzzStats& stats) {
  if (frame.size() < transport::kHeaderSize) return;
  const std::span<const std::byte, transport::kHeaderSize> header_bytes(frame.data(), transport::kHeaderSize);
  uint16_t type = 0;
  std::memcpy(&type, frame.data() + 6, sizeof type);  // the fuzz host is little-endian (static_assert in the codec)
  // A fresh vector gives the payload operator new's alignment, as FrameConnection's buffer has.
  const std::vector<std::byte> payload(frame.begin() + transport::kHeaderSize, frame.end());

  try {
    AllocationCounter counter;
    transport::Limits wire;
    wire.max_payload_bytes = limits.max_payload_bytes;
    wire.max_string_bytes = limits.max_string_bytes;
    Result<FrameHeader> header = transport::decode_header(header_bytes, wire);
    if (header) {
      EXPECT_LE(header->payload_length, limits.max_payload_bytes);
      type = header->type;
      // What the length check admits from the header alone, the payload of that length may be.
      const Status length = check_gemm_payload_length(type, header->payload_length, limits);
      if (!length.is_ok()) {
        EXPECT_EQ(length.code(), StatusCode::kProtocolError) << length.to_string();
      }
    }
    Result<GemmMessage> message = decode_gemm_payload(type, payload, limits);
    EXPECT_LE(counter.bytes(), payload.size() + kAllocationSlack) << transport::message_type_name(type);
    if (!message) {
      ++stats.rejected;
      // Damaged STORE / RESULT data is refused by its checksum, as a lost transfer.
      const bool checksum = message.status().code() == StatusCode::kNetworkError &&
                            message.status().message().find("checksum mismatch") != std::string::npos;
      EXPECT_TRUE(message.status().code() == StatusCode::kProtocolError || checksum) << message.status().to_string();
      return;
    }
    ++stats.decoded;
    EXPECT_EQ(static_cast<uint16_t>(gemm_message_type(*message)), type);
    // A payload that decodes has a length the header check admits.
    EXPECT_TRUE(check_gemm_payload_length(type, payload.size(), limits).is_ok()) << transport::message_type_name(type);
    // Whatever decodes is canonical: encoding it again gives back the same bytes.
    std::vector<std::byte> again;
    if (const auto* store = std::get_if<Store>(&*message)) {
      const auto prefix = encode_store_prefix(store->tile);
      again = testing::concat({prefix, std::as_bytes(store->data)});
    } else if (const auto* result = std::get_if<ResultTile>(&*message)) {
      const auto prefix = encode_result_prefix(result->job_id, result->compute_seconds, result->tile);
      again = testing::concat({prefix, std::as_bytes(result->data)});
    } else {
      again = encode_gemm_payload(*message);
    }
    EXPECT_EQ(again, payload) << transport::message_type_name(type);
  } catch (...) {
    ++stats.exceptions;
  }
}

TEST(GemmFuzz, MutatedFramesNeverCrashThrowOrOverAllocate) {
  std::vector<std::vector<std::byte>> corpus;
  for (const testing::SamplePayload& sample : testing::sample_payloads()) {
    corpus.push_back(testing::whole_frame(sample.type, sample.payload, 99));
  }
  Limits tight;
  tight.max_payload_bytes = 256;
  tight.max_tile_dim = 4;
  tight.max_string_bytes = 8;
  tight.max_echo_bytes = 16;
  tight.max_probe_size = 1024;
  tight.max_probe_seconds = 1.0;
  tight.max_release_tiles = 3;

  const FuzzStats stats = fuzz_mutated(corpus, kIterations, kSeed, [&](const std::vector<std::byte>& frame, int i, FuzzStats& seen) {
    decode_and_check(frame, i % 4 == 0 ? tight : Limits{}, seen);
  });
  // The mutations must exercise both outcomes, or the loop proves nothing.
  EXPECT_GT(stats.decoded, kIterations / 50);
  EXPECT_GT(stats.rejected, kIterations / 2);
}

TEST(GemmFuzz, RandomBytesAreRejectedQuietly) {
  std::mt19937_64 random(kSeed + 1);
  FuzzStats stats;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> frame(transport::kHeaderSize + random() % 200);
    for (std::byte& b : frame) b = static_cast<std::byte>(random());
    testing::put_le(frame, 0, transport::kMagic, 4);  // get past the magic so deeper checks run
    testing::put_le(frame, 4, 1, 2);
    testing::put_le(frame, 6, 1 + random() % static_cast<uint64_t>(MessageType::kStats), 2);
    decode_and_check(frame, Limits{}, stats);
  }
  EXPECT_EQ(stats.exceptions, 0);
}

}  // namespace
}  // namespace tessera::gemm
