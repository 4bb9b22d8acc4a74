#include "tessera/transport/block_key.hpp"

#include <gtest/gtest.h>

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
  // SHA-256 of "tessera-block-v1", rows and cols (u32 LE) and the doubles (LE), as Python's
  // hashlib computes it for this block.
  EXPECT_EQ(to_hex(*block_key(1, 1, std::vector<double>{1.0})),
            "f924bcc1f7c49e2551491aa30b2c3728d25b11e32c02fb4c9a78d66074352d42");
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
