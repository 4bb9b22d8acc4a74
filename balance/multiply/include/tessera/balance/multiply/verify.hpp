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
//
// Non-finite inputs (a NaN or an infinity in A or B, which callers accept only when asked to,
// e.g. `tessera multiply --allow-nonfinite`): an entry of C passes when the local product has the
// same non-finite value there (NaN where the reference is NaN, the same infinity where it is
// infinite). Freivalds cannot see through them (one NaN in B makes every A(Bx) NaN), so it checks
// the rows of A that are finite as usual and compares the other rows exactly; a non-finite entry
// in B reaches every row of C, so then every entry is compared exactly (the cost of kExact).
// Both modes first look for a NaN or an infinity in C that the inputs cannot explain: one at
// [i][j] although row i of A and column j of B are finite (with finite inputs, any non-finite
// entry). The exact value there is finite, so the product overflowed (or a node sent garbage) and
// the check fails naming the first such entry, in either mode alike: comparing with a local
// product would not catch it, since that overflows the same way.
// The check comes in two halves so a multiply can overlap most of it with the run: ProductCheck
// reads A and B (everything Freivalds needs except C) while the cluster computes, and finish()
// then reads C alone once it is complete. verify_product does both in a row.
// Pure functions and values; thread-compatible (one ProductCheck per thread).
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/linalg/matrix.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::multiply {

enum class VerifyMode { kNone, kFreivalds, kExact };
std::string_view verify_mode_name(VerifyMode mode);
Result<VerifyMode> parse_verify_mode(std::string_view name);  // none | freivalds | exact

struct Verification {
  VerifyMode mode = VerifyMode::kNone;
  bool passed = false;           // always false for kNone (nothing was checked)
  double max_error_ratio = 0.0;  // worst |difference| / allowed bound (<= 1 passes)
  double max_abs_error = 0.0;    // worst |difference| seen
  double seconds = 0.0;             // spent after C was complete: what the caller waited for
  double overlapped_seconds = 0.0;  // spent on A and B while the run went on (ProductCheck), not waited for
  std::string detail;            // where it failed, or how many rounds passed
};

// The rounding bounds' safety factor and unit roundoff, shared by every check here: rounding in
// BLAS kernels (blocked sums, FMA) stays within k u |A||B| per entry; the factor leaves room for
// the second product in Freivalds' A(Bx) and for the coordinate mix of x.
inline constexpr double kBoundSafety = 4.0;
inline constexpr double kUnitRoundoff = std::numeric_limits<double>::epsilon() / 2;

// A Freivalds vector: `size` entries uniform in [-1, 1).
std::vector<double> freivalds_vector(std::size_t size, std::mt19937_64& rng);

// The first NaN or infinity of `m` in row-major order, if any.
struct NonFiniteEntry {
  std::size_t row = 0, col = 0;
  double value = 0.0;
};
std::optional<NonFiniteEntry> first_nonfinite(linalg::MatrixView m);
// "A[12][7] is NaN", "B[0][3] is -inf" for a matrix called `name`.
std::string describe_nonfinite(std::string_view name, const NonFiniteEntry& entry);

// The half of a check that needs only A and B. For Freivalds: the random vectors x, A(Bx) and the
// rounding bound |A|(|B||x|), and which rows of A are finite (three O(mk + kn) passes, done once).
// The exact check and a B holding NaN or infinities (which also needs a full local product) have
// nothing that pays to do early, so prepare() only records the inputs for them.
// Holds views of A and B: they must outlive the check and stay unchanged until finish().
class ProductCheck {
 public:
  // REQUIRES: a is m x k, b is k x n.
  static ProductCheck prepare(linalg::MatrixView a, linalg::MatrixView b, VerifyMode mode, uint64_t seed,
                              int freivalds_rounds = 2);
  // REQUIRES: c is m x n and complete. The Freivalds pass over C uses up to `threads` threads.
  // An unexplained NaN or infinity in C (above) fails with "the product overflowed or is not
  // finite: C[i][j] is +inf ...", naming the first one in row-major order.
  Verification finish(linalg::MatrixView c, int threads = 1) const;

 private:
  ProductCheck() = default;
  linalg::MatrixView a_, b_;
  VerifyMode mode_ = VerifyMode::kNone;
  int rounds_ = 0;
  bool b_nonfinite_ = false;
  std::vector<std::vector<double>> x_, abs_x_, abx_, bound_;  // one of each per Freivalds round
  std::vector<char> row_finite_;
  double prepare_seconds_ = 0.0;
};

// prepare() and finish() in a row. REQUIRES: a is m x k, b is k x n, c is m x n (views of any
// leading dimension; not copied except for the |A| and |B| the rounding bound needs).
Verification verify_product(linalg::MatrixView a, linalg::MatrixView b, linalg::MatrixView c, VerifyMode mode,
                            uint64_t seed, int freivalds_rounds = 2);

}  // namespace tessera::balance::multiply
