// The content address of a block of doubles: what the coordinator and every worker agree a
// resident block is named by, so that a node asked "do you hold this?" answers for these exact
// bytes in this exact shape. The key is SHA-256 over a versioned prefix, the shape (rows, cols,
// little-endian) and the XXH3-128 digest of the values as they lie in memory (little-endian
// IEEE-754 doubles, as the wire carries them). XXH3 reads at memory speed (5-6 GB/s here against
// SHA-256's 1.1-1.9), and every key is computed over the whole block on both sides (the
// coordinator before it asks, a worker before it uses a block read from disk), so the content
// digest sets what a warm placement costs. XXH3 catches any corruption a disk or a partial write
// makes; it is not meant to resist a forger who writes the store's files, and it need not:
// a file is used only with the secret's MAC (worker/block_store.hpp), and whoever can write the
// worker's own folder can replace the worker itself. Not a secret.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tessera/core/status.hpp"

namespace tessera::transport {

struct BlockKey {
  std::array<std::byte, 32> digest{};
  bool operator==(const BlockKey&) const = default;
  auto operator<=>(const BlockKey&) const = default;
};

// The key of the rows x cols block whose row r starts at first_row + r * row_stride (row_stride >=
// cols). Always succeeds; Result for symmetry with the span form.
Result<BlockKey> block_key(uint32_t rows, uint32_t cols, const double* first_row, std::size_t row_stride);
// The same for a row-major block `values`; kInvalidArgument when values.size() != rows * cols.
Result<BlockKey> block_key(uint32_t rows, uint32_t cols, std::span<const double> values);

// The key of a rows x cols block whose values arrive in pieces, in row-major order (a worker
// reading a block from disk hashes each chunk while it is still in cache). finish() once all
// rows * cols values were given; it fails (kInvalidArgument) when they were not. Not thread-safe.
class BlockKeyStream {
 public:
  BlockKeyStream(uint32_t rows, uint32_t cols);
  ~BlockKeyStream();
  BlockKeyStream(const BlockKeyStream&) = delete;
  BlockKeyStream& operator=(const BlockKeyStream&) = delete;
  void update(std::span<const double> values);
  Result<BlockKey> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint32_t rows_;
  uint32_t cols_;
  uint64_t seen_ = 0;
};

// 64 lowercase hex digits, and back (kInvalidArgument naming the text when it is not one).
std::string to_hex(const BlockKey& key);
Result<BlockKey> block_key_from_hex(std::string_view hex);

}  // namespace tessera::transport
