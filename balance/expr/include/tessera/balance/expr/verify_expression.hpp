// Checking the value of a whole matrix expression, computed on the cluster, against its inputs.
//
// Freivalds for expressions: for random vectors x, R x must equal E x, where E x is worked out
// from the inputs alone by pushing x up the tree (a product applies its right operand first:
// (A B) x = A (B x); a power applies its base k times; sums, differences and scales combine
// vectors), so the check costs a matrix-vector product per product node instead of the
// expression's matrix products. Rounding: both sides may differ from the exact value by the
// forward error of everything between the inputs and the result, bounded by u times the sum of
// the inner dimensions along the worst path, times |E| |x| (the same push with |inputs| and |x|),
// with the safety factor of verify.hpp; integer inputs whose values stay below 2^53 give an
// exact value and a bound that needs no slack.
// The exact check evaluates the expression here (expr::evaluate) and compares every entry under
// that bound, with |E| from the inputs' magnitudes.
// Transposes are handled where they read an input (expr::transposes_to_inputs puts them there);
// any other transpose makes the check fall back to the exact one.
// Pure function; thread-safe (BLAS calls on the caller's thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tessera/balance/expr/expression.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::expr {

// REQUIRES: `inputs` hold every input of `e` with its shape; `value` is e's shape.
multiply::Verification verify_expression(const expr::Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                               linalg::MatrixView value, multiply::VerifyMode mode, uint64_t seed, int rounds = 2);

}  // namespace tessera::balance::expr
