#include "tessera/transport/crc32c.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace tessera::transport {
namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::vector<std::byte> filled(std::size_t size, auto value_of) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>(value_of(i));
  return out;
}

// RFC 3720, appendix B.4, and the usual check value of "123456789".
TEST(Crc32c, MatchesTheRfc3720Vectors) {
  const std::pair<std::vector<std::byte>, uint32_t> cases[] = {
      {filled(32, [](std::size_t) { return 0x00; }), 0x8A9136AAu},
      {filled(32, [](std::size_t) { return 0xFF; }), 0x62A8AB43u},
      {filled(32, [](std::size_t i) { return i; }), 0x46DD794Eu},
      {filled(32, [](std::size_t i) { return 31 - i; }), 0x113FDB5Cu},
      {bytes_of("123456789"), 0xE3069283u},
      {{}, 0u},
  };
  for (const auto& [data, expected] : cases) {
    EXPECT_EQ(crc32c(data), expected) << crc32c_implementation() << ", " << data.size() << " bytes";
    EXPECT_EQ(detail::crc32c_portable(data), expected) << data.size() << " bytes";
  }
}

// Whatever the pieces (odd sizes, odd alignments), incremental equals one shot and the hardware
// path equals the portable one.
TEST(Crc32c, PiecesAndImplementationsAgree) {
  std::mt19937 random(7);
  std::vector<std::byte> data(100003);
  for (std::byte& b : data) b = static_cast<std::byte>(random());
  const uint32_t whole = crc32c(data);
  EXPECT_EQ(detail::crc32c_portable(data), whole);
  for (std::size_t piece : {1u, 3u, 7u, 8u, 13u, 4096u, 65537u}) {
    Crc32c crc;
    for (std::size_t offset = 0; offset < data.size(); offset += piece) {
      crc.update(std::span(data).subspan(offset, std::min(piece, data.size() - offset)));
    }
    EXPECT_EQ(crc.value(), whole) << "pieces of " << piece;
  }
  for (std::size_t start = 0; start < 9; ++start) {
    const std::span<const std::byte> part = std::span(data).subspan(start, 1000 + start);
    EXPECT_EQ(crc32c(part), detail::crc32c_portable(part)) << "offset " << start;
  }
}

TEST(Crc32c, ASingleFlippedBitChangesTheValue) {
  std::vector<std::byte> data = filled(4096, [](std::size_t i) { return i * 31; });
  const uint32_t original = crc32c(data);
  for (std::size_t bit : {0u, 9u, 4095u * 8 + 7}) {
    std::vector<std::byte> flipped = data;
    flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_NE(crc32c(flipped), original) << "bit " << bit;
  }
}

}  // namespace
}  // namespace tessera::transport
