#include "tessera/balance/expr/expression.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

namespace tessera::balance::expr {

namespace {

bool open_identity(const Expr& e);

std::string shape(const Expr& e) {
  if (open_identity(e)) return "I (size open)";
  return fmt::format("{}x{}", e->rows, e->cols);
}

Expr make(Node node) { return std::make_shared<const Node>(std::move(node)); }

// I without a size yet, or a multiple of it (0.5 * I).
bool open_identity(const Expr& e) {
  return (e->op == Op::kIdentity && e->rows == 0) || (e->op == Op::kScale && open_identity(e->operands[0]));
}

// An identity whose size was open takes `size` from the other side of a sum or difference.
Expr sized(const Expr& e, uint64_t size) {
  if (!open_identity(e)) return e;
  Node node = *e;
  node.rows = node.cols = size;
  if (e->op == Op::kScale) node.operands = {sized(e->operands[0], size)};
  return make(std::move(node));
}

Result<Expr> additive(Op op, const Expr& left, const Expr& right) {
  const char* what = op == Op::kSum ? "sum" : "difference";
  if (open_identity(left) && open_identity(right)) {
    return invalid_argument(fmt::format("I {} I has no size; write identity of a size or add a matrix",
                                        op == Op::kSum ? "+" : "-"));
  }
  Expr a = left, b = right;
  if (open_identity(a)) {
    if (b->rows != b->cols) {
      return invalid_argument(fmt::format("I needs a square partner in a {}, but the other side is {}", what, shape(b)));
    }
    a = sized(a, b->rows);
  }
  if (open_identity(b)) {
    if (a->rows != a->cols) {
      return invalid_argument(fmt::format("I needs a square partner in a {}, but the other side is {}", what, shape(a)));
    }
    b = sized(b, a->rows);
  }
  if (a->rows != b->rows || a->cols != b->cols) {
    return invalid_argument(fmt::format("cannot {} {} and {}: a {} needs equal shapes", op == Op::kSum ? "add" : "subtract",
                                        shape(a), shape(b), what));
  }
  Node node;
  node.op = op;
  node.rows = a->rows;
  node.cols = a->cols;
  node.operands = {a, b};
  return make(std::move(node));
}

// Precedence for printing: sums 1, products and scales 2, powers and transposes 3, atoms 4.
int precedence(const Expr& e) {
  switch (e->op) {
    case Op::kSum:
    case Op::kDifference: return 1;
    case Op::kProduct:
    case Op::kScale: return 2;
    case Op::kPower:
    case Op::kTranspose: return 3;
    case Op::kInput:
    case Op::kIdentity: return 4;
  }
  return 4;
}

std::string wrapped(const Expr& e, int at_least) {
  const std::string text = to_string(e);
  return precedence(e) < at_least ? "(" + text + ")" : text;
}

}  // namespace

Result<Expr> input(const std::string& name, uint64_t rows, uint64_t cols) {
  const bool name_ok = !name.empty() && name.size() <= 64 &&
                       (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                       std::all_of(name.begin(), name.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!name_ok) {
    return invalid_argument(fmt::format("'{}' is not a matrix name; use a letter or _ then letters, digits or _ "
                                        "(at most 64), e.g. P or u_0",
                                        name));
  }
  if (name == "I") return invalid_argument("the name I means the identity; give the input another name");
  if (rows == 0 || cols == 0 || rows > kMaxDimension || cols > kMaxDimension) {
    return invalid_argument(fmt::format("input {} is {}x{}; each dimension must be 1..{}", name, rows, cols, kMaxDimension));
  }
  Node node;
  node.op = Op::kInput;
  node.name = name;
  node.rows = rows;
  node.cols = cols;
  return make(std::move(node));
}

Result<Expr> identity(uint64_t size) {
  if (size > kMaxDimension) return invalid_argument(fmt::format("identity of size {} is over {}", size, kMaxDimension));
  Node node;
  node.op = Op::kIdentity;
  node.rows = node.cols = size;
  return make(std::move(node));
}

Result<Expr> product(const Expr& left, const Expr& right) {
  if (open_identity(left) || open_identity(right)) {
    return invalid_argument("I in a product has no size to take; leave it out (I x A is A) or write identity(n)");
  }
  if (left->cols != right->rows) {
    return invalid_argument(fmt::format("cannot multiply {} by {}: the left's columns ({}) must equal the right's rows ({})",
                                        shape(left), shape(right), left->cols, right->rows));
  }
  Node node;
  node.op = Op::kProduct;
  node.rows = left->rows;
  node.cols = right->cols;
  node.operands = {left, right};
  return make(std::move(node));
}

Result<Expr> sum(const Expr& left, const Expr& right) { return additive(Op::kSum, left, right); }
Result<Expr> difference(const Expr& left, const Expr& right) { return additive(Op::kDifference, left, right); }

Result<Expr> scale(double scalar, const Expr& operand) {
  if (!std::isfinite(scalar)) return invalid_argument(fmt::format("the scalar {} is not finite", scalar));
  Node node;
  node.op = Op::kScale;
  node.rows = operand->rows;
  node.cols = operand->cols;
  node.scalar = scalar;
  node.operands = {operand};
  return make(std::move(node));
}

Result<Expr> transpose(const Expr& operand) {
  if (open_identity(operand)) return operand;  // (c I)' is c I
  Node node;
  node.op = Op::kTranspose;
  node.rows = operand->cols;
  node.cols = operand->rows;
  node.operands = {operand};
  return make(std::move(node));
}

Result<Expr> power(const Expr& operand, uint32_t exponent) {
  if (open_identity(operand)) {
    return invalid_argument("a power of I has no size to take; I^k is I, so write I");
  }
  if (operand->rows != operand->cols) {
    return invalid_argument(fmt::format("cannot raise {} to a power: only square matrices have powers", shape(operand)));
  }
  if (exponent > kMaxExponent) {
    return invalid_argument(fmt::format("exponent {} is over {}", exponent, kMaxExponent));
  }
  if (exponent == 0) return identity(operand->rows);
  if (exponent == 1) return operand;
  Node node;
  node.op = Op::kPower;
  node.rows = node.cols = operand->rows;
  node.exponent = exponent;
  node.operands = {operand};
  return make(std::move(node));
}

std::string to_string(const Expr& e) {
  switch (e->op) {
    case Op::kInput: return e->name;
    case Op::kIdentity: return "I";
    case Op::kProduct: return wrapped(e->operands[0], 2) + " * " + wrapped(e->operands[1], 3);
    case Op::kSum: return to_string(e->operands[0]) + " + " + wrapped(e->operands[1], 2);
    case Op::kDifference: return to_string(e->operands[0]) + " - " + wrapped(e->operands[1], 2);
    case Op::kScale: return fmt::format("{} * {}", e->scalar, wrapped(e->operands[0], 3));
    case Op::kTranspose: return wrapped(e->operands[0], 4) + "'";
    case Op::kPower: return fmt::format("{}^{}", wrapped(e->operands[0], 4), e->exponent);
  }
  return "?";
}

bool same(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (a->op != b->op || a->rows != b->rows || a->cols != b->cols || a->name != b->name || a->scalar != b->scalar ||
      a->exponent != b->exponent || a->operands.size() != b->operands.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a->operands.size(); ++i) {
    if (!same(a->operands[i], b->operands[i])) return false;
  }
  return true;
}

namespace {

void collect(const Expr& e, std::unordered_set<const Node*>& seen, std::vector<Expr>& out) {
  if (!seen.insert(e.get()).second) return;
  for (const Expr& operand : e->operands) collect(operand, seen, out);
  out.push_back(e);
}

}  // namespace

std::vector<Expr> nodes_in_order(const Expr& e) {
  std::unordered_set<const Node*> seen;
  std::vector<Expr> out;
  collect(e, seen, out);
  return out;
}

std::vector<std::string> input_names(const Expr& e) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  // Leaves come out of the depth-first walk as they are first reached: first-use order.
  for (const Expr& node : nodes_in_order(e)) {
    if (node->op == Op::kInput && seen.insert(node->name).second) names.push_back(node->name);
  }
  return names;
}

}  // namespace tessera::balance::expr
