// Matrix: a dense row-major float64 matrix owned by value; MatrixView / MutableMatrixView: the
// same shape over memory someone else owns (a numpy array, a caller's buffer), so the driver and
// verification can work on it without a copy. A view never owns or frees; its owner keeps the
// memory alive and unchanged (MatrixView) for as long as the view is used. Seeded generation and
// .npy I/O work on Matrix.
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

// Read-only row-major window: row r starts at data + r * ld. ld >= cols; ld == cols is contiguous.
struct MatrixView {
  const double* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t ld = 0;  // elements from the start of one row to the start of the next

  MatrixView() = default;
  MatrixView(const double* values, std::size_t r, std::size_t c, std::size_t leading = 0)
      : data(values), rows(r), cols(c), ld(leading == 0 ? c : leading) {}
  MatrixView(const Matrix& matrix)  // NOLINT(google-explicit-constructor): a Matrix is a view of itself
      : MatrixView(matrix.values.data(), matrix.rows, matrix.cols) {}

  const double* row(std::size_t r) const { return data + r * ld; }
  double at(std::size_t r, std::size_t c) const { return data[r * ld + c]; }
  bool contiguous() const { return ld == cols || rows <= 1; }
};

// Writable row-major window over caller-owned memory (the product C, for example).
struct MutableMatrixView {
  double* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t ld = 0;

  MutableMatrixView() = default;
  MutableMatrixView(double* values, std::size_t r, std::size_t c, std::size_t leading = 0)
      : data(values), rows(r), cols(c), ld(leading == 0 ? c : leading) {}
  MutableMatrixView(Matrix& matrix)  // NOLINT(google-explicit-constructor)
      : MutableMatrixView(matrix.values.data(), matrix.rows, matrix.cols) {}
  operator MatrixView() const { return {data, rows, cols, ld}; }  // NOLINT(google-explicit-constructor)

  double* row(std::size_t r) const { return data + r * ld; }
  double& at(std::size_t r, std::size_t c) const { return data[r * ld + c]; }
  bool contiguous() const { return ld == cols || rows <= 1; }
  void fill(double value) const;
};

// A packed (ld == cols) copy of any view.
Matrix to_matrix(MatrixView view);

enum class FillKind {
  kUniform,   // uniform in [-1, 1)
  kIntegers,  // integers in [-8, 8]: products and sums stay exact in float64 for k < 2^40
};

// Same seed, kind and shape -> same matrix on every machine (std::mt19937_64 + own mapping, not
// std::uniform_real_distribution, whose output is implementation-defined).
Matrix random_matrix(std::size_t rows, std::size_t cols, uint64_t seed, FillKind kind = FillKind::kUniform);

// Asks the kernel to back `m`'s values with 2 MiB pages (MADV_HUGEPAGE, then MADV_COLLAPSE for the
// pages already touched), as numpy's allocator asks for its large arrays: a GEMV streaming a
// large matrix over 4 KiB pages runs some 25-40% below the memory's rate. Best effort: a kernel
// that refuses changes nothing but speed. For matrices this process computes on many times.
void prefer_huge_pages(Matrix& m);

Result<Matrix> read_npy(const std::string& path);
Status write_npy(const std::string& path, const Matrix& matrix);

}  // namespace tessera::linalg
