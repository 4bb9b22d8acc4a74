// Reference answers computed on one machine, for --verify and the tests: power iteration (Jacobi)
// to a tight tolerance for PageRank and Katz, union-find for connected components, Dijkstra for
// shortest paths. Deliberately simple, sequential code that shares nothing with the engine except
// the definitions in algorithm.hpp; also Katz's convergence bound.
// Pure functions; thread-safe.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::graph {

// The answer for `spec` on `graph` (the input graph; cc symmetrises it itself). pagerank:
// normalised to sum 1; katz: unnormalised; cc: the label per vertex; sssp: distance, +inf where
// unreachable. Power iteration stops when sum |x_{k+1} - x_k| <= tolerance (default 1e-12) and
// fails (kInternal) if that takes more than max_iterations.
Result<std::vector<double>> reference_values(const graphdata::DirectedGraph& graph, const AlgorithmSpec& spec,
                                             double tolerance = 1e-12, int max_iterations = 100000);

// Rigorous bounds on lambda_max(A) (the spectral radius) from Collatz-Wielandt on a few power
// iterations of A + I with a positive start: lower <= lambda_max <= upper.
struct SpectralBounds {
  double lower = 0.0;
  double upper = 0.0;
};
SpectralBounds spectral_radius_bounds(const graphdata::DirectedGraph& graph, int iterations = 200);
// OK when beta * upper < 1. Otherwise kInvalidArgument: "--beta B is at least 1/lambda_max (the
// series diverges)" when beta * lower >= 1, or "cannot prove --beta B converges (lambda_max is
// between L and U); use --beta below 1/U".
Status check_katz_beta(const graphdata::DirectedGraph& graph, double beta);

struct Comparison {
  double l1_error = 0.0;        // sum |x - ref| over finite entries
  double max_error = 0.0;       // max |x - ref|
  int64_t mismatches = 0;       // entries not equal (cc, sssp: exact; infinities must match)
  std::string first_mismatch;   // "vertex 17: got 3, expected 2" or empty
};
Comparison compare_values(const AlgorithmSpec& spec, std::span<const double> values, std::span<const double> reference);

}  // namespace tessera::graph
