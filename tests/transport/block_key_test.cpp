#include "tessera/transport/block_key.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera::transport {
namespace {

TEST(BlockKey, NamesTheBytesAndTheShape) {
  const std::vector<double> values{1.0, 2.0, 3.0, 4.0, 5.0, 6.0};
  Result<BlockKey> key = block_key(2, 3, values);
  ASSERT_TRUE(key.is_ok());
  EXPECT_EQ(*key, *block_key(2, 3, values)) << "deterministic";
  EXPECT_NE(*key, *block_key(3, 2, values)) << "the same bytes in another shape are another block";
  std::vector<double> changed = values;
  changed[5] = 6.000000000000001;
  EXPECT_NE(*key, *block_key(2, 3, changed)) << "one ulp";
  // A fixed answer, so that coordinator and workers on other machines (arm64) agree: the
  // SHA-256 of "tessera-block-v2", rows and cols (u32 LE) and the canonical XXH3-128 of the
  // doubles (LE), as Python's hashlib and the libxxhash0 shared library compute it for this block.
  EXPECT_EQ(to_hex(*block_key(1, 1, std::vector<double>{1.0})),
            "74609be499b24076222a960c2a06788f42a7a520e1ad95810983682aef3676dc");
}

TEST(BlockKey, RowsInsideALargerMatrixNameTheSameBlockAsTheirCopy) {
  // A 3 x 4 matrix; its rows 1..2, columns 0..4 read in place (stride 4) and copied out.
  std::vector<double> matrix(12);
  for (std::size_t i = 0; i < matrix.size(); ++i) matrix[i] = 0.25 * static_cast<double>(i);
  const std::vector<double> copy(matrix.begin() + 4, matrix.end());
  EXPECT_EQ(*block_key(2, 4, matrix.data() + 4, 4), *block_key(2, 4, copy));
  // Columns 1..3 of every row, strided, against their copy.
  std::vector<double> narrow;
  for (std::size_t r = 0; r < 3; ++r) narrow.insert(narrow.end(), matrix.begin() + 4 * r + 1, matrix.begin() + 4 * r + 4);
  EXPECT_EQ(*block_key(3, 3, matrix.data() + 1, 4), *block_key(3, 3, narrow));
  EXPECT_FALSE(block_key(3, 3, std::span<const double>(narrow).first(8)).is_ok()) << "values that are not rows x cols";
}

TEST(BlockKey, AStreamInAnyChunksNamesTheSameBlock) {
  std::vector<double> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sqrt(static_cast<double>(i));
  const BlockKey whole = *block_key(25, 40, values);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{40}, std::size_t{1000}}) {
    BlockKeyStream stream(25, 40);
    for (std::size_t from = 0; from < values.size(); from += chunk) {
      stream.update(std::span<const double>(values).subspan(from, std::min(chunk, values.size() - from)));
    }
    Result<BlockKey> key = stream.finish();
    ASSERT_TRUE(key.is_ok());
    EXPECT_EQ(*key, whole) << "chunks of " << chunk;
  }
  BlockKeyStream short_stream(25, 40);
  short_stream.update(std::span<const double>(values).first(999));
  EXPECT_FALSE(short_stream.finish().is_ok()) << "a value missing";
}

TEST(BlockKey, HexRoundTripsAndRefusesWhatIsNotAKey) {
  const BlockKey key = *block_key(1, 2, std::vector<double>{0.5, -0.5});
  Result<BlockKey> back = block_key_from_hex(to_hex(key));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, key);
  for (const char* bad : {"", "abc", "ZZ2a1b4c5ee9e8c7d03d6f9cf6bfbd88c1d6d1c20f4d88e27e3f5c1f8d2b8c6f",
                          "2A2A1B4C5EE9E8C7D03D6F9CF6BFBD88C1D6D1C20F4D88E27E3F5C1F8D2B8C6F"}) {
    Result<BlockKey> refused = block_key_from_hex(bad);
    EXPECT_FALSE(refused.is_ok()) << bad;
    if (!refused) {
      EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace tessera::transport
