#include "tessera/transport/block_key.hpp"

#include <bit>
#include <cstring>
#include <string>

#include <openssl/sha.h>
// Header-only (the functions inlined here), so the worker links no xxhash library on any machine.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "tessera/core/strings.hpp"

namespace tessera::transport {

static_assert(std::endian::native == std::endian::little, "block keys hash doubles as they lie in memory (LE)");

Result<BlockKey> block_key(uint32_t rows, uint32_t cols, const double* first_row, std::size_t row_stride) {
  // The values' XXH3-128 (its canonical, big-endian bytes, the same on every machine), read row by
  // row so that rows inside a larger matrix need no copy.
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  if (XXH3_128bits_reset(&state) != XXH_OK) return internal_error("XXH3 of a block failed");
  const std::size_t row_bytes = std::size_t{cols} * sizeof(double);
  if (row_stride == cols) {
    XXH3_128bits_update(&state, first_row, row_bytes * rows);
  } else {
    for (uint32_t r = 0; r < rows; ++r) XXH3_128bits_update(&state, first_row + r * row_stride, row_bytes);
  }
  XXH128_canonical_t content{};
  XXH128_canonicalFromHash(&content, XXH3_128bits_digest(&state));

  // SHA-256 of "tessera-block-v2" | rows (u32 LE) | cols (u32 LE) | the content digest.
  std::array<unsigned char, 24 + sizeof(content.digest)> named{};
  std::memcpy(named.data(), "tessera-block-v2", 16);
  std::memcpy(named.data() + 16, &rows, 4);
  std::memcpy(named.data() + 20, &cols, 4);
  std::memcpy(named.data() + 24, content.digest, sizeof(content.digest));
  BlockKey key;
  static_assert(sizeof(key.digest) == SHA256_DIGEST_LENGTH);
  SHA256(named.data(), named.size(), reinterpret_cast<unsigned char*>(key.digest.data()));
  return key;
}

Result<BlockKey> block_key(uint32_t rows, uint32_t cols, std::span<const double> values) {
  if (values.size() != uint64_t{rows} * cols) {
    return invalid_argument("a " + std::to_string(rows) + "x" + std::to_string(cols) + " block holds " +
                            std::to_string(values.size()) + " values");
  }
  return block_key(rows, cols, values.data(), cols);
}

std::string to_hex(const BlockKey& key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * key.digest.size());
  for (std::byte b : key.digest) {
    hex += kDigits[std::to_integer<unsigned>(b) >> 4];
    hex += kDigits[std::to_integer<unsigned>(b) & 0xF];
  }
  return hex;
}

Result<BlockKey> block_key_from_hex(std::string_view hex) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  BlockKey key;
  bool ok = hex.size() == 2 * key.digest.size();
  for (std::size_t i = 0; ok && i < key.digest.size(); ++i) {
    const int high = digit(hex[2 * i]);
    const int low = digit(hex[2 * i + 1]);
    ok = high >= 0 && low >= 0;
    if (ok) key.digest[i] = static_cast<std::byte>(high * 16 + low);
  }
  if (!ok) return invalid_argument("'" + printable(hex) + "' is not a block key (64 lowercase hex digits)");
  return key;
}

}  // namespace tessera::transport
