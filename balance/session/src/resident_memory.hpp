// What an earlier session measured for a resident matrix: the layout its measured shares ended
// with (which node holds which rows), so that a later session on the same matrix, with the nodes'
// block stores warm, places exactly those pieces (every one a node kept) and measures nothing.
// One JSON file per matrix (by a fingerprint of its content), operand width and node set, in the placement cache's folder.
// A hint, never trusted: a file that is missing, unreadable, malformed or inconsistent with the
// matrix is no memory. Internal to the session library; values and free functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/transport/block_key.hpp"

namespace tessera::balance::session {

struct RememberedPiece {
  std::string node;
  uint64_t row_begin = 0;
  uint32_t rows = 0;
  bool operator==(const RememberedPiece&) const = default;
};

struct ResidentMemory {
  std::vector<std::string> nodes;  // the placement's node set, in its order
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t columns = 0;  // the operands' width the shares were measured for
  uint64_t block_rows = 0;
  std::vector<RememberedPiece> pieces;  // in row order
  double measured_product_s = 0.0;
  bool operator==(const ResidentMemory&) const = default;
};

// What names a matrix's memory: the block key of its shape and every 64th row (and its last),
// read in milliseconds where the whole matrix takes a pass of seconds. A memory is a hint about
// shares, never about content: a matrix that differs only in rows not read finds the memory of
// another of its shape, places those shares, and its pieces, named by their whole content, are
// sent where no store holds them.
transport::BlockKey matrix_fingerprint(linalg::MatrixView a);

// DIR/CLUSTER/<the matrix's fingerprint>-c<columns>-<the node set's digest>.json; "" when dir is "".
std::string resident_memory_path(const std::string& dir, const std::string& cluster, const transport::BlockKey& matrix,
                                 uint64_t columns, const std::vector<std::string>& nodes);

// The memory at `path` if it is sound and describes a rows x cols matrix measured for `columns`
// on `nodes`: its pieces cover the rows once, each named node in the set.
std::optional<ResidentMemory> read_resident_memory(const std::string& path, uint64_t rows, uint64_t cols,
                                                   uint64_t columns, const std::vector<std::string>& nodes);

// Writes it (a temporary file renamed into place, folders created); "" path: nothing.
Status write_resident_memory(const std::string& path, const ResidentMemory& memory);

}  // namespace tessera::balance::session
