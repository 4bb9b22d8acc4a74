#include "tessera/balance/multiply/verify.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tessera/linalg/gemm.hpp"

namespace tessera::balance::multiply {

namespace {


linalg::Matrix absolute(linalg::MatrixView m) {
  linalg::Matrix result = linalg::to_matrix(m);
  for (double& value : result.values) value = std::fabs(value);
  return result;
}

// The most Freivalds rounds one pass over a matrix serves; more rounds take more passes.
constexpr std::size_t kFusedRounds = 4;

// For every row i of `m` and each of the `rounds` vectors x_r (each m.cols long): y_r[i] =
// sum_j m[i][j] x_r[j] and, when `magnitude` is wanted, y_abs_r[i] = sum_j |m[i][j]| |x_r[j]|,
// in ONE pass over m's memory, which is what Freivalds' check costs at large n (it is
// memory-bound: a gemv per vector and per |.| would read each matrix up to 2 x rounds times, and
// |A|, |B| would first be copied). Also reports whether row i is all finite. Four partial sums
// per output keep the additions from waiting on each other.
void fused_products(linalg::MatrixView m, std::span<const std::vector<double>> x, std::span<const std::vector<double>> abs_x,
                    bool magnitude, std::span<std::vector<double>> y, std::span<std::vector<double>> y_abs,
                    std::vector<char>* row_finite) {
  const std::size_t rounds = x.size();
  for (std::size_t i = 0; i < m.rows; ++i) {
    const double* row = m.row(i);
    double sum[kFusedRounds][4] = {};
    double sum_abs[kFusedRounds][4] = {};
    double finite_check = 0.0;  // stays 0 while every entry is finite (x - x is NaN otherwise)
    std::size_t j = 0;
    for (; j + 4 <= m.cols; j += 4) {
      for (std::size_t q = 0; q < 4; ++q) {
        const double value = row[j + q];
        finite_check += value - value;
        const double magnitude_value = std::fabs(value);
        for (std::size_t r = 0; r < rounds; ++r) {
          sum[r][q] += value * x[r][j + q];
          if (magnitude) sum_abs[r][q] += magnitude_value * abs_x[r][j + q];
        }
      }
    }
    for (; j < m.cols; ++j) {
      const double value = row[j];
      finite_check += value - value;
      for (std::size_t r = 0; r < rounds; ++r) {
        sum[r][0] += value * x[r][j];
        if (magnitude) sum_abs[r][0] += std::fabs(value) * abs_x[r][j];
      }
    }
    for (std::size_t r = 0; r < rounds; ++r) {
      y[r][i] = (sum[r][0] + sum[r][1]) + (sum[r][2] + sum[r][3]);
      if (magnitude) y_abs[r][i] = (sum_abs[r][0] + sum_abs[r][1]) + (sum_abs[r][2] + sum_abs[r][3]);
    }
    if (row_finite != nullptr) (*row_finite)[i] = finite_check == 0.0;
  }
}

struct Comparison {
  double worst_ratio = 0.0;
  double worst_abs = 0.0;
  std::size_t worst_row = 0, worst_col = 0;
  double worst_value = 0.0, worst_reference = 0.0;
};

// Where the reference is non-finite (non-finite inputs), C must hold the same non-finite value:
// NaN for NaN, the same infinity for an infinity. NaN != NaN, hence the explicit test.
bool same_nonfinite(double value, double reference) {
  return std::isnan(reference) ? std::isnan(value) : value == reference;
}

void compare(double value, double reference, double bound, std::size_t row, std::size_t col, Comparison& out) {
  const double difference = std::fabs(value - reference);
  // A NaN or infinity in C must fail, never slip through a comparison that is false for NaN,
  // unless the reference has the very same non-finite value.
  const double ratio = !std::isfinite(reference) ? (same_nonfinite(value, reference)
                                                        ? 0.0
                                                        : std::numeric_limits<double>::infinity())
                       : !std::isfinite(value) ? std::numeric_limits<double>::infinity()
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

// Compares every entry of the given rows of C with the local product of those rows of A and B.
void compare_rows_exactly(linalg::MatrixView a, linalg::MatrixView b, linalg::MatrixView c,
                          const std::vector<std::size_t>& rows, const linalg::Matrix& abs_b, double length_factor,
                          Comparison& comparison) {
  if (rows.empty()) return;
  const std::size_t k = a.cols, n = b.cols;
  linalg::Matrix picked(rows.size(), k), abs_picked(rows.size(), k);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t l = 0; l < k; ++l) {
      picked.values[r * k + l] = a.at(rows[r], l);
      abs_picked.values[r * k + l] = std::fabs(a.at(rows[r], l));
    }
  }
  linalg::Matrix reference(rows.size(), n), magnitude(rows.size(), n);
  linalg::gemm(rows.size(), n, k, 1.0, picked.values.data(), k, b.data, b.ld, 0.0, reference.values.data(), n);
  linalg::gemm(rows.size(), n, k, 1.0, abs_picked.values.data(), k, abs_b.values.data(), n, 0.0,
               magnitude.values.data(), n);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t j = 0; j < n; ++j) {
      compare(c.at(rows[r], j), reference.at(r, j), length_factor * magnitude.at(r, j), rows[r], j, comparison);
    }
  }
}

}  // namespace

std::optional<NonFiniteEntry> first_nonfinite(linalg::MatrixView m) {
  for (std::size_t i = 0; i < m.rows; ++i) {
    const double* row = m.row(i);
    for (std::size_t j = 0; j < m.cols; ++j) {
      if (!std::isfinite(row[j])) return NonFiniteEntry{i, j, row[j]};
    }
  }
  return std::nullopt;
}

std::vector<double> freivalds_vector(std::size_t size, std::mt19937_64& rng) {
  std::vector<double> x(size);
  for (double& value : x) value = static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  return x;
}

std::string describe_nonfinite(std::string_view name, const NonFiniteEntry& entry) {
  const char* what = std::isnan(entry.value) ? "NaN" : entry.value > 0 ? "+inf" : "-inf";
  return fmt::format("{}[{}][{}] is {}", name, entry.row, entry.col, what);
}

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

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// C x for every round, rows split among `threads` threads (C is read once; after the run the
// coordinator's cores are free, and this pass is what the user waits for). With `row_finite`
// (m entries), also whether each row of C is all finite, found in the same pass.
void c_products(linalg::MatrixView c, std::span<const std::vector<double>> x, std::span<std::vector<double>> cx,
                int threads, std::vector<char>* row_finite) {
  const std::size_t parts = std::clamp<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), 1,
                                                    std::max<std::size_t>(c.rows / 256, 1));
  auto run_part = [&](std::size_t part) {
    const std::size_t begin = c.rows * part / parts, end = c.rows * (part + 1) / parts;
    std::vector<std::vector<double>> y(x.size(), std::vector<double>(end - begin)), unused;
    std::vector<char> finite(row_finite != nullptr ? end - begin : 0);
    const linalg::MatrixView rows{c.data + begin * c.ld, end - begin, c.cols, c.ld};
    fused_products(rows, x, {}, /*magnitude=*/false, y, unused, row_finite != nullptr ? &finite : nullptr);
    for (std::size_t r = 0; r < x.size(); ++r) std::copy(y[r].begin(), y[r].end(), cx[r].begin() + begin);
    if (row_finite != nullptr) std::copy(finite.begin(), finite.end(), row_finite->begin() + begin);
  };
  std::vector<std::thread> helpers;
  for (std::size_t part = 1; part < parts; ++part) helpers.emplace_back(run_part, part);
  run_part(0);
  for (std::thread& helper : helpers) helper.join();
}

// The first entry of C, in row-major order from `first_row` on, that is NaN or infinite although
// row i of A and column j of B hold only finite values. Such an entry has a finite exact value,
// so C holding it means the product (or one of its partial sums) overflowed the range of doubles,
// or a node returned garbage: either way C is not the exact answer, and comparing it with a local
// product proves nothing, since that overflows the same way (an all-inf C once passed the exact
// check). Where row i of A or column j of B holds a NaN or an infinity (inputs accepted with
// --allow-nonfinite), a non-finite entry is what the product gives, and the comparison decides.
// Reads A and B once; called only once C is known to hold a non-finite entry.
std::optional<NonFiniteEntry> first_unexplained_nonfinite(linalg::MatrixView a, linalg::MatrixView b,
                                                          linalg::MatrixView c, std::size_t first_row) {
  std::vector<char> a_row_finite(a.rows, 1), b_column_finite(b.cols, 1);
  for (std::size_t i = 0; i < a.rows; ++i) {
    const double* row = a.row(i);
    for (std::size_t l = 0; l < a.cols; ++l) {
      if (!std::isfinite(row[l])) {
        a_row_finite[i] = 0;
        break;
      }
    }
  }
  for (std::size_t l = 0; l < b.rows; ++l) {
    const double* row = b.row(l);
    for (std::size_t j = 0; j < b.cols; ++j) {
      if (!std::isfinite(row[j])) b_column_finite[j] = 0;
    }
  }
  for (std::size_t i = first_row; i < c.rows; ++i) {
    if (!a_row_finite[i]) continue;
    const double* row = c.row(i);
    for (std::size_t j = 0; j < c.cols; ++j) {
      if (b_column_finite[j] && !std::isfinite(row[j])) return NonFiniteEntry{i, j, row[j]};
    }
  }
  return std::nullopt;
}

// The verdict on a C that holds `entry` (from first_unexplained_nonfinite).
Verification overflowed(VerifyMode mode, const NonFiniteEntry& entry) {
  Verification result;
  result.mode = mode;
  result.passed = false;
  result.max_error_ratio = std::numeric_limits<double>::infinity();
  result.detail = fmt::format("the product overflowed or is not finite: {} (0-based [row][column]), although row {} "
                              "of A and column {} of B hold only finite values (a double reaches about 1.8e308); "
                              "an overflowed product is not an exact answer",
                              describe_nonfinite("C", entry), entry.row, entry.col);
  return result;
}

}  // namespace

ProductCheck ProductCheck::prepare(linalg::MatrixView a, linalg::MatrixView b, VerifyMode mode, uint64_t seed,
                                   int freivalds_rounds) {
  const auto start = std::chrono::steady_clock::now();
  ProductCheck check;
  check.a_ = a;
  check.b_ = b;
  check.mode_ = mode;
  check.rounds_ = freivalds_rounds;
  if (mode != VerifyMode::kFreivalds) return check;
  // Non-finite values in B reach every row of C (0 x inf is NaN), so Freivalds has nothing
  // finite left to compare; non-finite values in A only reach their own rows.
  check.b_nonfinite_ = first_nonfinite(b).has_value();
  if (check.b_nonfinite_) return check;
  const std::size_t m = a.rows, k = a.cols, n = b.cols;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  check.row_finite_.assign(m, 1);
  for (int done = 0; done < freivalds_rounds;) {
    const auto rounds = static_cast<std::size_t>(std::min<int>(freivalds_rounds - done, kFusedRounds));
    std::vector<std::vector<double>> x(rounds), abs_x(rounds);
    for (std::size_t r = 0; r < rounds; ++r) {
      x[r] = freivalds_vector(n, rng);
      abs_x[r].resize(n);
      for (std::size_t j = 0; j < n; ++j) abs_x[r][j] = std::fabs(x[r][j]);
    }
    std::vector<std::vector<double>> bx(rounds, std::vector<double>(k)), abs_bx = bx;
    std::vector<std::vector<double>> abx(rounds, std::vector<double>(m)), bound = abx;
    // B and A are each read once for all these rounds (and A's non-finite rows found on the
    // way, since the NaN-scan rides along with the products).
    fused_products(b, x, abs_x, /*magnitude=*/true, bx, abs_bx, nullptr);
    fused_products(a, bx, abs_bx, /*magnitude=*/true, abx, bound, done == 0 ? &check.row_finite_ : nullptr);
    for (std::size_t r = 0; r < rounds; ++r) {
      check.x_.push_back(std::move(x[r]));
      check.abs_x_.push_back(std::move(abs_x[r]));
      check.abx_.push_back(std::move(abx[r]));
      check.bound_.push_back(std::move(bound[r]));
    }
    done += static_cast<int>(rounds);
  }
  check.prepare_seconds_ = seconds_since(start);
  return check;
}

Verification ProductCheck::finish(linalg::MatrixView c, int threads) const {
  const auto start = std::chrono::steady_clock::now();
  const linalg::MatrixView a = a_, b = b_;
  Verification result;
  result.mode = mode_;
  result.overlapped_seconds = prepare_seconds_;
  const std::size_t m = a.rows, k = a.cols, n = b.cols;
  const double length_factor = kBoundSafety * static_cast<double>(k + 1) * kUnitRoundoff;
  Comparison comparison;
  bool exact_rows_failed = false;  // the worst entry comes from an exact comparison inside Freivalds

  if (mode_ == VerifyMode::kNone) {
    result.detail = "not verified";
    return result;
  }
  // C's finiteness comes first, in both modes, so that they agree on an overflowed product: the
  // exact check alone would pass an all-inf C whose local product overflows alike. Checked here
  // in one pass over C before the local product; Freivalds finds the non-finite rows in its own
  // pass over C below.
  const auto refuse_overflow = [&](std::size_t first_row) -> std::optional<Verification> {
    const std::optional<NonFiniteEntry> unexplained = first_unexplained_nonfinite(a, b, c, first_row);
    if (!unexplained) return std::nullopt;
    Verification refused = overflowed(mode_, *unexplained);
    refused.overlapped_seconds = prepare_seconds_;
    refused.seconds = seconds_since(start);
    return refused;
  };
  if (mode_ == VerifyMode::kExact || b_nonfinite_) {
    if (const std::optional<NonFiniteEntry> first = first_nonfinite(c)) {
      if (std::optional<Verification> refused = refuse_overflow(first->row)) return *refused;
    }
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
    result.detail = b_nonfinite_ ? fmt::format("B holds NaN or infinite values, which Freivalds' check cannot see "
                                               "through; all {} entries compared with a local BLAS product instead",
                                               m * n)
                                 : fmt::format("all {} entries compared with a local BLAS product", m * n);
  } else {
    // The bound covers both the rounding in C (length k) and in Cx / A(Bx) (length n, k).
    const double factor = kBoundSafety * static_cast<double>(k + n + 2) * kUnitRoundoff;
    std::vector<std::vector<double>> cx(x_.size(), std::vector<double>(m));
    std::vector<char> c_row_finite(m, 1);
    for (std::size_t first = 0; first < x_.size(); first += kFusedRounds) {  // C read once per kFusedRounds
      const std::size_t count = std::min(kFusedRounds, x_.size() - first);
      c_products(c, std::span(x_).subspan(first, count), std::span(cx).subspan(first, count), threads,
                 first == 0 ? &c_row_finite : nullptr);
    }
    const auto nonfinite_row = std::find(c_row_finite.begin(), c_row_finite.end(), 0);
    if (nonfinite_row != c_row_finite.end()) {
      const auto first_row = static_cast<std::size_t>(nonfinite_row - c_row_finite.begin());
      if (std::optional<Verification> refused = refuse_overflow(first_row)) return *refused;
    }
    for (std::size_t r = 0; r < x_.size(); ++r) {
      for (std::size_t i = 0; i < m; ++i) {
        if (row_finite_[i]) compare(cx[r][i], abx_[r][i], factor * bound_[r][i], i, 0, comparison);
      }
    }
    std::vector<std::size_t> nonfinite_rows;
    for (std::size_t i = 0; i < m; ++i) {
      if (!row_finite_[i]) nonfinite_rows.push_back(i);
    }
    // Rows of A with NaN/inf make their whole row of C (Cx)_i non-finite either way, so Freivalds
    // would pass a wrong row there; those rows are compared entry by entry instead.
    Comparison exact_part;
    if (!nonfinite_rows.empty()) compare_rows_exactly(a, b, c, nonfinite_rows, absolute(b), length_factor, exact_part);
    const double freivalds_worst_abs = comparison.worst_abs;
    if (exact_part.worst_ratio > comparison.worst_ratio) {  // the worse of the two is reported
      comparison = exact_part;
      exact_rows_failed = exact_part.worst_ratio > 1.0;
    }
    comparison.worst_abs = std::max(freivalds_worst_abs, exact_part.worst_abs);
    result.detail = nonfinite_rows.empty()
                        ? fmt::format("{} Freivalds rounds with random vectors", rounds_)
                        : fmt::format("{} Freivalds rounds with random vectors on the finite rows of A; its {} row{} "
                                      "holding NaN or infinite values compared exactly",
                                      rounds_, nonfinite_rows.size(), nonfinite_rows.size() == 1 ? "" : "s");
  }

  result.max_error_ratio = comparison.worst_ratio;
  result.max_abs_error = comparison.worst_abs;
  result.passed = comparison.worst_ratio <= 1.0;
  if (!result.passed) {
    result.detail = mode_ == VerifyMode::kExact || b_nonfinite_ || exact_rows_failed
                        ? fmt::format("C[{}][{}] = {} but the local product gives {}", comparison.worst_row,
                                      comparison.worst_col, comparison.worst_value, comparison.worst_reference)
                        : fmt::format("row {}: (C x)_i = {} but A (B x)_i = {}", comparison.worst_row,
                                      comparison.worst_value, comparison.worst_reference);
  }
  result.seconds = seconds_since(start);
  return result;
}

Verification verify_product(linalg::MatrixView a, linalg::MatrixView b, linalg::MatrixView c, VerifyMode mode, uint64_t seed,
                            int freivalds_rounds) {
  const ProductCheck check = ProductCheck::prepare(a, b, mode, seed, freivalds_rounds);
  Verification result = check.finish(c);
  // Nothing overlapped here: the caller waited for both halves.
  result.seconds += result.overlapped_seconds;
  result.overlapped_seconds = 0.0;
  return result;
}

}  // namespace tessera::balance::multiply
