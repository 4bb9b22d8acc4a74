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

namespace {

// SHA-256 of "tessera-block-v2" | rows (u32 LE) | cols (u32 LE) | the content digest (the values'
// XXH3-128, its canonical big-endian bytes, the same on every machine).
BlockKey named_key(uint32_t rows, uint32_t cols, XXH128_hash_t content_hash) {
  XXH128_canonical_t content{};
  XXH128_canonicalFromHash(&content, content_hash);
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

}  // namespace

struct BlockKeyStream::State {
  XXH3_state_t xxh;
};

BlockKeyStream::BlockKeyStream(uint32_t rows, uint32_t cols) : state_(std::make_unique<State>()), rows_(rows), cols_(cols) {
  XXH3_INITSTATE(&state_->xxh);
  XXH3_128bits_reset(&state_->xxh);
}

BlockKeyStream::~BlockKeyStream() = default;

void BlockKeyStream::update(std::span<const double> values) {
  XXH3_128bits_update(&state_->xxh, values.data(), values.size_bytes());
  seen_ += values.size();
}

Result<BlockKey> BlockKeyStream::finish() {
  if (seen_ != uint64_t{rows_} * cols_) {
    return invalid_argument("a " + std::to_string(rows_) + "x" + std::to_string(cols_) + " block was given " +
                            std::to_string(seen_) + " values");
  }
  return named_key(rows_, cols_, XXH3_128bits_digest(&state_->xxh));
}

Result<BlockKey> block_key(uint32_t rows, uint32_t cols, const double* first_row, std::size_t row_stride) {
  // Read row by row so that rows inside a larger matrix need no copy.
  BlockKeyStream stream(rows, cols);
  if (row_stride == cols) {
    stream.update({first_row, std::size_t{rows} * cols});
  } else {
    for (uint32_t r = 0; r < rows; ++r) stream.update({first_row + r * row_stride, cols});
  }
  return stream.finish();
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
