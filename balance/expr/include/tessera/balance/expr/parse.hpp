// Reading an expression the way a user types it on the command line: "u * P^8", "A*B*C*D",
// "I + A + A^2 + A^3", "(H' * H)^4 * a", "0.5 * (A + A')".
//
//   sum     := term (('+' | '-') term)*
//   term    := unary (('*' | '@') unary)*     number * matrix scales; matrix * matrix multiplies
//   unary   := '-' unary | postfix
//   postfix := primary ('^' INTEGER | "'" | ".T")*
//   primary := NUMBER | NAME | '(' sum ')'      NAME "I" is the identity, sized by a sum
//
// Shapes come from `inputs`; every error names the column and what was expected, with the
// expression and a caret under the place. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "tessera/balance/expr/expression.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::expr {

struct Shape {
  uint64_t rows = 0, cols = 0;
};

// At most 4096 characters.
Result<Expr> parse(std::string_view text, const std::map<std::string, Shape>& inputs);

}  // namespace tessera::balance::expr
