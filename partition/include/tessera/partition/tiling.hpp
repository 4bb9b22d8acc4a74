// Irregular tilings partitioned: the tiles' graph (graphdata/tile_graph.hpp: tiles that read the
// same panel joined, so that a panel travels once) split by the same partition_graph as any other
// graph, so every method, trap and quality measure applies. Pure functions; thread-safe.
#pragma once

#include <span>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/tile_graph.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::partition {

// tile_graph then partition_graph; Partition::part[i] is the part of tiles[i].
Result<Partition> partition_tiles(std::span<const graphdata::Tile> tiles, const PartitionOptions& options);

}  // namespace tessera::partition
