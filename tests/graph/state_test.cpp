#include "tessera/graph/state.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "graph_fixtures.hpp"

namespace tessera::graph {
namespace {

using fixtures::make_graph;

constexpr double kInf = std::numeric_limits<double>::infinity();

const AlgorithmSpec kPageRank{.kind = AlgorithmKind::kPageRank, .damping = 0.85};
const AlgorithmSpec kKatzAll{.kind = AlgorithmKind::kKatz, .beta = 0.1};
const AlgorithmSpec kKatzFrom2{.kind = AlgorithmKind::kKatz, .beta = 0.1, .source = 2};
const AlgorithmSpec kCcMax{.kind = AlgorithmKind::kConnectedComponents};
const AlgorithmSpec kCcMin{.kind = AlgorithmKind::kConnectedComponents, .max_label = false};
const AlgorithmSpec kSsspFrom0{.kind = AlgorithmKind::kShortestPaths, .source = 0};

double l1_distance(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(a[i] - b[i]);
  return sum;
}

double l1_norm(const std::vector<double>& a) {
  double sum = 0.0;
  for (double x : a) sum += std::abs(x);
  return sum;
}

// 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 0, 3 -> 2; 3 has no in-edges, nothing dangles.
graphdata::DirectedGraph four_vertices() { return make_graph(4, {{0, 1}, {0, 2}, {1, 2}, {2, 0}, {3, 2}}); }

TEST(InitialState, FollowsTheAlgorithmTable) {
  const graphdata::DirectedGraph graph = four_vertices();
  const VertexState pagerank = initial_state(graph, kPageRank);
  EXPECT_EQ(pagerank.value, std::vector<double>(4, 0.0));
  EXPECT_EQ(pagerank.delta, std::vector<double>(4, (1.0 - 0.85) / 4));
  EXPECT_EQ(initial_state(graph, kKatzAll).delta, std::vector<double>(4, 1.0));
  EXPECT_EQ(initial_state(graph, kKatzFrom2).delta, (std::vector<double>{0, 0, 1, 0}));
  const VertexState cc = initial_state(graph, kCcMax);
  EXPECT_EQ(cc.value, std::vector<double>(4, -kInf));
  EXPECT_EQ(cc.delta, (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(initial_state(graph, kCcMin).value, std::vector<double>(4, kInf));
  const VertexState sssp = initial_state(graph, kSsspFrom0);
  EXPECT_EQ(sssp.value, std::vector<double>(4, kInf));
  EXPECT_EQ(sssp.delta, (std::vector<double>{0, kInf, kInf, kInf}));
}

TEST(RestartState, LinearResidualByHand) {
  // x = (1, 2, 3, 4), pagerank d = 0.5: (A x)_0 = 0.5*3/1, (A x)_1 = 0.5*1/2,
  // (A x)_2 = 0.5*1/2 + 0.5*2/1 + 0.5*4/1, (A x)_3 = 0; b = 0.5/4.
  const AlgorithmSpec spec{.kind = AlgorithmKind::kPageRank, .damping = 0.5};
  const std::vector<double> x = {1, 2, 3, 4};
  const VertexState state = restart_state(four_vertices(), spec, x);
  EXPECT_EQ(state.value, x);
  const double b = 0.125;
  EXPECT_DOUBLE_EQ(state.delta[0], b + 1.5 - 1);
  EXPECT_DOUBLE_EQ(state.delta[1], b + 0.25 - 2);
  EXPECT_DOUBLE_EQ(state.delta[2], b + 0.25 + 1 + 2 - 3);
  EXPECT_DOUBLE_EQ(state.delta[3], b - 4);
}

TEST(RestartState, DanglingVerticesContributeNothing) {
  // 0 -> 1, 1 dangles: (A x)_0 = 0 whatever x_1 is.
  const graphdata::DirectedGraph graph = make_graph(2, {{0, 1}});
  const VertexState state = restart_state(graph, kPageRank, std::vector<double>{0.2, 7.0});
  EXPECT_DOUBLE_EQ(state.delta[0], 0.075 - 0.2);
  EXPECT_DOUBLE_EQ(state.delta[1], 0.075 + 0.85 * 0.2 - 7.0);
}

TEST(RestartState, KatzUsesWeights) {
  // 0 -(2)-> 1, 1 -(0.5)-> 1: (A x)_1 = beta * (2 x_0 + 0.5 x_1).
  const graphdata::DirectedGraph graph = make_graph(2, {{0, 1, 2.0}, {1, 1, 0.5}}, true);
  const VertexState state = restart_state(graph, kKatzAll, std::vector<double>{1.0, 4.0});
  EXPECT_DOUBLE_EQ(state.delta[0], 1.0 - 1.0);
  EXPECT_DOUBLE_EQ(state.delta[1], 1.0 + 0.1 * (2.0 + 2.0) - 4.0);
}

TEST(RestartState, AtTheFixedPointTheResidualVanishes) {
  // A directed cycle's unnormalised PageRank is 1/N everywhere: b + d/N - 1/N = 0 exactly.
  const graphdata::DirectedGraph cycle = fixtures::directed_cycle(8);
  const VertexState at_cycle = restart_state(cycle, kPageRank, std::vector<double>(8, 1.0 / 8));
  EXPECT_LT(l1_norm(at_cycle.delta), 1e-16);
  // Any graph: restart from the iterated fixed point leaves a residual at rounding level.
  for (const AlgorithmSpec& spec : {kPageRank, kKatzAll, kKatzFrom2}) {
    const graphdata::DirectedGraph graph = fixtures::random_graph(300, 2000, 11, spec.kind == AlgorithmKind::kKatz);
    const std::vector<double> x = fixtures::fixed_point(graph, spec);
    const VertexState state = restart_state(graph, spec, x);
    EXPECT_LT(l1_norm(state.delta), 1e-12 * l1_norm(x)) << describe(spec);
  }
}

TEST(RestartState, LinearFromGarbageReachesTheSameFixedPoint) {
  for (const AlgorithmSpec& spec : {kPageRank, kKatzAll}) {
    const graphdata::DirectedGraph graph = fixtures::awkward_graph();
    const std::vector<double> expected = fixtures::fixed_point(graph, spec);
    std::vector<double> garbage(expected.size());
    for (std::size_t v = 0; v < garbage.size(); ++v) garbage[v] = (v % 3 == 0) ? -5.0 + static_cast<double>(v) : 1e3;
    const std::vector<double> restarted =
        fixtures::iterate_to_fixed_point(graph, spec, restart_state(graph, spec, garbage));
    EXPECT_LT(l1_distance(restarted, expected), 1e-9) << describe(spec);
  }
}

TEST(RestartState, MinMaxRepropagatesReachedValues) {
  // sssp on 0 -(1)-> 1 -(1)-> 2 -(1)-> 3, 0 -(5)-> 3. A snapshot that knows 1 at distance 1 and
  // nothing else: dv = b (+) relax(x) offers 2 to vertex 2 and keeps 0 at the source.
  const graphdata::DirectedGraph graph = make_graph(4, {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {0, 3, 5}}, true);
  const std::vector<double> x = {kInf, 1.0, kInf, kInf};
  const VertexState state = restart_state(graph, kSsspFrom0, x);
  EXPECT_EQ(state.value, x);
  EXPECT_EQ(state.delta, (std::vector<double>{0.0, kInf, 2.0, kInf}));
  EXPECT_EQ(fixtures::iterate_to_fixed_point(graph, kSsspFrom0, state), (std::vector<double>{0, 1, 2, 3}));

  // cc max on the symmetrised awkward graph: a snapshot with some labels already spread.
  const graphdata::DirectedGraph symmetric = graphdata::symmetrised(fixtures::awkward_graph());
  const std::vector<double> expected = fixtures::fixed_point(symmetric, kCcMax);
  std::vector<double> partial(expected.size(), -kInf);
  partial[4] = 4.0;
  partial[2] = 4.0;  // reached from 4 along 2 <- 4
  partial[9] = 9.0;
  const VertexState restarted = restart_state(symmetric, kCcMax, partial);
  EXPECT_EQ(restarted.delta[0], 4.0) << "0 hears 2's label";
  EXPECT_EQ(fixtures::iterate_to_fixed_point(symmetric, kCcMax, restarted), expected);
  EXPECT_EQ(expected, (std::vector<double>{4, 4, 4, 4, 4, 9, 9, 9, 9, 9, 10, 12, 12, 13}));
}

TEST(NormalisePagerank, ScalesToSumOne) {
  std::vector<double> values = {1.0, 3.0, 4.0};
  normalise_pagerank(values);
  EXPECT_EQ(values, (std::vector<double>{0.125, 0.375, 0.5}));
  std::vector<double> zeros = {0.0, 0.0};
  normalise_pagerank(zeros);
  EXPECT_EQ(zeros, (std::vector<double>{0.0, 0.0}));
  std::vector<double> empty;
  normalise_pagerank(empty);
  EXPECT_TRUE(empty.empty());
}

}  // namespace
}  // namespace tessera::graph
