#include "tessera/balance/multiply/verify.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tessera/linalg/gemm.hpp"

namespace tessera::balance {
namespace {

linalg::Matrix product(const linalg::Matrix& a, const linalg::Matrix& b) {
  linalg::Matrix c(a.rows, b.cols);
  linalg::gemm(a.rows, b.cols, a.cols, 1.0, a.values.data(), a.cols, b.values.data(), b.cols, 0.0, c.values.data(),
               b.cols);
  return c;
}

// A product summed in a different order than BLAS: real rounding differences, no real errors.
linalg::Matrix naive_product(const linalg::Matrix& a, const linalg::Matrix& b) {
  linalg::Matrix c(a.rows, b.cols);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t p = a.cols; p-- > 0;)
      for (std::size_t j = 0; j < b.cols; ++j) c.at(i, j) += a.at(i, p) * b.at(p, j);
  return c;
}

class VerifyModes : public ::testing::TestWithParam<multiply::VerifyMode> {};

TEST_P(VerifyModes, AcceptsCorrectProductsSummedInAnyOrder) {
  const linalg::Matrix a = linalg::random_matrix(123, 457, 1);
  const linalg::Matrix b = linalg::random_matrix(457, 89, 2);
  const multiply::Verification blas = multiply::verify_product(a, b, product(a, b), GetParam(), 7);
  EXPECT_TRUE(blas.passed) << blas.detail;
  const multiply::Verification naive = multiply::verify_product(a, b, naive_product(a, b), GetParam(), 7);
  EXPECT_TRUE(naive.passed) << naive.detail << " ratio " << naive.max_error_ratio;
}

TEST_P(VerifyModes, RejectsOneWrongEntry) {
  const linalg::Matrix a = linalg::random_matrix(64, 200, 3);
  const linalg::Matrix b = linalg::random_matrix(200, 50, 4);
  linalg::Matrix c = product(a, b);
  c.at(17, 23) += 1e-6;  // far above rounding (~1e-13 here), far below the entries (~10)
  const multiply::Verification check = multiply::verify_product(a, b, c, GetParam(), 9);
  EXPECT_FALSE(check.passed);
  EXPECT_NE(check.detail.find("17"), std::string::npos) << check.detail;
}

TEST_P(VerifyModes, RejectsAMissingPanelContribution) {
  const linalg::Matrix a = linalg::random_matrix(40, 96, 5);
  linalg::Matrix b = linalg::random_matrix(96, 30, 6);
  const linalg::Matrix full = product(a, b);
  for (std::size_t p = 32; p < 64; ++p)
    for (std::size_t j = 0; j < b.cols; ++j) b.at(p, j) = 0.0;
  EXPECT_FALSE(multiply::verify_product(a, linalg::random_matrix(96, 30, 6), product(a, b), GetParam(), 1).passed);
  EXPECT_TRUE(multiply::verify_product(a, linalg::random_matrix(96, 30, 6), full, GetParam(), 1).passed);
}

TEST_P(VerifyModes, RejectsNaN) {
  const linalg::Matrix a = linalg::random_matrix(8, 8, 1);
  const linalg::Matrix b = linalg::random_matrix(8, 8, 2);
  linalg::Matrix c = product(a, b);
  c.at(3, 3) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(multiply::verify_product(a, b, c, GetParam(), 1).passed);
}

TEST_P(VerifyModes, IntegerInputsAreExact) {
  const linalg::Matrix a = linalg::random_matrix(30, 70, 1, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(70, 20, 2, linalg::FillKind::kIntegers);
  const multiply::Verification check = multiply::verify_product(a, b, naive_product(a, b), GetParam(), 3);
  EXPECT_TRUE(check.passed);
  // The exact check compares C itself, which is exact here; Freivalds multiplies by real-valued
  // vectors, so its two sides differ by rounding.
  if (GetParam() == multiply::VerifyMode::kExact) {
    EXPECT_EQ(check.max_abs_error, 0.0);
  }
}

// Non-finite inputs (accepted with --allow-nonfinite): matching non-finite entries are equal,
// anything else in those places still fails, in both modes.
TEST_P(VerifyModes, NonFiniteInputsVerifyWhenCMatchesTheReference) {
  linalg::Matrix a = linalg::random_matrix(12, 9, 1);
  linalg::Matrix b = linalg::random_matrix(9, 7, 2);
  a.at(4, 2) = std::numeric_limits<double>::quiet_NaN();
  a.at(6, 0) = std::numeric_limits<double>::infinity();
  const linalg::Matrix c = product(a, b);
  ASSERT_TRUE(std::isnan(c.at(4, 0)));
  const multiply::Verification check = multiply::verify_product(a, b, c, GetParam(), 1);
  EXPECT_TRUE(check.passed) << check.detail;

  linalg::Matrix wrong = c;
  wrong.at(4, 5) = 1.0;  // a NaN row that came back finite
  EXPECT_FALSE(multiply::verify_product(a, b, wrong, GetParam(), 1).passed);
  wrong = c;
  wrong.at(9, 3) += 1.0;  // a finite row that is wrong
  EXPECT_FALSE(multiply::verify_product(a, b, wrong, GetParam(), 1).passed);
  wrong = c;
  wrong.at(6, 1) = -wrong.at(6, 1);  // the wrong infinity
  ASSERT_TRUE(std::isinf(wrong.at(6, 1)));
  const multiply::Verification flipped = multiply::verify_product(a, b, wrong, GetParam(), 1);
  EXPECT_FALSE(flipped.passed);
  EXPECT_NE(flipped.detail.find("C[6][1]"), std::string::npos) << flipped.detail;
}

TEST_P(VerifyModes, NonFiniteBIsComparedEntryByEntry) {
  const linalg::Matrix a = linalg::random_matrix(10, 8, 3);
  linalg::Matrix b = linalg::random_matrix(8, 6, 4);
  b.at(5, 2) = -std::numeric_limits<double>::infinity();
  const linalg::Matrix c = product(a, b);
  const multiply::Verification check = multiply::verify_product(a, b, c, GetParam(), 1);
  EXPECT_TRUE(check.passed) << check.detail;
  if (GetParam() == multiply::VerifyMode::kFreivalds) {
    EXPECT_NE(check.detail.find("compared with a local BLAS product instead"), std::string::npos) << check.detail;
  }
  linalg::Matrix wrong = c;
  wrong.at(7, 4) *= 2.0;
  EXPECT_FALSE(multiply::verify_product(a, b, wrong, GetParam(), 1).passed);
}

TEST(VerifyTest, FreivaldsWithMoreRoundsThanOnePassServesAndRaggedSizesStillCatchesOneWrongEntry) {
  // 37 x 29 x 13: no size divisible by the kernel's 4 partial sums; 5 rounds take two passes.
  const linalg::Matrix a = linalg::random_matrix(37, 29, 11);
  const linalg::Matrix b = linalg::random_matrix(29, 13, 12);
  linalg::Matrix c = product(a, b);
  for (int rounds : {1, 2, 4, 5, 9}) {
    const multiply::Verification good = multiply::verify_product(a, b, c, multiply::VerifyMode::kFreivalds, 3, rounds);
    EXPECT_TRUE(good.passed) << rounds << ": " << good.detail;
    EXPECT_NE(good.detail.find(std::to_string(rounds) + " Freivalds rounds"), std::string::npos) << good.detail;
  }
  c.at(36, 12) += 1e-6;  // the last row and column: the tails of both loops
  for (int rounds : {1, 5}) {
    const multiply::Verification bad = multiply::verify_product(a, b, c, multiply::VerifyMode::kFreivalds, 3, rounds);
    EXPECT_FALSE(bad.passed) << rounds;
    EXPECT_NE(bad.detail.find("row 36"), std::string::npos) << bad.detail;
  }
}

TEST(VerifyTest, ACheckPreparedFromAAndBBeforeCExistsJudgesTheCThatArrivesLater) {
  // The multiply prepares the check while C is still being computed; C is filled in afterwards.
  const linalg::Matrix a = linalg::random_matrix(1031, 64, 21);  // rows split over threads unevenly
  const linalg::Matrix b = linalg::random_matrix(64, 40, 22);
  linalg::Matrix c(1031, 40);
  const multiply::ProductCheck check = multiply::ProductCheck::prepare(a, b, multiply::VerifyMode::kFreivalds, 5, 5);
  c = product(a, b);
  for (int threads : {1, 2, 3, 4}) {
    const multiply::Verification good = check.finish(c, threads);
    EXPECT_TRUE(good.passed) << threads << ": " << good.detail;
    EXPECT_GE(good.overlapped_seconds, 0.0);
  }
  // A wrong entry in the first, a middle and the last row of C is caught whichever thread reads it.
  for (std::size_t row : {std::size_t{0}, std::size_t{515}, std::size_t{1030}}) {
    linalg::Matrix wrong = c;
    wrong.at(row, 39) += 1e-3;
    for (int threads : {1, 4}) {
      const multiply::Verification bad = check.finish(wrong, threads);
      EXPECT_FALSE(bad.passed) << row << " " << threads;
      EXPECT_NE(bad.detail.find(fmt::format("row {}:", row)), std::string::npos) << bad.detail;
    }
  }
  // The prepared check gives verify_product's verdict and figures for the same seed.
  const multiply::Verification together = multiply::verify_product(a, b, c, multiply::VerifyMode::kFreivalds, 5, 5);
  const multiply::Verification split = check.finish(c, 2);
  EXPECT_EQ(together.max_error_ratio, split.max_error_ratio);
  EXPECT_EQ(together.detail, split.detail);
  EXPECT_EQ(together.overlapped_seconds, 0.0);  // verify_product waited for both halves
}

TEST(VerifyTest, APreparedCheckStillComparesNonFiniteRowsOfAEntryByEntry) {
  linalg::Matrix a = linalg::random_matrix(600, 12, 31);
  a.at(444, 3) = std::numeric_limits<double>::quiet_NaN();
  const linalg::Matrix b = linalg::random_matrix(12, 9, 32);
  const multiply::ProductCheck check = multiply::ProductCheck::prepare(a, b, multiply::VerifyMode::kFreivalds, 2);
  linalg::Matrix c = product(a, b);
  EXPECT_TRUE(check.finish(c, 3).passed);
  c.at(444, 8) = 1.0;  // a NaN row's entry replaced by a number: Freivalds alone could not see it
  const multiply::Verification bad = check.finish(c, 3);
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.detail.find("C[444][8]"), std::string::npos) << bad.detail;
}

TEST(VerifyTest, FirstNonFiniteNamesItsPosition) {
  linalg::Matrix a = linalg::random_matrix(20, 10, 1);
  EXPECT_FALSE(multiply::first_nonfinite(a).has_value());
  a.at(15, 1) = std::numeric_limits<double>::infinity();
  a.at(12, 7) = std::numeric_limits<double>::quiet_NaN();
  const std::optional<multiply::NonFiniteEntry> first = multiply::first_nonfinite(a);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(multiply::describe_nonfinite("A", *first), "A[12][7] is NaN");
  a.at(12, 7) = 0.0;
  EXPECT_EQ(multiply::describe_nonfinite("B", *multiply::first_nonfinite(a)), "B[15][1] is +inf");
}

// Issue 40: finite inputs whose product overflows (A's entries 1.7e308, B all ones) made C all
// +inf; the exact check passed it (its local product overflowed alike) while Freivalds failed it.
// Both must refuse it, with the same sentence naming the first cell.
TEST(VerifyTest, BothModesRefuseAProductOfFiniteInputsThatOverflowedAndNameItsFirstCell) {
  linalg::Matrix a(6, 5), b(5, 4);
  std::fill(a.values.begin(), a.values.end(), 1.7e308);
  std::fill(b.values.begin(), b.values.end(), 1.0);
  const linalg::Matrix c = product(a, b);
  ASSERT_TRUE(std::isinf(c.at(0, 0)));
  std::string details[2];
  int index = 0;
  for (multiply::VerifyMode mode : {multiply::VerifyMode::kExact, multiply::VerifyMode::kFreivalds}) {
    const multiply::Verification check = multiply::verify_product(a, b, c, mode, 1);
    EXPECT_FALSE(check.passed) << multiply::verify_mode_name(mode) << ": " << check.detail;
    EXPECT_NE(check.detail.find("overflowed"), std::string::npos) << check.detail;
    EXPECT_NE(check.detail.find("C[0][0] is +inf"), std::string::npos) << check.detail;
    EXPECT_TRUE(std::isinf(check.max_error_ratio));
    details[index++] = check.detail;
  }
  EXPECT_EQ(details[0], details[1]);
}

// The first unexplained non-finite entry in row-major order is named, wherever it is, whichever
// thread of Freivalds' pass over C reads it; a NaN a node made up is refused the same way.
TEST(VerifyTest, TheFirstNonFiniteEntryOfCIsNamedInEitherModeWithAnyThreadCount) {
  linalg::Matrix a = linalg::random_matrix(1031, 7, 41);
  linalg::Matrix b = linalg::random_matrix(7, 9, 42);
  // Row 700 of A times column 3 of B overflows; its other columns stay finite.
  a.at(700, 0) = a.at(700, 1) = 6e307;
  for (std::size_t j = 0; j < b.cols; ++j) b.at(0, j) = b.at(1, j) = 0.25;
  b.at(0, 3) = b.at(1, 3) = 2.0;
  linalg::Matrix c = product(a, b);
  ASSERT_TRUE(std::isinf(c.at(700, 3)));
  ASSERT_TRUE(std::isfinite(c.at(700, 2)));
  c.at(900, 5) = std::numeric_limits<double>::quiet_NaN();  // later in row-major order
  for (multiply::VerifyMode mode : {multiply::VerifyMode::kExact, multiply::VerifyMode::kFreivalds}) {
    const multiply::ProductCheck check = multiply::ProductCheck::prepare(a, b, mode, 3);
    for (int threads : {1, 4}) {
      const multiply::Verification verdict = check.finish(c, threads);
      EXPECT_FALSE(verdict.passed);
      EXPECT_NE(verdict.detail.find("C[700][3] is +inf"), std::string::npos) << verdict.detail;
    }
  }
  c.at(700, 3) = 1.0;  // wrong, but finite: the NaN is now the first non-finite entry
  for (multiply::VerifyMode mode : {multiply::VerifyMode::kExact, multiply::VerifyMode::kFreivalds}) {
    const multiply::Verification verdict = multiply::verify_product(a, b, c, mode, 3);
    EXPECT_FALSE(verdict.passed);
    EXPECT_NE(verdict.detail.find("C[900][5] is NaN"), std::string::npos) << verdict.detail;
  }
}

// With non-finite inputs (--allow-nonfinite), a non-finite entry is explained where its row of A
// or its column of B holds one, and compared there as before; one elsewhere is an overflow.
TEST_P(VerifyModes, NonFiniteInputsExplainOnlyTheirOwnRowsAndColumns) {
  linalg::Matrix a = linalg::random_matrix(10, 6, 51);
  linalg::Matrix b = linalg::random_matrix(6, 8, 52);
  a.at(2, 4) = std::numeric_limits<double>::quiet_NaN();  // row 2 of C is NaN
  // Row 7 of C is 1e308 x (B[0][j] + B[1][j]) + a little: finite, except in column 5.
  a.at(7, 0) = a.at(7, 1) = 1e308;
  for (std::size_t j = 0; j < b.cols; ++j) b.at(0, j) = b.at(1, j) = 0.25;
  b.at(0, 5) = b.at(1, 5) = 1.0;
  b.at(1, 6) = -std::numeric_limits<double>::infinity();  // column 6 of C is infinite or NaN
  const linalg::Matrix c = product(a, b);
  ASSERT_TRUE(std::isinf(c.at(7, 5)));
  const multiply::Verification check = multiply::verify_product(a, b, c, GetParam(), 1);
  EXPECT_FALSE(check.passed);
  EXPECT_NE(check.detail.find("C[7][5] is +inf"), std::string::npos) << check.detail;
  EXPECT_NE(check.detail.find("row 7 of A and column 5 of B"), std::string::npos) << check.detail;

  b.at(0, 5) = b.at(1, 5) = 0.5;  // no overflow left: the explained non-finite entries pass
  const linalg::Matrix fine = product(a, b);
  for (std::size_t j = 0; j < fine.cols; ++j) {
    if (j != 6) {
      ASSERT_TRUE(std::isfinite(fine.at(7, j))) << j;
    }
  }
  const multiply::Verification passed = multiply::verify_product(a, b, fine, GetParam(), 1);
  EXPECT_TRUE(passed.passed) << passed.detail;
}

INSTANTIATE_TEST_SUITE_P(Modes, VerifyModes, ::testing::Values(multiply::VerifyMode::kFreivalds, multiply::VerifyMode::kExact));

TEST(VerifyTest, NoneChecksNothingAndSaysSo) {
  const linalg::Matrix a(2, 2), b(2, 2);
  const multiply::Verification check = multiply::verify_product(a, b, linalg::Matrix(2, 2), multiply::VerifyMode::kNone, 1);
  EXPECT_FALSE(check.passed);
  EXPECT_EQ(check.detail, "not verified");
}

TEST(VerifyTest, ModeNames) {
  EXPECT_EQ(*multiply::parse_verify_mode("freivalds"), multiply::VerifyMode::kFreivalds);
  EXPECT_EQ(*multiply::parse_verify_mode("exact"), multiply::VerifyMode::kExact);
  EXPECT_EQ(*multiply::parse_verify_mode("none"), multiply::VerifyMode::kNone);
  EXPECT_NE(multiply::parse_verify_mode("maybe").status().message().find("freivalds, exact, none"), std::string::npos);
}

}  // namespace
}  // namespace tessera::balance
