#include "tessera/graphdata/graph.hpp"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::graphdata {
namespace {

std::vector<int32_t> neighbours_of(const Graph& graph, int32_t v) {
  const auto span = graph.neighbours(v);
  return {span.begin(), span.end()};
}

TEST(BuildGraph, EmptyGraph) {
  auto graph = build_graph({});
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  EXPECT_EQ(graph->vertex_count(), 0);
  EXPECT_EQ(graph->edge_count(), 0);
  EXPECT_EQ(graph->total_vertex_weight(), 0);
}

TEST(BuildGraph, OneVertex) {
  auto graph = build_graph({.vertex_count = 1});
  ASSERT_TRUE(graph.is_ok());
  EXPECT_EQ(graph->vertex_count(), 1);
  EXPECT_EQ(graph->edge_count(), 0);
  EXPECT_TRUE(neighbours_of(*graph, 0).empty());
}

TEST(BuildGraph, SymmetrisesDirectedInputAndSortsNeighbours) {
  auto graph = build_graph({.vertex_count = 4, .edges = {{3, 0}, {0, 2}, {2, 1}}});
  ASSERT_TRUE(graph.is_ok());
  EXPECT_EQ(graph->edge_count(), 3);
  EXPECT_EQ(neighbours_of(*graph, 0), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(neighbours_of(*graph, 1), (std::vector<int32_t>{2}));
  EXPECT_EQ(neighbours_of(*graph, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(neighbours_of(*graph, 3), (std::vector<int32_t>{0}));
}

TEST(BuildGraph, RemovesSelfLoopsAndMergesDuplicatesKeepingTheHeaviest) {
  GraphBuildStats stats;
  auto graph = build_graph({.vertex_count = 3,
                            .edges = {{0, 0, 9}, {0, 1, 2}, {1, 0, 7}, {0, 1, 3}, {1, 2, 1}, {2, 2, 1}},
                            .weighted_edges = true},
                           &stats);
  ASSERT_TRUE(graph.is_ok());
  EXPECT_EQ(stats.self_loops_removed, 2);
  EXPECT_EQ(stats.duplicates_merged, 2);
  EXPECT_EQ(graph->edge_count(), 2);
  ASSERT_EQ(neighbours_of(*graph, 0), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph->edge_weight_at(0), 7);
  // Both directions carry the same weight.
  EXPECT_EQ(graph->edge_weight_at(static_cast<std::size_t>(graph->xadj()[1])), 7);
}

TEST(BuildGraph, SymmetrisingASymmetricInputChangesNothing) {
  const std::vector<Edge> once = {{0, 1, 4}, {1, 2, 6}};
  const std::vector<Edge> twice = {{0, 1, 4}, {1, 0, 4}, {1, 2, 6}, {2, 1, 6}};
  auto a = build_graph({.vertex_count = 3, .edges = once, .weighted_edges = true});
  auto b = build_graph({.vertex_count = 3, .edges = twice, .weighted_edges = true});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(*a, *b);
}

TEST(BuildGraph, UnweightedInputIgnoresEdgeWeights) {
  auto graph = build_graph({.vertex_count = 2, .edges = {{0, 1, 50}}});
  ASSERT_TRUE(graph.is_ok());
  EXPECT_FALSE(graph->has_edge_weights());
  EXPECT_EQ(graph->edge_weight_at(0), 1);
}

TEST(BuildGraph, VertexWeights) {
  auto graph = build_graph({.vertex_count = 3, .vertex_weights = {5, 0, 2}});
  ASSERT_TRUE(graph.is_ok());
  EXPECT_EQ(graph->total_vertex_weight(), 7);
  EXPECT_EQ(graph->vertex_weight(1), 0);
}

TEST(BuildGraph, RefusesBadInput) {
  EXPECT_EQ(build_graph({.vertex_count = -1}).status().code(), StatusCode::kInvalidArgument);
  auto out_of_range = build_graph({.vertex_count = 2, .edges = {{0, 2}}});
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("outside 0..1"), std::string::npos) << out_of_range.status().message();
  EXPECT_FALSE(build_graph({.vertex_count = 2, .edges = {{-1, 0}}}).is_ok());
  EXPECT_FALSE(build_graph({.vertex_count = 2, .vertex_weights = {1}}).is_ok());
  EXPECT_FALSE(build_graph({.vertex_count = 2, .vertex_weights = {1, -3}}).is_ok());
  auto zero_weight = build_graph({.vertex_count = 2, .edges = {{0, 1, 0}}, .weighted_edges = true});
  EXPECT_EQ(zero_weight.status().code(), StatusCode::kInvalidArgument);
}

TEST(BuildGraph, RefusesSizesBeyondMetisIndices) {
  auto vertices = build_graph({.vertex_count = kMaxGraphIndex + 1});
  EXPECT_EQ(vertices.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(vertices.status().message().find("32-bit"), std::string::npos) << vertices.status().message();
  auto weight_sum = build_graph({.vertex_count = 2, .vertex_weights = {int64_t{1} << 30, int64_t{1} << 30}});
  EXPECT_EQ(weight_sum.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(weight_sum.status().message().find("sum of vertex weights"), std::string::npos);
  auto edge_weight = build_graph({.vertex_count = 2, .edges = {{0, 1, int64_t{1} << 30}}, .weighted_edges = true});
  EXPECT_EQ(edge_weight.status().code(), StatusCode::kResourceExhausted);
  auto huge_vertex_weight = build_graph({.vertex_count = 1, .vertex_weights = {int64_t{1} << 32}});
  EXPECT_EQ(huge_vertex_weight.status().code(), StatusCode::kResourceExhausted);
}

TEST(BuildGraph, Describe) {
  auto graph = build_graph({.vertex_count = 3, .edges = {{0, 1}}, .vertex_weights = {1, 2, 3}});
  ASSERT_TRUE(graph.is_ok());
  EXPECT_EQ(describe(*graph), "3 vertices, 1 edges, vertex weights 1..3 (total 6)");
}

}  // namespace
}  // namespace tessera::graphdata
