// Graph algorithms as accumulative updates (Maiter's delta-based form): each vertex holds a value
// v and a pending delta dv; an update folds dv into v with the algorithm's accumulate operator and
// sends g(dv, edge) along every out-edge, to be accumulated into the target's dv. The fixed point
// does not depend on the order of updates, which is what lets workers run without barriers.
//
//   algorithm  accumulate  v0     dv0                         g(dv, edge u->w)
//   pagerank   +           0      (1 - d) / N                 d * dv / outdeg(u)
//   katz       +           0      1 (all) or [v == source]    beta * dv * weight
//   cc         max | min   -inf | +inf   own id               dv  (on the symmetrised graph)
//   sssp       min         +inf   0 at source, +inf elsewhere  dv + weight   (weights >= 0)
//
// PageRank with dangling vertices: a dangling vertex's mass is dropped during the iteration and
// the result is normalised to sum 1 at the end; that equals standard PageRank in which a dangling
// vertex links to every vertex (the two fixed points differ only by a scale factor).
// Katz: x = sum_k beta^k (A^T)^k b, which converges only for beta < 1 / lambda_max(A).
// Values, specs and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"

namespace tessera::graph {

enum class AlgorithmKind : uint8_t { kPageRank = 1, kKatz = 2, kConnectedComponents = 3, kShortestPaths = 4 };
enum class Accumulate : uint8_t { kSum = 1, kMax = 2, kMin = 3 };

struct AlgorithmSpec {
  AlgorithmKind kind = AlgorithmKind::kPageRank;
  double damping = 0.85;                // pagerank: 0 < d < 1
  double beta = 0.0;                    // katz: 0 < beta < 1 / lambda_max (checked by the planner)
  std::optional<int64_t> source = {};   // katz: single-source when set; sssp: REQUIRED
  bool max_label = true;                // cc: label = largest (true) or smallest vertex id
  bool operator==(const AlgorithmSpec&) const = default;
};

// "pagerank" | "katz" | "cc" | "sssp"; anything else fails listing them.
Result<AlgorithmKind> parse_algorithm(std::string_view name);
std::string_view algorithm_name(AlgorithmKind kind);
Accumulate accumulate_of(const AlgorithmSpec& spec);
// Sum algorithms converge to a tolerance on sum |dv|; min/max ones until no delta is pending.
bool is_linear(const AlgorithmSpec& spec);
// "pagerank (d = 0.85)", "sssp from 17" for reports.
std::string describe(const AlgorithmSpec& spec);
// Range checks that need no graph (damping in (0,1), beta > 0 and finite, source present for
// sssp). Fails with kInvalidArgument naming the flag to fix.
Status check_spec(const AlgorithmSpec& spec);

// The accumulate operator's identity: 0 for +, -inf for max, +inf for min.
double identity_of(Accumulate op);
// a (+) b.
inline double accumulate(Accumulate op, double a, double b) {
  switch (op) {
    case Accumulate::kSum: return a + b;
    case Accumulate::kMax: return a > b ? a : b;
    case Accumulate::kMin: return a < b ? a : b;
  }
  return a;
}

}  // namespace tessera::graph
