#include "tessera/graph/reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <utility>

#include <fmt/format.h>

namespace tessera::graph {
namespace {

using graphdata::DirectedGraph;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Calls visit(target, weight) for every out-edge of u; weight 1 on an unweighted graph.
template <typename Visit>
void for_each_out_edge(const DirectedGraph& graph, int64_t u, Visit&& visit) {
  const uint64_t end = graph.offsets[static_cast<std::size_t>(u) + 1];
  for (uint64_t e = graph.offsets[static_cast<std::size_t>(u)]; e < end; ++e) {
    visit(graph.targets[e], graph.weighted() ? graph.weights[e] : 1.0);
  }
}

Status check_vertex(const DirectedGraph& graph, int64_t vertex, std::string_view flag) {
  if (vertex < 0 || vertex >= graph.vertex_count) {
    return invalid_argument(fmt::format("{} {} is outside the graph's vertices 0..{}", flag, vertex,
                                        graph.vertex_count - 1));
  }
  return Status::ok();
}

// Neumaier's compensated summation: the error stays near one rounding whatever the length.
double compensated_sum(const std::vector<double>& values) {
  double sum = 0.0, compensation = 0.0;
  for (double value : values) {
    const double next = sum + value;
    compensation += std::abs(sum) >= std::abs(value) ? (sum - next) + value : (value - next) + sum;
    sum = next;
  }
  return sum + compensation;
}

// x = sum_k delta_k with delta_{k+1} = step(delta_k): Jacobi from x_0 = 0 for x = delta_0 + M x.
// The iterates are Jacobi's (x_{k+1} - x_k = delta_{k+1}), but the increment is computed directly
// rather than as the difference of two nearly equal vectors, whose rounding alone (about 1e-16
// times the sum of x) exceeds a 1e-12 tolerance on Katz over a million vertices.
Result<std::vector<double>> sum_series(std::vector<double> delta,
                                       const std::function<void(const std::vector<double>&, std::vector<double>&)>& step,
                                       double tolerance, int max_iterations, std::string_view what) {
  std::vector<double> x = delta;
  std::vector<double> next(delta.size());
  double change = 0.0;
  for (int iteration = 1; iteration <= max_iterations; ++iteration) {
    std::fill(next.begin(), next.end(), 0.0);
    step(delta, next);
    change = 0.0;
    for (std::size_t v = 0; v < x.size(); ++v) {
      x[v] += next[v];
      change += std::abs(next[v]);
    }
    std::swap(delta, next);
    if (!std::isfinite(change)) {
      return invalid_argument(fmt::format("{} diverges (the increments overflow after {} iterations)", what, iteration));
    }
    if (change <= tolerance) return x;
  }
  return internal_error(fmt::format("{} did not reach sum |x_(k+1) - x_k| <= {} in {} iterations (it is at {}); raise "
                                    "the iteration limit or the tolerance",
                                    what, tolerance, max_iterations, change));
}

// Standard PageRank: x = (1-d)/N + d (P^T x + (dangling mass of x)/N), a dangling vertex linking to
// every vertex; each parallel edge carries its own share, a self-loop keeps its share.
Result<std::vector<double>> pagerank(const DirectedGraph& graph, double damping, double tolerance, int max_iterations) {
  const auto n = static_cast<std::size_t>(graph.vertex_count);
  if (n == 0) return std::vector<double>{};
  const auto step = [&](const std::vector<double>& delta, std::vector<double>& next) {
    double dangling = 0.0;
    for (int64_t u = 0; u < graph.vertex_count; ++u) {
      const uint64_t degree = graph.out_degree(u);
      const double mass = delta[static_cast<std::size_t>(u)];
      if (degree == 0) {
        dangling += mass;
        continue;
      }
      const double share = damping * mass / static_cast<double>(degree);
      for_each_out_edge(graph, u, [&](uint32_t target, double) { next[target] += share; });
    }
    const double spread = damping * dangling / static_cast<double>(n);
    for (double& value : next) value += spread;
  };
  Result<std::vector<double>> x = sum_series(std::vector<double>(n, (1.0 - damping) / static_cast<double>(n)), step,
                                             tolerance, max_iterations, "pagerank");
  if (!x) return x;
  // Mathematically the sum is already 1; dividing removes the rounding the iterations left. A
  // plain running sum over a million ranks drifts by about 1e-11, above the tolerance itself.
  const double total = compensated_sum(*x);
  for (double& value : *x) value /= total;
  return x;
}

// Katz: x = sum_k beta^k (A^T)^k b, edge weights multiplying.
Result<std::vector<double>> katz(const DirectedGraph& graph, const AlgorithmSpec& spec, double tolerance,
                                 int max_iterations) {
  const auto n = static_cast<std::size_t>(graph.vertex_count);
  std::vector<double> b(n, spec.source ? 0.0 : 1.0);
  if (spec.source) {
    TESSERA_RETURN_IF_ERROR(check_vertex(graph, *spec.source, "--source"));
    b[static_cast<std::size_t>(*spec.source)] = 1.0;
  }
  const auto step = [&](const std::vector<double>& delta, std::vector<double>& next) {
    for (int64_t u = 0; u < graph.vertex_count; ++u) {
      const double scaled = spec.beta * delta[static_cast<std::size_t>(u)];
      if (scaled == 0.0) continue;
      for_each_out_edge(graph, u, [&](uint32_t target, double weight) { next[target] += scaled * weight; });
    }
  };
  return sum_series(std::move(b), step, tolerance, max_iterations,
                    fmt::format("katz with --beta {} (check it against 1/lambda_max)", spec.beta));
}

// Weakly connected components by union-find on the input's edges (directions ignored).
std::vector<double> connected_components(const DirectedGraph& graph, bool max_label) {
  const auto n = static_cast<std::size_t>(graph.vertex_count);
  std::vector<uint32_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0u);
  const auto find = [&](uint32_t v) {
    while (parent[v] != v) {
      parent[v] = parent[parent[v]];  // path halving
      v = parent[v];
    }
    return v;
  };
  for (int64_t u = 0; u < graph.vertex_count; ++u) {
    for_each_out_edge(graph, u, [&](uint32_t target, double) {
      const uint32_t a = find(static_cast<uint32_t>(u)), b = find(target);
      // The smaller root under the larger keeps trees shallow enough with path halving; union by
      // rank would add an array for no measurable gain here.
      if (a != b) parent[std::min(a, b)] = std::max(a, b);
    });
  }
  std::vector<double> label_of_root(n, max_label ? -kInfinity : kInfinity);
  for (std::size_t v = 0; v < n; ++v) {
    double& label = label_of_root[find(static_cast<uint32_t>(v))];
    label = max_label ? std::max(label, static_cast<double>(v)) : std::min(label, static_cast<double>(v));
  }
  std::vector<double> labels(n);
  for (std::size_t v = 0; v < n; ++v) labels[v] = label_of_root[find(static_cast<uint32_t>(v))];
  return labels;
}

Status check_non_negative_weights(const DirectedGraph& graph) {
  if (!graph.weighted()) return Status::ok();
  for (int64_t u = 0; u < graph.vertex_count; ++u) {
    const uint64_t end = graph.offsets[static_cast<std::size_t>(u) + 1];
    for (uint64_t e = graph.offsets[static_cast<std::size_t>(u)]; e < end; ++e) {
      if (graph.weights[e] < 0) {
        return invalid_argument(fmt::format("edge {}->{} has weight {}; sssp needs weights >= 0", u, graph.targets[e],
                                            graph.weights[e]));
      }
    }
  }
  return Status::ok();
}

// Dijkstra with a binary heap and lazy deletion: O(E log V).
Result<std::vector<double>> shortest_paths(const DirectedGraph& graph, int64_t source) {
  TESSERA_RETURN_IF_ERROR(check_vertex(graph, source, "--source"));
  TESSERA_RETURN_IF_ERROR(check_non_negative_weights(graph));
  std::vector<double> distance(static_cast<std::size_t>(graph.vertex_count), kInfinity);
  using Entry = std::pair<double, uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  distance[static_cast<std::size_t>(source)] = 0.0;
  queue.emplace(0.0, static_cast<uint32_t>(source));
  while (!queue.empty()) {
    // Copied out of the binding: a lambda may not capture a structured binding before C++20's
    // P1091 (clang 14, which builds the fuzzers, lacks it).
    const double d = queue.top().first;
    const uint32_t u = queue.top().second;
    queue.pop();
    if (d > distance[u]) continue;  // a stale entry: u was settled closer
    for_each_out_edge(graph, u, [&](uint32_t target, double weight) {
      const double through = d + weight;
      if (through < distance[target]) {
        distance[target] = through;
        queue.emplace(through, target);
      }
    });
  }
  return distance;
}

bool has_negative_weight(const DirectedGraph& graph) {
  return std::any_of(graph.weights.begin(), graph.weights.end(), [](double w) { return w < 0; });
}

}  // namespace

Result<std::vector<double>> reference_values(const DirectedGraph& graph, const AlgorithmSpec& spec, double tolerance,
                                             int max_iterations) {
  TESSERA_RETURN_IF_ERROR(check_spec(spec));
  if (!(tolerance > 0.0) || max_iterations < 1) {
    return invalid_argument(fmt::format("tolerance {} and iteration limit {}: use a tolerance > 0 and a limit >= 1",
                                        tolerance, max_iterations));
  }
  switch (spec.kind) {
    case AlgorithmKind::kPageRank: return pagerank(graph, spec.damping, tolerance, max_iterations);
    case AlgorithmKind::kKatz: return katz(graph, spec, tolerance, max_iterations);
    case AlgorithmKind::kConnectedComponents: return connected_components(graph, spec.max_label);
    case AlgorithmKind::kShortestPaths: return shortest_paths(graph, *spec.source);
  }
  return internal_error("unknown algorithm kind");
}

namespace {

// Collatz-Wielandt for a nonnegative matrix B = A + I (|weights|, which bounds A's spectral
// radius from above): for x > 0, min_i (Bx)_i / x_i <= rho(B) <= max_i (Bx)_i / x_i, and
// rho(A + I) = rho(A) + 1. The lower bound also holds for x >= 0, x != 0 with the minimum taken
// over x's support; it is taken on x with its tiny entries zeroed, because a vertex that reaches
// no cycle (a dangling one, say) keeps (Bx)_i / x_i = 1 forever and would pin the bound at 0.
// Power iterations of B (the +I makes them converge on periodic graphs) sharpen both; the best
// of each over the iterations is kept, and iterating stops once `settled` says the bounds are
// good enough. Rounding makes the bounds good to about 1e-15 relative.
SpectralBounds bounds_until(const DirectedGraph& graph, int iterations,
                            const std::function<bool(const SpectralBounds&)>& settled) {
  const auto n = static_cast<std::size_t>(graph.vertex_count);
  if (n == 0) return {};
  // Entries below kSupport (x is scaled to max 1) leave the lower bound's support; entries are
  // kept above kFloor so that every ratio of the upper bound stays finite.
  constexpr double kSupport = 1e-9;
  constexpr double kFloor = 1e-250;
  std::vector<double> x(n, 1.0), y(n), y_support(n);
  SpectralBounds best{0.0, kInfinity};  // rho >= 0 always
  for (int iteration = 0; iteration < std::max(iterations, 1); ++iteration) {
    for (int64_t u = 0; u < graph.vertex_count; ++u) {
      const auto i = static_cast<std::size_t>(u);
      double all = x[i], support = x[i] >= kSupport ? x[i] : 0.0;
      for_each_out_edge(graph, u, [&](uint32_t target, double weight) {
        const double term = std::abs(weight) * x[target];
        all += term;
        if (x[target] >= kSupport) support += term;
      });
      y[i] = all;
      y_support[i] = support;
    }
    double upper = 0.0, lower = kInfinity, largest = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      upper = std::max(upper, y[i] / x[i]);
      if (x[i] >= kSupport) lower = std::min(lower, y_support[i] / x[i]);
      largest = std::max(largest, y[i]);
    }
    best.upper = std::min(best.upper, upper - 1.0);
    best.lower = std::min(std::max(best.lower, lower - 1.0), best.upper);  // equal up to rounding when they meet
    if (best.upper - best.lower <= 1e-12 * (1.0 + best.upper) || settled(best)) break;
    for (std::size_t i = 0; i < n; ++i) x[i] = std::max(y[i] / largest, kFloor);
  }
  return best;
}

}  // namespace

SpectralBounds spectral_radius_bounds(const DirectedGraph& graph, int iterations) {
  return bounds_until(graph, iterations, [](const SpectralBounds&) { return false; });
}

Status check_katz_beta(const DirectedGraph& graph, double beta) {
  if (!(beta > 0.0) || !std::isfinite(beta)) {
    return invalid_argument(fmt::format("--beta {} is out of range; katz needs 0 < beta < 1/lambda_max", beta));
  }
  // With negative weights the bounds are those of |A|, whose radius only bounds A's from above.
  const bool negative = has_negative_weight(graph);
  const auto converges = [&](const SpectralBounds& bounds) { return beta * bounds.upper < 1.0; };
  const auto diverges = [&](const SpectralBounds& bounds) { return !negative && beta * bounds.lower >= 1.0; };
  // Iterates only until the answer is known: a beta well below 1/lambda is proven in a few.
  const SpectralBounds bounds = bounds_until(graph, 200, [&](const SpectralBounds& b) { return converges(b) || diverges(b); });
  if (converges(bounds)) return Status::ok();
  if (diverges(bounds)) {
    return invalid_argument(fmt::format("--beta {} is at least 1/lambda_max (the series diverges): lambda_max >= {:.6g}; "
                                        "use --beta below 1/{:.6g} = {:.6g}",
                                        beta, bounds.lower, bounds.upper, 1.0 / bounds.upper));
  }
  return invalid_argument(fmt::format("cannot prove --beta {} converges (lambda_max is between {:.6g} and {:.6g}); use "
                                      "--beta below 1/{:.6g} = {:.6g}",
                                      beta, negative ? 0.0 : bounds.lower, bounds.upper, bounds.upper,
                                      1.0 / bounds.upper));
}

Comparison compare_values(const AlgorithmSpec& spec, std::span<const double> values, std::span<const double> reference) {
  Comparison comparison;
  const bool exact = !is_linear(spec);
  const std::size_t common = std::min(values.size(), reference.size());
  if (values.size() != reference.size()) {
    comparison.mismatches = static_cast<int64_t>(std::max(values.size(), reference.size()) - common);
    comparison.first_mismatch = fmt::format("got {} values, expected {}", values.size(), reference.size());
  }
  for (std::size_t v = 0; v < common; ++v) {
    const double got = values[v], expected = reference[v];
    const bool finite = std::isfinite(got) && std::isfinite(expected);
    if (finite) {
      const double error = std::abs(got - expected);
      comparison.l1_error += error;
      comparison.max_error = std::max(comparison.max_error, error);
    }
    // cc and sssp must match exactly (inf == inf); pagerank and katz are measured by their errors,
    // and only a value that is not finite where the reference's is (or the reverse) mismatches.
    const bool mismatch = exact ? !(got == expected) : (!finite && !(got == expected));
    if (!mismatch) continue;
    ++comparison.mismatches;
    if (comparison.first_mismatch.empty()) {
      comparison.first_mismatch = fmt::format("vertex {}: got {}, expected {}", v, got, expected);
    }
  }
  return comparison;
}

}  // namespace tessera::graph
