#include "tessera/graph/reference.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::graph {
namespace {

using graphdata::DirectedEdge;
using graphdata::DirectedGraph;

constexpr double kInf = std::numeric_limits<double>::infinity();
// A real graph from libmetis-doc (scripts/setup.sh): a 2D finite element mesh, undirected.
constexpr const char* kMetis4elt = "/usr/share/doc/libmetis-dev/examples/graphs/4elt.graph";

DirectedGraph graph_of(int64_t vertices, std::vector<DirectedEdge> edges, bool weighted = false) {
  Result<DirectedGraph> graph = graphdata::build_directed_graph(vertices, std::move(edges), weighted);
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  return graph.is_ok() ? *graph : DirectedGraph{};
}

DirectedGraph cycle(int64_t n) {
  std::vector<DirectedEdge> edges;
  for (int64_t v = 0; v < n; ++v) edges.push_back({v, (v + 1) % n});
  return graph_of(n, edges);
}

DirectedGraph complete(int64_t n) {
  std::vector<DirectedEdge> edges;
  for (int64_t u = 0; u < n; ++u) {
    for (int64_t v = 0; v < n; ++v) {
      if (u != v) edges.push_back({u, v});
    }
  }
  return graph_of(n, edges);
}

DirectedGraph generated(const char* spec, uint64_t seed = 1) {
  Result<DirectedGraph> graph = graphdata::generate_directed_graph(spec, seed);
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  return graph.is_ok() ? *graph : DirectedGraph{};
}

AlgorithmSpec pagerank(double damping = 0.85) { return {.kind = AlgorithmKind::kPageRank, .damping = damping}; }
AlgorithmSpec katz(double beta, std::optional<int64_t> source = {}) {
  return {.kind = AlgorithmKind::kKatz, .beta = beta, .source = source};
}
AlgorithmSpec cc(bool max_label) { return {.kind = AlgorithmKind::kConnectedComponents, .max_label = max_label}; }
AlgorithmSpec sssp(int64_t source) { return {.kind = AlgorithmKind::kShortestPaths, .source = source}; }

std::vector<double> values_of(const DirectedGraph& graph, const AlgorithmSpec& spec, double tolerance = 1e-12) {
  Result<std::vector<double>> values = reference_values(graph, spec, tolerance);
  EXPECT_TRUE(values.is_ok()) << describe(spec) << ": " << values.status().to_string();
  return values.is_ok() ? *values : std::vector<double>{};
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& expected, double tolerance) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t v = 0; v < got.size(); ++v) EXPECT_NEAR(got[v], expected[v], tolerance) << "vertex " << v;
}

template <typename Visit>
void for_each_edge(const DirectedGraph& graph, Visit&& visit) {
  for (int64_t u = 0; u < graph.vertex_count; ++u) {
    for (uint64_t e = graph.offsets[static_cast<std::size_t>(u)]; e < graph.offsets[static_cast<std::size_t>(u) + 1]; ++e) {
      visit(u, static_cast<int64_t>(graph.targets[e]), graph.weighted() ? graph.weights[e] : 1.0);
    }
  }
}

// --- PageRank --------------------------------------------------------------------------------------

TEST(ReferencePageRank, CycleIsUniform) {
  for (int n : {1, 3, 7}) {
    expect_near_all(values_of(cycle(n), pagerank()), std::vector<double>(static_cast<std::size_t>(n), 1.0 / n), 1e-14);
  }
  expect_near_all(values_of(complete(5), pagerank(0.5)), std::vector<double>(5, 0.2), 1e-14);
}

// 0 -> 1, 0 -> 2, 1 -> 2; vertex 2 is dangling and, in standard PageRank, links to all three.
// With d = 0.85 every vertex receives c = 0.05 + 0.85 x2 / 3, so
//   x0 = c,  x1 = c + 0.85 x0 / 2 = 1.425 c,  x2 = c + 0.85 x0 / 2 + 0.85 x1 = 2.63625 c,
// and the sum being 1 gives c = 1 / 5.06125.
TEST(ReferencePageRank, DanglingVertexLinksToEveryVertex) {
  const DirectedGraph graph = graph_of(3, {{0, 1}, {0, 2}, {1, 2}});
  const double c = 1.0 / 5.06125;
  const std::vector<double> expected = {c, 1.425 * c, 2.63625 * c};
  const std::vector<double> ranks = values_of(graph, pagerank());
  expect_near_all(ranks, expected, 1e-12);
  EXPECT_NEAR(std::accumulate(ranks.begin(), ranks.end(), 0.0), 1.0, 1e-15);
  // algorithm.hpp's claim: dropping the dangling mass and normalising at the end gives the same.
  // Dropped: y0 = 0.05, y1 = 0.05 + 0.425 y0, y2 = 0.05 + 0.425 y0 + 0.85 y1.
  const double y0 = 0.05, y1 = 0.05 + 0.425 * y0, y2 = 0.05 + 0.425 * y0 + 0.85 * y1;
  expect_near_all(ranks, {y0 / (y0 + y1 + y2), y1 / (y0 + y1 + y2), y2 / (y0 + y1 + y2)}, 1e-12);
}

// The fixed point of standard PageRank, checked by its own equation.
void expect_pagerank_fixed_point(const DirectedGraph& graph, double damping) {
  const std::vector<double> x = values_of(graph, pagerank(damping));
  const auto n = static_cast<double>(graph.vertex_count);
  double dangling = 0.0;
  std::vector<double> image(x.size(), 0.0);
  for (int64_t u = 0; u < graph.vertex_count; ++u) {
    if (graph.out_degree(u) == 0) dangling += x[static_cast<std::size_t>(u)];
  }
  for_each_edge(graph, [&](int64_t u, int64_t v, double) {
    image[static_cast<std::size_t>(v)] += damping * x[static_cast<std::size_t>(u)] / static_cast<double>(graph.out_degree(u));
  });
  double residual = 0.0, total = 0.0;
  for (std::size_t v = 0; v < x.size(); ++v) {
    residual += std::abs((1 - damping) / n + image[v] + damping * dangling / n - x[v]);
    total += x[v];
    EXPECT_GT(x[v], 0.0);
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  // sum |x_{k+1} - x_k| <= 1e-12 leaves at most 1e-12 * d / (1 - d) of distance to the fixed point.
  EXPECT_LT(residual, 1e-11);
}

TEST(ReferencePageRank, GeneratedGraphsSatisfyTheEquation) {
  expect_pagerank_fixed_point(generated("rmat:12"), 0.85);
  expect_pagerank_fixed_point(generated("lognormal:5000"), 0.85);
  expect_pagerank_fixed_point(generated("mesh2d:17x9"), 0.6);
  expect_pagerank_fixed_point(graph_of(4, {{0, 0}, {0, 1}, {0, 1}, {1, 2}}), 0.85);  // self-loop, parallel edges
}

// --- Katz ----------------------------------------------------------------------------------------

TEST(ReferenceKatz, PathIsTheSeriesOfWalks) {
  // 0 -> 1 -> 2 -> 3: from every source, vertex v is reached by one walk of each length 0..v.
  const DirectedGraph path = graph_of(4, {{0, 1}, {1, 2}, {2, 3}});
  const double b = 0.5;
  expect_near_all(values_of(path, katz(b)), {1, 1 + b, 1 + b + b * b, 1 + b + b * b + b * b * b}, 1e-15);
  expect_near_all(values_of(path, katz(b, 0)), {1, b, b * b, b * b * b}, 1e-15);
  expect_near_all(values_of(path, katz(b, 2)), {0, 0, 1, b}, 1e-15);
  // Edge weights multiply along the walk.
  const DirectedGraph weighted = graph_of(4, {{0, 1, 2.0}, {1, 2, 3.0}, {2, 3, 0.5}}, true);
  expect_near_all(values_of(weighted, katz(b, 0)), {1, 2 * b, 6 * b * b, 3 * b * b * b}, 1e-15);
}

TEST(ReferenceKatz, CycleSumsTheGeometricSeries) {
  // lambda = 1: every vertex is reached by one walk of every length, x = 1 / (1 - beta).
  expect_near_all(values_of(cycle(5), katz(0.5)), std::vector<double>(5, 2.0), 1e-11);
  // Single source on a 3-cycle: x_v = beta^v / (1 - beta^3).
  const double b = 0.6, r = 1.0 / (1.0 - b * b * b);
  expect_near_all(values_of(cycle(3), katz(b, 0)), {r, b * r, b * b * r}, 1e-11);
}

TEST(ReferenceKatz, GeneratedGraphSatisfiesTheEquation) {
  const DirectedGraph graph = generated("rmat:11");
  const SpectralBounds bounds = spectral_radius_bounds(graph);
  const double beta = 0.5 / bounds.upper;
  const std::vector<double> x = values_of(graph, katz(beta));
  std::vector<double> image(x.size(), 1.0);
  for_each_edge(graph, [&](int64_t u, int64_t v, double w) {
    image[static_cast<std::size_t>(v)] += beta * w * x[static_cast<std::size_t>(u)];
  });
  double residual = 0.0;
  for (std::size_t v = 0; v < x.size(); ++v) residual += std::abs(image[v] - x[v]);
  EXPECT_LT(residual, 1e-10);
}

TEST(ReferenceKatz, DivergentBetaFailsInsteadOfLooping) {
  Result<std::vector<double>> values = reference_values(complete(4), katz(1.0));  // lambda = 3
  ASSERT_FALSE(values.is_ok());
  EXPECT_EQ(values.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(values.status().message().find("diverges"), std::string::npos) << values.status().message();
  Result<std::vector<double>> slow = reference_values(cycle(3), katz(0.99), 1e-12, 10);
  EXPECT_EQ(slow.status().code(), StatusCode::kInternal);
}

// --- Connected components ------------------------------------------------------------------------

// {0, 1, 2} joined by 1->0 and 1->2 (no directed path 0 -> 2), {3, 5, 6} by 6->3 and 5->6, and 4
// alone with a self-loop: three weakly connected components.
TEST(ReferenceComponents, WeaklyConnectedWithIsolatedVertices) {
  const DirectedGraph graph = graph_of(7, {{1, 0}, {1, 2}, {6, 3}, {5, 6}, {4, 4}});
  EXPECT_EQ(values_of(graph, cc(true)), (std::vector<double>{2, 2, 2, 6, 4, 6, 6}));
  EXPECT_EQ(values_of(graph, cc(false)), (std::vector<double>{0, 0, 0, 3, 4, 3, 3}));
  // No edges at all: every vertex is its own component.
  EXPECT_EQ(values_of(graph_of(3, {}), cc(true)), (std::vector<double>{0, 1, 2}));
}

TEST(ReferenceComponents, GeneratedAndRealGraphsLabelConsistently) {
  std::vector<DirectedGraph> graphs = {generated("rmat:11:2"), generated("lognormal:3000")};
  if (std::filesystem::exists(kMetis4elt)) {
    Result<DirectedGraph> real = graphdata::read_directed_graph_file(kMetis4elt);
    ASSERT_TRUE(real.is_ok()) << real.status().to_string();
    graphs.push_back(*real);
  }
  for (const DirectedGraph& graph : graphs) {
    for (bool max_label : {true, false}) {
      const std::vector<double> labels = values_of(graph, cc(max_label));
      // Both ends of an edge share a label, the label is a vertex of the component, and it is the
      // largest (smallest) id there: every vertex is on the right side of its label.
      for_each_edge(graph, [&](int64_t u, int64_t v, double) {
        ASSERT_EQ(labels[static_cast<std::size_t>(u)], labels[static_cast<std::size_t>(v)]) << u << "->" << v;
      });
      for (std::size_t v = 0; v < labels.size(); ++v) {
        ASSERT_EQ(labels[static_cast<std::size_t>(labels[v])], labels[v]);
        ASSERT_TRUE(max_label ? labels[v] >= static_cast<double>(v) : labels[v] <= static_cast<double>(v));
      }
    }
  }
}

// --- Shortest paths ------------------------------------------------------------------------------

TEST(ReferenceShortestPaths, ZeroWeightsAndUnreachableVertices) {
  // 4 reaches 0 but not the reverse; 5 is isolated.
  const DirectedGraph graph =
      graph_of(6, {{0, 1, 0.0}, {1, 2, 2.0}, {0, 2, 5.0}, {2, 3, 0.0}, {4, 0, 1.0}, {3, 1, 0.5}}, true);
  EXPECT_EQ(values_of(graph, sssp(0)), (std::vector<double>{0, 0, 2, 2, kInf, kInf}));
  EXPECT_EQ(values_of(graph, sssp(4)), (std::vector<double>{1, 1, 3, 3, 0, kInf}));
  EXPECT_EQ(values_of(graph, sssp(5)), (std::vector<double>{kInf, kInf, kInf, kInf, kInf, 0}));
  // Unweighted: hop counts.
  const DirectedGraph hops = graph_of(5, {{0, 1}, {1, 2}, {0, 2}, {2, 3}});
  EXPECT_EQ(values_of(hops, sssp(0)), (std::vector<double>{0, 1, 1, 2, kInf}));
}

TEST(ReferenceShortestPaths, GeneratedGraphDistancesAreTight) {
  std::vector<DirectedEdge> edges;
  const DirectedGraph shape = generated("rmat:11");
  uint64_t salt = 1;
  for_each_edge(shape, [&](int64_t u, int64_t v, double) {
    salt = salt * 6364136223846793005ULL + 1442695040888963407ULL;
    edges.push_back({u, v, static_cast<double>(salt >> 60)});  // weights 0..15, zeros included
  });
  const DirectedGraph graph = graph_of(shape.vertex_count, edges, true);
  const std::vector<double> distance = values_of(graph, sssp(0));
  EXPECT_EQ(distance[0], 0.0);
  // Every edge is relaxed (d[v] <= d[u] + w), and every reached vertex but the source is reached
  // through an edge that achieves its distance.
  std::vector<bool> achieved(distance.size(), false);
  for_each_edge(graph, [&](int64_t u, int64_t v, double w) {
    const double through = distance[static_cast<std::size_t>(u)] + w;
    EXPECT_LE(distance[static_cast<std::size_t>(v)], through);
    if (std::isfinite(through) && distance[static_cast<std::size_t>(v)] == through) achieved[static_cast<std::size_t>(v)] = true;
  });
  for (std::size_t v = 1; v < distance.size(); ++v) {
    if (std::isfinite(distance[v])) {
      EXPECT_TRUE(achieved[v]) << v;
    }
  }
}

TEST(ReferenceShortestPaths, RefusesNegativeWeightsAndBadSources) {
  const DirectedGraph graph = graph_of(3, {{0, 1, 1.0}, {1, 2, 0.0}, {2, 0, -1.5}}, true);
  Result<std::vector<double>> negative = reference_values(graph, sssp(0));
  ASSERT_FALSE(negative.is_ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "edge 2->0 has weight -1.5; sssp needs weights >= 0");
  Result<std::vector<double>> outside = reference_values(cycle(3), sssp(3));
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("--source 3"), std::string::npos) << outside.status().message();
  Result<std::vector<double>> missing = reference_values(cycle(3), {.kind = AlgorithmKind::kShortestPaths});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reference_values(cycle(3), katz(0.5, 7)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reference_values(cycle(3), pagerank(1.0)).status().code(), StatusCode::kInvalidArgument);
}

// --- Spectral bounds and Katz's beta --------------------------------------------------------------

void expect_bracket(const DirectedGraph& graph, double lambda, double width) {
  const SpectralBounds bounds = spectral_radius_bounds(graph);
  EXPECT_LE(bounds.lower, lambda + 1e-12);
  EXPECT_GE(bounds.upper, lambda - 1e-12);
  EXPECT_LE(bounds.upper - bounds.lower, width);
}

TEST(SpectralBounds, BracketKnownRadii) {
  for (int64_t n : {1, 2, 5, 12}) expect_bracket(cycle(n), 1.0, 1e-12);  // permutation: lambda = 1
  for (int64_t n : {2, 4, 9}) expect_bracket(complete(n), static_cast<double>(n - 1), 1e-12);
  expect_bracket(graph_of(4, {}), 0.0, 0.0);
  // A 3-cycle feeding a dangling vertex and fed by a source vertex: lambda = 1. The dangling
  // vertex's ratio stays 1 forever, so only the support rule keeps the lower bound near 1.
  expect_bracket(graph_of(5, {{0, 1}, {1, 2}, {2, 0}, {2, 3}, {4, 0}}), 1.0, 1e-6);
  // Weights scale: a 4-cycle of weight 3 has lambda = 3; a 2-cycle with weights 2 and 8, 4.
  expect_bracket(graph_of(4, {{0, 1, 3.0}, {1, 2, 3.0}, {2, 3, 3.0}, {3, 0, 3.0}}, true), 3.0, 1e-9);
  expect_bracket(graph_of(2, {{0, 1, 2.0}, {1, 0, 8.0}}, true), 4.0, 1e-6);
  // Periodic (bipartite) graph: the +I makes the power iteration converge anyway.
  expect_bracket(graph_of(4, {{0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 0}, {2, 1}, {3, 0}, {3, 1}}), 2.0, 1e-6);
}

TEST(SpectralBounds, GeneratedGraphBoundsProveKatzConverges) {
  for (const char* spec : {"rmat:12", "lognormal:4000", "mesh2d:20x30"}) {
    SCOPED_TRACE(spec);
    const DirectedGraph graph = generated(spec);
    const SpectralBounds bounds = spectral_radius_bounds(graph);
    EXPECT_GT(bounds.lower, 0.0);
    EXPECT_LE(bounds.lower, bounds.upper);
    // Katz converges just below the upper bound's 1/U: the proof the planner relies on.
    EXPECT_TRUE(check_katz_beta(graph, 0.99 / bounds.upper).is_ok());
    EXPECT_TRUE(reference_values(graph, katz(0.99 / bounds.upper), 1e-9).is_ok());
  }
}

TEST(CheckKatzBeta, AcceptsBelowAndRefusesAboveOneOverLambda) {
  for (const auto& [graph, lambda, flag] :
       {std::tuple{cycle(6), 1.0, "--beta 1.5"}, std::tuple{complete(5), 4.0, "--beta 0.375"}}) {
    EXPECT_TRUE(check_katz_beta(graph, 0.5 / lambda).is_ok());
    const Status refused = check_katz_beta(graph, 1.5 / lambda);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    const std::string expected = std::string(flag) + " is at least 1/lambda_max (the series diverges)";
    EXPECT_EQ(refused.message().rfind(expected, 0), 0u) << refused.message();
  }
  // Negative weights: the bounds are |A|'s, so divergence cannot be claimed, only not proven.
  const DirectedGraph negative = graph_of(3, {{0, 1, -1.0}, {1, 2, -1.0}, {2, 0, -1.0}}, true);
  EXPECT_TRUE(check_katz_beta(negative, 0.5).is_ok());
  const Status unproven = check_katz_beta(negative, 1.5);
  EXPECT_EQ(unproven.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unproven.message().rfind("cannot prove --beta 1.5 converges (lambda_max is between 0 and 1); use --beta "
                                     "below 1/1",
                                     0),
            0u)
      << unproven.message();
  EXPECT_EQ(check_katz_beta(cycle(3), 0.0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(check_katz_beta(cycle(3), std::nan("")).code(), StatusCode::kInvalidArgument);
}

// --- Comparing -----------------------------------------------------------------------------------

TEST(CompareValues, LinearAlgorithmsMeasureErrors) {
  const std::vector<double> reference = {0.5, 0.25, 0.25};
  const Comparison close = compare_values(pagerank(), std::vector<double>{0.5, 0.26, 0.24}, reference);
  EXPECT_NEAR(close.l1_error, 0.02, 1e-15);
  EXPECT_NEAR(close.max_error, 0.01, 1e-15);
  EXPECT_EQ(close.mismatches, 0);
  EXPECT_TRUE(close.first_mismatch.empty());
  const Comparison nan = compare_values(katz(0.1), std::vector<double>{0.5, std::nan(""), 0.25}, reference);
  EXPECT_EQ(nan.mismatches, 1);
  EXPECT_EQ(nan.first_mismatch, "vertex 1: got nan, expected 0.25");
}

TEST(CompareValues, LabelsAndDistancesMustBeExact) {
  const Comparison labels = compare_values(cc(true), std::vector<double>{2, 3, 2, 5}, std::vector<double>{2, 2, 2, 5});
  EXPECT_EQ(labels.mismatches, 1);
  EXPECT_EQ(labels.first_mismatch, "vertex 1: got 3, expected 2");
  const std::vector<double> distances = {0, 1.5, kInf};
  EXPECT_EQ(compare_values(sssp(0), distances, distances).mismatches, 0);  // inf == inf
  const Comparison unreached = compare_values(sssp(0), std::vector<double>{0, 1.5, 7}, distances);
  EXPECT_EQ(unreached.mismatches, 1);
  EXPECT_EQ(unreached.first_mismatch, "vertex 2: got 7, expected inf");
  const Comparison tiny = compare_values(sssp(0), std::vector<double>{0, 1.5 + 1e-15, kInf}, distances);
  EXPECT_EQ(tiny.mismatches, 1);
  const Comparison short_values = compare_values(cc(false), std::vector<double>{0, 0}, std::vector<double>{0, 0, 2});
  EXPECT_EQ(short_values.mismatches, 1);
  EXPECT_EQ(short_values.first_mismatch, "got 2 values, expected 3");
}

TEST(ReferenceValues, EmptyGraph) {
  const DirectedGraph empty = graph_of(0, {});
  EXPECT_TRUE(values_of(empty, pagerank()).empty());
  EXPECT_TRUE(values_of(empty, katz(0.5)).empty());
  EXPECT_TRUE(values_of(empty, cc(true)).empty());
}

}  // namespace
}  // namespace tessera::graph
