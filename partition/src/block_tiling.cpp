#include "tessera/partition/block_tiling.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "tessera/partition/row_partition.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::partition {
namespace {

constexpr std::array<std::pair<Layout, std::string_view>, 4> kLayoutNames = {{
    {Layout::kRows, "rows"},
    {Layout::kColumnBased, "2d"},
    {Layout::kSquareCorner, "square-corner"},
    {Layout::kRecursive3d, "3d"},
}};

// The three axes of a Block as (begin, size) members, so that cutting along one is one code path.
using Axis = std::pair<uint64_t Block::*, uint64_t Block::*>;
constexpr std::array<Axis, 3> kAxes = {{
    {&Block::row_begin, &Block::rows},
    {&Block::col_begin, &Block::cols},
    {&Block::k_begin, &Block::depth},
}};

std::string describe(const Block& b) {
  return fmt::format("rows [{},{}) cols [{},{}) k [{},{})", b.row_begin, b.row_begin + b.rows, b.col_begin,
                     b.col_begin + b.cols, b.k_begin, b.k_begin + b.depth);
}

bool overlaps(const Block& a, const Block& b) {
  for (const auto& [begin, size] : kAxes) {
    if (a.*begin + a.*size <= b.*begin || b.*begin + b.*size <= a.*begin) return false;
  }
  return true;
}

Status check_space(uint64_t m, uint64_t n, uint64_t k) {
  if (m == 0 || n == 0 || k == 0) {
    return invalid_argument(fmt::format("empty product: m={} n={} k={}; use m, n, k >= 1", m, n, k));
  }
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  if (n > max / m || k > max / (m * n)) {
    return invalid_argument(fmt::format("m*n*k = {}*{}*{} overflows 64 bits", m, n, k));
  }
  return Status::ok();
}

// Nodes with weight > 0, ties kept in index order so that plans are deterministic.
std::vector<std::size_t> positive_nodes(const std::vector<double>& pw, bool heaviest_first) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < pw.size(); ++i) {
    if (pw[i] > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return heaviest_first ? pw[a] > pw[b] : pw[a] < pw[b];
  });
  return order;
}

Result<NodeBlocks> rows_layout(uint64_t m, uint64_t n, uint64_t k, std::span<const double> weights) {
  auto rows = proportional_rows(m, weights);
  if (!rows) return rows.status();
  NodeBlocks blocks(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const RowBlock& r = (*rows)[i];
    if (r.count > 0) blocks[i].push_back({r.begin, r.count, 0, n, 0, k});
  }
  return blocks;
}

Result<NodeBlocks> column_based(uint64_t m, uint64_t n, uint64_t k, const std::vector<double>& pw) {
  const std::vector<std::size_t> order = positive_nodes(pw, /*heaviest_first=*/false);
  const std::size_t q = order.size();
  std::vector<long double> prefix(q + 1, 0);
  for (std::size_t i = 0; i < q; ++i) prefix[i + 1] = prefix[i] + pw[order[i]];

  // Beaumont et al. show an optimal column-based partition takes the sorted nodes in contiguous
  // columns. cost[i] is the least half-perimeter sum for the i lightest nodes: a column holding
  // sorted nodes [j, i) is (S_i - S_j)*n wide, each of its i - j nodes spans that width, and their
  // heights add up to m. On the unit square this is their sum of (nodes * width + 1); weighting
  // by n and m keeps the choice right for flat or tall C.
  std::vector<long double> cost(q + 1, std::numeric_limits<long double>::infinity());
  std::vector<std::size_t> column_start(q + 1, 0);
  cost[0] = 0;
  for (std::size_t i = 1; i <= q; ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const long double c = cost[j] + static_cast<long double>(i - j) * (prefix[i] - prefix[j]) *
                                          static_cast<long double>(n) + static_cast<long double>(m);
      if (c < cost[i]) {
        cost[i] = c;
        column_start[i] = j;
      }
    }
  }
  std::vector<std::size_t> bounds = {q};
  for (std::size_t i = q; i > 0; i = column_start[i]) bounds.push_back(column_start[i]);
  std::reverse(bounds.begin(), bounds.end());

  std::vector<double> column_weights;
  for (std::size_t c = 0; c + 1 < bounds.size(); ++c) {
    column_weights.push_back(static_cast<double>(prefix[bounds[c + 1]] - prefix[bounds[c]]));
  }
  auto widths = proportional_rows(n, column_weights);
  if (!widths) return widths.status();
  NodeBlocks blocks(pw.size());
  for (std::size_t c = 0; c < column_weights.size(); ++c) {
    std::vector<double> member_weights;
    for (std::size_t t = bounds[c]; t < bounds[c + 1]; ++t) member_weights.push_back(pw[order[t]]);
    auto heights = proportional_rows(m, member_weights);
    if (!heights) return heights.status();
    const RowBlock& width = (*widths)[c];
    for (std::size_t t = 0; t < member_weights.size(); ++t) {
      const RowBlock& height = (*heights)[t];
      if (width.count > 0 && height.count > 0) {
        blocks[order[bounds[c] + t]].push_back({height.begin, height.count, width.begin, width.count, 0, k});
      }
    }
  }
  return blocks;
}

// The part of the m x n face not under `squares` (disjoint), as rectangles: C is cut into bands
// at every square's top and bottom, each band's free column runs become rectangles, and a band
// whose runs match the band above extends those rectangles instead.
std::vector<Block> complement(uint64_t m, uint64_t n, uint64_t k, const std::vector<Block>& squares) {
  std::vector<uint64_t> cuts = {0, m};
  for (const Block& s : squares) {
    cuts.push_back(s.row_begin);
    cuts.push_back(s.row_begin + s.rows);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  std::vector<Block> rest;
  std::size_t band_above = 0;  // rest[band_above..] are the rectangles of the band above
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    const uint64_t top = cuts[c];
    const uint64_t height = cuts[c + 1] - top;
    std::vector<Block> covering;
    for (const Block& s : squares) {
      if (s.row_begin <= top && top < s.row_begin + s.rows) covering.push_back(s);
    }
    std::sort(covering.begin(), covering.end(),
              [](const Block& a, const Block& b) { return a.col_begin < b.col_begin; });
    std::vector<Block> band;
    uint64_t col = 0;
    for (const Block& s : covering) {
      if (s.col_begin > col) band.push_back({top, height, col, s.col_begin - col, 0, k});
      col = s.col_begin + s.cols;
    }
    if (col < n) band.push_back({top, height, col, n - col, 0, k});

    const bool same_runs = band.size() == rest.size() - band_above &&
                           std::equal(band.begin(), band.end(), rest.begin() + static_cast<std::ptrdiff_t>(band_above),
                                      [](const Block& a, const Block& b) {
                                        return a.col_begin == b.col_begin && a.cols == b.cols;
                                      });
    if (same_runs) {
      for (std::size_t r = band_above; r < rest.size(); ++r) rest[r].rows += height;
    } else {
      band_above = rest.size();
      rest.insert(rest.end(), band.begin(), band.end());
    }
  }
  return rest;
}

Result<NodeBlocks> square_corner(uint64_t m, uint64_t n, uint64_t k, const std::vector<double>& pw) {
  const std::vector<std::size_t> order = positive_nodes(pw, /*heaviest_first=*/true);
  const std::size_t fast = order.front();
  if (pw[fast] <= 0.5) {
    return invalid_argument(fmt::format(
        "square-corner needs one node with more than half the weight; the heaviest, node {}, has {:.3g} of it; "
        "use layout 2d or 3d",
        fast, pw[fast]));
  }
  if (order.size() > 4) {
    return invalid_argument(fmt::format(
        "square-corner takes one fast node and at most 3 slow ones; {} nodes have weight > 0; use layout 2d or 3d",
        order.size()));
  }
  NodeBlocks blocks(pw.size());
  std::vector<Block> squares;
  for (std::size_t t = 1; t < order.size(); ++t) {
    const std::size_t node = order[t];
    const long double ideal_side =
        std::sqrt(static_cast<long double>(pw[node]) * static_cast<long double>(m) * static_cast<long double>(n));
    const auto side = static_cast<uint64_t>(std::llround(ideal_side));
    if (side == 0) continue;
    if (side > std::min(m, n)) {
      return invalid_argument(fmt::format(
          "the square of node {} (side {}) does not fit in the {} x {} matrix C; use layout 2d or 3d", node, side, m, n));
    }
    // Opposite corners first: two squares there overlap only if their sides add up to more than
    // both m and n.
    const std::array<Block, 4> corners = {{
        {m - side, side, n - side, side, 0, k},
        {0, side, 0, side, 0, k},
        {0, side, n - side, side, 0, k},
        {m - side, side, 0, side, 0, k},
    }};
    const auto free_corner = std::find_if(corners.begin(), corners.end(), [&](const Block& corner) {
      return std::none_of(squares.begin(), squares.end(), [&](const Block& s) { return overlaps(s, corner); });
    });
    if (free_corner == corners.end()) {
      return invalid_argument(fmt::format(
          "the squares would overlap: node {}'s square (side {}) fits in no free corner of the {} x {} matrix C; "
          "use layout 2d or 3d",
          node, side, m, n));
    }
    squares.push_back(*free_corner);
    blocks[node].push_back(*free_corner);
  }
  blocks[fast] = complement(m, n, k, squares);
  return blocks;
}

// `group` holds node indices, heaviest first.
void bisect(const Block& box, std::span<const std::size_t> group, const std::vector<double>& pw, NodeBlocks& blocks) {
  std::size_t axis = 0;
  for (std::size_t a = 1; a < kAxes.size(); ++a) {
    if (box.*kAxes[a].second > box.*kAxes[axis].second) axis = a;
  }
  const uint64_t extent = box.*kAxes[axis].second;
  if (group.size() == 1 || extent == 1) {
    blocks[group.front()].push_back(box);  // a 1x1x1 box cannot be cut; the heaviest node takes it
    return;
  }
  long double total = 0;
  for (std::size_t node : group) total += pw[node];
  std::size_t split = 1;
  long double left = pw[group[0]], best_left = left;
  for (std::size_t t = 2; t < group.size(); ++t) {
    left += pw[group[t - 1]];
    if (std::abs(2 * left - total) < std::abs(2 * best_left - total)) {
      split = t;
      best_left = left;
    }
  }
  const long double ideal_cut = static_cast<long double>(extent) * best_left / total;
  const uint64_t cut = std::clamp<uint64_t>(static_cast<uint64_t>(std::llround(ideal_cut)), 1, extent - 1);

  const auto& [begin, size] = kAxes[axis];
  Block low = box, high = box;
  low.*size = cut;
  high.*begin += cut;
  high.*size -= cut;
  bisect(low, group.first(split), pw, blocks);
  bisect(high, group.subspan(split), pw, blocks);
}

}  // namespace

std::string_view layout_name(Layout layout) {
  for (const auto& [value, name] : kLayoutNames) {
    if (value == layout) return name;
  }
  return "unknown";
}

Result<Layout> parse_layout(std::string_view name) {
  for (const auto& [value, known] : kLayoutNames) {
    if (known == name) return value;
  }
  const std::string valid = join(kLayoutNames, ", ", [](const auto& entry) { return entry.second; });
  return invalid_argument(fmt::format("unknown layout \"{}\"; valid layouts: {}", name, valid));
}

Result<NodeBlocks> tile_blocks(Layout layout, uint64_t m, uint64_t n, uint64_t k, std::span<const double> weights) {
  TESSERA_RETURN_IF_ERROR(check_space(m, n, k));
  auto normalised = normalise_weights(weights);
  if (!normalised) return normalised.status();
  const std::vector<double>& pw = *normalised;
  switch (layout) {
    case Layout::kRows:
      return rows_layout(m, n, k, weights);
    case Layout::kColumnBased:
      return column_based(m, n, k, pw);
    case Layout::kSquareCorner:
      return square_corner(m, n, k, pw);
    case Layout::kRecursive3d: {
      const std::vector<std::size_t> order = positive_nodes(pw, /*heaviest_first=*/true);
      NodeBlocks blocks(pw.size());
      bisect({0, m, 0, n, 0, k}, order, pw, blocks);
      return blocks;
    }
  }
  return internal_error(fmt::format("tile_blocks: layout {} is not handled", static_cast<int>(layout)));
}

Status check_cover(const NodeBlocks& blocks, uint64_t m, uint64_t n, uint64_t k) {
  TESSERA_RETURN_IF_ERROR(check_space(m, n, k));
  struct Placed {
    std::size_t node, index;
    Block block;
  };
  const auto name = [](const Placed& p) {
    return fmt::format("node {} block {} ({})", p.node, p.index, describe(p.block));
  };
  std::vector<Placed> placed;
  uint64_t volume = 0;
  for (std::size_t node = 0; node < blocks.size(); ++node) {
    for (std::size_t index = 0; index < blocks[node].size(); ++index) {
      const Placed p = {node, index, blocks[node][index]};
      const std::array<uint64_t, 3> extents = {m, n, k};
      for (std::size_t a = 0; a < kAxes.size(); ++a) {
        const uint64_t begin = p.block.*kAxes[a].first, size = p.block.*kAxes[a].second;
        if (begin > extents[a] || size > extents[a] - begin) {
          return invalid_argument(fmt::format("{} lies outside the {} x {} x {} space", name(p), m, n, k));
        }
        if (size == 0) return invalid_argument(name(p) + " is empty");
      }
      for (const Placed& other : placed) {
        if (overlaps(other.block, p.block)) return invalid_argument(name(other) + " and " + name(p) + " overlap");
      }
      volume += p.block.volume();  // disjoint and inside the space, so the sum cannot overflow
      placed.push_back(p);
    }
  }
  if (volume != m * n * k) {
    return invalid_argument(fmt::format("the blocks cover {} of the {} multiply-adds of the {} x {} x {} space",
                                        volume, m * n * k, m, n, k));
  }
  return Status::ok();
}

std::vector<uint64_t> input_elements(const NodeBlocks& blocks) {
  std::vector<uint64_t> elements;
  for (const std::vector<Block>& node_blocks : blocks) {
    uint64_t sum = 0;
    for (const Block& b : node_blocks) sum += b.depth * (b.rows + b.cols);
    elements.push_back(sum);
  }
  return elements;
}

}  // namespace tessera::partition
