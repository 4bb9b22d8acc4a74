#include "tessera/linalg/gemm.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <regex>
#include <string>
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
