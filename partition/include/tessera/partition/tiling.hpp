// Irregular tilings: work split into tiles of uneven cost, where tiles that read the same panel
// (a block of A's rows, of B's columns, a sparse matrix's column) should share a node so the panel
// travels once. tile_graph turns the tiling into a graph (tile = vertex weighted by its cost; two
// tiles sharing k panels = an edge of weight k) and partition_tiles partitions it with the same
// partition_graph as any other graph, so every method, trap and quality measure applies.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/partition/graph.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::partition {

struct Tile {
  int64_t cost = 1;             // work of the tile, >= 0 (vertex weight)
  std::vector<int64_t> panels;  // ids of the panels it reads, >= 0; repeats are ignored
};

// A panel read by t tiles contributes t(t-1)/2 edges, so a panel shared by very many tiles makes
// the graph quadratic; beyond kMaxGraphIndex adjacency entries this fails with kResourceExhausted
// before allocating them. Also fails on a negative cost or panel id.
Result<Graph> tile_graph(std::span<const Tile> tiles);

// tile_graph then partition_graph; Partition::part[i] is the part of tiles[i].
Result<Partition> partition_tiles(std::span<const Tile> tiles, const PartitionOptions& options);

}  // namespace tessera::partition
