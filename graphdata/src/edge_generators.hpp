// Internal to tessera_graphdata: the edge-producing half of the graph generators, shared by the
// undirected ones (generators.cpp, which hand the edges to build_graph) and the directed ones
// (digraph.cpp, which hand them to build_directed_graph). One random stream and one order of
// draws, so a spec and seed give the same edges to both; only the checks on size (METIS' 32-bit
// adjacency versus memory) and what is done with the edges differ.
// The edge type E is Edge or DirectedEdge: {first endpoint, second endpoint, weight 1}.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/graphdata/generators.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::graphdata::detail {

// splitmix64 as a stream: tiny, statistically sound for generation, and identical everywhere
// (the <random> distributions are implementation-defined, so they are not used).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t x = (state_ += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Modulo bias is below bound / 2^64: negligible for graph sizes under 2^31.
  uint64_t below(uint64_t bound) { return next() % bound; }
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t state_;
};

inline void relabel(Edge& edge, const std::vector<int64_t>& label) {
  edge.u = label[static_cast<std::size_t>(edge.u)];
  edge.v = label[static_cast<std::size_t>(edge.v)];
}
inline void relabel(DirectedEdge& edge, const std::vector<int64_t>& label) {
  edge.source = label[static_cast<std::size_t>(edge.source)];
  edge.target = label[static_cast<std::size_t>(edge.target)];
}

// A parsed generator spec (see generators.hpp for the syntax).
struct GeneratorSpec {
  enum class Kind { kMesh2d, kMesh3d, kRmat, kLognormal };
  Kind kind = Kind::kMesh2d;
  std::array<int64_t, 3> dims = {1, 1, 1};  // meshes: NX, NY, NZ (NZ = 1 for mesh2d)
  RmatOptions rmat = {};
  LognormalOptions lognormal = {};
};
// Fails (kInvalidArgument) quoting the syntax; seeds rmat and lognormal with `seed`.
Result<GeneratorSpec> parse_generator_spec(std::string_view spec, uint64_t seed);

// Dimensions >= 1 (kInvalidArgument) and a vertex count within 32 bits (kResourceExhausted, the
// message naming `index_limit`: "METIS' 32-bit limit").
Status check_mesh(int64_t nx, int64_t ny, int64_t nz, std::string_view what, std::string_view index_limit);
// Neighbour pairs of the grid: those along x, along y and along z.
inline int64_t mesh_edge_count(int64_t nx, int64_t ny, int64_t nz) {
  return (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1);
}
// REQUIRES: check_mesh OK. Appends every neighbour pair once, lower id first (vertex x + NX*(y + NY*z)).
template <typename E>
void append_mesh_edges(int64_t nx, int64_t ny, int64_t nz, std::vector<E>& edges) {
  const auto id = [&](int64_t x, int64_t y, int64_t z) { return x + nx * (y + ny * z); };
  for (int64_t z = 0; z < nz; ++z) {
    for (int64_t y = 0; y < ny; ++y) {
      for (int64_t x = 0; x < nx; ++x) {
        if (x + 1 < nx) edges.push_back(E{id(x, y, z), id(x + 1, y, z)});
        if (y + 1 < ny) edges.push_back(E{id(x, y, z), id(x, y + 1, z)});
        if (z + 1 < nz) edges.push_back(E{id(x, y, z), id(x, y, z + 1)});
      }
    }
  }
}

// SCALE within 1..30, EDGE_FACTOR >= 1, probabilities >= 0 summing to <= 1 (kInvalidArgument).
Status check_rmat(const RmatOptions& options, std::string_view what);
// REQUIRES: check_rmat OK. Appends EF * 2^SCALE R-MAT edges as drawn (self-loops and repeats
// included), then permutes vertex labels as Graph500 does, because R-MAT puts the hubs at low ids
// and vertex order should carry no locality.
template <typename E>
void append_rmat_edges(const RmatOptions& options, std::vector<E>& edges) {
  SplitMix64 random(options.seed);
  const int64_t n = int64_t{1} << options.scale;
  const int64_t count = n * options.edge_factor;
  const std::size_t first = edges.size();
  edges.reserve(first + static_cast<std::size_t>(count));
  // Quadrants: a = (0,0), b = (0,1), c = (1,0), d = (1,1) of (row bit, column bit), picked by a
  // uniform r = k * 2^-53. Comparing the integer k with ceil(threshold * 2^53) decides exactly as
  // comparing r with the threshold would, and without branches: the random outcomes of three
  // comparisons per bit would otherwise be mispredicted most of the time, a pipeline flush per
  // miss in the generator's innermost loop.
  const auto threshold = [](double p) { return static_cast<uint64_t>(std::ceil(std::ldexp(p, 53))); };
  const uint64_t a = threshold(options.a);
  const uint64_t ab = threshold(options.a + options.b);
  const uint64_t abc = threshold(options.a + options.b + options.c);
  for (int64_t e = 0; e < count; ++e) {
    int64_t u = 0, v = 0;
    for (int bit = 0; bit < options.scale; ++bit) {
      const uint64_t k = random.next() >> 11;
      const auto row_bit = static_cast<int64_t>(k >= ab);
      const auto col_bit = static_cast<int64_t>((k >= a) & (k < ab)) | static_cast<int64_t>(k >= abc);
      u = (u << 1) | row_bit;
      v = (v << 1) | col_bit;
    }
    edges.push_back(E{u, v});
  }
  std::vector<int64_t> label(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) label[static_cast<std::size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(label[static_cast<std::size_t>(i)], label[random.below(static_cast<uint64_t>(i + 1))]);
  }
  for (std::size_t e = first; e < edges.size(); ++e) relabel(edges[e], label);
}

// N >= 1 and within 32 bits (named as in check_mesh), finite mu, sigma >= 0.
Status check_lognormal(const LognormalOptions& options, std::string_view what, std::string_view index_limit);
// In-degrees drawn from the log-normal (rounded, at most N - 1) and the random stream positioned
// for drawing the sources. Drawing stops as soon as the running edge total exceeds max_edges
// (`edges` then holds that total and `degrees` is incomplete), so a size that cannot be built is
// refused before its edges are allocated.
struct LognormalDraw {
  std::vector<int64_t> in_degrees;
  int64_t edges = 0;
  bool complete = true;
  SplitMix64 random{0};
};
// REQUIRES: check_lognormal OK.
LognormalDraw draw_lognormal_in_degrees(const LognormalOptions& options, int64_t max_edges);
// REQUIRES: draw.complete. Appends in_degrees[v] edges u -> v per vertex v with uniform sources u:
// over all N vertices when self_loops (the undirected generator, whose build drops them), over
// the other N - 1 otherwise (the directed one keeps what it is given).
template <typename E>
void append_lognormal_edges(LognormalDraw& draw, bool self_loops, std::vector<E>& edges) {
  const auto n = static_cast<int64_t>(draw.in_degrees.size());
  edges.reserve(edges.size() + static_cast<std::size_t>(draw.edges));
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t i = 0; i < draw.in_degrees[static_cast<std::size_t>(v)]; ++i) {
      int64_t u = 0;
      if (self_loops) {
        u = static_cast<int64_t>(draw.random.below(static_cast<uint64_t>(n)));
      } else {
        u = static_cast<int64_t>(draw.random.below(static_cast<uint64_t>(n - 1)));
        if (u >= v) ++u;
      }
      edges.push_back(E{u, v});
    }
  }
}

}  // namespace tessera::graphdata::detail
