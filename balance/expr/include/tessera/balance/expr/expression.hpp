// Matrix expressions as values: the lazy tree a user writes (u * P^8, A*B*C*D, I + A + A^2),
// checked for shape as it is built, before anything is computed or sent anywhere.
//
// A node is immutable and shared (std::shared_ptr<const Node>), so one subexpression can feed
// several parents: after eliminate_common() (rewrite.hpp) equal subtrees are one node, and the
// tree is a DAG that computes each of them once. Builders return Result: a product of 3x4 by
// 5x6 is refused with both shapes named. `I` (the identity), or a multiple of it, may be written
// without a size where a sum or difference gives it one (I + A, A - 0.5 * I); identity(n) makes a
// sized one.
// Values; thread-safe to share (nothing mutates a node after it is built).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::balance::expr {

enum class Op {
  kInput,       // a named matrix the caller supplies
  kIdentity,    // I, rows x rows
  kProduct,     // operands[0] x operands[1]
  kSum,         // operands[0] + operands[1]
  kDifference,  // operands[0] - operands[1]
  kScale,       // scalar x operands[0]
  kTranspose,   // operands[0]^T
  kPower,       // operands[0]^exponent, square operand, exponent >= 1
};

struct Node;
using Expr = std::shared_ptr<const Node>;

struct Node {
  Op op = Op::kInput;
  uint64_t rows = 0, cols = 0;  // 0 x 0 only for an identity whose size is still open
  std::string name;             // kInput
  double scalar = 1.0;          // kScale
  uint32_t exponent = 1;        // kPower
  std::vector<Expr> operands;
};

// The largest dimension and power accepted; far beyond what a cluster multiplies, small enough
// that flop counts stay exact in a double.
constexpr uint64_t kMaxDimension = uint64_t{1} << 31;
constexpr uint32_t kMaxExponent = 1u << 20;

// Names: a letter or '_' then letters, digits, '_' (at most 64); "I" is the identity.
Result<Expr> input(const std::string& name, uint64_t rows, uint64_t cols);
Result<Expr> identity(uint64_t size);  // size 0: sized later by a sum or difference
Result<Expr> product(const Expr& left, const Expr& right);
Result<Expr> sum(const Expr& left, const Expr& right);
Result<Expr> difference(const Expr& left, const Expr& right);
Result<Expr> scale(double scalar, const Expr& operand);  // finite scalars only
Result<Expr> transpose(const Expr& operand);
Result<Expr> power(const Expr& operand, uint32_t exponent);  // square operand; exponent 0 is I

// Infix text with the parentheses precedence needs: "u * P^8", "(A + B) * C", "A'" for A^T,
// "2 * A". Shared subtrees print in full wherever they occur.
std::string to_string(const Expr& e);

// Structural equality: same operations, names, shapes, scalars and exponents.
bool same(const Expr& a, const Expr& b);

// Every distinct node of `e` once (shared subtrees once), operands before the nodes that use them.
std::vector<Expr> nodes_in_order(const Expr& e);

// The names of the inputs, each once, in first-use order.
std::vector<std::string> input_names(const Expr& e);

}  // namespace tessera::balance::expr
