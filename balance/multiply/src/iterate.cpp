#include "tessera/balance/multiply/iterate.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "tessera/linalg/gemm.hpp"

namespace tessera::balance::multiply {

namespace {

using IterationClock = std::chrono::steady_clock;

double dot(std::span<const double> a, std::span<const double> b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

double norm(std::span<const double> a) { return std::sqrt(dot(a, a)); }

double since(IterationClock::time_point start) {
  return std::chrono::duration<double>(IterationClock::now() - start).count();
}

// product.apply, its seconds added to `product_seconds`.
Status timed_product(const VectorProduct& product, std::span<const double> v, std::vector<double>& y,
                     double& product_seconds) {
  const auto start = IterationClock::now();
  Status done = product.apply(v, y);
  product_seconds += since(start);
  return done;
}

bool cancelled_now(const std::atomic<bool>* cancel) { return cancel != nullptr && cancel->load(); }

}  // namespace

VectorProduct resident_product(cluster::ClusterConnection& cluster, ResidentMatrix& a, uint64_t* bytes_moved,
                               const ResidentSurvival* survival) {
  return {a.rows, [&cluster, &a, bytes_moved, survival](std::span<const double> v, std::vector<double>& y) -> Status {
            y.resize(a.rows);
            const linalg::MatrixView x(v.data(), v.size(), 1);
            const linalg::MutableMatrixView out(y.data(), y.size(), 1);
            Result<ResidentProduct> run = survival != nullptr
                                              ? multiply_resident_surviving(cluster, survival->source, a, x, out,
                                                                            survival->on_lost)
                                              : multiply_resident(cluster, a, x, out);
            if (!run) return run.status();
            if (bytes_moved != nullptr) {
              for (const ResidentNodeRun& node : run->nodes) *bytes_moved += node.bytes_to_node + node.bytes_from_node;
            }
            if (!run->verification.passed) {
              return verification_failed(fmt::format("a resident product failed its check: {}", run->verification.detail));
            }
            return Status::ok();
          }};
}

VectorProduct local_product(linalg::MatrixView a) {
  return {a.rows, [a](std::span<const double> v, std::vector<double>& y) -> Status {
            if (v.size() != a.cols) return invalid_argument(fmt::format("v has {} entries for {} columns", v.size(), a.cols));
            y.resize(a.rows);
            linalg::gemv(a.rows, a.cols, a.data, a.ld, v.data(), y.data());
            return Status::ok();
          }};
}

Result<IterationOutcome> power_iteration(cluster::ClusterConnection& cluster, ResidentMatrix& a,
                                         const PowerOptions& options, const std::atomic<bool>* cancel,
                                         const ResidentSurvival* survival) {
  if (a.rows != a.cols) return invalid_argument(fmt::format("power iteration needs a square matrix, not {}x{}", a.rows, a.cols));
  uint64_t bytes = 0;
  Result<IterationOutcome> outcome = power_iteration(resident_product(cluster, a, &bytes, survival), options, cancel);
  if (outcome) outcome->bytes_moved = bytes;
  return outcome;
}

Result<IterationOutcome> conjugate_gradient(cluster::ClusterConnection& cluster, ResidentMatrix& a,
                                            std::span<const double> b, const CgOptions& options,
                                            const std::atomic<bool>* cancel, const ResidentSurvival* survival) {
  if (a.rows != a.cols) return invalid_argument(fmt::format("conjugate gradient needs a square matrix, not {}x{}", a.rows, a.cols));
  uint64_t bytes = 0;
  Result<IterationOutcome> outcome =
      conjugate_gradient(resident_product(cluster, a, &bytes, survival), b, options, cancel);
  if (outcome) outcome->bytes_moved = bytes;
  return outcome;
}

Result<IterationOutcome> power_iteration(const VectorProduct& a, const PowerOptions& options,
                                         const std::atomic<bool>* cancel) {
  if (options.iterations == 0 || !(options.tol > 0.0)) {
    return invalid_argument(fmt::format("iterations {} and tol {:g}: give iterations >= 1 and tol > 0",
                                        options.iterations, options.tol));
  }
  const auto start = IterationClock::now();
  IterationOutcome outcome;
  std::vector<double> v(a.rows), w;
  std::mt19937_64 random(options.seed);
  std::normal_distribution<double> normal;
  for (double& x : v) x = normal(random);
  const double start_norm = norm(v);
  for (double& x : v) x /= start_norm;
  double value = 0.0;
  for (uint32_t step = 1; step <= options.iterations; ++step) {
    if (cancelled_now(cancel)) return cancelled("power iteration cancelled");
    const auto step_start = IterationClock::now();
    TESSERA_RETURN_IF_ERROR(timed_product(a, v, w, outcome.product_seconds));
    const double estimate = dot(v, w);
    const double w_norm = norm(w);
    if (w_norm == 0.0) return invalid_argument("A v is zero: the start vector lies in A's null space (try another seed)");
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = w[i] / w_norm;
    outcome.iterations = step;
    outcome.step_seconds.push_back(since(step_start));
    if (step > 1 && std::abs(estimate - value) <= options.tol * std::abs(estimate)) {
      value = estimate;
      outcome.converged = true;
      break;
    }
    value = estimate;
  }
  TESSERA_RETURN_IF_ERROR(timed_product(a, v, w, outcome.product_seconds));
  double residual = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) residual += (w[i] - value * v[i]) * (w[i] - value * v[i]);
  outcome.residual = std::sqrt(residual) / std::max(std::abs(value), std::numeric_limits<double>::min());
  outcome.value = value;
  outcome.vector = std::move(v);
  outcome.seconds = std::chrono::duration<double>(IterationClock::now() - start).count();
  return outcome;
}

Result<IterationOutcome> conjugate_gradient(const VectorProduct& a, std::span<const double> b, const CgOptions& options,
                                            const std::atomic<bool>* cancel) {
  const uint64_t n = a.rows;
  if (b.size() != n) return invalid_argument(fmt::format("b has {} entries for a {}x{} matrix", b.size(), n, n));
  if (!(options.tol > 0.0)) return invalid_argument(fmt::format("tol {:g}: give tol > 0", options.tol));
  const uint64_t limit = options.max_iterations > 0 ? options.max_iterations : 10 * n;
  const auto start = IterationClock::now();
  IterationOutcome outcome;
  std::vector<double> x(n, 0.0), r(b.begin(), b.end()), p = r, q;
  double rr = dot(r, r);
  const double b_norm = norm(b) > 0.0 ? norm(b) : 1.0;
  while (outcome.iterations < limit && std::sqrt(rr) > options.tol * b_norm) {
    if (cancelled_now(cancel)) return cancelled("conjugate gradient cancelled");
    const auto step_start = IterationClock::now();
    TESSERA_RETURN_IF_ERROR(timed_product(a, p, q, outcome.product_seconds));
    const double curvature = dot(p, q);
    if (!(curvature > 0.0)) {
      return invalid_argument(fmt::format("p^T A p = {:.3g} at step {}: A is not positive definite", curvature,
                                          outcome.iterations + 1));
    }
    const double alpha = rr / curvature;
    for (uint64_t i = 0; i < n; ++i) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
    }
    const double rr_next = dot(r, r);
    const double beta = rr_next / rr;
    for (uint64_t i = 0; i < n; ++i) p[i] = r[i] + beta * p[i];
    rr = rr_next;
    ++outcome.iterations;
    outcome.step_seconds.push_back(since(step_start));
  }
  TESSERA_RETURN_IF_ERROR(timed_product(a, x, q, outcome.product_seconds));
  double residual = 0.0;
  for (uint64_t i = 0; i < n; ++i) residual += (b[i] - q[i]) * (b[i] - q[i]);
  outcome.residual = std::sqrt(residual) / b_norm;
  const double floor = 10.0 * static_cast<double>(n) * std::numeric_limits<double>::epsilon();
  outcome.converged = outcome.residual <= std::max(options.tol, floor);
  const bool recurrence_converged = std::sqrt(rr) <= options.tol * b_norm;
  if (recurrence_converged && outcome.residual > 100.0 * std::max(options.tol, floor)) {
    return verification_failed(fmt::format("conjugate gradient's recurrence converged but the true residual is "
                                           "{:.3g} (tol {:g}): A is not symmetric positive definite, or a product "
                                           "was wrong",
                                           outcome.residual, options.tol));
  }
  outcome.vector = std::move(x);
  outcome.seconds = std::chrono::duration<double>(IterationClock::now() - start).count();
  return outcome;
}

}  // namespace tessera::balance::multiply
