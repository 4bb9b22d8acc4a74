// Irregular tilings as graphs: work split into tiles of uneven cost, where tiles that read the
// same panel (a block of A's rows, of B's columns, a sparse matrix's column) should share a node so
// the panel travels once. tile_graph turns the tiling into a graph (tile = vertex weighted by its
// cost; two tiles sharing k panels = an edge of weight k) that any graph partitioner takes
// (partition/tiling.hpp partitions it). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::graphdata {

struct Tile {
  int64_t cost = 1;             // work of the tile, >= 0 (vertex weight)
  std::vector<int64_t> panels;  // ids of the panels it reads, >= 0; repeats are ignored
};

// A panel read by t tiles contributes t(t-1)/2 edges, so a panel shared by very many tiles makes
// the graph quadratic; beyond kMaxGraphIndex adjacency entries this fails with kResourceExhausted
// before allocating them. Also fails on a negative cost or panel id.
Result<Graph> tile_graph(std::span<const Tile> tiles);

}  // namespace tessera::graphdata
