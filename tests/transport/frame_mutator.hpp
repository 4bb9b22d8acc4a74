// Random damage to whole frames for the codecs' fuzz tests (transport's session codec here, the
// GEMM codec in tests/gemm/): bit flips, overwritten bytes, boundary values in 2/4/8-byte fields,
// truncation, extension, and a header length made to agree with whatever the payload now is.
// Deterministic for a seed, so a failure names the seed and iteration that reproduce it.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "frame_samples.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::transport::testing {

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
        put_le(frame, offset, kInteresting[below(std::size(kInteresting))], size);
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
        if (frame.size() >= kHeaderSize) put_le(frame, 16, frame.size() - kHeaderSize, 8);
        break;
      }
    }
  }

  std::mt19937_64 random_;
};

// What a fuzz loop saw: frames decoded, frames refused, and exceptions (which must never happen).
struct FuzzStats {
  int decoded = 0;
  int rejected = 0;
  int exceptions = 0;
};

// `iterations` frames, each a corpus frame damaged by a Mutator seeded with `seed`, given to
// check(frame, iteration, stats), which decodes it as a reader would and checks the codec's
// promises; stops at the first failing frame, naming the seed and iteration that reproduce it.
template <typename Check>
FuzzStats fuzz_mutated(const std::vector<std::vector<std::byte>>& corpus, int iterations, uint64_t seed, Check check) {
  Mutator mutator(seed);
  FuzzStats stats;
  for (int i = 0; i < iterations; ++i) {
    std::vector<std::byte> frame = corpus[mutator.below(corpus.size())];
    mutator.mutate(frame);
    check(frame, i, stats);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopping at iteration " << i << " (seed " << seed << ")";
      break;
    }
  }
  EXPECT_EQ(stats.exceptions, 0);
  ::testing::Test::RecordProperty("decoded", stats.decoded);
  ::testing::Test::RecordProperty("rejected", stats.rejected);
  return stats;
}

}  // namespace tessera::transport::testing
