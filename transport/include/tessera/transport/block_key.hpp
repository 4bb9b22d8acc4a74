// The content address of a block of doubles: what the coordinator and every worker agree a
// resident block is named by, so that a node asked "do you hold this?" answers for these exact
// bytes in this exact shape. SHA-256 over a versioned prefix (rows, cols, little-endian) and the
// values as they lie in memory (little-endian IEEE-754 doubles, as the wire carries them). Not a
// secret: who may use a stored block is the block store's business (worker/block_store.hpp).
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tessera/core/status.hpp"

namespace tessera::transport {

struct BlockKey {
  std::array<std::byte, 32> digest{};
  bool operator==(const BlockKey&) const = default;
  auto operator<=>(const BlockKey&) const = default;
};

// The key of the rows x cols block `values` (row-major, values.size() == rows * cols); fails only
// when OpenSSL cannot allocate its digest.
Result<BlockKey> block_key(uint32_t rows, uint32_t cols, std::span<const double> values);

// 64 lowercase hex digits, and back (kInvalidArgument naming the text when it is not one).
std::string to_hex(const BlockKey& key);
Result<BlockKey> block_key_from_hex(std::string_view hex);

}  // namespace tessera::transport
