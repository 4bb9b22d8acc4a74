// Internal to tessera_graphdata: the line and token layer and the three file-format scanners that
// the undirected readers (graph_io.cpp) and the directed ones (digraph.cpp) share.
//
// A scanner checks a file's syntax and structure (header, counts, index ranges, token counts) and
// hands every entry to a callback with its line number. What an entry becomes (an undirected edge
// for METIS, a directed edge with a weight) and the checks that differ between the two readers
// (undirected weights >= 1, directed weights any finite number) belong to the callback, which
// returns a Status to stop the scan. Messages read "FILE:LINE: what is wrong; what to write
// instead". Pure functions over the text given; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera::graphdata::detail {

// Reserving what a header announces lets a one-line file claim terabytes; cap it and let vectors
// grow past the cap only as real entries arrive.
inline constexpr std::size_t kMaxReserve = std::size_t{1} << 22;

class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}

  // The next line without its "\n" or "\r\n"; false at the end. A final line without "\n" counts;
  // the empty string after a final "\n" does not.
  bool next(std::string_view& line);
  int line_number() const { return line_number_; }
  // Bytes not yet returned by next(): what the rest of the file can still hold.
  uint64_t remaining() const { return pos_ >= text_.size() ? 0 : text_.size() - pos_; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  int line_number_ = 0;
};

// Tokens separated by spaces or tabs.
std::vector<std::string_view> split(std::string_view line);
bool is_blank(std::string_view line);
std::string lower(std::string_view text);

// A token from the file as a message quotes it: "'x'", with control bytes and invalid UTF-8 as
// \xNN (core's printable), so a hostile file cannot put terminal escapes on the screen.
std::string quoted(std::string_view token);

// Messages all read "FILE:LINE: ..."; the name is kept as printable() shows it, since a path can
// hold any byte too. `index_limit` names the 32-bit limit a reader enforces in its messages
// ("METIS' 32-bit limit") and outlives the Source.
class Source {
 public:
  explicit Source(const std::string& name, std::string_view index_limit = "METIS' 32-bit limit");
  const std::string& name() const { return name_; }
  std::string_view index_limit() const { return index_limit_; }

  Status error(int line, const std::string& what) const;
  Status error(const std::string& what) const;
  // Whole numbers; `what` names the token in the message ("row index 'x' is not an integer").
  // These three quote a bad token through quoted().
  Result<int64_t> integer(std::string_view token, int line, std::string_view what) const;
  // Syntax only: a value that overflows a double still passes.
  Status number(std::string_view token, int line) const;
  // A finite double (an edge weight): NaN, infinities and values beyond a double are refused.
  Result<double> finite_real(std::string_view token, int line, std::string_view what) const;

 private:
  std::string name_;
  std::string_view index_limit_;
};

#define TESSERA_ASSIGN_OR_RETURN(lhs, expr)          \
  auto lhs##_result = (expr);                        \
  if (!lhs##_result) return lhs##_result.status();   \
  const auto lhs = *lhs##_result

// A header's vertex count as memory, checked before anything that size is allocated.
Status check_vertices_fit(int64_t vertices, const Source& source, int line, const std::string& what);

// --- Matrix Market (coordinate) ---------------------------------------------------------------
struct MatrixMarketHeader {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t nonzeros = 0;
  std::string field;     // lower case: real | integer | pattern | double
  std::string symmetry;  // lower case: general | symmetric | skew-symmetric
  int size_line = 0;
  bool symmetric() const { return symmetry != "general"; }
};
struct MatrixMarketEntry {
  int64_t row = 0;  // 0-based, as stored (a symmetric file's mirror is the callback's to add)
  int64_t col = 0;
  std::string_view value;  // the value token as written, its syntax checked; empty for pattern
  int line = 0;
};
// Checks the banner and the size line (against the file's remaining bytes and memory), calls
// on_header once, then on_entry for every entry in file order, then checks the entry count.
Status scan_matrix_market(std::string_view text, const Source& source,
                          const std::function<Status(const MatrixMarketHeader&)>& on_header,
                          const std::function<Status(const MatrixMarketEntry&)>& on_entry);

// --- METIS .graph -------------------------------------------------------------------------------
struct MetisHeader {
  int64_t vertices = 0;
  int64_t edges = 0;
  bool has_vertex_weight = false;
  bool has_edge_weight = false;
  int line = 0;
};
struct MetisNeighbour {
  int64_t vertex = 0;     // 0-based owner of the list
  int64_t neighbour = 0;  // 0-based, range checked
  int64_t weight = 1;     // 1 without edge weights; otherwise as written (its range is the callback's)
  int line = 0;
};
// Checks the header, calls on_header once, on_vertex_weight per vertex when FMT has vertex
// weights (checked >= 0), on_neighbour per adjacency entry, and checks the vertex line count.
// Returns the number of adjacency entries: how they relate to the header's edge count differs
// between an undirected reading (2 per edge) and a directed one, so the caller checks it.
Result<int64_t> scan_metis_graph(std::string_view text, const Source& source,
                                 const std::function<Status(const MetisHeader&)>& on_header,
                                 const std::function<void(int64_t vertex, int64_t weight)>& on_vertex_weight,
                                 const std::function<Status(const MetisNeighbour&)>& on_neighbour);

// --- Edge lists -------------------------------------------------------------------------------
struct EdgeListEntry {
  int64_t u = 0;  // 0-based, >= 0 and below the index limit
  int64_t v = 0;
  std::string_view weight;  // the third column as written; empty when the file has two
  int line = 0;
};
// '#' and '%' comment lines, "U V" or "U V WEIGHT" with the same column count on every line.
// Returns the vertex count (largest id + 1).
Result<int64_t> scan_edge_list(std::string_view text, const Source& source,
                               const std::function<Status(const EdgeListEntry&)>& on_edge);

// --- Files --------------------------------------------------------------------------------------
enum class GraphFormat { kMatrixMarket, kMetis, kEdgeList };
// By extension: .mtx, .graph / .metis, .edges / .el / .txt, and with snap_extensions also .snap
// and .edgelist (the name networkx writes).
std::optional<GraphFormat> graph_format_of(const std::string& path, bool snap_extensions);
// The whole file as text. Refuses a FIFO, a directory or a device by name (reading one could
// block or never end), and a file larger than the memory left to hold it; `remedy` ends that
// message ("; partition a smaller graph").
Result<std::string> read_graph_text(const std::string& path, std::string_view remedy);

}  // namespace tessera::graphdata::detail
