#include "tessera/partition/generators.hpp"

#include <charconv>
#include <cmath>
#include <numbers>
#include <vector>

#include <fmt/format.h>

namespace tessera::partition {
namespace {

constexpr std::string_view kSpecSyntax =
    "use mesh2d:NXxNY, mesh3d:NXxNYxNZ, rmat:SCALE[:EDGE_FACTOR] or lognormal:N (e.g. mesh2d:200x200, rmat:16)";

// splitmix64 as a stream: tiny, statistically sound for generation, and identical everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t x = (state_ += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Modulo bias is below bound / 2^64: negligible for graph sizes under 2^31.
  uint64_t below(uint64_t bound) { return next() % bound; }
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t state_;
};

Status check_adjacency(int64_t edges, std::string_view what) {
  if (2 * edges > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{} would have up to {} edges; METIS' 32-bit limit allows {} adjacency "
                                          "entries (2 per edge)",
                                          what, edges, kMaxGraphIndex));
  }
  return Status::ok();
}

Result<Graph> mesh(int64_t nx, int64_t ny, int64_t nz, std::string_view what) {
  if (nx < 1 || ny < 1 || nz < 1) {
    return invalid_argument(fmt::format("{}: every dimension must be >= 1", what));
  }
  if (nx > kMaxGraphIndex || ny > kMaxGraphIndex || nz > kMaxGraphIndex || nx * ny > kMaxGraphIndex ||
      nx * ny * nz > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{} has more vertices than METIS' 32-bit limit of {}", what, kMaxGraphIndex));
  }
  const int64_t edges = (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1);
  TESSERA_RETURN_IF_ERROR(check_adjacency(edges, what));
  GraphInput input;
  input.vertex_count = nx * ny * nz;
  input.edges.reserve(static_cast<std::size_t>(edges));
  const auto id = [&](int64_t x, int64_t y, int64_t z) { return x + nx * (y + ny * z); };
  for (int64_t z = 0; z < nz; ++z) {
    for (int64_t y = 0; y < ny; ++y) {
      for (int64_t x = 0; x < nx; ++x) {
        if (x + 1 < nx) input.edges.push_back({id(x, y, z), id(x + 1, y, z), 1});
        if (y + 1 < ny) input.edges.push_back({id(x, y, z), id(x, y + 1, z), 1});
        if (z + 1 < nz) input.edges.push_back({id(x, y, z), id(x, y, z + 1), 1});
      }
    }
  }
  return build_graph(input);
}

Result<int64_t> spec_number(std::string_view token, std::string_view spec) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
    return invalid_argument(fmt::format("'{}': '{}' is not a whole number; {}", spec, token, kSpecSyntax));
  }
  return value;
}

std::vector<std::string_view> split_on(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

Result<std::vector<int64_t>> spec_numbers(std::string_view text, char separator, std::size_t min_count,
                                          std::size_t max_count, std::string_view spec) {
  const std::vector<std::string_view> tokens = split_on(text, separator);
  if (tokens.size() < min_count || tokens.size() > max_count) {
    return invalid_argument(fmt::format("'{}' is malformed; {}", spec, kSpecSyntax));
  }
  std::vector<int64_t> values;
  for (std::string_view token : tokens) {
    Result<int64_t> value = spec_number(token, spec);
    if (!value) return value.status();
    values.push_back(*value);
  }
  return values;
}

}  // namespace

Result<Graph> mesh2d(int64_t nx, int64_t ny) { return mesh(nx, ny, 1, fmt::format("mesh2d:{}x{}", nx, ny)); }

Result<Graph> mesh3d(int64_t nx, int64_t ny, int64_t nz) {
  return mesh(nx, ny, nz, fmt::format("mesh3d:{}x{}x{}", nx, ny, nz));
}

Result<Graph> rmat(const RmatOptions& options) {
  const std::string what = fmt::format("rmat:{}:{}", options.scale, options.edge_factor);
  if (options.scale < 1 || options.scale > 30) return invalid_argument(what + ": SCALE must be within 1..30");
  if (options.edge_factor < 1) return invalid_argument(what + ": EDGE_FACTOR must be >= 1");
  const double d = 1.0 - options.a - options.b - options.c;
  if (options.a < 0 || options.b < 0 || options.c < 0 || d < 0) {
    return invalid_argument(fmt::format("{}: probabilities a={} b={} c={} must be >= 0 with a+b+c <= 1", what,
                                        options.a, options.b, options.c));
  }
  const int64_t n = int64_t{1} << options.scale;
  const int64_t edges = n * options.edge_factor;
  TESSERA_RETURN_IF_ERROR(check_adjacency(edges, what));
  Random random(options.seed);
  GraphInput input;
  input.vertex_count = n;
  input.edges.reserve(static_cast<std::size_t>(edges));
  const double ab = options.a + options.b;
  const double abc = ab + options.c;
  for (int64_t e = 0; e < edges; ++e) {
    int64_t u = 0, v = 0;
    for (int bit = 0; bit < options.scale; ++bit) {
      const double r = random.uniform();
      // Quadrants: a = (0,0), b = (0,1), c = (1,0), d = (1,1) of (row bit, column bit).
      const int64_t row_bit = r >= ab ? 1 : 0;
      const int64_t col_bit = (r >= options.a && r < ab) || r >= abc ? 1 : 0;
      u = (u << 1) | row_bit;
      v = (v << 1) | col_bit;
    }
    input.edges.push_back({u, v, 1});
  }
  // Graph500 permutes labels so that vertex order carries no locality (R-MAT puts hubs at low ids).
  std::vector<int64_t> label(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) label[static_cast<std::size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(label[static_cast<std::size_t>(i)], label[random.below(static_cast<uint64_t>(i + 1))]);
  }
  for (Edge& edge : input.edges) {
    edge.u = label[static_cast<std::size_t>(edge.u)];
    edge.v = label[static_cast<std::size_t>(edge.v)];
  }
  return build_graph(input);
}

Result<Graph> lognormal_graph(const LognormalOptions& options) {
  const std::string what = fmt::format("lognormal:{}", options.vertices);
  if (options.vertices < 1) return invalid_argument(what + ": N must be >= 1");
  if (options.vertices > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{}: more vertices than METIS' 32-bit limit of {}", what, kMaxGraphIndex));
  }
  if (!(options.sigma >= 0) || !std::isfinite(options.mu) || !std::isfinite(options.sigma)) {
    return invalid_argument(fmt::format("{}: mu={} sigma={}; use finite values, sigma >= 0", what, options.mu,
                                        options.sigma));
  }
  Random random(options.seed);
  const int64_t n = options.vertices;
  std::vector<int64_t> in_degree(static_cast<std::size_t>(n));
  int64_t edges = 0;
  for (int64_t& degree : in_degree) {
    const double drawn = std::round(std::exp(options.mu + options.sigma * random.normal()));
    degree = static_cast<int64_t>(std::min(drawn, static_cast<double>(n - 1)));
    edges += degree;
    TESSERA_RETURN_IF_ERROR(check_adjacency(edges, what));
  }
  GraphInput input;
  input.vertex_count = n;
  input.edges.reserve(static_cast<std::size_t>(edges));
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t i = 0; i < in_degree[static_cast<std::size_t>(v)]; ++i) {
      input.edges.push_back({static_cast<int64_t>(random.below(static_cast<uint64_t>(n))), v, 1});
    }
  }
  return build_graph(input);
}

bool is_generator_spec(std::string_view text) {
  for (std::string_view prefix : {"mesh2d:", "mesh3d:", "rmat:", "lognormal:"}) {
    if (text.starts_with(prefix)) return true;
  }
  return false;
}

Result<Graph> generate_graph(std::string_view spec, uint64_t seed) {
  const std::size_t colon = spec.find(':');
  if (colon == std::string_view::npos || !is_generator_spec(spec)) {
    return invalid_argument(fmt::format("'{}' is not a generator spec; {}", spec, kSpecSyntax));
  }
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view arguments = spec.substr(colon + 1);
  if (kind == "mesh2d") {
    Result<std::vector<int64_t>> dims = spec_numbers(arguments, 'x', 2, 2, spec);
    if (!dims) return dims.status();
    return mesh2d((*dims)[0], (*dims)[1]);
  }
  if (kind == "mesh3d") {
    Result<std::vector<int64_t>> dims = spec_numbers(arguments, 'x', 3, 3, spec);
    if (!dims) return dims.status();
    return mesh3d((*dims)[0], (*dims)[1], (*dims)[2]);
  }
  if (kind == "rmat") {
    Result<std::vector<int64_t>> values = spec_numbers(arguments, ':', 1, 2, spec);
    if (!values) return values.status();
    RmatOptions options;
    if ((*values)[0] < 1 || (*values)[0] > 30) return invalid_argument(fmt::format("'{}': SCALE must be within 1..30", spec));
    options.scale = static_cast<int>((*values)[0]);
    if (values->size() == 2) {
      if ((*values)[1] < 1 || (*values)[1] > 1024) {
        return invalid_argument(fmt::format("'{}': EDGE_FACTOR must be within 1..1024", spec));
      }
      options.edge_factor = static_cast<int>((*values)[1]);
    }
    options.seed = seed;
    return rmat(options);
  }
  Result<std::vector<int64_t>> values = spec_numbers(arguments, ':', 1, 1, spec);
  if (!values) return values.status();
  LognormalOptions options;
  options.vertices = (*values)[0];
  options.seed = seed;
  return lognormal_graph(options);
}

}  // namespace tessera::partition
