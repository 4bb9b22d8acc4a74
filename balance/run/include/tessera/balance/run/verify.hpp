// Checking C = A x B after a distributed multiply.
//
// Freivalds' check multiplies both sides by random vectors x: A(Bx) must equal Cx. It costs
// O(n^2) per round instead of O(n^3); a wrong C passes one round with probability <= 1/2 for
// 0/1 vectors and practically never for the real-valued vectors used here. Floating-point results
// differ from the exact product by rounding, so each entry is compared against the standard
// forward-error bound for a dot product of length k: |A||B||x| * k * unit roundoff (times a
// safety factor), computed in the same pass.
// The exact check recomputes C locally with BLAS and compares every entry under the same bound;
// with integer-valued inputs (linalg::FillKind::kIntegers) the products are exact and the bound is 0.
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/linalg/matrix.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance {

enum class VerifyMode { kNone, kFreivalds, kExact };
std::string_view verify_mode_name(VerifyMode mode);
Result<VerifyMode> parse_verify_mode(std::string_view name);  // none | freivalds | exact

struct Verification {
  VerifyMode mode = VerifyMode::kNone;
  bool passed = false;           // always false for kNone (nothing was checked)
  double max_error_ratio = 0.0;  // worst |difference| / allowed bound (<= 1 passes)
  double max_abs_error = 0.0;    // worst |difference| seen
  double seconds = 0.0;
  std::string detail;            // where it failed, or how many rounds passed
};

// REQUIRES: a is m x k, b is k x n, c is m x n (views of any leading dimension; not copied
// except for the |A| and |B| the rounding bound needs).
Verification verify_product(linalg::MatrixView a, linalg::MatrixView b, linalg::MatrixView c, VerifyMode mode,
                            uint64_t seed, int freivalds_rounds = 2);

}  // namespace tessera::balance
