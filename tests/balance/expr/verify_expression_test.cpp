// The whole-expression check: the true value passes under Freivalds and the exact check, with
// integer and real inputs, transposes on inputs, powers and sums; one wrong entry, a NaN or a
// value that overflowed fails, naming where.
#include "tessera/balance/expr/verify_expression.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "tessera/balance/expr/evaluate.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/expr/rewrite.hpp"

namespace tessera::balance {
namespace {

struct Case {
  expr::Expr e;
  std::map<std::string, linalg::Matrix> values;
  std::map<std::string, linalg::MatrixView> views;
  linalg::Matrix value;
};

Case make_case(const std::string& text, const std::map<std::string, expr::Shape>& shapes, linalg::FillKind fill) {
  Case c;
  uint64_t seed = 11;
  for (const auto& [name, shape] : shapes) {
    c.values.emplace(name, linalg::random_matrix(shape.rows, shape.cols, seed++, fill));
  }
  for (const auto& [name, m] : c.values) c.views.emplace(name, linalg::MatrixView(m));
  Result<expr::Expr> parsed = expr::parse(text, shapes);
  EXPECT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  c.e = expr::transposes_to_inputs(expr::powers_by_squaring(*parsed));
  Result<linalg::Matrix> value = expr::evaluate(c.e, c.views);
  EXPECT_TRUE(value.is_ok()) << value.status().to_string();
  c.value = *value;
  return c;
}

const std::map<std::string, expr::Shape> kShapes = {{"P", {60, 60}}, {"u", {1, 60}}, {"A", {45, 60}}, {"h", {45, 1}}};
const char* const kExpressions[] = {"u * P^6", "P^3 - 0.5 * P", "(A' * A)^2 * A' * h", "I + P + P^2 + P^3",
                                    "(A * P)' * h"};

TEST(VerifyExpression, TheTrueValuePassesEitherWay) {
  for (linalg::FillKind fill : {linalg::FillKind::kIntegers, linalg::FillKind::kUniform}) {
    for (const char* text : kExpressions) {
      SCOPED_TRACE(text);
      const Case c = make_case(text, kShapes, fill);
      for (multiply::VerifyMode mode : {multiply::VerifyMode::kFreivalds, multiply::VerifyMode::kExact}) {
        const multiply::Verification check = expr::verify_expression(c.e, c.views, c.value, mode, 7);
        EXPECT_TRUE(check.passed) << multiply::verify_mode_name(mode) << ": " << check.detail;
        EXPECT_LE(check.max_error_ratio, 1.0);
      }
    }
  }
}

TEST(VerifyExpression, OneWrongEntryFailsAndIsNamed) {
  for (const char* text : kExpressions) {
    SCOPED_TRACE(text);
    Case c = make_case(text, kShapes, linalg::FillKind::kUniform);
    const std::size_t row = c.value.rows / 2, col = c.value.cols - 1;
    // Far beyond rounding: |E| |x| of a power of a random matrix dwarfs its (cancelling) entries.
    c.value.at(row, col) += 1e-3 * (std::fabs(c.value.at(row, col)) + 1.0);
    const multiply::Verification freivalds = expr::verify_expression(c.e, c.views, c.value, multiply::VerifyMode::kFreivalds, 7);
    EXPECT_FALSE(freivalds.passed);
    EXPECT_NE(freivalds.detail.find("row " + std::to_string(row)), std::string::npos) << freivalds.detail;
    const multiply::Verification exact = expr::verify_expression(c.e, c.views, c.value, multiply::VerifyMode::kExact, 7);
    EXPECT_FALSE(exact.passed);
    EXPECT_NE(exact.detail.find(fmt::format("[{}][{}]", row, col)), std::string::npos) << exact.detail;
  }
}

TEST(VerifyExpression, NonFiniteValuesFail) {
  Case c = make_case("u * P^6", kShapes, linalg::FillKind::kUniform);
  c.value.at(0, 3) = std::numeric_limits<double>::infinity();
  const multiply::Verification check = expr::verify_expression(c.e, c.views, c.value, multiply::VerifyMode::kFreivalds, 7);
  EXPECT_FALSE(check.passed);
  EXPECT_NE(check.detail.find("[0][3]"), std::string::npos) << check.detail;
  EXPECT_NE(check.detail.find("inf"), std::string::npos) << check.detail;
}

// Finite inputs whose value overflows: both modes refuse it alike, naming the first entry (as
// the product check does; issue 40).
TEST(VerifyExpression, AValueThatOverflowedFailsInBothModesAlike) {
  Case c = make_case("P^3 - 0.5 * P", kShapes, linalg::FillKind::kUniform);
  linalg::Matrix& p = c.values.at("P");  // the views read this memory
  std::fill(p.values.begin(), p.values.end(), 1e200);
  Result<linalg::Matrix> value = expr::evaluate(c.e, c.views);
  ASSERT_TRUE(value.is_ok()) << value.status().to_string();
  ASSERT_TRUE(std::isinf(value->at(0, 0)));
  const multiply::Verification freivalds = expr::verify_expression(c.e, c.views, *value, multiply::VerifyMode::kFreivalds, 7);
  const multiply::Verification exact = expr::verify_expression(c.e, c.views, *value, multiply::VerifyMode::kExact, 7);
  EXPECT_FALSE(freivalds.passed);
  EXPECT_FALSE(exact.passed);
  EXPECT_NE(exact.detail.find("[0][0] is +inf"), std::string::npos) << exact.detail;
  EXPECT_NE(exact.detail.find("overflows"), std::string::npos) << exact.detail;
  EXPECT_EQ(freivalds.detail, exact.detail);
}

TEST(VerifyExpression, NoneChecksNothing) {
  const Case c = make_case("u * P^6", kShapes, linalg::FillKind::kUniform);
  const multiply::Verification check = expr::verify_expression(c.e, c.views, c.value, multiply::VerifyMode::kNone, 7);
  EXPECT_FALSE(check.passed);
  EXPECT_EQ(check.mode, multiply::VerifyMode::kNone);
}

}  // namespace
}  // namespace tessera::balance
