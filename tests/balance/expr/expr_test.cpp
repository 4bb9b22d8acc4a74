#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "tessera/balance/expr/evaluate.hpp"
#include "tessera/balance/expr/expression.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::expr {
namespace {

using linalg::FillKind;
using linalg::Matrix;

Expr parsed(const std::string& text, const std::map<std::string, Shape>& inputs) {
  Result<Expr> e = parse(text, inputs);
  EXPECT_TRUE(e.is_ok()) << text << ": " << e.status().to_string();
  return e.is_ok() ? *e : nullptr;
}

std::string parse_error(const std::string& text, const std::map<std::string, Shape>& inputs) {
  Result<Expr> e = parse(text, inputs);
  EXPECT_FALSE(e.is_ok()) << text << " parsed as " << (e.is_ok() ? to_string(*e) : "");
  return e.is_ok() ? "" : e.status().message();
}

// Small integer matrices: every product, sum and power below is exact in float64, so a
// rewritten expression must give bit-identical values.
std::map<std::string, Matrix> integer_inputs(const std::map<std::string, Shape>& shapes) {
  std::map<std::string, Matrix> values;
  uint64_t seed = 1;
  for (const auto& [name, shape] : shapes) {
    Matrix m = linalg::random_matrix(shape.rows, shape.cols, seed++, FillKind::kIntegers);
    for (double& v : m.values) v = std::fmod(v, 3.0);  // -2..2: powers stay far below 2^53
    values.emplace(name, std::move(m));
  }
  return values;
}

std::map<std::string, linalg::MatrixView> views(const std::map<std::string, Matrix>& values) {
  std::map<std::string, linalg::MatrixView> out;
  for (const auto& [name, m] : values) out.emplace(name, linalg::MatrixView(m));
  return out;
}

Matrix naive_product(const Matrix& a, const Matrix& b) {
  Matrix c(a.rows, b.cols);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t p = 0; p < a.cols; ++p)
      for (std::size_t j = 0; j < b.cols; ++j) c.at(i, j) += a.at(i, p) * b.at(p, j);
  return c;
}

Matrix evaluated(const Expr& e, const std::map<std::string, Matrix>& values) {
  Result<Matrix> result = evaluate(e, views(values));
  EXPECT_TRUE(result.is_ok()) << result.status().to_string();
  return result.is_ok() ? *result : Matrix();
}

TEST(ExprBuild, ShapesAreCheckedAndNamedInTheRefusal) {
  const Expr a = *input("A", 3, 4);
  const Expr b = *input("B", 5, 6);
  const Result<Expr> bad = product(a, b);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("cannot multiply 3x4 by 5x6"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(sum(a, b).is_ok());
  EXPECT_NE(power(a, 2).status().message().find("only square matrices"), std::string::npos);
  const Expr t = *transpose(a);
  EXPECT_EQ(t->rows, 4u);
  EXPECT_EQ(t->cols, 3u);
  EXPECT_EQ((*product(t, a))->rows, 4u);
  EXPECT_FALSE(input("2x", 1, 1).is_ok());
  EXPECT_FALSE(input("I", 2, 2).is_ok());
  EXPECT_FALSE(input("A", 0, 2).is_ok());
  EXPECT_FALSE(scale(std::nan(""), a).is_ok());
  EXPECT_EQ((*power(*input("P", 4, 4), 0))->op, Op::kIdentity);
}

TEST(ExprParse, ReadsWhatUsersTypeWithPrecedence) {
  const std::map<std::string, Shape> shapes = {{"u", {1, 8}}, {"P", {8, 8}}, {"A", {8, 8}}, {"B", {8, 8}}};
  EXPECT_EQ(to_string(parsed("u * P^8", shapes)), "u * P^8");
  EXPECT_EQ(to_string(parsed("u@P @ P", shapes)), "u * P * P");
  EXPECT_EQ(to_string(parsed("(A + B) * A'", shapes)), "(A + B) * A'");
  EXPECT_EQ(to_string(parsed("A.T^2", shapes)), "(A')^2");
  EXPECT_EQ(to_string(parsed("-A + 2 * 3 * B", shapes)), "-1 * A + 6 * B");
  EXPECT_EQ(to_string(parsed("I + A + A^2", shapes)), "I + A + A^2");
  EXPECT_EQ(parsed("I + A", shapes)->operands[0]->rows, 8u) << "I takes its size from the sum";
  EXPECT_EQ(parsed("A - 0.5 * I", shapes)->operands[1]->operands[0]->rows, 8u);
  EXPECT_EQ(to_string(parsed("A^0 * B", shapes)), "I * B");
}

TEST(ExprParse, ErrorsNameTheColumnAndTheFix) {
  const std::map<std::string, Shape> shapes = {{"u", {1, 8}}, {"P", {8, 8}}, {"R", {3, 5}}};
  EXPECT_NE(parse_error("P * u", shapes).find("column 3: cannot multiply 8x8 by 1x8"), std::string::npos);
  EXPECT_NE(parse_error("P * Q", shapes).find("no input named Q; the inputs are: P, R, u"), std::string::npos);
  EXPECT_NE(parse_error("(P + P", shapes).find("column 1: this '(' is not closed"), std::string::npos);
  EXPECT_NE(parse_error("P^x", shapes).find("column 3: expected a whole exponent"), std::string::npos);
  EXPECT_NE(parse_error("R^2", shapes).find("only square matrices"), std::string::npos);
  EXPECT_NE(parse_error("P + 1", shapes).find("A + 2 * I"), std::string::npos);
  EXPECT_NE(parse_error("2 * 3", shapes).find("plain number"), std::string::npos);
  EXPECT_NE(parse_error("I", shapes).find("no size"), std::string::npos);
  EXPECT_NE(parse_error("I * P", shapes).find("I in a product"), std::string::npos);
  EXPECT_NE(parse_error("P P", shapes).find("column 3"), std::string::npos);
  EXPECT_NE(parse_error("", shapes).find("found the end"), std::string::npos);
  EXPECT_NE(parse_error(std::string(300, '(') + "P" + std::string(300, ')'), shapes).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(parse_error("P\x01", shapes).find("control character"), std::string::npos);
}

TEST(ExprRewrite, AVectorTimesAPowerBecomesVectorMatrixProducts) {
  const std::map<std::string, Shape> shapes = {{"u", {1, 64}}, {"P", {64, 64}}};
  const Expr before = parsed("u * P^8", shapes);
  const Expr after = rewrite(before);
  // Eight products of a 1 x 64 row by P, left to right, instead of three 64^3 squarings.
  EXPECT_EQ(cost(after).products, 8u);
  EXPECT_DOUBLE_EQ(cost(after).flops, 8 * 2.0 * 64 * 64);
  EXPECT_EQ(to_string(after), "u * P * P * P * P * P * P * P * P");
  const auto values = integer_inputs(shapes);
  EXPECT_EQ(evaluated(after, values).values, evaluated(before, values).values);
}

TEST(ExprRewrite, APowerOfAProductInAChainWithAVectorBecomesVectorProducts) {
  // HITS: (A' A)^4 h is eight vector products (2 n^2 flops each), not A' A (2 n^3) then four.
  const std::map<std::string, Shape> shapes = {{"A", {40, 30}}, {"h", {30, 1}}};
  const Expr written = parsed("(A' * A)^4 * h", shapes);
  const Expr rewritten = rewrite(written);
  EXPECT_EQ(cost(rewritten).products, 8u) << to_string(rewritten);
  EXPECT_DOUBLE_EQ(cost(rewritten).flops, 8.0 * 2.0 * 40 * 30);
  const std::map<std::string, Matrix> values = integer_inputs(shapes);
  EXPECT_EQ(evaluated(rewritten, values), evaluated(written, values));
}

TEST(ExprRewrite, APowerAloneIsSquaredWithEachSquareComputedOnce) {
  const std::map<std::string, Shape> shapes = {{"P", {16, 16}}};
  const Expr after = rewrite(parsed("P^8", shapes));
  EXPECT_EQ(cost(after).products, 3u) << explain(parsed("P^8", shapes), after);  // P2, P4, P8
  const Expr odd = rewrite(parsed("P^13", shapes));  // 13 = 8 + 4 + 1: three squarings, two more products
  EXPECT_EQ(cost(odd).products, 5u);
  const auto values = integer_inputs(shapes);
  Matrix expected = values.at("P");
  for (int i = 1; i < 13; ++i) expected = naive_product(expected, values.at("P"));
  EXPECT_EQ(evaluated(odd, values).values, expected.values);
}

TEST(ExprRewrite, ChainOrderFollowsTheDynamicProgramme) {
  // The textbook case: 10x30, 30x5, 5x60. (AB)C costs 2*(1500 + 3000) flops, A(BC) 2*(9000 + 18000).
  const std::map<std::string, Shape> shapes = {{"A", {10, 30}}, {"B", {30, 5}}, {"C", {5, 60}}, {"D", {60, 2}}};
  EXPECT_EQ(to_string(order_chains(parsed("A * (B * C)", shapes))), "A * B * C");
  EXPECT_DOUBLE_EQ(cost(order_chains(parsed("A * B * C", shapes))).flops, 2.0 * (10 * 30 * 5 + 10 * 5 * 60));
  // With D (60 x 2) at the end the cheapest is A (B (C D)): 2*(600 + 300 + 300) flops.
  const Expr four = order_chains(parsed("A * B * C * D", shapes));
  EXPECT_EQ(to_string(four), "A * (B * (C * D))");
  EXPECT_DOUBLE_EQ(cost(four).flops, 2.0 * (5 * 60 * 2 + 30 * 5 * 2 + 10 * 30 * 2));
  const auto values = integer_inputs(shapes);
  EXPECT_EQ(evaluated(four, values).values, evaluated(parsed("((A * B) * C) * D", shapes), values).values);
  // Each product sends its operands out and its result back: 8 (10x30 + 30x5 + 10x5) bytes for A * B.
  EXPECT_DOUBLE_EQ(cost(parsed("A * B", shapes)).moved_bytes, 8.0 * (300 + 150 + 50));
  const CostWeights weights{1e-9, 1e-6};
  EXPECT_DOUBLE_EQ(weights.seconds(cost(parsed("A * B", shapes))), 2.0 * 1500 * 1e-9 + 8.0 * 500 * 1e-6);
}

TEST(ExprRewrite, CommonSubexpressionsAreComputedOnce) {
  const std::map<std::string, Shape> shapes = {{"A", {12, 12}}, {"H", {20, 12}}};
  // Leontief: A^2 inside A^3 and A^2 itself are one node after rewriting.
  const Expr series = parsed("I + A + A^2 + A^3", shapes);
  const Expr after = rewrite(series);
  EXPECT_LE(cost(after).products, 3u) << explain(series, after);
  const Expr twice = parsed("H' * H + H' * H", shapes);
  EXPECT_EQ(cost(eliminate_common(twice)).products, 1u);
  EXPECT_EQ(cost(twice).products, 2u);
  const auto values = integer_inputs(shapes);
  EXPECT_EQ(evaluated(after, values).values, evaluated(series, values).values);
  const std::string text = explain(series, after);
  EXPECT_NE(text.find("t1 = "), std::string::npos) << text;
  EXPECT_NE(text.find("before: I + A + A^2 + A^3"), std::string::npos) << text;
}

TEST(ExprRewrite, EveryOperatorMatchesItsDefinitionOnIntegers) {
  const std::map<std::string, Shape> shapes = {{"A", {6, 4}}, {"B", {4, 6}}, {"S", {6, 6}}};
  const auto values = integer_inputs(shapes);
  const Matrix& a = values.at("A");
  const Matrix& b = values.at("B");
  const Matrix& s = values.at("S");
  const Matrix ab = naive_product(a, b);
  Matrix expected(6, 6);
  for (std::size_t i = 0; i < 6; ++i) {
    for (std::size_t j = 0; j < 6; ++j) {
      // 2 (A B)^T - S + I, entry by entry.
      expected.at(i, j) = 2.0 * ab.at(j, i) - s.at(i, j) + (i == j ? 1.0 : 0.0);
    }
  }
  const Expr e = parsed("2 * (A * B)' - S + I", shapes);
  EXPECT_EQ(evaluated(e, values).values, expected.values);
  EXPECT_EQ(evaluated(rewrite(e), values).values, expected.values);
  // A power of a power, evaluated as written (the inner power's products made while the outer's are).
  Matrix s6 = s;
  for (int i = 1; i < 6; ++i) s6 = naive_product(s6, s);
  EXPECT_EQ(evaluated(parsed("(S^2)^3", shapes), values).values, s6.values);
}

TEST(ExprEvaluate, AMissingOrMisshapedInputIsRefusedByName) {
  const Expr e = parsed("P * P", {{"P", {3, 3}}});
  EXPECT_NE(evaluate(e, {}).status().message().find("input P"), std::string::npos);
  const Matrix wrong(3, 4);
  EXPECT_NE(evaluate(e, {{"P", linalg::MatrixView(wrong)}}).status().message().find("P is 3x4"), std::string::npos);
}

TEST(ExprEvaluate, ProductsGoThroughTheGivenMultiplyOnceEach) {
  const std::map<std::string, Shape> shapes = {{"A", {8, 8}}};
  const auto values = integer_inputs(shapes);
  int calls = 0;
  const MultiplyFn counting = [&](const Matrix& x, const Matrix& y) -> Result<Matrix> {
    ++calls;
    return naive_product(x, y);
  };
  const Expr e = rewrite(parsed("A^2 + A^2 * A^2", shapes));
  Result<Matrix> result = evaluate(e, views(values), counting);
  ASSERT_TRUE(result.is_ok());
  EXPECT_EQ(calls, 2);  // A^2 once, then A^2 * A^2
  const MultiplyFn failing = [](const Matrix&, const Matrix&) -> Result<Matrix> {
    return network_error("node 'pi1' is unreachable");
  };
  EXPECT_NE(evaluate(e, views(values), failing).status().message().find("pi1"), std::string::npos);
}

}  // namespace
}  // namespace tessera::balance::expr

namespace tessera::balance::expr {
namespace {

bool has_transpose_above_non_input(const Expr& e) {
  for (const Expr& node : nodes_in_order(e)) {
    if (node->op == Op::kTranspose && node->operands[0]->op != Op::kInput && node->operands[0]->op != Op::kIdentity) {
      return true;
    }
  }
  return false;
}

TEST(ExprRewrite, TransposesMoveDownToTheInputsAndKeepTheValue) {
  const std::map<std::string, Shape> shapes = {{"A", {5, 7}}, {"B", {7, 4}}, {"S", {4, 4}}};
  const std::map<std::string, Matrix> values = integer_inputs(shapes);
  for (const std::string text : {"(A * B)'", "(A * B * S)' * (A * B)'' ", "(2 * (A * B) - (A * B))'", "((A * B)' * A * B + S)'",
                                  "(S^3)'", "(I + S)' * S'"}) {
    SCOPED_TRACE(text);
    const Expr written = parsed(text, shapes);
    ASSERT_NE(written, nullptr);
    const Expr moved = transposes_to_inputs(powers_by_squaring(written));
    EXPECT_FALSE(has_transpose_above_non_input(moved)) << to_string(moved);
    for (const Expr& node : nodes_in_order(moved)) EXPECT_NE(node->op, Op::kPower) << to_string(moved);
    EXPECT_EQ(evaluated(moved, values), evaluated(written, values)) << to_string(moved);
  }
}

TEST(ExprRewrite, PowersBySquaringChangesNothingElse) {
  const std::map<std::string, Shape> shapes = {{"P", {6, 6}}, {"u", {1, 6}}};
  const std::map<std::string, Matrix> values = integer_inputs(shapes);
  const Expr written = parsed("u * P^5 + u * P", shapes);
  const Expr lowered = powers_by_squaring(written);
  // u * P^5: P^2, P^4 and P^4 * P by squaring; the other product and the sum as written.
  EXPECT_EQ(cost(lowered).products, 3u + 2u);
  EXPECT_EQ(evaluated(lowered, values), evaluated(written, values));
  const Expr plain = parsed("u * P + u", shapes);
  EXPECT_EQ(powers_by_squaring(plain), plain);  // nothing to lower: the same node comes back
}

}  // namespace
}  // namespace tessera::balance::expr
