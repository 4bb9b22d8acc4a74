#include "tessera/graphdata/graph_io.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "tessera/core/files.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graphdata/tile_graph.hpp"
#include "text_formats.hpp"

namespace tessera::graphdata {
namespace detail {
namespace {

// What one vertex costs on the way to METIS: its count of nonzeros, its tile or adjacency offset,
// its weight, METIS' own copies and workspace (about 8 int64 per vertex). A rough bound suffices:
// it only refuses headers that cannot fit before allocating for them.
constexpr uint64_t kGraphBytesPerVertex = 64;

}  // namespace

bool LineReader::next(std::string_view& line) {
  if (pos_ >= text_.size()) return false;
  std::size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  line = text_.substr(pos_, end - pos_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos_ = end + 1;
  ++line_number_;
  return true;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

bool is_blank(std::string_view line) { return split(line).empty(); }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string quoted(std::string_view token) { return "'" + printable(token) + "'"; }

Source::Source(const std::string& name, std::string_view index_limit)
    : name_(printable(name)), index_limit_(index_limit) {}

Status Source::error(int line, const std::string& what) const {
  return invalid_argument(fmt::format("{}:{}: {}", name_, line, what));
}

Status Source::error(const std::string& what) const { return invalid_argument(fmt::format("{}: {}", name_, what)); }

Result<int64_t> Source::integer(std::string_view token, int line, std::string_view what) const {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return error(line, fmt::format("{} {} is too large", what, quoted(token)));
  }
  if (ec != std::errc() || end != token.data() + token.size()) {
    return error(line, fmt::format("{} {} is not an integer", what, quoted(token)));
  }
  return value;
}

Status Source::number(std::string_view token, int line) const {
  double value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || end != token.data() + token.size()) {
    return error(line, fmt::format("value {} is not a number", quoted(token)));
  }
  return Status::ok();
}

Result<double> Source::finite_real(std::string_view token, int line, std::string_view what) const {
  double value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return error(line, fmt::format("{} {} is beyond the range of a double; use a value of magnitude "
                                   "between 1e-300 and 1e300",
                                   what, quoted(token)));
  }
  if (ec != std::errc() || end != token.data() + token.size()) {
    return error(line, fmt::format("{} {} is not a number; write a decimal like 2 or 0.5", what, quoted(token)));
  }
  if (!std::isfinite(value)) {
    return error(line, fmt::format("{} {} is not finite; use a finite number", what, quoted(token)));
  }
  return value;
}

Status check_vertices_fit(int64_t vertices, const Source& source, int line, const std::string& what) {
  return check_fits_in_memory(saturating_bytes(static_cast<uint64_t>(vertices), 1, kGraphBytesPerVertex),
                              fmt::format("{}:{}: {} as a graph of {} vertices", source.name(), line, what, vertices),
                              "; is the header right?");
}

Status scan_matrix_market(std::string_view text, const Source& source,
                          const std::function<Status(const MatrixMarketHeader&)>& on_header,
                          const std::function<Status(const MatrixMarketEntry&)>& on_entry) {
  LineReader reader(text);
  std::string_view line;
  if (!reader.next(line)) return source.error(1, "empty file; expected '%%MatrixMarket matrix coordinate ...'");
  const std::vector<std::string_view> banner = split(line);
  if (banner.size() != 5 || banner[0] != "%%MatrixMarket" || lower(banner[1]) != "matrix") {
    return source.error(1, "not a Matrix Market header; the first line must read "
                           "'%%MatrixMarket matrix coordinate FIELD SYMMETRY'");
  }
  MatrixMarketHeader header;
  const std::string format = lower(banner[2]);
  header.field = lower(banner[3]);
  header.symmetry = lower(banner[4]);
  if (format == "array") return source.error(1, "dense 'array' format is not supported; use 'coordinate'");
  if (format != "coordinate") {
    return source.error(1, fmt::format("unknown format {}; use 'coordinate'", quoted(banner[2])));
  }
  if (header.field == "complex") return source.error(1, "complex matrices are not supported; use real, integer or pattern");
  if (header.field != "real" && header.field != "integer" && header.field != "pattern" && header.field != "double") {
    return source.error(1, fmt::format("unknown field {}; use real, integer or pattern", quoted(banner[3])));
  }
  if (header.symmetry == "hermitian") return source.error(1, "hermitian matrices are not supported (complex)");
  if (header.symmetry != "general" && header.symmetry != "symmetric" && header.symmetry != "skew-symmetric") {
    return source.error(1, fmt::format("unknown symmetry {}; use general, symmetric or skew-symmetric",
                                       quoted(banner[4])));
  }
  const bool symmetric = header.symmetric();
  const std::size_t entry_tokens = header.field == "pattern" ? 2 : 3;

  std::vector<std::string_view> size_tokens;
  while (reader.next(line)) {
    if (line.starts_with('%') || is_blank(line)) continue;
    size_tokens = split(line);
    break;
  }
  if (size_tokens.empty()) return source.error(reader.line_number(), "the file ends before the size line 'ROWS COLS NONZEROS'");
  const int size_line = reader.line_number();
  header.size_line = size_line;
  if (size_tokens.size() != 3) {
    return source.error(size_line, fmt::format("the size line has {} values; coordinate files need 'ROWS COLS NONZEROS'",
                                               size_tokens.size()));
  }
  TESSERA_ASSIGN_OR_RETURN(rows, source.integer(size_tokens[0], size_line, "row count"));
  TESSERA_ASSIGN_OR_RETURN(cols, source.integer(size_tokens[1], size_line, "column count"));
  TESSERA_ASSIGN_OR_RETURN(nonzeros, source.integer(size_tokens[2], size_line, "nonzero count"));
  if (rows < 0 || cols < 0 || nonzeros < 0) return source.error(size_line, "negative size; counts must be >= 0");
  if (rows > kMaxGraphIndex || cols > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{}:{}: {} x {} exceeds {} of {} rows", source.name(), size_line, rows, cols,
                                          source.index_limit(), kMaxGraphIndex));
  }
  if (symmetric && rows != cols) {
    return source.error(size_line, fmt::format("a {} matrix must be square, not {} x {}", header.symmetry, rows, cols));
  }
  // An entry line is at least "I J\n" (4 bytes, 3 on a last line without "\n"): a header that
  // announces more entries than the rest of the file can hold is refused before it is believed.
  const uint64_t entry_capacity = (reader.remaining() + 1) / 4;
  if (static_cast<uint64_t>(nonzeros) > entry_capacity) {
    return source.error(size_line, fmt::format("the size line announces {} entries but the {} bytes after it can hold "
                                               "at most {}; the header is wrong or the file is truncated",
                                               nonzeros, reader.remaining(), entry_capacity));
  }
  // Rows without entries are isolated vertices and cost memory without taking bytes in the file,
  // so the row count is bounded by memory, not by the file's size.
  TESSERA_RETURN_IF_ERROR(
      check_vertices_fit(std::max(rows, cols), source, size_line, fmt::format("a {} x {} matrix", rows, cols)));
  header.rows = rows;
  header.cols = cols;
  header.nonzeros = nonzeros;
  TESSERA_RETURN_IF_ERROR(on_header(header));

  int64_t seen = 0;
  while (reader.next(line)) {
    if (line.starts_with('%') || is_blank(line)) continue;
    const int at = reader.line_number();
    if (seen == nonzeros) {
      return source.error(at, fmt::format("more entries than the {} announced on line {}", nonzeros, size_line));
    }
    const std::vector<std::string_view> tokens = split(line);
    if (tokens.size() != entry_tokens) {
      return source.error(at, fmt::format("{} values; a {} entry is 'ROW COL{}'", tokens.size(), header.field,
                                          entry_tokens == 3 ? " VALUE" : ""));
    }
    TESSERA_ASSIGN_OR_RETURN(i, source.integer(tokens[0], at, "row index"));
    TESSERA_ASSIGN_OR_RETURN(j, source.integer(tokens[1], at, "column index"));
    if (i < 1 || i > rows) return source.error(at, fmt::format("row index {} is outside 1..{}", i, rows));
    if (j < 1 || j > cols) return source.error(at, fmt::format("column index {} is outside 1..{}", j, cols));
    if (symmetric && i < j) {
      return source.error(at, fmt::format("entry ({}, {}) is above the diagonal; a {} file stores only the lower "
                                          "triangle (row >= column)",
                                          i, j, header.symmetry));
    }
    std::string_view value;
    if (header.field == "integer") {
      TESSERA_ASSIGN_OR_RETURN(integer_value, source.integer(tokens[2], at, "integer value"));
      (void)integer_value;
      value = tokens[2];
    } else if (entry_tokens == 3) {
      TESSERA_RETURN_IF_ERROR(source.number(tokens[2], at));
      value = tokens[2];
    }
    TESSERA_RETURN_IF_ERROR(on_entry({i - 1, j - 1, value, at}));
    ++seen;
  }
  if (seen != nonzeros) {
    return source.error(reader.line_number(), fmt::format("the file ends after {} of the {} entries announced on line {}",
                                                          seen, nonzeros, size_line));
  }
  return Status::ok();
}

Result<int64_t> scan_metis_graph(std::string_view text, const Source& source,
                                 const std::function<Status(const MetisHeader&)>& on_header,
                                 const std::function<void(int64_t vertex, int64_t weight)>& on_vertex_weight,
                                 const std::function<Status(const MetisNeighbour&)>& on_neighbour) {
  LineReader reader(text);
  std::string_view line;
  std::vector<std::string_view> header;
  while (reader.next(line)) {
    if (line.starts_with('%')) continue;
    header = split(line);
    break;
  }
  const int header_line = reader.line_number();
  if (header.empty()) return source.error(std::max(header_line, 1), "missing header 'VERTICES EDGES [FMT [NCON]]'");
  if (header.size() > 4) {
    return source.error(header_line, fmt::format("the header has {} values; METIS expects 'VERTICES EDGES [FMT [NCON]]'",
                                                 header.size()));
  }
  if (header.size() < 2) return source.error(header_line, "the header needs at least 'VERTICES EDGES'");
  TESSERA_ASSIGN_OR_RETURN(n, source.integer(header[0], header_line, "vertex count"));
  TESSERA_ASSIGN_OR_RETURN(m, source.integer(header[1], header_line, "edge count"));
  if (n < 0 || m < 0) return source.error(header_line, "negative count; VERTICES and EDGES must be >= 0");
  if (n > kMaxGraphIndex) {
    return resource_exhausted(fmt::format("{}:{}: {} vertices exceed {} of {}", source.name(), header_line, n,
                                          source.index_limit(), kMaxGraphIndex));
  }
  // Every vertex has a line (at least "\n"): a vertex count the rest of the file cannot hold is
  // refused before anything is sized by it. (Edges need no such check: what is reserved for them
  // is capped, and the count is compared with the adjacency lists actually read.)
  if (static_cast<uint64_t>(n) > reader.remaining()) {
    return source.error(header_line, fmt::format("the header announces {} vertices but only {} bytes follow; each "
                                                 "vertex needs its own line, so the header is wrong or the file "
                                                 "is truncated",
                                                 n, reader.remaining()));
  }
  TESSERA_RETURN_IF_ERROR(check_vertices_fit(n, source, header_line, "the header"));
  bool has_size = false, has_vertex_weight = false, has_edge_weight = false;
  if (header.size() >= 3) {
    const std::string_view fmt_code = header[2];
    const bool digits = !fmt_code.empty() && fmt_code.size() <= 3 &&
                        std::all_of(fmt_code.begin(), fmt_code.end(), [](char c) { return c == '0' || c == '1'; });
    if (!digits) {
      return source.error(header_line,
                          fmt::format("FMT {} is not one of 0, 1, 10, 11, 100, 101, 110, 111", quoted(fmt_code)));
    }
    const std::string padded = std::string(3 - fmt_code.size(), '0') + std::string(fmt_code);
    has_size = padded[0] == '1';
    has_vertex_weight = padded[1] == '1';
    has_edge_weight = padded[2] == '1';
  }
  if (header.size() == 4) {
    TESSERA_ASSIGN_OR_RETURN(ncon, source.integer(header[3], header_line, "NCON"));
    if (ncon != 1) {
      return source.error(header_line, fmt::format("NCON {}: multi-constraint graphs are not supported; give one "
                                                   "vertex weight per vertex",
                                                   ncon));
    }
  }
  TESSERA_RETURN_IF_ERROR(on_header({n, m, has_vertex_weight, has_edge_weight, header_line}));

  const std::size_t prefix = (has_size ? 1u : 0u) + (has_vertex_weight ? 1u : 0u);
  const std::size_t stride = has_edge_weight ? 2 : 1;
  int64_t vertex = 0;
  int64_t adjacency_entries = 0;
  while (reader.next(line)) {
    if (line.starts_with('%')) continue;
    const int at = reader.line_number();
    const std::vector<std::string_view> tokens = split(line);
    if (vertex == n) {
      if (tokens.empty()) continue;
      return source.error(at, fmt::format("more vertex lines than the {} the header announces", n));
    }
    if (tokens.size() < prefix || (tokens.size() - prefix) % stride != 0) {
      return source.error(at, fmt::format("vertex {} has {} values; with FMT {}{}{} a line is {}{}{}", vertex + 1,
                                          tokens.size(), has_size ? 1 : 0, has_vertex_weight ? 1 : 0,
                                          has_edge_weight ? 1 : 0, has_size ? "SIZE " : "",
                                          has_vertex_weight ? "WEIGHT " : "",
                                          has_edge_weight ? "then NEIGHBOUR EDGE_WEIGHT pairs" : "then NEIGHBOURs"));
    }
    std::size_t t = 0;
    if (has_size) {
      TESSERA_ASSIGN_OR_RETURN(size, source.integer(tokens[t++], at, "vertex size"));
      if (size < 0) return source.error(at, fmt::format("vertex size {} is negative", size));
    }
    if (has_vertex_weight) {
      TESSERA_ASSIGN_OR_RETURN(weight, source.integer(tokens[t++], at, "vertex weight"));
      if (weight < 0) return source.error(at, fmt::format("vertex weight {} is negative; use >= 0", weight));
      on_vertex_weight(vertex, weight);
    }
    for (; t < tokens.size(); t += stride) {
      TESSERA_ASSIGN_OR_RETURN(neighbour, source.integer(tokens[t], at, "neighbour"));
      if (neighbour < 1 || neighbour > n) {
        return source.error(at, fmt::format("neighbour {} is outside 1..{}", neighbour, n));
      }
      int64_t weight = 1;
      if (has_edge_weight) {
        TESSERA_ASSIGN_OR_RETURN(edge_weight, source.integer(tokens[t + 1], at, "edge weight"));
        weight = edge_weight;
      }
      TESSERA_RETURN_IF_ERROR(on_neighbour({vertex, neighbour - 1, weight, at}));
      ++adjacency_entries;
    }
    ++vertex;
  }
  if (vertex != n) {
    return source.error(reader.line_number(), fmt::format("the file ends after {} of the {} vertex lines (an isolated "
                                                          "vertex still needs an empty line)",
                                                          vertex, n));
  }
  return adjacency_entries;
}

Result<int64_t> scan_edge_list(std::string_view text, const Source& source,
                               const std::function<Status(const EdgeListEntry&)>& on_edge) {
  LineReader reader(text);
  std::string_view line;
  int64_t max_id = -1;
  std::size_t columns = 0;
  int first_line = 0;
  while (reader.next(line)) {
    if (line.starts_with('#') || line.starts_with('%') || is_blank(line)) continue;
    const int at = reader.line_number();
    const std::vector<std::string_view> tokens = split(line);
    if (tokens.size() != 2 && tokens.size() != 3) {
      return source.error(at, fmt::format("{} values; an edge is 'U V' or 'U V WEIGHT'", tokens.size()));
    }
    if (columns == 0) {
      columns = tokens.size();
      first_line = at;
    } else if (tokens.size() != columns) {
      return source.error(at, fmt::format("{} values, but line {} has {}; give a weight on every line or on none",
                                          tokens.size(), first_line, columns));
    }
    TESSERA_ASSIGN_OR_RETURN(u, source.integer(tokens[0], at, "vertex id"));
    TESSERA_ASSIGN_OR_RETURN(v, source.integer(tokens[1], at, "vertex id"));
    for (int64_t id : {u, v}) {
      if (id < 0) return source.error(at, fmt::format("vertex id {} is negative; ids are 0-based", id));
      if (id >= kMaxGraphIndex) {
        return resource_exhausted(fmt::format("{}:{}: vertex id {} exceeds {} of {} vertices", source.name(), at, id,
                                              source.index_limit(), kMaxGraphIndex));
      }
    }
    max_id = std::max({max_id, u, v});
    TESSERA_RETURN_IF_ERROR(on_edge({u, v, columns == 3 ? tokens[2] : std::string_view{}, at}));
  }
  return max_id + 1;
}

std::optional<GraphFormat> graph_format_of(const std::string& path, bool snap_extensions) {
  const std::string extension = lower(std::filesystem::path(path).extension().string());
  if (extension == ".mtx") return GraphFormat::kMatrixMarket;
  if (extension == ".graph" || extension == ".metis") return GraphFormat::kMetis;
  if (extension == ".edges" || extension == ".el" || extension == ".txt") return GraphFormat::kEdgeList;
  if (snap_extensions && (extension == ".snap" || extension == ".edgelist")) return GraphFormat::kEdgeList;
  return std::nullopt;
}

Result<std::string> read_graph_text(const std::string& path, std::string_view remedy) {
  Result<uint64_t> size = regular_file_size(path, "graph file");
  if (!size) return size.status();
  TESSERA_RETURN_IF_ERROR(
      check_fits_in_memory(*size, fmt::format("{} ({} as text)", printable(path), format_bytes(*size)), remedy));
  Result<std::string> read = read_regular_file(path, *size, "graph file");
  if (!read) {
    return read.status().code() == StatusCode::kResourceExhausted
               ? io_error(fmt::format("{} grew while it was read; read it again when it is complete", printable(path)))
               : read.status();
  }
  return read;
}

}  // namespace detail

using detail::Source;

namespace {

Result<Graph> built(const GraphInput& input, const std::string& source_name, GraphBuildStats* stats) {
  Result<Graph> graph = build_graph(input, stats);
  if (!graph) return graph.status().with_context(printable(source_name) + ": ");
  return graph;
}

}  // namespace

Result<Graph> parse_matrix_market(std::string_view text, const std::string& source_name, GraphBuildStats* stats) {
  const Source source(source_name);
  int64_t rows = 0, cols = 0;
  bool symmetric = false;
  std::vector<std::pair<int64_t, int64_t>> entries;  // 0-based (row, col), both triangles
  const Status scanned = detail::scan_matrix_market(
      text, source,
      [&](const detail::MatrixMarketHeader& header) {
        rows = header.rows;
        cols = header.cols;
        symmetric = header.symmetric();
        entries.reserve(
            std::min<std::size_t>(static_cast<std::size_t>(header.nonzeros) * (symmetric ? 2 : 1), detail::kMaxReserve));
        return Status::ok();
      },
      [&](const detail::MatrixMarketEntry& entry) {
        const int64_t i = entry.row, j = entry.col;
        entries.emplace_back(i, j);
        if (symmetric && i != j) entries.emplace_back(j, i);
        return Status::ok();
      });
  TESSERA_RETURN_IF_ERROR(scanned);
  Result<Graph> graph = graph_of_pattern(rows, cols, std::move(entries), stats);
  if (!graph) return graph.status().with_context(source.name() + ": ");
  return graph;
}

Result<Graph> graph_of_pattern(int64_t rows, int64_t cols, std::vector<std::pair<int64_t, int64_t>> entries,
                               GraphBuildStats* stats) {
  // Repeated coordinates are one nonzero (some writers split a value into several entries).
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  std::vector<int64_t> row_nonzeros(static_cast<std::size_t>(rows), 0);
  for (const auto& [i, j] : entries) ++row_nonzeros[static_cast<std::size_t>(i)];
  if (rows != cols) {
    std::vector<Tile> tiles(static_cast<std::size_t>(rows));
    for (const auto& [i, j] : entries) tiles[static_cast<std::size_t>(i)].panels.push_back(j);
    for (std::size_t r = 0; r < tiles.size(); ++r) tiles[r].cost = row_nonzeros[r];
    if (stats != nullptr) *stats = {};
    return tile_graph(tiles);
  }
  GraphInput input;
  input.vertex_count = rows;
  input.vertex_weights = std::move(row_nonzeros);
  input.edges.reserve(entries.size());
  for (const auto& [i, j] : entries) {
    if (i < j) input.edges.push_back({i, j, 1});
    if (i > j && !std::binary_search(entries.begin(), entries.end(), std::pair{j, i})) input.edges.push_back({i, j, 1});
  }
  return build_graph(input, stats);
}

Result<Graph> parse_metis_graph(std::string_view text, const std::string& source_name, GraphBuildStats* stats) {
  const Source source(source_name);
  GraphInput input;
  int64_t m = 0;
  int header_line = 0;
  Result<int64_t> adjacency_entries = detail::scan_metis_graph(
      text, source,
      [&](const detail::MetisHeader& header) {
        input.vertex_count = header.vertices;
        input.weighted_edges = header.has_edge_weight;
        m = header.edges;
        header_line = header.line;
        if (header.has_vertex_weight) {
          input.vertex_weights.reserve(std::min<std::size_t>(static_cast<std::size_t>(header.vertices), detail::kMaxReserve));
        }
        input.edges.reserve(std::min<std::size_t>(static_cast<std::size_t>(header.edges), detail::kMaxReserve));
        return Status::ok();
      },
      [&](int64_t, int64_t weight) { input.vertex_weights.push_back(weight); },
      [&](const detail::MetisNeighbour& entry) {
        if (entry.weight < 1) return source.error(entry.line, fmt::format("edge weight {} must be >= 1", entry.weight));
        input.edges.push_back({entry.vertex, entry.neighbour, entry.weight});
        return Status::ok();
      });
  if (!adjacency_entries) return adjacency_entries.status();
  if (*adjacency_entries != 2 * m) {
    return source.error(header_line, fmt::format("the header says {} edges, so the adjacency lists should hold {} "
                                                 "entries (each edge from both ends), but they hold {}",
                                                 m, 2 * m, *adjacency_entries));
  }
  return built(input, source_name, stats);
}

Result<Graph> parse_edge_list(std::string_view text, const std::string& source_name, GraphBuildStats* stats) {
  const Source source(source_name);
  GraphInput input;
  Result<int64_t> vertex_count = detail::scan_edge_list(text, source, [&](const detail::EdgeListEntry& edge) {
    int64_t weight = 1;
    if (!edge.weight.empty()) {
      input.weighted_edges = true;
      TESSERA_ASSIGN_OR_RETURN(edge_weight, source.integer(edge.weight, edge.line, "edge weight"));
      if (edge_weight < 1) return source.error(edge.line, fmt::format("edge weight {} must be >= 1", edge_weight));
      weight = edge_weight;
    }
    input.edges.push_back({edge.u, edge.v, weight});
    return Status::ok();
  });
  if (!vertex_count) return vertex_count.status();
  input.vertex_count = *vertex_count;
  return built(input, source_name, stats);
}

Result<Graph> read_graph_file(const std::string& path, GraphBuildStats* stats) {
  const std::optional<detail::GraphFormat> format = detail::graph_format_of(path, /*snap_extensions=*/false);
  if (!format) {
    const std::string extension = detail::lower(std::filesystem::path(path).extension().string());
    return invalid_argument(fmt::format("{}: unknown graph file extension {}; use .mtx (Matrix Market), .graph "
                                        "(METIS) or .edges/.el/.txt (edge list)",
                                        printable(path), detail::quoted(extension)));
  }
  Result<std::string> text = detail::read_graph_text(path, "; partition a smaller graph");
  if (!text) return text.status();
  switch (*format) {
    case detail::GraphFormat::kMatrixMarket: return parse_matrix_market(*text, path, stats);
    case detail::GraphFormat::kMetis: return parse_metis_graph(*text, path, stats);
    case detail::GraphFormat::kEdgeList: return parse_edge_list(*text, path, stats);
  }
  return internal_error("unreachable");
}

}  // namespace tessera::graphdata
