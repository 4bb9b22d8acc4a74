#include "tessera/graphdata/digraph.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/strings.hpp"
#include "tessera/graphdata/graph_io.hpp"

namespace tessera::graphdata {
namespace {

// Real graphs shipped by Debian packages that scripts/setup.sh installs. libmetis-doc: finite
// element meshes in METIS format (undirected, so every edge is read in both directions).
// python3-networkx: a directed SNAP-style edge list (a drug users' network, 1-based ids).
constexpr const char* kMetis4elt = "/usr/share/doc/libmetis-dev/examples/graphs/4elt.graph";
constexpr const char* kMetisCopter2 = "/usr/share/doc/libmetis-dev/examples/graphs/copter2.graph";
constexpr const char* kHartfordDrug = "/usr/share/doc/python3-networkx/examples/algorithms/hartford_drug.edgelist";

std::string instance(const std::string& name) { return std::string(TESSERA_TEST_INSTANCES) + "/graphs/" + name; }
std::string directed(const std::string& name) { return instance("directed/" + name); }

std::vector<uint32_t> out_of(const DirectedGraph& graph, int64_t v) {
  return {graph.targets.begin() + static_cast<std::ptrdiff_t>(graph.offsets[static_cast<std::size_t>(v)]),
          graph.targets.begin() + static_cast<std::ptrdiff_t>(graph.offsets[static_cast<std::size_t>(v) + 1])};
}
std::vector<double> weights_of(const DirectedGraph& graph, int64_t v) {
  return {graph.weights.begin() + static_cast<std::ptrdiff_t>(graph.offsets[static_cast<std::size_t>(v)]),
          graph.weights.begin() + static_cast<std::ptrdiff_t>(graph.offsets[static_cast<std::size_t>(v) + 1])};
}

DirectedGraph read_ok(const std::string& path) {
  Result<DirectedGraph> graph = read_directed_graph_file(path);
  EXPECT_TRUE(graph.is_ok()) << path << ": " << graph.status().to_string();
  return graph.is_ok() ? *graph : DirectedGraph{};
}

// The file fails with `code`, and the message starts with FILE:LINE: and holds `expected`.
void expect_rejected(const std::string& path, int line, const std::string& expected,
                     StatusCode code = StatusCode::kInvalidArgument) {
  SCOPED_TRACE(path);
  Result<DirectedGraph> graph = read_directed_graph_file(path);
  ASSERT_FALSE(graph.is_ok());
  EXPECT_EQ(graph.status().code(), code) << graph.status().to_string();
  const std::string message = graph.status().message();
  EXPECT_EQ(message.rfind(path + ":" + std::to_string(line) + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(expected), std::string::npos) << message;
}

// The invariants every DirectedGraph must hold: offsets monotone from 0 to E, targets in range,
// each list sorted, weights absent or one per edge and finite.
void expect_well_formed(const DirectedGraph& graph) {
  ASSERT_EQ(graph.offsets.size(), static_cast<std::size_t>(graph.vertex_count) + 1);
  EXPECT_EQ(graph.offsets.front(), 0u);
  EXPECT_EQ(graph.offsets.back(), graph.targets.size());
  EXPECT_TRUE(std::is_sorted(graph.offsets.begin(), graph.offsets.end()));
  for (int64_t v = 0; v < graph.vertex_count; ++v) {
    const std::vector<uint32_t> targets = out_of(graph, v);
    ASSERT_TRUE(std::is_sorted(targets.begin(), targets.end())) << v;
    for (uint32_t t : targets) ASSERT_LT(static_cast<int64_t>(t), graph.vertex_count);
  }
  if (graph.weighted()) {
    ASSERT_EQ(graph.weights.size(), graph.targets.size());
    for (double w : graph.weights) EXPECT_TRUE(std::isfinite(w));
  }
}

// Edge multiplicities: (u, v) -> how often u->v appears.
std::map<std::pair<int64_t, int64_t>, int> multiset_of(const DirectedGraph& graph) {
  std::map<std::pair<int64_t, int64_t>, int> edges;
  for (int64_t u = 0; u < graph.vertex_count; ++u) {
    for (uint32_t v : out_of(graph, u)) ++edges[{u, v}];
  }
  return edges;
}

int64_t self_loops(const DirectedGraph& graph) {
  int64_t loops = 0;
  for (int64_t u = 0; u < graph.vertex_count; ++u) {
    for (uint32_t v : out_of(graph, u)) loops += v == u ? 1 : 0;
  }
  return loops;
}

// --- Building ------------------------------------------------------------------------------------

TEST(BuildDirectedGraph, KeepsSelfLoopsAndParallelEdgesSortedStably) {
  Result<DirectedGraph> graph =
      build_directed_graph(4, {{0, 2, 1.0}, {0, 1, 2.0}, {0, 2, 3.0}, {2, 2, 4.0}, {3, 0, 5.0}}, /*weighted=*/true);
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  expect_well_formed(*graph);
  EXPECT_EQ(graph->edge_count(), 5);
  EXPECT_EQ(out_of(*graph, 0), (std::vector<uint32_t>{1, 2, 2}));
  EXPECT_EQ(weights_of(*graph, 0), (std::vector<double>{2.0, 1.0, 3.0}));  // equal targets keep input order
  EXPECT_EQ(out_of(*graph, 1), std::vector<uint32_t>{});
  EXPECT_EQ(out_of(*graph, 2), std::vector<uint32_t>{2});
  EXPECT_EQ(describe(*graph), "4 vertices, 5 edges (weighted), 1 dangling, 1 self-loops");

  Result<DirectedGraph> unweighted = build_directed_graph(3, {{2, 0, 9.0}, {0, 1, 9.0}}, /*weighted=*/false);
  ASSERT_TRUE(unweighted.is_ok());
  EXPECT_FALSE(unweighted->weighted());
  EXPECT_EQ(describe(*unweighted), "3 vertices, 2 edges, 1 dangling, 0 self-loops");

  Result<DirectedGraph> empty = build_directed_graph(0, {}, false);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->edge_count(), 0);
  expect_well_formed(*empty);
}

TEST(BuildDirectedGraph, RefusesBadInput) {
  EXPECT_EQ(build_directed_graph(-1, {}, false).status().code(), StatusCode::kInvalidArgument);
  Result<DirectedGraph> outside = build_directed_graph(3, {{0, 1}, {1, 3}}, false);
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("edge 1 (1 -> 3) has an endpoint outside 0..2"), std::string::npos)
      << outside.status().message();
  EXPECT_EQ(build_directed_graph(3, {{-1, 1}}, false).status().code(), StatusCode::kInvalidArgument);
  Result<DirectedGraph> nan = build_directed_graph(2, {{0, 1, std::nan("")}}, true);
  EXPECT_EQ(nan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nan.status().message().find("finite"), std::string::npos);
  // Unweighted builds ignore the weight field, whatever it holds.
  EXPECT_TRUE(build_directed_graph(2, {{0, 1, std::nan("")}}, false).is_ok());
  EXPECT_EQ(build_directed_graph(int64_t{1} << 31, {}, false).status().code(), StatusCode::kResourceExhausted);
}

// --- Reading -------------------------------------------------------------------------------------

TEST(ReadDirected, SnapEdgeListKeepsDirectionLoopsAndRepeats) {
  const DirectedGraph graph = read_ok(directed("tiny.snap"));
  expect_well_formed(graph);
  EXPECT_EQ(graph.vertex_count, 6);
  EXPECT_EQ(graph.edge_count(), 7);
  EXPECT_FALSE(graph.weighted());
  EXPECT_EQ(out_of(graph, 0), (std::vector<uint32_t>{1, 1}));
  EXPECT_EQ(out_of(graph, 1), (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(out_of(graph, 2), (std::vector<uint32_t>{0, 2, 3}));
  for (int64_t v : {3, 4, 5}) EXPECT_EQ(graph.out_degree(v), 0u) << v;
  EXPECT_EQ(describe(graph), "6 vertices, 7 edges, 3 dangling, 1 self-loops");
}

TEST(ReadDirected, SnapEdgeListRealWeights) {
  const DirectedGraph graph = read_ok(directed("weighted.edges"));
  expect_well_formed(graph);
  ASSERT_TRUE(graph.weighted());
  EXPECT_EQ(out_of(graph, 0), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(weights_of(graph, 0), (std::vector<double>{2.5, 1e-3}));
  EXPECT_EQ(weights_of(graph, 1), (std::vector<double>{0.0}));
  EXPECT_EQ(weights_of(graph, 2), (std::vector<double>{-1.0}));  // accepted here; sssp refuses it
  EXPECT_EQ(weights_of(graph, 3), (std::vector<double>{4.0}));
}

TEST(ReadDirected, MatrixMarketEntryIJIsEdgeIToJ) {
  const DirectedGraph graph = read_ok(directed("tiny.mtx"));
  expect_well_formed(graph);
  EXPECT_EQ(graph.vertex_count, 4);
  EXPECT_EQ(out_of(graph, 0), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(weights_of(graph, 0), (std::vector<double>{0.5, 3.0}));
  EXPECT_EQ(out_of(graph, 1), (std::vector<uint32_t>{2}));
  EXPECT_EQ(out_of(graph, 2), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(weights_of(graph, 2), (std::vector<double>{1.5, -1.0}));
  EXPECT_EQ(graph.out_degree(3), 0u);
}

TEST(ReadDirected, MatrixMarketSymmetricGivesBothDirections) {
  const DirectedGraph graph = read_ok(directed("symmetric.mtx"));
  expect_well_formed(graph);
  EXPECT_FALSE(graph.weighted());  // pattern
  EXPECT_EQ(out_of(graph, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(out_of(graph, 1), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(out_of(graph, 2), (std::vector<uint32_t>{1, 2}));  // the diagonal entry once
  const DirectedGraph skew = read_ok(directed("skew.mtx"));
  EXPECT_EQ(out_of(skew, 0), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(weights_of(skew, 0), (std::vector<double>{-5.0, 2.0}));  // A(j,i) = -A(i,j)
  EXPECT_EQ(weights_of(skew, 1), (std::vector<double>{5.0}));
  EXPECT_EQ(weights_of(skew, 2), (std::vector<double>{-2.0}));
}

TEST(ReadDirected, MetisListsAreOutEdges) {
  const DirectedGraph arcs = read_ok(directed("arcs.graph"));
  expect_well_formed(arcs);
  EXPECT_EQ(arcs.edge_count(), 4);
  EXPECT_EQ(out_of(arcs, 0), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(weights_of(arcs, 0), (std::vector<double>{7.0, 1.0}));
  EXPECT_EQ(out_of(arcs, 2), (std::vector<uint32_t>{0}));
  EXPECT_EQ(arcs.out_degree(3), 0u);

  // An undirected METIS file: both directions, and its placement graph is the file's own graph.
  const DirectedGraph manual = read_ok(instance("manual.graph"));
  expect_well_formed(manual);
  EXPECT_EQ(manual.vertex_count, 7);
  EXPECT_EQ(manual.edge_count(), 22);
  Result<Graph> undirected = read_graph_file(instance("manual.graph"));
  Result<Graph> placement = placement_graph(manual);
  ASSERT_TRUE(undirected.is_ok() && placement.is_ok());
  EXPECT_EQ(placement->xadj(), undirected->xadj());
  EXPECT_EQ(placement->adjncy(), undirected->adjncy());
}

TEST(ReadDirected, TextWithCarriageReturnsAndEmptyInputs) {
  Result<DirectedGraph> graph = parse_directed_edge_list("0 1\r\n1 0\r\n", "inline");
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  EXPECT_EQ(graph->edge_count(), 2);
  Result<DirectedGraph> empty = parse_directed_edge_list("# nothing\n", "inline");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->vertex_count, 0);
  Result<DirectedGraph> no_edges = parse_directed_metis_graph("3 0\n\n\n\n", "inline.graph");
  ASSERT_TRUE(no_edges.is_ok()) << no_edges.status().to_string();
  EXPECT_EQ(no_edges->vertex_count, 3);
  EXPECT_EQ(parse_directed_metis_graph("", "inline.graph").status().message(),
            "inline.graph:1: missing header 'VERTICES EDGES [FMT [NCON]]'");
}

TEST(ReadDirected, BrokenFilesNameFileAndLine) {
  expect_rejected(directed("bad-token.snap"), 3, "vertex id 'x' is not an integer");
  expect_rejected(directed("mixed-weights.edges"), 2, "2 values, but line 1 has 3");
  expect_rejected(directed("nan-weight.edges"), 1, "edge weight 'nan' is not finite");
  expect_rejected(directed("inf-weight.edges"), 2, "edge weight 'inf' is not finite");
  expect_rejected(directed("huge-weight.edges"), 1, "beyond the range of a double");
  expect_rejected(directed("huge-id.snap"), 2, "the 32-bit vertex id limit", StatusCode::kResourceExhausted);
  expect_rejected(instance("negative-id.edges"), 2, "negative");
  expect_rejected(directed("out-of-range.mtx"), 4, "column index 4 is outside 1..3");
  expect_rejected(directed("negative-count.mtx"), 2, "negative size");
  expect_rejected(directed("rectangular.mtx"), 2, "a 2 x 3 matrix is not a graph");
  expect_rejected(instance("bad-value.mtx"), 3, "'abc' is not a number");
  expect_rejected(instance("lying-entries.mtx"), 2, "announces 2000000000 entries");
  expect_rejected(directed("out-of-range.graph"), 3, "neighbour 4 is outside 1..3");
  expect_rejected(directed("negative-count.graph"), 2, "negative count");
  expect_rejected(directed("truncated.graph"), 4, "ends after 2 of the 4 vertex lines");
  expect_rejected(directed("short-list.graph"), 2, "should hold 6 entries (each undirected edge from both ends) or 3");
  expect_rejected(instance("too-many-lines.graph"), 4, "more vertex lines than the 2");
}

// The directed readers (what `tessera graph` reads) quote a hostile token escaped too.
TEST(ReadDirected, HostileBytesAreQuotedEscaped) {
  for (const auto& [name, line] : std::vector<std::pair<std::string, int>>{
           {"hostile-token.edges", 2}, {"hostile-value.mtx", 3}, {"hostile-neighbour.graph", 3}}) {
    SCOPED_TRACE(name);
    const Result<DirectedGraph> graph = read_directed_graph_file(instance(name));
    ASSERT_FALSE(graph.is_ok());
    const std::string message = graph.status().message();
    EXPECT_EQ(message.rfind(instance(name) + ":" + std::to_string(line) + ": ", 0), 0u) << message;
    EXPECT_NE(message.find("'\\x1b]0;PWNED\\x07\\x00\\x91\\x1b[2J'"), std::string::npos) << message;
    for (const char raw : {'\x1b', '\x07', '\0', '\x91'}) EXPECT_EQ(message.find(raw), std::string::npos) << message;
    EXPECT_EQ(printable_message(message), message);
  }
}

TEST(ReadDirected, UnknownExtensionAndMissingFile) {
  Result<DirectedGraph> unknown = read_directed_graph_file(instance("unknown.ext"));
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find(".snap"), std::string::npos) << unknown.status().message();
  Result<DirectedGraph> missing = read_directed_graph_file(directed("no-such-file.snap"));
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_NE(missing.status().message().find("no-such-file.snap"), std::string::npos);
}

TEST(ReadDirected, RealMetisGraphsFromLibmetisDoc) {
  if (!std::filesystem::exists(kMetis4elt)) GTEST_SKIP() << kMetis4elt << " is absent; install libmetis-doc (scripts/setup.sh)";
  const DirectedGraph elt = read_ok(kMetis4elt);
  expect_well_formed(elt);
  EXPECT_EQ(elt.vertex_count, 7434);
  EXPECT_EQ(elt.edge_count(), 2 * 43031);  // every undirected edge both ways
  EXPECT_EQ(symmetrised(elt).edge_count(), 4 * 43031);
  Result<Graph> placement = placement_graph(elt);
  ASSERT_TRUE(placement.is_ok()) << placement.status().to_string();
  EXPECT_EQ(placement->edge_count(), 43031);
  EXPECT_EQ(placement->total_vertex_weight(), 2 * 43031 + 7434);
  const DirectedGraph copter = read_ok(kMetisCopter2);
  EXPECT_EQ(copter.vertex_count, 55476);
  EXPECT_EQ(copter.edge_count(), 2 * 352238);
}

TEST(ReadDirected, RealSnapEdgeListFromNetworkx) {
  if (!std::filesystem::exists(kHartfordDrug)) {
    GTEST_SKIP() << kHartfordDrug << " is absent; install python3-networkx (scripts/setup.sh)";
  }
  const DirectedGraph graph = read_ok(kHartfordDrug);
  expect_well_formed(graph);
  EXPECT_EQ(graph.vertex_count, 294);  // ids 1..293; 0 and ids never named are isolated
  EXPECT_EQ(graph.edge_count(), 337);
  EXPECT_FALSE(graph.weighted());
}

// --- Symmetrised and placement graphs --------------------------------------------------------------

void expect_symmetrised(const DirectedGraph& graph) {
  const DirectedGraph both = symmetrised(graph);
  expect_well_formed(both);
  EXPECT_EQ(both.vertex_count, graph.vertex_count);
  EXPECT_EQ(both.edge_count(), 2 * graph.edge_count() - self_loops(graph));
  EXPECT_EQ(both.weighted(), graph.weighted());
  const auto edges = multiset_of(graph);
  const auto symmetric = multiset_of(both);
  for (const auto& [edge, count] : symmetric) {
    const auto [u, v] = edge;
    const auto forward = edges.find({u, v});
    const auto backward = edges.find({v, u});
    const int expected = (forward == edges.end() ? 0 : forward->second) +
                         (u == v || backward == edges.end() ? 0 : backward->second);
    EXPECT_EQ(count, expected) << u << "->" << v;
    EXPECT_EQ(symmetric.at({v, u}), count) << u << "->" << v;
  }
}

TEST(Symmetrised, EveryEdgeBothWaysLoopsOnce) {
  expect_symmetrised(read_ok(directed("tiny.snap")));
  expect_symmetrised(read_ok(directed("weighted.edges")));
  Result<DirectedGraph> rmat = generate_directed_graph("rmat:10", 3);
  ASSERT_TRUE(rmat.is_ok());
  expect_symmetrised(*rmat);
  // Weights travel with their edge: 2 -> 0 (-1) gives 0 -> 2 (-1) beside 0 -> 2 (0.001).
  const DirectedGraph both = symmetrised(read_ok(directed("weighted.edges")));
  EXPECT_EQ(out_of(both, 0), (std::vector<uint32_t>{1, 2, 2}));
  std::vector<double> weights = weights_of(both, 0);
  std::sort(weights.begin() + 1, weights.end());
  EXPECT_EQ(weights, (std::vector<double>{2.5, -1.0, 1e-3}));
}

void expect_placement(const DirectedGraph& graph) {
  Result<Graph> placement = placement_graph(graph);
  ASSERT_TRUE(placement.is_ok()) << placement.status().to_string();
  ASSERT_EQ(placement->vertex_count(), graph.vertex_count);
  EXPECT_FALSE(placement->has_edge_weights());
  int64_t total = 0;
  for (int32_t v = 0; v < placement->vertex_count(); ++v) {
    EXPECT_EQ(placement->vertex_weight(v), static_cast<int64_t>(graph.out_degree(v)) + 1) << v;
    total += placement->vertex_weight(v);
    for (int32_t w : placement->neighbours(v)) {
      EXPECT_NE(w, v);
      const std::vector<uint32_t> forward = out_of(graph, v), backward = out_of(graph, w);
      EXPECT_TRUE(std::binary_search(forward.begin(), forward.end(), static_cast<uint32_t>(w)) ||
                  std::binary_search(backward.begin(), backward.end(), static_cast<uint32_t>(v)))
          << v << "-" << w;
    }
  }
  EXPECT_EQ(total, graph.edge_count() + graph.vertex_count);
  // Every directed edge between distinct vertices is an undirected one.
  std::set<std::pair<int64_t, int64_t>> expected;
  for (const auto& [edge, count] : multiset_of(graph)) {
    if (edge.first != edge.second) expected.insert(std::minmax(edge.first, edge.second));
  }
  EXPECT_EQ(placement->edge_count(), static_cast<int64_t>(expected.size()));
}

TEST(PlacementGraph, UndirectedOutDegreePlusOne) {
  expect_placement(read_ok(directed("tiny.snap")));
  expect_placement(read_ok(directed("arcs.graph")));
  for (const char* spec : {"rmat:11", "lognormal:3000", "mesh2d:9x7"}) {
    SCOPED_TRACE(spec);
    Result<DirectedGraph> graph = generate_directed_graph(spec, 5);
    ASSERT_TRUE(graph.is_ok());
    expect_placement(*graph);
  }
}

// --- Generating ----------------------------------------------------------------------------------

TEST(GenerateDirected, SameSeedSameGraphFiveTimes) {
  for (const char* spec : {"rmat:10", "rmat:9:5", "lognormal:2000", "mesh2d:7x5", "mesh3d:3x4x5"}) {
    SCOPED_TRACE(spec);
    Result<DirectedGraph> first = generate_directed_graph(spec, 42);
    ASSERT_TRUE(first.is_ok()) << first.status().to_string();
    expect_well_formed(*first);
    for (int run = 0; run < 4; ++run) {
      Result<DirectedGraph> again = generate_directed_graph(spec, 42);
      ASSERT_TRUE(again.is_ok());
      EXPECT_EQ(*again, *first) << "run " << run;
    }
  }
  for (const char* spec : {"rmat:10", "lognormal:2000"}) {
    EXPECT_NE(*generate_directed_graph(spec, 42), *generate_directed_graph(spec, 43)) << spec;
  }
}

TEST(GenerateDirected, MeshesHaveEveryGridEdgeBothWays) {
  for (auto [nx, ny] : {std::pair{1, 1}, std::pair{1, 7}, std::pair{3, 5}, std::pair{13, 11}}) {
    Result<DirectedGraph> mesh = generate_directed_graph("mesh2d:" + std::to_string(nx) + "x" + std::to_string(ny), 1);
    ASSERT_TRUE(mesh.is_ok());
    EXPECT_EQ(mesh->vertex_count, nx * ny);
    EXPECT_EQ(mesh->edge_count(), 2 * ((nx - 1) * ny + nx * (ny - 1))) << nx << "x" << ny;
    EXPECT_EQ(self_loops(*mesh), 0);
    EXPECT_EQ(multiset_of(symmetrised(*mesh)).size(), multiset_of(*mesh).size());  // already symmetric
  }
  Result<DirectedGraph> cube = generate_directed_graph("mesh3d:4x5x6", 1);
  ASSERT_TRUE(cube.is_ok());
  EXPECT_EQ(cube->vertex_count, 120);
  EXPECT_EQ(cube->edge_count(), 2 * (3 * 5 * 6 + 4 * 4 * 6 + 4 * 5 * 5));
  EXPECT_EQ(out_of(*cube, 1 + 4 * (1 + 5 * 1)),  // interior vertex (1,1,1): 6 neighbours
            (std::vector<uint32_t>{1 + 4 * (1 + 5 * 0), 1 + 4 * (0 + 5 * 1), 0 + 4 * (1 + 5 * 1), 2 + 4 * (1 + 5 * 1),
                                   1 + 4 * (2 + 5 * 1), 1 + 4 * (1 + 5 * 2)}));
}

TEST(GenerateDirected, RmatKeepsEveryGeneratedEdge) {
  for (auto [spec, n, edges] : {std::tuple{"rmat:10", 1024, 16 * 1024}, std::tuple{"rmat:8:4", 256, 4 * 256},
                                std::tuple{"rmat:16", 65536, 16 * 65536}}) {
    SCOPED_TRACE(spec);
    Result<DirectedGraph> graph = generate_directed_graph(spec, 7);
    ASSERT_TRUE(graph.is_ok());
    EXPECT_EQ(graph->vertex_count, n);
    EXPECT_EQ(graph->edge_count(), edges);
    EXPECT_FALSE(graph->weighted());
  }
  // R-MAT is skewed and, unsymmetrised, not symmetric: some edge has no reverse.
  Result<DirectedGraph> graph = generate_directed_graph("rmat:12", 1);
  ASSERT_TRUE(graph.is_ok());
  uint64_t max_degree = 0;
  for (int64_t v = 0; v < graph->vertex_count; ++v) max_degree = std::max(max_degree, graph->out_degree(v));
  EXPECT_GT(static_cast<double>(max_degree), 10.0 * 16);
  EXPECT_GT(multiset_of(symmetrised(*graph)).size(), multiset_of(*graph).size());
}

TEST(GenerateDirected, LognormalInDegreesNoSelfLoops) {
  Result<DirectedGraph> graph = generate_directed_graph("lognormal:20000", 3);
  ASSERT_TRUE(graph.is_ok());
  EXPECT_EQ(graph->vertex_count, 20000);
  EXPECT_EQ(self_loops(*graph), 0);
  // E[in-degree] = exp(mu + sigma^2 / 2) = exp(2.425) ~ 11.30; 20000 draws put the mean within 0.2.
  const double mean_in_degree = static_cast<double>(graph->edge_count()) / 20000.0;
  EXPECT_NEAR(mean_in_degree, 11.30, 0.2);
  // In-degrees are log-normal: the median is exp(mu) ~ 10, none is 0 for most vertices.
  std::vector<int64_t> in_degree(20000, 0);
  for (uint32_t t : graph->targets) ++in_degree[t];
  std::nth_element(in_degree.begin(), in_degree.begin() + 10000, in_degree.end());
  EXPECT_NEAR(static_cast<double>(in_degree[10000]), 10.0, 1.0);
}

TEST(GenerateDirected, BadSpecsAndSizes) {
  for (const char* bad : {"mesh2d:20", "mesh2d:0x3", "mesh3d:2x2", "rmat:", "rmat:99", "rmat:8:0", "lognormal:0",
                          "torus:3x3", "graph.snap"}) {
    Result<DirectedGraph> graph = generate_directed_graph(bad, 1);
    EXPECT_EQ(graph.status().code(), StatusCode::kInvalidArgument) << bad << ": " << graph.status().to_string();
  }
  EXPECT_EQ(generate_directed_graph("mesh2d:50000x50000", 1).status().code(), StatusCode::kResourceExhausted);
  // 2^30 vertices with 1024 edges each: 2^40 edges cannot fit anywhere this test runs.
  Result<DirectedGraph> huge = generate_directed_graph("rmat:30:1024", 1);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().to_string();
}

}  // namespace
}  // namespace tessera::graphdata
