#include "tessera/linalg/gemm.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace tessera::linalg {
namespace {

// Row-major matrix with a leading dimension wider than its width, so tests catch kernels that
// confuse the two.
struct Strided {
  std::size_t rows, cols, ld;
  std::vector<double> values;
  Strided(std::size_t r, std::size_t c, std::size_t pad) : rows(r), cols(c), ld(c + pad), values(r * (c + pad), -7.0) {}
  double& at(std::size_t i, std::size_t j) { return values[i * ld + j]; }
};

// Small integers keep every product and sum exact in binary64, so comparisons can be ==.
void fill_integers(Strided& m, int seed) {
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) m.at(i, j) = static_cast<double>((static_cast<int>(i * 7 + j * 3) + seed) % 11 - 5);
}

void naive_gemm(std::size_t m, std::size_t n, std::size_t k, double alpha, Strided& a, Strided& b, double beta,
                Strided& c) {
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::size_t p = 0; p < k; ++p) sum += a.at(i, p) * b.at(p, j);
      c.at(i, j) = alpha * sum + beta * c.at(i, j);
    }
}

TEST(Gemm, MatchesNaiveTripleLoopOnOddSizesWithPaddedLeadingDimensions) {
  const std::size_t m = 37, n = 53, k = 71;
  Strided a(m, k, 5), b(k, n, 3), c(m, n, 9), expected(m, n, 9);
  fill_integers(a, 1);
  fill_integers(b, 4);
  fill_integers(c, 2);
  expected.values = c.values;
  gemm(m, n, k, 2.0, a.values.data(), a.ld, b.values.data(), b.ld, -1.0, c.values.data(), c.ld);
  naive_gemm(m, n, k, 2.0, a, b, -1.0, expected);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(c.at(i, j), expected.at(i, j)) << "at " << i << "," << j;
  // Padding between rows is untouched.
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = n; j < c.ld; ++j) ASSERT_EQ(c.at(i, j), -7.0);
}

TEST(Gemm, AccumulateAddsIntoC) {
  const std::size_t m = 13, n = 7, k = 29;
  Strided a(m, k, 1), b(k, n, 2), c(m, n, 0), product(m, n, 0);
  fill_integers(a, 3);
  fill_integers(b, 8);
  for (auto& v : c.values) v = 0.0;
  for (auto& v : product.values) v = 0.0;
  naive_gemm(m, n, k, 1.0, a, b, 0.0, product);
  for (int round = 1; round <= 3; ++round) {
    gemm_accumulate(m, n, k, a.values.data(), a.ld, b.values.data(), b.ld, c.values.data(), c.ld);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(c.at(i, j), round * product.at(i, j));
  }
}

TEST(Gemm, EmptyInnerDimensionOnlyScalesC) {
  std::vector<double> c{1, 2, 3, 4};
  gemm(2, 2, 0, 1.0, nullptr, 0, nullptr, 2, 3.0, c.data(), 2);
  EXPECT_EQ(c, (std::vector<double>{3, 6, 9, 12}));
  gemm(2, 2, 0, 1.0, nullptr, 0, nullptr, 2, 0.0, c.data(), 2);
  EXPECT_EQ(c, (std::vector<double>{0, 0, 0, 0}));
}

// The transpose of a strided matrix, with its own padding: what a transposed operand looks like
// when it is stored.
Strided transposed(Strided& m, std::size_t pad) {
  Strided t(m.cols, m.rows, pad);
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) t.at(j, i) = m.at(i, j);
  return t;
}

// gemm_ex with every combination of transposed operands, stored with their own padding as a job
// would find them, against the naive product of the untransposed ones (padding stays untouched).
void expect_every_transpose_matches(std::size_t m, std::size_t n, std::size_t k) {
  Strided a(m, k, 5), b(k, n, 3), c(m, n, 9), expected(m, n, 9);
  fill_integers(a, 1);
  fill_integers(b, 4);
  fill_integers(c, 2);
  expected.values = c.values;
  naive_gemm(m, n, k, 2.0, a, b, -1.0, expected);
  Strided a_t = transposed(a, 4);  // k x m, stored as the job would find A
  Strided b_t = transposed(b, 6);  // n x k
  for (const bool transpose_a : {false, true}) {
    for (const bool transpose_b : {false, true}) {
      SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " transpose_a=" << transpose_a
                                        << " transpose_b=" << transpose_b);
      const Strided& stored_a = transpose_a ? a_t : a;
      const Strided& stored_b = transpose_b ? b_t : b;
      Strided out = c;
      gemm_ex(transpose_a, transpose_b, m, n, k, 2.0, stored_a.values.data(), stored_a.ld, stored_b.values.data(),
              stored_b.ld, -1.0, out.values.data(), out.ld);
      ASSERT_EQ(out.values, expected.values) << "padding included: it must stay untouched";
    }
  }
}

TEST(GemmEx, EachTransposeMatchesTheProductOfTheUntransposedOperands) {
  expect_every_transpose_matches(37, 53, 71);  // op(A) m x k, op(B) k x n
}

TEST(GemmEx, VectorProductsOnEitherSideMatchEveryTransposeAndStride) {
  // m == 1 or n == 1 runs as dgemv: every operand layout, padded leading dimensions included.
  for (const auto& [m, n] : {std::pair<std::size_t, std::size_t>{37, 1}, {1, 53}, {1, 1}}) {
    ASSERT_NO_FATAL_FAILURE(expect_every_transpose_matches(m, n, 71));
  }
}

TEST(GemmEx, ReadsTransposedSubBlocksInPlace) {
  // op(A) = A[2:2+k, 3:3+m]^T and op(B) = B[1:1+n, 4:4+k]^T, read through offset pointers with
  // the whole tiles' leading dimensions, as a worker reads blocks of stored tiles.
  const std::size_t m = 6, n = 5, k = 9;
  Strided a(k + 4, m + 7, 0), b(n + 3, k + 6, 0), c(m, n, 1);
  fill_integers(a, 2);
  fill_integers(b, 3);
  for (auto& v : c.values) v = 0.0;
  gemm_ex(true, true, m, n, k, 1.0, &a.at(2, 3), a.ld, &b.at(1, 4), b.ld, 0.0, c.values.data(), c.ld);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::size_t p = 0; p < k; ++p) sum += a.at(2 + p, 3 + i) * b.at(1 + j, 4 + p);
      ASSERT_EQ(c.at(i, j), sum) << i << "," << j;
    }
}

TEST(GemmEx, EmptyInnerDimensionOnlyScalesCTransposedToo) {
  std::vector<double> c{1, 2, 3, 4};
  gemm_ex(true, true, 2, 2, 0, 1.0, nullptr, 2, nullptr, 1, 3.0, c.data(), 2);
  EXPECT_EQ(c, (std::vector<double>{3, 6, 9, 12}));
}

TEST(Gemv, MatchesNaiveProduct) {
  const std::size_t m = 9, n = 17;
  Strided a(m, n, 4);
  fill_integers(a, 6);
  std::vector<double> x(n), y(m, 99.0);
  for (std::size_t j = 0; j < n; ++j) x[j] = static_cast<double>(j % 5) - 2.0;
  gemv(m, n, a.values.data(), a.ld, x.data(), y.data());
  for (std::size_t i = 0; i < m; ++i) {
    double sum = 0.0;
    for (std::size_t j = 0; j < n; ++j) sum += a.at(i, j) * x[j];
    EXPECT_EQ(y[i], sum);
  }
}

TEST(Gemm, DescribesTheBlasLibraryFromWhatItReports) {
  const std::string description = blas_description();
  RecordProperty("blas", description);
  // The fallback text means the library did not report its configuration: a stub or the wrong
  // library was linked, and reports would not say which BLAS produced their numbers.
  EXPECT_NE(description, "OpenBLAS (configuration unknown)");
  EXPECT_TRUE(std::regex_search(description, std::regex(R"(\b\d+\.\d+(\.\d+)?\b)")))
      << "no library version in \"" << description << "\"";
  EXPECT_EQ(description.find('\n'), std::string::npos) << "one line, for report tables";
}

TEST(Gemm, ProductsStayExactWhateverBlasThreadCountIsSet) {
  // Large enough that a threaded BLAS splits the work; small integers keep every sum exact, so
  // any split must give the same bits as the naive product.
  constexpr std::size_t kSize = 320;
  Strided a(kSize, kSize, 1), b(kSize, kSize, 2), expected(kSize, kSize, 3);
  fill_integers(a, 1);
  fill_integers(b, 2);
  fill_integers(expected, 3);
  Strided initial_c = expected;
  naive_gemm(kSize, kSize, kSize, 1.0, a, b, 1.0, expected);
  for (int threads : {1, 2, 4, 0, -3}) {  // 0 and negative counts mean one thread
    SCOPED_TRACE(threads);
    set_blas_threads(threads);
    Strided c = initial_c;
    gemm_accumulate(kSize, kSize, kSize, a.values.data(), a.ld, b.values.data(), b.ld, c.values.data(), c.ld);
    ASSERT_EQ(c.values, expected.values);
  }
  set_blas_threads(1);  // what the compute pools expect
}

}  // namespace
}  // namespace tessera::linalg
