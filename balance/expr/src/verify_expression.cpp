#include "tessera/balance/expr/verify_expression.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <unordered_map>

#include <fmt/format.h>

#include "tessera/balance/expr/evaluate.hpp"

namespace tessera::balance::expr {

namespace {

using expr::Op;

// Vectors pushed up the tree, as columns: the values and their magnitudes (|.| of everything
// they were made from), rows x rounds each.
struct Pushed {
  linalg::Matrix value, magnitude;
};

// y += op(a) x for a plain input (transposed: a^T x), values and magnitudes in one pass over a.
void apply_input(linalg::MatrixView a, bool transposed, const Pushed& x, Pushed& y) {
  const std::size_t rounds = x.value.cols;
  for (std::size_t i = 0; i < a.rows; ++i) {
    const double* row = a.row(i);
    for (std::size_t j = 0; j < a.cols; ++j) {
      const double entry = row[j], size = std::fabs(entry);
      const std::size_t to = transposed ? j : i, from = transposed ? i : j;
      for (std::size_t q = 0; q < rounds; ++q) {
        y.value.at(to, q) += entry * x.value.at(from, q);
        y.magnitude.at(to, q) += size * x.magnitude.at(from, q);
      }
    }
  }
}

class Pusher {
 public:
  explicit Pusher(const std::map<std::string, linalg::MatrixView>& inputs) : inputs_(inputs) {}

  // e x with its magnitude; nullopt when e has a transpose above something other than an input.
  std::optional<Pushed> push(const expr::Expr& e, const Pushed& x) {
    const std::size_t rounds = x.value.cols;
    switch (e->op) {
      case Op::kInput: {
        Pushed y{linalg::Matrix(e->rows, rounds), linalg::Matrix(e->rows, rounds)};
        apply_input(inputs_.at(e->name), false, x, y);
        return y;
      }
      case Op::kIdentity: return x;
      case Op::kTranspose: {
        const expr::Expr& inner = e->operands[0];
        if (inner->op == Op::kIdentity) return x;
        if (inner->op != Op::kInput) return std::nullopt;
        Pushed y{linalg::Matrix(e->rows, rounds), linalg::Matrix(e->rows, rounds)};
        apply_input(inputs_.at(inner->name), true, x, y);
        return y;
      }
      case Op::kProduct: {
        std::optional<Pushed> right = push(e->operands[1], x);
        if (!right) return std::nullopt;
        return push(e->operands[0], *right);
      }
      case Op::kPower: {
        std::optional<Pushed> y = x;
        for (uint32_t k = 0; k < e->exponent && y; ++k) y = push(e->operands[0], *y);
        return y;
      }
      case Op::kScale: {
        std::optional<Pushed> y = push(e->operands[0], x);
        if (!y) return std::nullopt;
        for (double& v : y->value.values) v *= e->scalar;
        for (double& v : y->magnitude.values) v *= std::fabs(e->scalar);
        return y;
      }
      case Op::kSum:
      case Op::kDifference: {
        std::optional<Pushed> left = push(e->operands[0], x);
        std::optional<Pushed> right = left ? push(e->operands[1], x) : std::nullopt;
        if (!right) return std::nullopt;
        const double sign = e->op == Op::kSum ? 1.0 : -1.0;
        for (std::size_t i = 0; i < left->value.values.size(); ++i) {
          left->value.values[i] += sign * right->value.values[i];
          left->magnitude.values[i] += right->magnitude.values[i];
        }
        return left;
      }
    }
    return std::nullopt;
  }

 private:
  const std::map<std::string, linalg::MatrixView>& inputs_;
};

// The inner dimensions summed along the worst path from the inputs to e, plus one per addition
// or scaling: how many roundings can pile up in one entry of the value.
double rounding_depth(const expr::Expr& e, std::unordered_map<const expr::Node*, double>& memo) {
  if (const auto found = memo.find(e.get()); found != memo.end()) return found->second;
  double depth = 0.0;
  switch (e->op) {
    case Op::kInput:
    case Op::kIdentity: break;
    case Op::kTranspose: depth = rounding_depth(e->operands[0], memo); break;
    case Op::kScale: depth = rounding_depth(e->operands[0], memo) + 1.0; break;
    case Op::kProduct:
      depth = rounding_depth(e->operands[0], memo) + rounding_depth(e->operands[1], memo) +
              static_cast<double>(e->operands[0]->cols);
      break;
    case Op::kPower:
      depth = static_cast<double>(e->exponent) * (rounding_depth(e->operands[0], memo) + static_cast<double>(e->rows));
      break;
    case Op::kSum:
    case Op::kDifference:
      depth = std::max(rounding_depth(e->operands[0], memo), rounding_depth(e->operands[1], memo)) + 1.0;
      break;
  }
  memo.emplace(e.get(), depth);
  return depth;
}

// The same tree with every sign made positive: differences become sums, scalars their
// magnitudes, so that evaluating it on |inputs| gives |E|, the exact check's rounding scale.
expr::Expr magnitude_tree(const expr::Expr& e) {
  std::vector<expr::Expr> operands;
  for (const expr::Expr& operand : e->operands) operands.push_back(magnitude_tree(operand));
  expr::Node node = *e;
  if (node.op == Op::kDifference) node.op = Op::kSum;
  if (node.op == Op::kScale) node.scalar = std::fabs(node.scalar);
  node.operands = std::move(operands);
  return std::make_shared<const expr::Node>(std::move(node));
}

multiply::Verification exact_check(const expr::Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                         linalg::MatrixView value, double depth) {
  multiply::Verification check;
  check.mode = multiply::VerifyMode::kExact;
  Result<linalg::Matrix> local = expr::evaluate(e, inputs);
  if (!local) {
    check.detail = fmt::format("the local evaluation failed: {}", local.status().message());
    return check;
  }
  std::map<std::string, linalg::Matrix> absolute;
  std::map<std::string, linalg::MatrixView> absolute_views;
  for (const auto& [name, view] : inputs) {
    linalg::Matrix copy = linalg::to_matrix(view);
    for (double& v : copy.values) v = std::fabs(v);
    absolute_views[name] = absolute.emplace(name, std::move(copy)).first->second;
  }
  Result<linalg::Matrix> magnitude = expr::evaluate(magnitude_tree(e), absolute_views);
  if (!magnitude) {
    check.detail = fmt::format("the local evaluation failed: {}", magnitude.status().message());
    return check;
  }
  for (std::size_t i = 0; i < value.rows; ++i) {
    for (std::size_t j = 0; j < value.cols; ++j) {
      const double difference = std::fabs(value.at(i, j) - local->at(i, j));
      const double bound = multiply::kBoundSafety * 2.0 * depth * multiply::kUnitRoundoff * magnitude->at(i, j);
      check.max_abs_error = std::max(check.max_abs_error, difference);
      if (!(difference <= bound)) {
        check.max_error_ratio = bound > 0.0 ? difference / bound : std::numeric_limits<double>::infinity();
        check.detail = fmt::format("entry [{}][{}] is {} where the inputs give {} (allowed difference {:.3g})", i, j,
                                   value.at(i, j), local->at(i, j), bound);
        return check;
      }
      if (bound > 0.0) check.max_error_ratio = std::max(check.max_error_ratio, difference / bound);
    }
  }
  check.passed = true;
  check.detail = "every entry matches a local evaluation";
  return check;
}

}  // namespace

multiply::Verification verify_expression(const expr::Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                               linalg::MatrixView value, multiply::VerifyMode mode, uint64_t seed, int rounds) {
  const auto start = std::chrono::steady_clock::now();
  std::unordered_map<const expr::Node*, double> memo;
  const double depth = rounding_depth(e, memo);
  multiply::Verification check;
  check.mode = mode;
  if (mode == multiply::VerifyMode::kNone) return check;
  const auto finish = [&](multiply::Verification done) {
    done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return done;
  };
  if (const std::optional<multiply::NonFiniteEntry> bad = multiply::first_nonfinite(value)) {
    check.detail = fmt::format("{}: the expression overflows doubles or a worker returned garbage",
                               multiply::describe_nonfinite("the value", *bad));
    return finish(check);
  }
  if (mode == multiply::VerifyMode::kExact) return finish(exact_check(e, inputs, value, depth));

  const std::size_t count = static_cast<std::size_t>(std::max(rounds, 1));
  std::mt19937_64 rng(seed);
  Pushed x{linalg::Matrix(value.cols, count), linalg::Matrix(value.cols, count)};
  x.value.values = multiply::freivalds_vector(value.cols * count, rng);
  for (std::size_t i = 0; i < x.value.values.size(); ++i) x.magnitude.values[i] = std::fabs(x.value.values[i]);
  Pusher pusher(inputs);
  std::optional<Pushed> expected = pusher.push(e, x);
  if (!expected) return finish(exact_check(e, inputs, value, depth));
  const double length = static_cast<double>(value.cols);
  for (std::size_t i = 0; i < value.rows; ++i) {
    const double* row = value.row(i);
    for (std::size_t q = 0; q < count; ++q) {
      double got = 0.0, got_magnitude = 0.0;
      for (std::size_t j = 0; j < value.cols; ++j) {
        got += row[j] * x.value.at(j, q);
        got_magnitude += std::fabs(row[j]) * x.magnitude.at(j, q);
      }
      const double difference = std::fabs(got - expected->value.at(i, q));
      const double bound = multiply::kBoundSafety * multiply::kUnitRoundoff *
                           ((2.0 * depth + length) * expected->magnitude.at(i, q) + length * got_magnitude);
      check.max_abs_error = std::max(check.max_abs_error, difference);
      if (!(difference <= bound)) {
        check.max_error_ratio = bound > 0.0 ? difference / bound : std::numeric_limits<double>::infinity();
        check.detail = fmt::format("row {} fails Freivalds' check: (value x)[{}] = {} where the inputs give {} "
                                   "(allowed difference {:.3g})", i, i, got, expected->value.at(i, q), bound);
        return finish(check);
      }
      if (bound > 0.0) check.max_error_ratio = std::max(check.max_error_ratio, difference / bound);
    }
  }
  check.passed = true;
  check.detail = fmt::format("{} Freivalds rounds passed", count);
  return finish(check);
}

}  // namespace tessera::balance::expr
