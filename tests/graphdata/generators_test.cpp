#include "tessera/graphdata/generators.hpp"

#include <gtest/gtest.h>

namespace tessera::graphdata {
namespace {

TEST(Generators, MeshSizes) {
  for (auto [nx, ny] : {std::pair{1, 1}, std::pair{1, 7}, std::pair{3, 5}, std::pair{200, 200}}) {
    Result<Graph> mesh = mesh2d(nx, ny);
    ASSERT_TRUE(mesh.is_ok()) << mesh.status().to_string();
    EXPECT_EQ(mesh->vertex_count(), nx * ny);
    EXPECT_EQ(mesh->edge_count(), (nx - 1) * ny + nx * (ny - 1)) << nx << "x" << ny;
  }
  Result<Graph> cube = mesh3d(4, 5, 6);
  ASSERT_TRUE(cube.is_ok());
  EXPECT_EQ(cube->vertex_count(), 120);
  EXPECT_EQ(cube->edge_count(), 3 * 5 * 6 + 4 * 4 * 6 + 4 * 5 * 5);
  // An interior vertex of a 3D mesh has 6 neighbours.
  EXPECT_EQ(cube->neighbours(1 + 4 * (1 + 5 * 1)).size(), 6u);
}

TEST(Generators, MeshRefusesBadOrHugeSizes) {
  EXPECT_EQ(mesh2d(0, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mesh2d(50000, 50000).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(mesh3d(2000, 2000, 2000).status().code(), StatusCode::kResourceExhausted);
}

TEST(Generators, RmatIsDeterministicPerSeed) {
  Result<Graph> a = rmat({.scale = 10, .seed = 7});
  Result<Graph> b = rmat({.scale = 10, .seed = 7});
  Result<Graph> c = rmat({.scale = 10, .seed = 8});
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(a->vertex_count(), 1024);
  // 16 * 1024 generated; R-MAT repeats many and some are self-loops, but most survive.
  EXPECT_GT(a->edge_count(), 8 * 1024);
  EXPECT_LE(a->edge_count(), 16 * 1024);
}

TEST(Generators, RmatIsSkewed) {
  Result<Graph> graph = rmat({.scale = 12, .seed = 1});
  ASSERT_TRUE(graph.is_ok());
  std::size_t max_degree = 0;
  for (int32_t v = 0; v < graph->vertex_count(); ++v) max_degree = std::max(max_degree, graph->neighbours(v).size());
  const double mean_degree = 2.0 * static_cast<double>(graph->edge_count()) / graph->vertex_count();
  EXPECT_GT(static_cast<double>(max_degree), 10 * mean_degree);
}

TEST(Generators, RmatRefusesBeyondMetisIndices) {
  EXPECT_EQ(rmat({.scale = 26}).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(rmat({.scale = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rmat({.scale = 4, .a = 0.9, .b = 0.2}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Generators, LognormalMeanInDegree) {
  Result<Graph> graph = lognormal_graph({.vertices = 20000, .seed = 3});
  ASSERT_TRUE(graph.is_ok());
  // E[in-degree] = exp(mu + sigma^2/2) = exp(2.425) ~ 11.3; symmetrising roughly doubles the degree
  // and removes the few repeats, so the mean undirected degree lands near 22.
  const double mean_degree = 2.0 * static_cast<double>(graph->edge_count()) / graph->vertex_count();
  EXPECT_GT(mean_degree, 20.0);
  EXPECT_LT(mean_degree, 23.5);
  Result<Graph> again = lognormal_graph({.vertices = 20000, .seed = 3});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*graph, *again);
}

TEST(Generators, Specs) {
  EXPECT_TRUE(is_generator_spec("mesh2d:3x3"));
  EXPECT_FALSE(is_generator_spec("graphs/mesh2d.graph"));
  Result<Graph> mesh = generate_graph("mesh2d:20x10", 1);
  ASSERT_TRUE(mesh.is_ok());
  EXPECT_EQ(mesh->vertex_count(), 200);
  Result<Graph> cube = generate_graph("mesh3d:3x3x3", 1);
  ASSERT_TRUE(cube.is_ok());
  EXPECT_EQ(cube->vertex_count(), 27);
  Result<Graph> r = generate_graph("rmat:8:4", 5);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->vertex_count(), 256);
  EXPECT_LE(r->edge_count(), 4 * 256);
  Result<Graph> l = generate_graph("lognormal:500", 5);
  ASSERT_TRUE(l.is_ok());
  EXPECT_EQ(l->vertex_count(), 500);
  for (const char* bad : {"mesh2d:20", "mesh2d:20x", "mesh2d:ax3", "mesh3d:2x2", "rmat:", "rmat:99", "rmat:8:0",
                          "lognormal:0", "lognormal:1:2", "torus:3x3"}) {
    Result<Graph> graph = generate_graph(bad, 1);
    EXPECT_EQ(graph.status().code(), StatusCode::kInvalidArgument) << bad << ": " << graph.status().to_string();
  }
}

}  // namespace
}  // namespace tessera::graphdata
