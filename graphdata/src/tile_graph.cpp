#include "tessera/graphdata/tile_graph.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

namespace tessera::graphdata {

Result<Graph> tile_graph(std::span<const Tile> tiles) {
  if (static_cast<int64_t>(tiles.size()) > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{} tiles exceed METIS' 32-bit limit of {}", tiles.size(), kMaxGraphIndex));
  }
  GraphInput input;
  input.vertex_count = static_cast<int64_t>(tiles.size());
  input.weighted_edges = true;
  input.vertex_weights.reserve(tiles.size());
  // Readers of each panel, each tile once even if it lists a panel twice.
  std::unordered_map<int64_t, std::vector<int64_t>> readers;
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    const Tile& tile = tiles[t];
    if (tile.cost < 0) return invalid_argument(fmt::format("tile {} has cost {}; use a cost >= 0", t, tile.cost));
    input.vertex_weights.push_back(tile.cost);
    std::vector<int64_t> panels = tile.panels;
    std::sort(panels.begin(), panels.end());
    panels.erase(std::unique(panels.begin(), panels.end()), panels.end());
    for (int64_t panel : panels) {
      if (panel < 0) return invalid_argument(fmt::format("tile {} reads panel {}; panel ids are >= 0", t, panel));
      readers[panel].push_back(static_cast<int64_t>(t));
    }
  }
  // Count the clique edges before making them: a panel every tile reads would otherwise allocate
  // n^2 pairs before build_graph could refuse them.
  int64_t pairs = 0;
  for (const auto& [panel, tile_ids] : readers) {
    const auto t = static_cast<int64_t>(tile_ids.size());
    pairs += t * (t - 1) / 2;
    if (2 * pairs > kMaxGraphIndex) {
      return resource_exhausted(fmt::format("panel {} is read by {} tiles: the tile graph would exceed METIS' 32-bit "
                                            "limit of {} adjacency entries; use coarser tiles or fewer shared panels",
                                            panel, t, kMaxGraphIndex));
    }
  }
  // Sum the shared panels per tile pair here: build_graph keeps the maximum of duplicate edges,
  // and two tiles sharing k panels should weigh k.
  std::vector<Edge> pair_list;
  pair_list.reserve(static_cast<std::size_t>(pairs));
  for (const auto& [panel, tile_ids] : readers) {
    for (std::size_t a = 0; a < tile_ids.size(); ++a) {
      for (std::size_t b = a + 1; b < tile_ids.size(); ++b) pair_list.push_back({tile_ids[a], tile_ids[b], 1});
    }
  }
  std::sort(pair_list.begin(), pair_list.end(),
            [](const Edge& x, const Edge& y) { return std::pair{x.u, x.v} < std::pair{y.u, y.v}; });
  for (const Edge& edge : pair_list) {
    if (!input.edges.empty() && input.edges.back().u == edge.u && input.edges.back().v == edge.v) {
      ++input.edges.back().weight;
    } else {
      input.edges.push_back(edge);
    }
  }
  return build_graph(input);
}

}  // namespace tessera::graphdata
