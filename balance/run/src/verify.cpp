#include "tessera/balance/run/verify.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "tessera/linalg/gemm.hpp"

namespace tessera::balance {

namespace {

// Rounding in BLAS kernels (blocked sums, FMA) stays within k * u * |A||B| per entry; the factor
// leaves room for the second product in Freivalds' A(Bx) and for the coordinate mix of x.
constexpr double kBoundSafety = 4.0;
constexpr double kUnitRoundoff = std::numeric_limits<double>::epsilon() / 2;

std::vector<double> random_vector(std::size_t size, std::mt19937_64& rng) {
  std::vector<double> x(size);
  for (double& value : x) value = static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  return x;
}

linalg::Matrix absolute(linalg::MatrixView m) {
  linalg::Matrix result = linalg::to_matrix(m);
  for (double& value : result.values) value = std::fabs(value);
  return result;
}

struct Comparison {
  double worst_ratio = 0.0;
  double worst_abs = 0.0;
  std::size_t worst_row = 0, worst_col = 0;
  double worst_value = 0.0, worst_reference = 0.0;
};

void compare(double value, double reference, double bound, std::size_t row, std::size_t col, Comparison& out) {
  const double difference = std::fabs(value - reference);
  // A NaN or infinity in C must fail, never slip through a comparison that is false for NaN.
  const double ratio = !std::isfinite(value) ? std::numeric_limits<double>::infinity()
                       : difference == 0.0   ? 0.0
                       : bound > 0.0         ? difference / bound
                                             : std::numeric_limits<double>::infinity();
  out.worst_abs = std::max(out.worst_abs, std::isfinite(difference) ? difference : out.worst_abs);
  if (ratio > out.worst_ratio || (std::isinf(ratio) && !std::isinf(out.worst_ratio))) {
    out.worst_ratio = ratio;
    out.worst_row = row;
    out.worst_col = col;
    out.worst_value = value;
    out.worst_reference = reference;
  }
}

}  // namespace

std::string_view verify_mode_name(VerifyMode mode) {
  switch (mode) {
    case VerifyMode::kNone: return "none";
    case VerifyMode::kFreivalds: return "freivalds";
    case VerifyMode::kExact: return "exact";
  }
  return "unknown";
}

Result<VerifyMode> parse_verify_mode(std::string_view name) {
  if (name == "none") return VerifyMode::kNone;
  if (name == "freivalds") return VerifyMode::kFreivalds;
  if (name == "exact") return VerifyMode::kExact;
  return invalid_argument(fmt::format("unknown verification '{}'; use one of: freivalds, exact, none", name));
}

Verification verify_product(linalg::MatrixView a, linalg::MatrixView b, linalg::MatrixView c, VerifyMode mode, uint64_t seed,
                            int freivalds_rounds) {
  const auto start = std::chrono::steady_clock::now();
  Verification result;
  result.mode = mode;
  const std::size_t m = a.rows, k = a.cols, n = b.cols;
  const double length_factor = kBoundSafety * static_cast<double>(k + 1) * kUnitRoundoff;
  Comparison comparison;

  if (mode == VerifyMode::kNone) {
    result.detail = "not verified";
    return result;
  }
  if (mode == VerifyMode::kExact) {
    linalg::Matrix reference(m, n);
    linalg::gemm(m, n, k, 1.0, a.data, a.ld, b.data, b.ld, 0.0, reference.values.data(), n);
    const linalg::Matrix abs_a = absolute(a), abs_b = absolute(b);
    linalg::Matrix magnitude(m, n);
    linalg::gemm(m, n, k, 1.0, abs_a.values.data(), k, abs_b.values.data(), n, 0.0, magnitude.values.data(), n);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        compare(c.at(i, j), reference.at(i, j), length_factor * magnitude.at(i, j), i, j, comparison);
      }
    }
    result.detail = fmt::format("all {} entries compared with a local BLAS product", m * n);
  } else {
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    const linalg::Matrix abs_a = absolute(a), abs_b = absolute(b);
    for (int round = 0; round < freivalds_rounds; ++round) {
      const std::vector<double> x = random_vector(n, rng);
      std::vector<double> abs_x(n), bx(k), abx(m), cx(m), abs_bx(k), bound(m);
      for (std::size_t j = 0; j < n; ++j) abs_x[j] = std::fabs(x[j]);
      linalg::gemv(k, n, b.data, b.ld, x.data(), bx.data());
      linalg::gemv(m, k, a.data, a.ld, bx.data(), abx.data());
      linalg::gemv(m, n, c.data, c.ld, x.data(), cx.data());
      linalg::gemv(k, n, abs_b.values.data(), n, abs_x.data(), abs_bx.data());
      linalg::gemv(m, k, abs_a.values.data(), k, abs_bx.data(), bound.data());
      // The bound covers both the rounding in C (length k) and in Cx / A(Bx) (length n, k).
      const double factor = kBoundSafety * static_cast<double>(k + n + 2) * kUnitRoundoff;
      for (std::size_t i = 0; i < m; ++i) compare(cx[i], abx[i], factor * bound[i], i, 0, comparison);
    }
    result.detail = fmt::format("{} Freivalds rounds with random vectors", freivalds_rounds);
  }

  result.max_error_ratio = comparison.worst_ratio;
  result.max_abs_error = comparison.worst_abs;
  result.passed = comparison.worst_ratio <= 1.0;
  if (!result.passed) {
    result.detail = mode == VerifyMode::kExact
                        ? fmt::format("C[{}][{}] = {} but the local product gives {}", comparison.worst_row,
                                      comparison.worst_col, comparison.worst_value, comparison.worst_reference)
                        : fmt::format("row {}: (C x)_i = {} but A (B x)_i = {}", comparison.worst_row,
                                      comparison.worst_value, comparison.worst_reference);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tessera::balance
