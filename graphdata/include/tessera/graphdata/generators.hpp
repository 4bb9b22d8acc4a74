// Synthetic graphs for tests and benchmarks, all deterministic: the same parameters and seed give
// the same Graph on every platform (own splitmix64 stream and Box-Muller normals, not the
// implementation-defined <random> distributions).
//
// Generator specs, as `tessera partition` takes them in place of a file:
//   mesh2d:NXxNY          NX*NY grid, 5-point stencil (4 neighbours), vertex x + NX*y
//   mesh3d:NXxNYxNZ       NX*NY*NZ grid, 7-point stencil (6 neighbours), vertex x + NX*(y + NY*z)
//   rmat:SCALE[:EF]       R-MAT (Chakrabarti et al. 2004) with Graph500's a=0.57 b=0.19 c=0.19
//                         d=0.05: 2^SCALE vertices, EF*2^SCALE generated edges (EF default 16, as
//                         Graph500), vertex labels randomly permuted as Graph500 does
//   lognormal:N           N vertices whose in-degrees follow a log-normal distribution with
//                         mu=2.3, sigma=0.5 (the AAU thesis' synthetic PageRank graphs, section 3.5:
//                         mean in-degree ~11.3), sources uniform
// Generated edges go through build_graph, so R-MAT's and log-normal's self-loops and repeats are
// removed and directed edges symmetrised; edge counts are those of the final graph. Sizes whose
// adjacency would exceed METIS' 32-bit limit fail with kResourceExhausted before generating.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::graphdata {

Result<Graph> mesh2d(int64_t nx, int64_t ny);
Result<Graph> mesh3d(int64_t nx, int64_t ny, int64_t nz);

struct RmatOptions {
  int scale = 10;         // 2^scale vertices, 1..30 (the adjacency limit usually binds first)
  int edge_factor = 16;   // generated edges per vertex, >= 1
  double a = 0.57, b = 0.19, c = 0.19;  // d = 1 - a - b - c; Graph500's values
  uint64_t seed = 1;
};
Result<Graph> rmat(const RmatOptions& options);

struct LognormalOptions {
  int64_t vertices = 1000;
  double mu = 2.3;     // of the in-degree's log
  double sigma = 0.5;
  uint64_t seed = 1;
};
Result<Graph> lognormal_graph(const LognormalOptions& options);

// True when `text` starts with a generator name and ':' (so it is not meant as a file name).
bool is_generator_spec(std::string_view text);

// Parses a spec from the list above and generates it with `seed`. A malformed spec fails
// (kInvalidArgument) quoting the syntax.
Result<Graph> generate_graph(std::string_view spec, uint64_t seed);

}  // namespace tessera::graphdata
