#include "tessera/graphdata/graph_io.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::graphdata {
namespace {

std::string instance(const std::string& name) { return std::string(TESSERA_TEST_INSTANCES) + "/graphs/" + name; }

std::vector<int32_t> neighbours_of(const Graph& graph, int32_t v) {
  const auto span = graph.neighbours(v);
  return {span.begin(), span.end()};
}

Graph read_ok(const std::string& name, GraphBuildStats* stats = nullptr) {
  Result<Graph> graph = read_graph_file(instance(name), stats);
  EXPECT_TRUE(graph.is_ok()) << name << ": " << graph.status().to_string();
  return graph.is_ok() ? *graph : Graph{};
}

// The file fails with kInvalidArgument, and the message names the file, the line and `expected`.
void expect_rejected(const std::string& name, int line, const std::string& expected,
                     StatusCode code = StatusCode::kInvalidArgument) {
  SCOPED_TRACE(name);
  Result<Graph> graph = read_graph_file(instance(name));
  ASSERT_FALSE(graph.is_ok());
  EXPECT_EQ(graph.status().code(), code) << graph.status().to_string();
  const std::string message = graph.status().message();
  const std::string location = instance(name) + (line > 0 ? ":" + std::to_string(line) + ":" : ":");
  EXPECT_EQ(message.rfind(location, 0), 0u) << message;
  EXPECT_NE(message.find(expected), std::string::npos) << message;
}

TEST(MatrixMarket, KarateIsTheSymmetrisedPattern) {
  Graph graph = read_ok("karate.mtx");
  EXPECT_EQ(graph.vertex_count(), 34);
  EXPECT_EQ(graph.edge_count(), 78);
  // No diagonal: a row's nonzeros are its degree, both triangles counted.
  for (int32_t v = 0; v < graph.vertex_count(); ++v) {
    EXPECT_EQ(graph.vertex_weight(v), static_cast<int64_t>(graph.neighbours(v).size())) << v;
  }
  EXPECT_EQ(graph.vertex_weight(33), 17);  // member 34, the instructor's rival, has 17 friends
  EXPECT_EQ(graph.total_vertex_weight(), 156);
}

TEST(MatrixMarket, GeneralMatrixSymmetrisedWithRowNonzerosAsWeights) {
  GraphBuildStats stats;
  Graph graph = read_ok("small-general.mtx", &stats);
  EXPECT_EQ(graph.vertex_count(), 5);
  EXPECT_EQ(graph.edge_count(), 3);  // {1,2} (both directions given), {3,4} (one way), {5,1}
  EXPECT_EQ(neighbours_of(graph, 0), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(neighbours_of(graph, 2), (std::vector<int32_t>{3}));
  EXPECT_EQ(neighbours_of(graph, 3), (std::vector<int32_t>{2}));
  EXPECT_EQ(graph.vertex_weights(), (std::vector<int32_t>{2, 2, 2, 1, 2}));
  EXPECT_EQ(stats.self_loops_removed, 0);  // the diagonal only adds weight
}

TEST(MatrixMarket, RectangularRowsShareColumns) {
  Graph graph = read_ok("rectangular.mtx");
  EXPECT_EQ(graph.vertex_count(), 3);
  EXPECT_EQ(graph.edge_count(), 2);
  ASSERT_EQ(neighbours_of(graph, 0), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph.edge_weight_at(0), 2);  // rows 1 and 2 share columns 1 and 3
  EXPECT_EQ(neighbours_of(graph, 2), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph.vertex_weights(), (std::vector<int32_t>{2, 3, 1}));
}

TEST(MatrixMarket, EmptyAndOneVertex) {
  EXPECT_EQ(read_ok("empty.mtx").vertex_count(), 0);
  Graph one = read_ok("one-vertex.mtx");
  EXPECT_EQ(one.vertex_count(), 1);
  EXPECT_EQ(one.edge_count(), 0);
  EXPECT_EQ(one.vertex_weight(0), 1);
}

TEST(MatrixMarket, BrokenFiles) {
  expect_rejected("bad-header.mtx", 1, "unknown format 'coordinat'");
  expect_rejected("not-matrix-market.mtx", 1, "not a Matrix Market header");
  expect_rejected("array.mtx", 1, "'array' format is not supported");
  expect_rejected("complex.mtx", 1, "complex");
  expect_rejected("bad-size-line.mtx", 3, "ROWS COLS NONZEROS");
  expect_rejected("out-of-range.mtx", 5, "column index 4 is outside 1..3");
  expect_rejected("zero-index.mtx", 4, "row index 0 is outside 1..3");
  expect_rejected("too-few-entries.mtx", 5, "ends after 3 of the 4 entries");
  expect_rejected("too-many-entries.mtx", 5, "more entries than the 2");
  expect_rejected("upper-triangle.mtx", 4, "above the diagonal");
  expect_rejected("bad-value.mtx", 3, "'abc' is not a number");
  expect_rejected("missing-value.mtx", 3, "'ROW COL VALUE'");
  expect_rejected("huge.mtx", 2, "32-bit", StatusCode::kResourceExhausted);
}

TEST(MetisGraph, ManualExample) {
  Graph graph = read_ok("manual.graph");
  EXPECT_EQ(graph.vertex_count(), 7);
  EXPECT_EQ(graph.edge_count(), 11);
  EXPECT_FALSE(graph.has_vertex_weights());
  EXPECT_FALSE(graph.has_edge_weights());
  EXPECT_EQ(neighbours_of(graph, 0), (std::vector<int32_t>{1, 2, 4}));
}

TEST(MetisGraph, Fmt11VertexAndEdgeWeights) {
  Graph graph = read_ok("weighted.graph");
  EXPECT_EQ(graph.edge_count(), 11);
  EXPECT_EQ(graph.vertex_weights(), (std::vector<int32_t>{4, 2, 5, 3, 1, 6, 2}));
  ASSERT_EQ(neighbours_of(graph, 6), (std::vector<int32_t>{3, 5}));
  const auto at = static_cast<std::size_t>(graph.xadj()[6]);
  EXPECT_EQ(graph.edge_weight_at(at), 5);
  EXPECT_EQ(graph.edge_weight_at(at + 1), 6);
}

TEST(MetisGraph, Fmt1Fmt10AndSizes) {
  Graph edges = read_ok("edge-weights.graph");
  EXPECT_TRUE(edges.has_edge_weights());
  EXPECT_FALSE(edges.has_vertex_weights());
  EXPECT_EQ(edges.edge_weights(), (std::vector<int32_t>{5, 1, 5, 2, 1, 2}));
  Graph vertices = read_ok("vertex-weights.graph");
  EXPECT_EQ(vertices.vertex_weights(), (std::vector<int32_t>{7, 0, 2}));
  Graph sizes = read_ok("vertex-sizes.graph");
  EXPECT_EQ(sizes.vertex_weights(), (std::vector<int32_t>{7, 0, 2}));
  EXPECT_EQ(sizes.edge_count(), 2);
}

TEST(MetisGraph, IsolatedVerticesNoEdgesSelfLoop) {
  Graph isolated = read_ok("isolated.graph");
  EXPECT_EQ(isolated.vertex_count(), 3);
  EXPECT_TRUE(neighbours_of(isolated, 1).empty());
  Graph no_edges = read_ok("no-edges.graph");
  EXPECT_EQ(no_edges.vertex_count(), 4);
  EXPECT_EQ(no_edges.edge_count(), 0);
  GraphBuildStats stats;
  Graph loop = read_ok("self-loop.graph", &stats);
  EXPECT_EQ(loop.edge_count(), 1);
  EXPECT_EQ(stats.self_loops_removed, 2);
}

TEST(MetisGraph, BrokenFiles) {
  expect_rejected("bad-header.graph", 1, "edge count 'x' is not an integer");
  expect_rejected("bad-fmt.graph", 1, "FMT '2'");
  expect_rejected("multi-constraint.graph", 1, "multi-constraint");
  expect_rejected("out-of-range.graph", 3, "neighbour 4 is outside 1..3");
  expect_rejected("wrong-edge-count.graph", 1, "should hold 6 entries");
  expect_rejected("too-few-lines.graph", 3, "ends after 2 of the 3 vertex lines");
  expect_rejected("too-many-lines.graph", 4, "more vertex lines than the 2");
  expect_rejected("odd-weights.graph", 3, "vertex 2 has 1 values");
}

TEST(EdgeList, PathWithComments) {
  Graph graph = read_ok("path.edges");
  EXPECT_EQ(graph.vertex_count(), 4);
  EXPECT_EQ(graph.edge_count(), 3);
}

TEST(EdgeList, DirectedIsSymmetrised) {
  GraphBuildStats stats;
  Graph graph = read_ok("directed.edges", &stats);
  EXPECT_EQ(graph.edge_count(), 3);
  EXPECT_EQ(stats.duplicates_merged, 1);
  EXPECT_EQ(neighbours_of(graph, 0), (std::vector<int32_t>{1, 2}));
}

TEST(EdgeList, SelfLoopsDuplicatesWeights) {
  GraphBuildStats stats;
  Graph loops = read_ok("self-loops.edges", &stats);
  EXPECT_EQ(stats.self_loops_removed, 2);
  EXPECT_EQ(loops.edge_count(), 2);
  Graph duplicates = read_ok("duplicates.edges", &stats);
  EXPECT_EQ(stats.duplicates_merged, 2);
  EXPECT_EQ(duplicates.edge_count(), 2);
  EXPECT_EQ(duplicates.edge_weight_at(0), 5);  // the heaviest of 2, 5, 3
  Graph weighted = read_ok("weighted.edges");
  EXPECT_EQ(weighted.edge_weight_at(0), 4);
  Graph one = read_ok("one-vertex.edges");
  EXPECT_EQ(one.vertex_count(), 1);
  EXPECT_EQ(one.edge_count(), 0);
  EXPECT_EQ(read_ok("empty.edges").vertex_count(), 0);
}

TEST(EdgeList, BrokenFiles) {
  expect_rejected("bad-line.edges", 2, "4 values");
  expect_rejected("not-a-number.edges", 2, "'two' is not an integer");
  expect_rejected("negative-id.edges", 2, "negative");
  expect_rejected("mixed-columns.edges", 2, "line 1 has 3");
  expect_rejected("zero-weight.edges", 1, "edge weight 0");
  expect_rejected("huge-id.edges", 1, "32-bit", StatusCode::kResourceExhausted);
}

// The hostile-* instances hold an ESC ] title sequence, a BEL, a NUL, 0x91 (not UTF-8) and an
// ESC [ clear-screen in the token the message quotes; it must quote them as \xNN.
void expect_quoted_escaped(const Status& status, int line, const std::string& name) {
  SCOPED_TRACE(name);
  const std::string message = status.message();
  EXPECT_EQ(message.rfind(instance(name) + ":" + std::to_string(line) + ": ", 0), 0u) << message;
  EXPECT_NE(message.find("'\\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J'"), std::string::npos) << message;
  for (const char raw : {'\x1b', '\x07', '\0', '\x91'}) EXPECT_EQ(message.find(raw), std::string::npos) << message;
  EXPECT_EQ(printable_message(message), message) << "nothing left to escape";
}

TEST(HostileBytes, EveryReaderQuotesThemEscaped) {
  expect_quoted_escaped(read_graph_file(instance("hostile-token.edges")).status(), 2, "hostile-token.edges");
  expect_quoted_escaped(read_graph_file(instance("hostile-value.mtx")).status(), 3, "hostile-value.mtx");
  expect_quoted_escaped(read_graph_file(instance("hostile-neighbour.graph")).status(), 3, "hostile-neighbour.graph");
  // The banner's words and the file's name are quoted the same way.
  const Status banner = parse_matrix_market("%%MatrixMarket matrix coordinate re\x1b[2Jal general\n1 1 0\n",
                                            "in\x07put\xff.mtx")
                            .status();
  EXPECT_EQ(banner.message(), "in\\x07put\\xff.mtx:1: unknown field 're\\x1b[2Jal'; use real, integer or pattern");
  const Status fmt_code = parse_metis_graph("1 0 1\x1b\n\n", "g.graph").status();
  EXPECT_EQ(fmt_code.message(), "g.graph:1: FMT '1\\x1b' is not one of 0, 1, 10, 11, 100, 101, 110, 111");
}

TEST(ReadGraphFile, UnknownExtensionAndMissingFile) {
  Result<Graph> unknown = read_graph_file(instance("unknown.ext"));
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find(".mtx"), std::string::npos);
  Result<Graph> missing = read_graph_file(instance("no-such-file.mtx"));
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_NE(missing.status().message().find("no-such-file.mtx"), std::string::npos);
}

TEST(ParseFromText, CarriageReturnsAndSourceName) {
  Result<Graph> graph = parse_edge_list("0 1\r\n1 2\r\n", "inline");
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  EXPECT_EQ(graph->edge_count(), 2);
  Result<Graph> bad = parse_metis_graph("", "inline.graph");
  EXPECT_EQ(bad.status().message(), "inline.graph:1: missing header 'VERTICES EDGES [FMT [NCON]]'");
}

}  // namespace
// Headers that claim more than the file holds are refused at once, before anything is sized by
// them (a 77-byte .mtx claiming 2e9 rows once ended in std::bad_alloc).
TEST(GraphHeaders, ClaimsTheFileCannotHoldAreRefusedQuickly) {
  const auto start = std::chrono::steady_clock::now();
  expect_rejected("lying-entries.mtx", 2, "announces 2000000000 entries but the 4 bytes after it can hold at most 1");
  expect_rejected("lying-vertices.graph", 1, "announces 2000000000 vertices but only 4 bytes follow");
  // Rows without entries cost memory but no bytes, so 2e9 rows are refused by memory (about
  // 119 GiB as a graph); skipped on a machine that really has that much free.
  if (available_memory_bytes() < uint64_t{2000000000} * 64) {
    expect_rejected("lying-rows.mtx", 2, "a 2000000000 x 2000000000 matrix as a graph of 2000000000 vertices needs",
                    StatusCode::kResourceExhausted);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(GraphHeaders, SpecialFilesAreRefused) {
  Result<Graph> graph = read_graph_file("/dev/zero.mtx");
  EXPECT_FALSE(graph.is_ok());
  const std::string fifo = (std::filesystem::temp_directory_path() / ("tessera-fifo-" + std::to_string(::getpid()) + ".mtx")).string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  graph = read_graph_file(fifo);
  ::unlink(fifo.c_str());
  ASSERT_FALSE(graph.is_ok());
  EXPECT_EQ(graph.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(graph.status().message().find("is a FIFO"), std::string::npos) << graph.status().message();
}

}  // namespace tessera::graphdata
