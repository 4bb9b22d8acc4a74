#include "tessera/partition/tiling.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace tessera::partition {
namespace {

std::vector<int32_t> neighbours_of(const graphdata::Graph& graph, int32_t v) {
  const auto span = graph.neighbours(v);
  return {span.begin(), span.end()};
}

TEST(TileGraph, SharedPanelsBecomeWeightedEdges) {
  // Tiles 0 and 1 share panels 10 and 11; 1 and 2 share 12; tile 3 shares nothing.
  const std::vector<graphdata::Tile> tiles = {{5, {10, 11}}, {2, {10, 11, 12, 12}}, {7, {12}}, {1, {99}}};
  Result<graphdata::Graph> graph = graphdata::tile_graph(tiles);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  EXPECT_EQ(graph->vertex_weights(), (std::vector<int32_t>{5, 2, 7, 1}));
  ASSERT_EQ(neighbours_of(*graph, 0), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph->edge_weight_at(0), 2);
  EXPECT_EQ(neighbours_of(*graph, 1), (std::vector<int32_t>{0, 2}));
  EXPECT_TRUE(neighbours_of(*graph, 3).empty());
}

TEST(TileGraph, RefusesBadTiles) {
  EXPECT_EQ(graphdata::tile_graph(std::vector<graphdata::Tile>{{-1, {}}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(graphdata::tile_graph(std::vector<graphdata::Tile>{{1, {-4}}}).status().code(), StatusCode::kInvalidArgument);
}

TEST(TileGraph, RefusesQuadraticBlowUpBeforeAllocating) {
  // 70000 tiles all reading panel 0: 2.4e9 pairs, beyond METIS' 32-bit adjacency.
  std::vector<graphdata::Tile> tiles(70000, graphdata::Tile{1, {0}});
  Result<graphdata::Graph> graph = graphdata::tile_graph(tiles);
  EXPECT_EQ(graph.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(graph.status().message().find("panel 0"), std::string::npos) << graph.status().message();
}

TEST(PartitionTiles, GemmTilesOfUnevenCost) {
  // C = A x B in 16 x 16 tiles; tile (i, j) reads A's row panel i and B's column panel 100 + j,
  // and costs more towards the bottom-right (an irregular, e.g. triangular-ish, workload).
  std::vector<graphdata::Tile> tiles;
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < 16; ++j) tiles.push_back({1 + i + j, {i, 100 + j}});
  }
  PartitionOptions options;
  options.target_weights = {0.4, 0.2, 0.2, 0.2};
  Result<Partition> metis = partition_tiles(tiles, options);
  ASSERT_TRUE(metis.is_ok()) << metis.status().to_string();
  EXPECT_EQ(metis->part.size(), tiles.size());
  EXPECT_LE(metis->quality.imbalance, 1.05);
  options.method = PartitionMethod::kHash;
  Result<Partition> hash = partition_tiles(tiles, options);
  ASSERT_TRUE(hash.is_ok());
  // Fewer shared panels cut means fewer panels sent to more than one node.
  EXPECT_LT(metis->quality.edge_cut, hash->quality.edge_cut);
}

}  // namespace
}  // namespace tessera::partition
