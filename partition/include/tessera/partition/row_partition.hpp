// Row partitions: splitting the n rows of A and C into one contiguous block per node.
//
// proportional_rows implements Tinetti & Luque's distribution: node i gets floor(n * pw_i) rows,
// where pw_i are the weights normalised to sum 1, and the rows left over go one each to the nodes
// with the largest fractional parts n*pw_i - floor(n*pw_i) (ties to the lower index). Every row is
// assigned exactly once, blocks are contiguous and in node order, and each share is within one row
// of n * pw_i. Pure functions, thread-safe, no I/O.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::partition {

struct RowBlock {
  uint64_t begin = 0;
  uint64_t count = 0;
  uint64_t end() const { return begin + count; }
  bool operator==(const RowBlock&) const = default;
};

// Weights normalised to sum 1. Fails (kInvalidArgument) on an empty list, a negative, NaN or
// infinite weight, or all weights zero; the message names the offending index and value.
Result<std::vector<double>> normalise_weights(std::span<const double> weights);

// One block per weight; a weight of 0 gets an empty block. Fails as normalise_weights does.
Result<std::vector<RowBlock>> proportional_rows(uint64_t n, std::span<const double> weights);

// Equal weights: the first n % parts blocks get one extra row. REQUIRES: parts >= 1.
std::vector<RowBlock> even_rows(uint64_t n, std::size_t parts);

// "[0,10) [10,25) ..." for plans and test failures.
std::string to_string(std::span<const RowBlock> blocks);

}  // namespace tessera::partition
