#include "tessera/graphdata/generators.hpp"

#include <charconv>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "edge_generators.hpp"

namespace tessera::graphdata {
namespace detail {
namespace {

constexpr std::string_view kSpecSyntax =
    "use mesh2d:NXxNY, mesh3d:NXxNYxNZ, rmat:SCALE[:EDGE_FACTOR] or lognormal:N (e.g. mesh2d:200x200, rmat:16)";

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

Result<GeneratorSpec> parse_generator_spec(std::string_view spec, uint64_t seed) {
  const std::size_t colon = spec.find(':');
  if (colon == std::string_view::npos || !is_generator_spec(spec)) {
    return invalid_argument(fmt::format("'{}' is not a generator spec; {}", spec, kSpecSyntax));
  }
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view arguments = spec.substr(colon + 1);
  GeneratorSpec parsed;
  if (kind == "mesh2d" || kind == "mesh3d") {
    const bool three = kind == "mesh3d";
    Result<std::vector<int64_t>> dims = spec_numbers(arguments, 'x', three ? 3 : 2, three ? 3 : 2, spec);
    if (!dims) return dims.status();
    parsed.kind = three ? GeneratorSpec::Kind::kMesh3d : GeneratorSpec::Kind::kMesh2d;
    for (std::size_t i = 0; i < dims->size(); ++i) parsed.dims[i] = (*dims)[i];
    return parsed;
  }
  if (kind == "rmat") {
    Result<std::vector<int64_t>> values = spec_numbers(arguments, ':', 1, 2, spec);
    if (!values) return values.status();
    if ((*values)[0] < 1 || (*values)[0] > 30) return invalid_argument(fmt::format("'{}': SCALE must be within 1..30", spec));
    parsed.kind = GeneratorSpec::Kind::kRmat;
    parsed.rmat.scale = static_cast<int>((*values)[0]);
    if (values->size() == 2) {
      if ((*values)[1] < 1 || (*values)[1] > 1024) {
        return invalid_argument(fmt::format("'{}': EDGE_FACTOR must be within 1..1024", spec));
      }
      parsed.rmat.edge_factor = static_cast<int>((*values)[1]);
    }
    parsed.rmat.seed = seed;
    return parsed;
  }
  Result<std::vector<int64_t>> values = spec_numbers(arguments, ':', 1, 1, spec);
  if (!values) return values.status();
  parsed.kind = GeneratorSpec::Kind::kLognormal;
  parsed.lognormal.vertices = (*values)[0];
  parsed.lognormal.seed = seed;
  return parsed;
}

Status check_mesh(int64_t nx, int64_t ny, int64_t nz, std::string_view what, std::string_view index_limit) {
  if (nx < 1 || ny < 1 || nz < 1) {
    return invalid_argument(fmt::format("{}: every dimension must be >= 1", what));
  }
  if (nx > kMaxGraphIndex || ny > kMaxGraphIndex || nz > kMaxGraphIndex || nx * ny > kMaxGraphIndex ||
      nx * ny * nz > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{} has more vertices than {} of {}", what, index_limit, kMaxGraphIndex));
  }
  return Status::ok();
}

Status check_rmat(const RmatOptions& options, std::string_view what) {
  if (options.scale < 1 || options.scale > 30) return invalid_argument(fmt::format("{}: SCALE must be within 1..30", what));
  if (options.edge_factor < 1) return invalid_argument(fmt::format("{}: EDGE_FACTOR must be >= 1", what));
  const double d = 1.0 - options.a - options.b - options.c;
  if (options.a < 0 || options.b < 0 || options.c < 0 || d < 0) {
    return invalid_argument(fmt::format("{}: probabilities a={} b={} c={} must be >= 0 with a+b+c <= 1", what,
                                        options.a, options.b, options.c));
  }
  return Status::ok();
}

Status check_lognormal(const LognormalOptions& options, std::string_view what, std::string_view index_limit) {
  if (options.vertices < 1) return invalid_argument(fmt::format("{}: N must be >= 1", what));
  if (options.vertices > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{}: more vertices than {} of {}", what, index_limit, kMaxGraphIndex));
  }
  if (!(options.sigma >= 0) || !std::isfinite(options.mu) || !std::isfinite(options.sigma)) {
    return invalid_argument(fmt::format("{}: mu={} sigma={}; use finite values, sigma >= 0", what, options.mu,
                                        options.sigma));
  }
  return Status::ok();
}

LognormalDraw draw_lognormal_in_degrees(const LognormalOptions& options, int64_t max_edges) {
  LognormalDraw draw;
  draw.random = SplitMix64(options.seed);
  const int64_t n = options.vertices;
  draw.in_degrees.resize(static_cast<std::size_t>(n));
  for (int64_t& degree : draw.in_degrees) {
    const double drawn = std::round(std::exp(options.mu + options.sigma * draw.random.normal()));
    degree = static_cast<int64_t>(std::min(drawn, static_cast<double>(n - 1)));
    draw.edges += degree;
    if (draw.edges > max_edges) {
      draw.complete = false;
      break;
    }
  }
  return draw;
}

}  // namespace detail

namespace {

// METIS stores each undirected edge twice in 32-bit indices.
constexpr int64_t kMaxUndirectedEdges = kMaxGraphIndex / 2;
constexpr std::string_view kMetisIndexLimit = "METIS' 32-bit limit";

Status check_adjacency(int64_t edges, std::string_view what) {
  if (edges > kMaxUndirectedEdges) {
    return resource_exhausted(fmt::format("{} would have up to {} edges; METIS' 32-bit limit allows {} adjacency "
                                          "entries (2 per edge)",
                                          what, edges, kMaxGraphIndex));
  }
  return Status::ok();
}

Result<Graph> mesh(int64_t nx, int64_t ny, int64_t nz, std::string_view what) {
  TESSERA_RETURN_IF_ERROR(detail::check_mesh(nx, ny, nz, what, kMetisIndexLimit));
  const int64_t edges = detail::mesh_edge_count(nx, ny, nz);
  TESSERA_RETURN_IF_ERROR(check_adjacency(edges, what));
  GraphInput input;
  input.vertex_count = nx * ny * nz;
  input.edges.reserve(static_cast<std::size_t>(edges));
  detail::append_mesh_edges(nx, ny, nz, input.edges);
  return build_graph(input);
}

}  // namespace

Result<Graph> mesh2d(int64_t nx, int64_t ny) { return mesh(nx, ny, 1, fmt::format("mesh2d:{}x{}", nx, ny)); }

Result<Graph> mesh3d(int64_t nx, int64_t ny, int64_t nz) {
  return mesh(nx, ny, nz, fmt::format("mesh3d:{}x{}x{}", nx, ny, nz));
}

Result<Graph> rmat(const RmatOptions& options) {
  const std::string what = fmt::format("rmat:{}:{}", options.scale, options.edge_factor);
  TESSERA_RETURN_IF_ERROR(detail::check_rmat(options, what));
  TESSERA_RETURN_IF_ERROR(check_adjacency((int64_t{1} << options.scale) * options.edge_factor, what));
  GraphInput input;
  input.vertex_count = int64_t{1} << options.scale;
  detail::append_rmat_edges(options, input.edges);
  return build_graph(input);
}

Result<Graph> lognormal_graph(const LognormalOptions& options) {
  const std::string what = fmt::format("lognormal:{}", options.vertices);
  TESSERA_RETURN_IF_ERROR(detail::check_lognormal(options, what, kMetisIndexLimit));
  detail::LognormalDraw draw = detail::draw_lognormal_in_degrees(options, kMaxUndirectedEdges);
  TESSERA_RETURN_IF_ERROR(check_adjacency(draw.edges, what));
  GraphInput input;
  input.vertex_count = options.vertices;
  detail::append_lognormal_edges(draw, /*self_loops=*/true, input.edges);
  return build_graph(input);
}

bool is_generator_spec(std::string_view text) {
  for (std::string_view prefix : {"mesh2d:", "mesh3d:", "rmat:", "lognormal:"}) {
    if (text.starts_with(prefix)) return true;
  }
  return false;
}

Result<Graph> generate_graph(std::string_view spec, uint64_t seed) {
  Result<detail::GeneratorSpec> parsed = detail::parse_generator_spec(spec, seed);
  if (!parsed) return parsed.status();
  switch (parsed->kind) {
    case detail::GeneratorSpec::Kind::kMesh2d: return mesh2d(parsed->dims[0], parsed->dims[1]);
    case detail::GeneratorSpec::Kind::kMesh3d: return mesh3d(parsed->dims[0], parsed->dims[1], parsed->dims[2]);
    case detail::GeneratorSpec::Kind::kRmat: return rmat(parsed->rmat);
    case detail::GeneratorSpec::Kind::kLognormal: return lognormal_graph(parsed->lognormal);
  }
  return internal_error("unreachable");
}

}  // namespace tessera::graphdata
