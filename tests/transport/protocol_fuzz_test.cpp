#include "tessera/transport/protocol.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "alloc_counter.hpp"
#include "frame_samples.hpp"

namespace tessera::transport {
namespace {

using testing::AllocationCounter;

constexpr int kIterations = 20000;
constexpr uint64_t kSeed = 0x7E55E4A;
// Decoding may copy what is present (strings, echo bytes, tile ids) plus bookkeeping, never more.
constexpr uint64_t kAllocationSlack = 64 * 1024;

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : random_(seed) {}

  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_); }

  void mutate(std::vector<std::byte>& frame) {
    const std::size_t rounds = 1 + below(4);
    for (std::size_t round = 0; round < rounds; ++round) mutate_once(frame);
  }

 private:
  void mutate_once(std::vector<std::byte>& frame) {
    static constexpr uint64_t kInteresting[] = {0,          1,          2,          7,          8,
                                                0x7F,       0x80,       0xFF,       0xFFFF,     0x10000,
                                                1u << 20,   (1u << 20) + 1, 0x7FFFFFFF, 0xFFFFFFFF, 1ull << 32,
                                                1ull << 63, ~0ull};
    switch (below(6)) {
      case 0:  // flip one bit
        if (!frame.empty()) frame[below(frame.size())] ^= static_cast<std::byte>(1u << below(8));
        break;
      case 1:  // overwrite a byte
        if (!frame.empty()) frame[below(frame.size())] = static_cast<std::byte>(below(256));
        break;
      case 2: {  // overwrite a 2/4/8-byte field with a boundary value
        const int size = 1 << (1 + below(3));
        if (frame.size() < static_cast<std::size_t>(size)) break;
        const std::size_t offset = below(frame.size() - static_cast<std::size_t>(size) + 1);
        testing::put_le(frame, offset, kInteresting[below(std::size(kInteresting))], size);
        break;
      }
      case 3:  // truncate
        frame.resize(below(frame.size() + 1));
        break;
      case 4: {  // extend with random bytes
        const std::size_t extra = 1 + below(40);
        for (std::size_t i = 0; i < extra; ++i) frame.push_back(static_cast<std::byte>(below(256)));
        break;
      }
      default: {  // make the header's length agree with whatever the payload now is
        if (frame.size() >= kHeaderSize) testing::put_le(frame, 16, frame.size() - kHeaderSize, 8);
        break;
      }
    }
  }

  std::mt19937_64 random_;
};

struct FuzzStats {
  int decoded = 0;
  int rejected = 0;
  int exceptions = 0;
};

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
      // Damaged STORE / RESULT data is refused by its checksum, as a lost transfer.
      const bool checksum = message.status().code() == StatusCode::kNetworkError &&
                            message.status().message().find("checksum mismatch") != std::string::npos;
      EXPECT_TRUE(message.status().code() == StatusCode::kProtocolError || checksum) << message.status().to_string();
      return;
    }
    ++stats.decoded;
    EXPECT_EQ(static_cast<uint16_t>(message_type(*message)), type);
    // Whatever decodes is canonical: encoding it again gives back the same bytes.
    std::vector<std::byte> again;
    if (const auto* store = std::get_if<Store>(&*message)) {
      const auto prefix = encode_store_prefix(store->tile);
      again = testing::concat({prefix, std::as_bytes(store->data)});
    } else if (const auto* result = std::get_if<ResultTile>(&*message)) {
      const auto prefix = encode_result_prefix(result->job_id, result->compute_seconds, result->tile);
      again = testing::concat({prefix, std::as_bytes(result->data)});
    } else {
      again = encode_payload(*message);
    }
    EXPECT_EQ(again, payload) << message_type_name(type);
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
  tight.max_tile_dim = 4;
  tight.max_string_bytes = 8;
  tight.max_echo_bytes = 16;
  tight.max_probe_size = 1024;
  tight.max_probe_seconds = 1.0;
  tight.max_release_tiles = 3;

  Mutator mutator(kSeed);
  FuzzStats stats;
  for (int i = 0; i < kIterations; ++i) {
    std::vector<std::byte> frame = corpus[mutator.below(corpus.size())];
    mutator.mutate(frame);
    decode_and_check(frame, i % 4 == 0 ? tight : Limits{}, stats);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopping at iteration " << i << " (seed " << kSeed << ")";
      break;
    }
  }
  EXPECT_EQ(stats.exceptions, 0);
  RecordProperty("decoded", stats.decoded);
  RecordProperty("rejected", stats.rejected);
  // The mutations must exercise both outcomes, or the loop proves nothing.
  EXPECT_GT(stats.decoded, kIterations / 50);
  EXPECT_GT(stats.rejected, kIterations / 2);
}

TEST(ProtocolFuzz, RandomBytesAreRejectedQuietly) {
  std::mt19937_64 random(kSeed + 1);
  FuzzStats stats;
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> frame(kHeaderSize + random() % 200);
    for (std::byte& b : frame) b = static_cast<std::byte>(random());
    testing::put_le(frame, 0, kMagic, 4);  // get past the magic so deeper checks run
    testing::put_le(frame, 4, 1, 2);
    testing::put_le(frame, 6, 1 + random() % static_cast<uint64_t>(MessageType::kStats), 2);
    decode_and_check(frame, Limits{}, stats);
  }
  EXPECT_EQ(stats.exceptions, 0);
}

}  // namespace
}  // namespace tessera::transport
