// Computing an expression on this machine with BLAS: the reference the cluster's answers are
// checked against in tests, and what `tessera eval` does for the sums, scales and transposes
// between the products it sends to the cluster. Each shared node is computed once.
// Pure function; thread-safe (BLAS calls run on the caller's thread).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "tessera/balance/expr/expression.hpp"
#include "tessera/core/status.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::balance::expr {

// How a product node is computed: by default a local BLAS call; `tessera eval` passes one that
// multiplies on the cluster (and verifies). Returns the product or why there is none.
using MultiplyFn = std::function<Result<linalg::Matrix>(const linalg::Matrix& a, const linalg::Matrix& b)>;

// The matrix `inputs` holds for input node `input`: kNotFound when there is none, kInvalidArgument
// when its shape differs from the one the expression was built for, both naming the input.
Result<linalg::MatrixView> input_view(const Expr& input, const std::map<std::string, linalg::MatrixView>& inputs);

// REQUIRES nothing of `inputs`: a missing input or one whose shape differs from the expression's
// is refused by name (input_view).
Result<linalg::Matrix> evaluate(const Expr& e, const std::map<std::string, linalg::MatrixView>& inputs,
                                const MultiplyFn& multiply = {});

}  // namespace tessera::balance::expr
