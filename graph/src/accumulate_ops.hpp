// The engine's accumulate operators as compile-time traits (Op<kSum>, Op<kMin>, Op<kMax>), how
// g(dv, e) depends on the edge (EdgeMode), and the switches that turn the run-time operator and
// mode into template arguments, so each kernel is compiled once per operator and mode.
// Private to the graph library. Stateless; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "tessera/graph/algorithm.hpp"

namespace tessera::graph::detail {

// How g(dv, e) depends on the edge: not at all (pagerank, unweighted katz, cc, unweighted sssp
// with unit weights folded into the per-vertex constant), scaled by the weight (weighted katz) or
// plus the weight (weighted sssp).
enum class EdgeMode : uint8_t { kConstant, kScaledByWeight, kPlusWeight };

inline EdgeMode edge_mode_of(const AlgorithmSpec& spec, bool weighted) {
  if (spec.kind == AlgorithmKind::kKatz && weighted) return EdgeMode::kScaledByWeight;
  if (spec.kind == AlgorithmKind::kShortestPaths && weighted) return EdgeMode::kPlusWeight;
  return EdgeMode::kConstant;
}

template <Accumulate kOp>
struct Op;

template <>
struct Op<Accumulate::kSum> {
  static constexpr double kIdentity = 0.0;
  static constexpr double kTakeAll = 0.0;  // priority limit that selects every pending vertex
  static void apply(double& acc, double c) { acc += c; }
  static bool pending(double dv, double) { return dv != 0.0; }
  // Residual removed per edge updated: an update takes |dv| out and puts back at most d|dv| (for
  // pagerank) at a cost of `degree` edges. Against plain |dv| (Maiter's choice) this needs fewer
  // edge updates on skewed graphs such as R-MAT, where |dv| keeps picking hubs of huge
  // out-degree. Dangling vertices are never selected here: the round folds them in beforehand, at
  // no edge cost.
  static double priority(double dv, uint64_t degree) { return std::abs(dv) / static_cast<double>(degree); }
  static bool above(double dv, uint64_t degree, double limit) {
    return degree != 0 && std::abs(dv) >= limit * static_cast<double>(degree);  // no division per vertex
  }
  static void fold(double& v, double dv) { v += dv; }
  static double residual(double dv, double) { return std::abs(dv); }
};

template <>
struct Op<Accumulate::kMin> {
  static constexpr double kIdentity = std::numeric_limits<double>::infinity();
  static bool better(double c, double acc) { return c < acc; }
  static void apply(double& acc, double c) { acc = c < acc ? c : acc; }
  static bool pending(double dv, double v) { return dv < v; }
  static double priority(double dv) { return -dv; }  // smaller tentative value first
  static void fold(double& v, double dv) { v = dv; }
  static double residual(double dv, double v) { return dv < v ? 1.0 : 0.0; }
};

template <>
struct Op<Accumulate::kMax> {
  static constexpr double kIdentity = -std::numeric_limits<double>::infinity();
  static bool better(double c, double acc) { return c > acc; }
  static void apply(double& acc, double c) { acc = c > acc ? c : acc; }
  static bool pending(double dv, double v) { return dv > v; }
  static double priority(double dv) { return dv; }  // larger label first
  static void fold(double& v, double dv) { v = dv; }
  static double residual(double dv, double v) { return dv > v ? 1.0 : 0.0; }
};

// What a batch of deltas counts for in the residual: sum |d| (sum), or entries (min/max).
inline double batch_residual(Accumulate op, std::span<const double> deltas) {
  if (op != Accumulate::kSum) return static_cast<double>(deltas.size());
  double sum = 0.0;
  for (double d : deltas) sum += std::abs(d);
  return sum;
}

// body.template operator()<kOp>() for the run-time operator `op`.
template <typename Body>
void dispatch_op(Accumulate op, Body&& body) {
  switch (op) {
    case Accumulate::kSum: return body.template operator()<Accumulate::kSum>();
    case Accumulate::kMin: return body.template operator()<Accumulate::kMin>();
    case Accumulate::kMax: return body.template operator()<Accumulate::kMax>();
  }
}

// body.template operator()<kOp, kMode>() for the pairs an algorithm can have.
template <typename Body>
void dispatch_op_and_mode(Accumulate op, EdgeMode mode, Body&& body) {
  switch (op) {
    case Accumulate::kSum:
      if (mode == EdgeMode::kScaledByWeight) return body.template operator()<Accumulate::kSum, EdgeMode::kScaledByWeight>();
      return body.template operator()<Accumulate::kSum, EdgeMode::kConstant>();
    case Accumulate::kMin:
      if (mode == EdgeMode::kPlusWeight) return body.template operator()<Accumulate::kMin, EdgeMode::kPlusWeight>();
      return body.template operator()<Accumulate::kMin, EdgeMode::kConstant>();
    case Accumulate::kMax: return body.template operator()<Accumulate::kMax, EdgeMode::kConstant>();
  }
}

}  // namespace tessera::graph::detail
