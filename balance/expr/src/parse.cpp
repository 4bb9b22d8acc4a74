#include "tessera/balance/expr/parse.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <variant>

#include <fmt/format.h>

namespace tessera::balance::expr {

namespace {

constexpr std::size_t kMaxText = 4096;
constexpr int kMaxDepth = 200;  // nested parentheses and unary minus; deeper input is refused, not recursed into

// What a subexpression evaluates to while parsing: a plain number or a matrix expression.
using Value = std::variant<double, Expr>;

class Parser {
 public:
  Parser(std::string_view text, const std::map<std::string, Shape>& inputs) : text_(text), inputs_(inputs) {}

  Result<Expr> run() {
    Result<Value> value = parse_sum();
    if (!value) return value.status();
    skip_space();
    if (at_ < text_.size()) return fail(fmt::format("unexpected '{}'; expected an operator (+ - * ^ ') or the end", text_[at_]));
    if (std::holds_alternative<double>(*value)) {
      return fail_at(0, "the expression is a plain number; it needs at least one matrix");
    }
    return std::get<Expr>(std::move(*value));
  }

 private:
  Status fail(const std::string& what) const { return fail_at(at_, what); }
  Status fail_at(std::size_t column, const std::string& what) const {
    return invalid_argument(fmt::format("expression, column {}: {}\n  {}\n  {}^", column + 1, what, text_,
                                        std::string(column, ' ')));
  }
  // A builder's refusal (shapes), placed where the operator stood.
  Status placed(std::size_t column, const Status& status) const { return fail_at(column, status.message()); }

  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool accept(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  Result<Value> parse_sum() {
    Result<Value> left = parse_term();
    if (!left) return left;
    for (;;) {
      skip_space();
      const std::size_t op_at = at_;
      const bool plus = accept('+');
      if (!plus && !accept('-')) return left;
      Result<Value> right = parse_term();
      if (!right) return right;
      if (std::holds_alternative<double>(*left) && std::holds_alternative<double>(*right)) {
        const double a = std::get<double>(*left), b = std::get<double>(*right);
        left = Value(plus ? a + b : a - b);
        continue;
      }
      if (std::holds_alternative<double>(*left) || std::holds_alternative<double>(*right)) {
        return fail_at(op_at, "cannot add a number and a matrix; to add it on the diagonal write it times I, "
                              "e.g. A + 2 * I");
      }
      Result<Expr> combined = plus ? sum(std::get<Expr>(*left), std::get<Expr>(*right))
                                   : difference(std::get<Expr>(*left), std::get<Expr>(*right));
      if (!combined) return placed(op_at, combined.status());
      left = Value(std::move(*combined));
    }
  }

  Result<Value> parse_term() {
    Result<Value> left = parse_unary();
    if (!left) return left;
    for (;;) {
      skip_space();
      const std::size_t op_at = at_;
      if (!accept('*') && !accept('@')) return left;
      Result<Value> right = parse_unary();
      if (!right) return right;
      const bool left_number = std::holds_alternative<double>(*left);
      const bool right_number = std::holds_alternative<double>(*right);
      if (left_number && right_number) {
        left = Value(std::get<double>(*left) * std::get<double>(*right));
        continue;
      }
      Result<Expr> combined = left_number    ? scale(std::get<double>(*left), std::get<Expr>(*right))
                              : right_number ? scale(std::get<double>(*right), std::get<Expr>(*left))
                                             : product(std::get<Expr>(*left), std::get<Expr>(*right));
      if (!combined) return placed(op_at, combined.status());
      left = Value(std::move(*combined));
    }
  }

  Result<Value> parse_unary() {
    skip_space();
    const std::size_t minus_at = at_;
    if (accept('-')) {
      if (++depth_ > kMaxDepth) return fail("nested too deeply");
      Result<Value> operand = parse_unary();
      --depth_;
      if (!operand) return operand;
      if (std::holds_alternative<double>(*operand)) return Value(-std::get<double>(*operand));
      Result<Expr> negated = scale(-1.0, std::get<Expr>(*operand));
      if (!negated) return placed(minus_at, negated.status());
      return Value(std::move(*negated));
    }
    return parse_postfix();
  }

  Result<Value> parse_postfix() {
    Result<Value> value = parse_primary();
    if (!value) return value;
    for (;;) {
      skip_space();
      const std::size_t op_at = at_;
      if (accept('^')) {
        skip_space();
        const std::size_t digits_at = at_;
        uint32_t exponent = 0;
        const char* begin = text_.data() + at_;
        const char* end = text_.data() + text_.size();
        const auto [stop, error] = std::from_chars(begin, end, exponent);
        if (error != std::errc() || stop == begin) {
          return fail_at(digits_at, fmt::format("expected a whole exponent 0..{} after ^", kMaxExponent));
        }
        at_ += static_cast<std::size_t>(stop - begin);
        if (std::holds_alternative<double>(*value)) {
          value = Value(std::pow(std::get<double>(*value), static_cast<double>(exponent)));
          continue;
        }
        Result<Expr> raised = power(std::get<Expr>(*value), exponent);
        if (!raised) return placed(op_at, raised.status());
        value = Value(std::move(*raised));
      } else if (accept('\'') || (text_.substr(at_, 2) == ".T" && (at_ += 2, true))) {
        if (std::holds_alternative<double>(*value)) continue;  // a number is its own transpose
        Result<Expr> flipped = transpose(std::get<Expr>(*value));
        if (!flipped) return placed(op_at, flipped.status());
        value = Value(std::move(*flipped));
      } else {
        return value;
      }
    }
  }

  Result<Value> parse_primary() {
    skip_space();
    if (at_ >= text_.size()) return fail("expected a matrix name, a number or '(' here, found the end");
    const char c = text_[at_];
    if (c == '(') {
      const std::size_t open_at = at_++;
      if (++depth_ > kMaxDepth) return fail("nested too deeply");
      Result<Value> inner = parse_sum();
      --depth_;
      if (!inner) return inner;
      if (!accept(')')) return fail_at(open_at, "this '(' is not closed");
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      double number = 0.0;
      const char* begin = text_.data() + at_;
      const auto [stop, error] = std::from_chars(begin, text_.data() + text_.size(), number);
      if (error != std::errc() || stop == begin || !std::isfinite(number)) return fail("expected a finite number");
      at_ += static_cast<std::size_t>(stop - begin);
      return Value(number);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t name_at = at_;
      while (at_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_')) ++at_;
      const std::string name(text_.substr(name_at, at_ - name_at));
      if (name == "I") {
        Result<Expr> eye = identity(0);
        if (!eye) return eye.status();
        return Value(std::move(*eye));
      }
      const auto found = inputs_.find(name);
      if (found == inputs_.end()) {
        std::string known;
        for (const auto& [known_name, shape] : inputs_) known += (known.empty() ? "" : ", ") + known_name;
        return fail_at(name_at, fmt::format("no input named {}; the inputs are: {}", name, known.empty() ? "none" : known));
      }
      Result<Expr> leaf = input(name, found->second.rows, found->second.cols);
      if (!leaf) return placed(name_at, leaf.status());
      return Value(std::move(*leaf));
    }
    return fail(fmt::format("unexpected '{}'; expected a matrix name, a number or '('", c));
  }

  std::string_view text_;
  const std::map<std::string, Shape>& inputs_;
  std::size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Expr> parse(std::string_view text, const std::map<std::string, Shape>& inputs) {
  if (text.size() > kMaxText) {
    return invalid_argument(fmt::format("the expression is {} characters; at most {}", text.size(), kMaxText));
  }
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 && !std::isspace(static_cast<unsigned char>(c))) {
      return invalid_argument("the expression holds a control character");
    }
  }
  Result<Expr> parsed = Parser(text, inputs).run();
  if (!parsed) return parsed;
  if ((*parsed)->op == Op::kIdentity && (*parsed)->rows == 0) {
    return invalid_argument("the expression is I alone, which has no size");
  }
  return parsed;
}

}  // namespace tessera::balance::expr
