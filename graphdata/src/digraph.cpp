#include "tessera/graphdata/digraph.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "edge_generators.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"
#include "text_formats.hpp"

namespace tessera::graphdata {
namespace {

using detail::Source;

// Vertex ids travel as uint32 targets, but the engine and METIS' placement graph index vertices
// with signed 32-bit integers, so the count stops where both agree.
constexpr int64_t kMaxVertices = std::numeric_limits<int32_t>::max();
constexpr std::string_view kVertexIdLimit = "the 32-bit vertex id limit";

// What building a generated graph holds per edge at its peak: the DirectedEdge list and the CSR
// target it becomes (generated graphs are unweighted); per vertex: offsets, the fill cursors and
// the generator's own table (R-MAT's labels, log-normal's in-degrees).
constexpr uint64_t kBuildBytesPerEdge = sizeof(DirectedEdge) + sizeof(uint32_t);
constexpr uint64_t kBuildBytesPerVertex = 3 * sizeof(uint64_t);

// Places edges into CSR arrays in two passes over the same edge sequence: count() every source,
// then place() every edge in the same order (which makes the placement stable), then finish()
// orders each list by target. Counting sort rather than sorting the edges: O(E) and no second
// per-edge array beyond the CSR itself.
class CsrBuilder {
 public:
  CsrBuilder(int64_t vertex_count, bool weighted) : weighted_(weighted) {
    graph_.vertex_count = vertex_count;
    graph_.offsets.assign(static_cast<std::size_t>(vertex_count) + 1, 0);
  }

  void count(int64_t source) { ++graph_.offsets[static_cast<std::size_t>(source) + 1]; }

  // REQUIRES: every edge counted.
  void allocate() {
    for (std::size_t v = 0; v + 1 < graph_.offsets.size(); ++v) graph_.offsets[v + 1] += graph_.offsets[v];
    graph_.targets.resize(graph_.offsets.back());
    if (weighted_) graph_.weights.resize(graph_.offsets.back());
    cursor_.assign(graph_.offsets.begin(), graph_.offsets.end() - 1);
  }

  void place(int64_t source, int64_t target, double weight) {
    const uint64_t slot = cursor_[static_cast<std::size_t>(source)]++;
    graph_.targets[slot] = static_cast<uint32_t>(target);
    if (weighted_) graph_.weights[slot] = weight;
  }

  DirectedGraph finish() {
    cursor_ = {};
    std::vector<std::pair<uint32_t, uint64_t>> order;  // (target, position): sorting both is stable
    std::vector<double> weights;
    for (int64_t v = 0; v < graph_.vertex_count; ++v) {
      const auto begin = static_cast<std::ptrdiff_t>(graph_.offsets[static_cast<std::size_t>(v)]);
      const auto end = static_cast<std::ptrdiff_t>(graph_.offsets[static_cast<std::size_t>(v) + 1]);
      const auto targets = graph_.targets.begin();
      if (std::is_sorted(targets + begin, targets + end)) continue;
      if (!weighted_) {
        std::sort(targets + begin, targets + end);
        continue;
      }
      order.clear();
      weights.assign(graph_.weights.begin() + begin, graph_.weights.begin() + end);
      for (std::ptrdiff_t e = begin; e < end; ++e) {
        order.emplace_back(graph_.targets[static_cast<std::size_t>(e)], static_cast<uint64_t>(e - begin));
      }
      std::sort(order.begin(), order.end());
      for (std::size_t i = 0; i < order.size(); ++i) {
        graph_.targets[static_cast<std::size_t>(begin) + i] = order[i].first;
        graph_.weights[static_cast<std::size_t>(begin) + i] = weights[order[i].second];
      }
    }
    return std::move(graph_);
  }

 private:
  bool weighted_;
  DirectedGraph graph_;
  std::vector<uint64_t> cursor_;
};

Result<DirectedGraph> built(int64_t vertex_count, std::vector<DirectedEdge> edges, bool weighted,
                            const std::string& source_name) {
  Result<DirectedGraph> graph = build_directed_graph(vertex_count, std::move(edges), weighted);
  if (!graph) return graph.status().with_context(printable(source_name) + ": ");
  return graph;
}

// Refuses a generated graph whose build would not fit, before its edges are drawn.
Status check_generated_fits(int64_t vertices, int64_t edges, std::string_view spec) {
  const uint64_t bytes = saturating_bytes(static_cast<uint64_t>(edges), 1, kBuildBytesPerEdge) +
                         saturating_bytes(static_cast<uint64_t>(vertices), 1, kBuildBytesPerVertex);
  return check_fits_in_memory(bytes, fmt::format("{} ({} vertices, {} edges)", spec, vertices, edges),
                              "; generate a smaller graph");
}

Result<DirectedGraph> directed_mesh(const std::array<int64_t, 3>& dims, std::string_view spec) {
  const auto [nx, ny, nz] = dims;
  TESSERA_RETURN_IF_ERROR(detail::check_mesh(nx, ny, nz, spec, kVertexIdLimit));
  const int64_t pairs = detail::mesh_edge_count(nx, ny, nz);
  TESSERA_RETURN_IF_ERROR(check_generated_fits(nx * ny * nz, 2 * pairs, spec));
  std::vector<DirectedEdge> edges;
  edges.reserve(static_cast<std::size_t>(2 * pairs));
  detail::append_mesh_edges(nx, ny, nz, edges);
  for (int64_t e = 0; e < pairs; ++e) {
    const DirectedEdge forward = edges[static_cast<std::size_t>(e)];
    edges.push_back({forward.target, forward.source});
  }
  return build_directed_graph(nx * ny * nz, std::move(edges), /*weighted=*/false);
}

Result<DirectedGraph> directed_rmat(const RmatOptions& options, std::string_view spec) {
  TESSERA_RETURN_IF_ERROR(detail::check_rmat(options, spec));
  const int64_t n = int64_t{1} << options.scale;
  if (n > kMaxVertices) {
    return resource_exhausted(fmt::format("{}: 2^{} vertices exceed {} of {}", spec, options.scale, kVertexIdLimit,
                                          kMaxVertices));
  }
  TESSERA_RETURN_IF_ERROR(check_generated_fits(n, n * options.edge_factor, spec));
  std::vector<DirectedEdge> edges;
  detail::append_rmat_edges(options, edges);
  return build_directed_graph(n, std::move(edges), /*weighted=*/false);
}

Result<DirectedGraph> directed_lognormal(const LognormalOptions& options, std::string_view spec) {
  TESSERA_RETURN_IF_ERROR(detail::check_lognormal(options, spec, kVertexIdLimit));
  TESSERA_RETURN_IF_ERROR(check_generated_fits(options.vertices, 0, spec));
  // The edge total is known only once the in-degrees are drawn: stop drawing where memory ends.
  const uint64_t available = available_memory_bytes();
  const int64_t max_edges = available == 0 ? std::numeric_limits<int64_t>::max()
                                           : static_cast<int64_t>(available / kBuildBytesPerEdge);
  detail::LognormalDraw draw = detail::draw_lognormal_in_degrees(options, max_edges);
  TESSERA_RETURN_IF_ERROR(check_generated_fits(options.vertices, draw.edges, spec));
  std::vector<DirectedEdge> edges;
  detail::append_lognormal_edges(draw, /*self_loops=*/false, edges);
  return build_directed_graph(options.vertices, std::move(edges), /*weighted=*/false);
}

}  // namespace

Result<DirectedGraph> build_directed_graph(int64_t vertex_count, std::vector<DirectedEdge> edges, bool weighted) {
  if (vertex_count < 0) return invalid_argument(fmt::format("vertex count {} is negative", vertex_count));
  if (vertex_count > kMaxVertices) {
    return resource_exhausted(fmt::format("{} vertices exceed {} of {}; use a smaller graph", vertex_count,
                                          kVertexIdLimit, kMaxVertices));
  }
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const DirectedEdge& edge = edges[i];
    if (edge.source < 0 || edge.source >= vertex_count || edge.target < 0 || edge.target >= vertex_count) {
      return invalid_argument(fmt::format("edge {} ({} -> {}) has an endpoint outside 0..{}", i, edge.source,
                                          edge.target, vertex_count - 1));
    }
    if (weighted && !std::isfinite(edge.weight)) {
      return invalid_argument(fmt::format("edge {} ({} -> {}) has weight {}; weights must be finite", i, edge.source,
                                          edge.target, edge.weight));
    }
  }
  CsrBuilder builder(vertex_count, weighted);
  for (const DirectedEdge& edge : edges) builder.count(edge.source);
  builder.allocate();
  for (const DirectedEdge& edge : edges) builder.place(edge.source, edge.target, edge.weight);
  edges = {};  // the CSR holds everything now; free the list before the lists are sorted
  return builder.finish();
}

DirectedGraph symmetrised(const DirectedGraph& graph) {
  CsrBuilder builder(graph.vertex_count, graph.weighted());
  const auto for_each_edge = [&](const auto& visit) {
    for (int64_t u = 0; u < graph.vertex_count; ++u) {
      for (uint64_t e = graph.offsets[static_cast<std::size_t>(u)]; e < graph.offsets[static_cast<std::size_t>(u) + 1];
           ++e) {
        visit(u, static_cast<int64_t>(graph.targets[e]), graph.weighted() ? graph.weights[e] : 1.0);
      }
    }
  };
  for_each_edge([&](int64_t u, int64_t v, double) {
    builder.count(u);
    if (u != v) builder.count(v);
  });
  builder.allocate();
  for_each_edge([&](int64_t u, int64_t v, double weight) {
    builder.place(u, v, weight);
    if (u != v) builder.place(v, u, weight);
  });
  return builder.finish();
}

Result<Graph> placement_graph(const DirectedGraph& graph) {
  const auto out_edges = [&](int64_t v) {
    return std::span<const uint32_t>(graph.targets.data() + graph.offsets[static_cast<std::size_t>(v)],
                                     graph.out_degree(v));
  };
  // {u, v} once: from u's list when u < v, from the larger end only when the smaller one has no
  // edge back. Counted before anything is allocated, so a graph beyond METIS is refused cheaply.
  const auto for_each_undirected = [&](const auto& visit) {
    for (int64_t u = 0; u < graph.vertex_count; ++u) {
      const std::span<const uint32_t> targets = out_edges(u);
      for (std::size_t i = 0; i < targets.size(); ++i) {
        const int64_t v = targets[i];
        if (v == u || (i > 0 && targets[i - 1] == targets[i])) continue;
        const std::span<const uint32_t> back = out_edges(v);
        if (u < v || !std::binary_search(back.begin(), back.end(), static_cast<uint32_t>(u))) visit(u, v);
      }
    }
  };
  int64_t undirected_edges = 0;
  for_each_undirected([&](int64_t, int64_t) { ++undirected_edges; });
  if (2 * undirected_edges > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("the placement graph of {} has {} undirected edges; METIS' 32-bit limit "
                                          "allows {} adjacency entries (2 per edge); use a smaller graph",
                                          describe(graph), undirected_edges, kMaxGraphIndex));
  }
  GraphInput input;
  input.vertex_count = graph.vertex_count;
  input.vertex_weights.resize(static_cast<std::size_t>(graph.vertex_count));
  for (int64_t v = 0; v < graph.vertex_count; ++v) {
    input.vertex_weights[static_cast<std::size_t>(v)] = static_cast<int64_t>(graph.out_degree(v)) + 1;
  }
  input.edges.reserve(static_cast<std::size_t>(undirected_edges));
  for_each_undirected([&](int64_t u, int64_t v) { input.edges.push_back({u, v, 1}); });
  return build_graph(input);
}

std::string describe(const DirectedGraph& graph) {
  int64_t dangling = 0, self_loops = 0;
  for (int64_t v = 0; v < graph.vertex_count; ++v) {
    if (graph.out_degree(v) == 0) ++dangling;
    for (uint64_t e = graph.offsets[static_cast<std::size_t>(v)]; e < graph.offsets[static_cast<std::size_t>(v) + 1]; ++e) {
      if (graph.targets[e] == static_cast<uint32_t>(v)) ++self_loops;
    }
  }
  return fmt::format("{} vertices, {} edges{}, {} dangling, {} self-loops", graph.vertex_count, graph.edge_count(),
                     graph.weighted() ? " (weighted)" : "", dangling, self_loops);
}

// --- Reading -----------------------------------------------------------------------------------

Result<DirectedGraph> parse_directed_edge_list(std::string_view text, const std::string& source_name) {
  const Source source(source_name, kVertexIdLimit);
  std::vector<DirectedEdge> edges;
  bool weighted = false;
  Result<int64_t> vertex_count = detail::scan_edge_list(text, source, [&](const detail::EdgeListEntry& edge) {
    double weight = 1.0;
    if (!edge.weight.empty()) {
      weighted = true;
      TESSERA_ASSIGN_OR_RETURN(value, source.finite_real(edge.weight, edge.line, "edge weight"));
      weight = value;
    }
    edges.push_back({edge.u, edge.v, weight});
    return Status::ok();
  });
  if (!vertex_count) return vertex_count.status();
  return built(*vertex_count, std::move(edges), weighted, source_name);
}

Result<DirectedGraph> parse_directed_matrix_market(std::string_view text, const std::string& source_name) {
  const Source source(source_name, kVertexIdLimit);
  detail::MatrixMarketHeader header;
  std::vector<DirectedEdge> edges;
  const Status scanned = detail::scan_matrix_market(
      text, source,
      [&](const detail::MatrixMarketHeader& read) {
        header = read;
        if (header.rows != header.cols) {
          return source.error(header.size_line, fmt::format("a {} x {} matrix is not a graph; a directed graph needs "
                                                            "a square matrix whose entry (i, j) is the edge i->j",
                                                            header.rows, header.cols));
        }
        edges.reserve(std::min<std::size_t>(static_cast<std::size_t>(header.nonzeros) * (header.symmetric() ? 2 : 1),
                                             detail::kMaxReserve));
        return Status::ok();
      },
      [&](const detail::MatrixMarketEntry& entry) {
        double weight = 1.0;
        if (!entry.value.empty()) {
          TESSERA_ASSIGN_OR_RETURN(value, source.finite_real(entry.value, entry.line, "value"));
          weight = value;
        }
        edges.push_back({entry.row, entry.col, weight});
        // A symmetric file stores one triangle; A(j,i) = A(i,j), or -A(i,j) when skew-symmetric.
        if (header.symmetric() && entry.row != entry.col) {
          edges.push_back({entry.col, entry.row, header.symmetry == "skew-symmetric" ? -weight : weight});
        }
        return Status::ok();
      });
  TESSERA_RETURN_IF_ERROR(scanned);
  return built(header.rows, std::move(edges), header.field != "pattern", source_name);
}

Result<DirectedGraph> parse_directed_metis_graph(std::string_view text, const std::string& source_name) {
  const Source source(source_name, kVertexIdLimit);
  detail::MetisHeader header;
  std::vector<DirectedEdge> edges;
  Result<int64_t> adjacency_entries = detail::scan_metis_graph(
      text, source,
      [&](const detail::MetisHeader& read) {
        header = read;
        edges.reserve(std::min<std::size_t>(2 * static_cast<std::size_t>(header.edges), detail::kMaxReserve));
        return Status::ok();
      },
      [](int64_t, int64_t) {},  // vertex weights describe METIS' balance, not the directed graph
      [&](const detail::MetisNeighbour& entry) {
        edges.push_back({entry.vertex, entry.neighbour, static_cast<double>(entry.weight)});
        return Status::ok();
      });
  if (!adjacency_entries) return adjacency_entries.status();
  // METIS writes an undirected graph with each edge in both lists (2m entries); a file written as
  // a directed graph naturally counts each arc once (m entries). Both are read as written.
  if (*adjacency_entries != 2 * header.edges && *adjacency_entries != header.edges) {
    return source.error(header.line, fmt::format("the header says {} edges, so the adjacency lists should hold {} "
                                                 "entries (each undirected edge from both ends) or {} (each directed "
                                                 "edge once), but they hold {}; fix the header or the lists",
                                                 header.edges, 2 * header.edges, header.edges, *adjacency_entries));
  }
  return built(header.vertices, std::move(edges), header.has_edge_weight, source_name);
}

Result<DirectedGraph> read_directed_graph_file(const std::string& path) {
  const std::optional<detail::GraphFormat> format = detail::graph_format_of(path, /*snap_extensions=*/true);
  if (!format) {
    const std::string extension = detail::lower(std::filesystem::path(path).extension().string());
    return invalid_argument(fmt::format("{}: unknown graph file extension {}; use .mtx (Matrix Market), "
                                        ".graph/.metis (METIS) or .edges/.el/.txt/.snap/.edgelist (SNAP edge list)",
                                        printable(path), detail::quoted(extension)));
  }
  Result<std::string> text = detail::read_graph_text(path, "; use a smaller graph");
  if (!text) return text.status();
  switch (*format) {
    case detail::GraphFormat::kMatrixMarket: return parse_directed_matrix_market(*text, path);
    case detail::GraphFormat::kMetis: return parse_directed_metis_graph(*text, path);
    case detail::GraphFormat::kEdgeList: return parse_directed_edge_list(*text, path);
  }
  return internal_error("unreachable");
}

// --- Generating --------------------------------------------------------------------------------

Result<DirectedGraph> generate_directed_graph(std::string_view spec, uint64_t seed) {
  Result<detail::GeneratorSpec> parsed = detail::parse_generator_spec(spec, seed);
  if (!parsed) return parsed.status();
  switch (parsed->kind) {
    case detail::GeneratorSpec::Kind::kMesh2d:
    case detail::GeneratorSpec::Kind::kMesh3d: return directed_mesh(parsed->dims, spec);
    case detail::GeneratorSpec::Kind::kRmat: return directed_rmat(parsed->rmat, spec);
    case detail::GeneratorSpec::Kind::kLognormal: return directed_lognormal(parsed->lognormal, spec);
  }
  return internal_error("unreachable");
}

}  // namespace tessera::graphdata
