// Matrix: a dense row-major float64 matrix owned by value, plus seeded generation and .npy I/O.
//
// .npy support is deliberately narrow: format 1.0/2.0/3.0, dtype '<f8' (float64 little-endian),
// fortran_order False, 2-D shape. Anything else is refused with a message saying what the file
// holds and what Tessera expects (e.g. "A.npy: dtype '<f4' (float32); save as float64:
// np.save(path, a.astype('<f8'))"). Values; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::linalg {

struct Matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> values;  // rows * cols, row-major

  Matrix() = default;
  Matrix(std::size_t r, std::size_t c) : rows(r), cols(c), values(r * c, 0.0) {}
  double& at(std::size_t r, std::size_t c) { return values[r * cols + c]; }
  double at(std::size_t r, std::size_t c) const { return values[r * cols + c]; }
  double* row(std::size_t r) { return values.data() + r * cols; }
  const double* row(std::size_t r) const { return values.data() + r * cols; }
  bool operator==(const Matrix&) const = default;
};

enum class FillKind {
  kUniform,   // uniform in [-1, 1)
  kIntegers,  // integers in [-8, 8]: products and sums stay exact in float64 for k < 2^40
};

// Same seed, kind and shape -> same matrix on every machine (std::mt19937_64 + own mapping, not
// std::uniform_real_distribution, whose output is implementation-defined).
Matrix random_matrix(std::size_t rows, std::size_t cols, uint64_t seed, FillKind kind = FillKind::kUniform);

Result<Matrix> read_npy(const std::string& path);
Status write_npy(const std::string& path, const Matrix& matrix);

}  // namespace tessera::linalg
