#include "tessera/graph/part.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "graph_fixtures.hpp"

namespace tessera::graph {
namespace {

using fixtures::make_graph;

std::vector<int32_t> contiguous_placement(int64_t vertex_count, uint32_t parts) {
  std::vector<int32_t> part_of(static_cast<std::size_t>(vertex_count));
  for (std::size_t v = 0; v < part_of.size(); ++v) {
    part_of[v] = static_cast<int32_t>(v * parts / part_of.size());
  }
  return part_of;
}

using GlobalEdge = std::tuple<uint32_t, uint32_t, double>;

std::vector<GlobalEdge> global_edges(const graphdata::DirectedGraph& graph) {
  std::vector<GlobalEdge> edges;
  for (uint32_t u = 0; u < graph.vertex_count; ++u) {
    for (uint64_t e = graph.offsets[u]; e < graph.offsets[u + 1]; ++e) {
      edges.emplace_back(u, graph.targets[e], graph.weighted() ? graph.weights[e] : 1.0);
    }
  }
  std::sort(edges.begin(), edges.end());
  return edges;
}

// Checks every invariant of build_parts' output against the global graph and placement.
void expect_parts_cover(const graphdata::DirectedGraph& graph, const Placement& placement,
                        const std::vector<GraphPart>& parts, const std::vector<double>& value,
                        const std::vector<double>& delta) {
  ASSERT_EQ(parts.size(), placement.part_count);
  std::vector<int> owned_times(static_cast<std::size_t>(graph.vertex_count), 0);
  std::vector<GlobalEdge> edges;
  for (uint32_t p = 0; p < parts.size(); ++p) {
    const GraphPart& part = parts[p];
    SCOPED_TRACE("part " + std::to_string(p));
    ASSERT_TRUE(part.validate().is_ok()) << part.validate().to_string();
    EXPECT_EQ(part.part_index, p);
    EXPECT_EQ(part.part_count, placement.part_count);
    ASSERT_EQ(part.local_count, placement.vertices[p].size());
    EXPECT_EQ(part.weights.size(), graph.weighted() ? part.targets.size() : 0u);
    // Ghosts: another owner, deduplicated, in (owner, slot) order, and each names the right slot.
    for (std::size_t g = 0; g < part.ghosts.size(); ++g) {
      EXPECT_NE(part.ghosts[g].owner, p);
      ASSERT_LT(part.ghosts[g].slot, placement.vertices[part.ghosts[g].owner].size());
      if (g > 0) {
        EXPECT_LT(std::tie(part.ghosts[g - 1].owner, part.ghosts[g - 1].slot),
                  std::tie(part.ghosts[g].owner, part.ghosts[g].slot));
      }
    }
    std::vector<bool> ghost_used(part.ghosts.size(), false);
    for (uint32_t s = 0; s < part.local_count; ++s) {
      const uint32_t v = placement.vertices[p][s];
      ++owned_times[v];
      EXPECT_EQ(placement.part_of[v], static_cast<int32_t>(p));
      EXPECT_EQ(placement.slot_of[v], s);
      if (s > 0) {
        EXPECT_LT(placement.vertices[p][s - 1], v) << "owned vertices ascend";
      }
      EXPECT_EQ(part.value[s], value[v]);
      EXPECT_EQ(part.delta[s], delta[v]);
      for (uint64_t e = part.offsets[s]; e < part.offsets[s + 1]; ++e) {
        if (e > part.offsets[s]) {
          EXPECT_LE(part.targets[e - 1], part.targets[e]) << "targets in slot order";
        }
        const uint32_t t = part.targets[e];
        uint32_t w = 0;
        if (t < part.local_count) {
          w = placement.vertices[p][t];
        } else {
          const GhostRef& ghost = part.ghosts[t - part.local_count];
          ghost_used[t - part.local_count] = true;
          w = placement.vertices[ghost.owner][ghost.slot];
        }
        edges.emplace_back(v, w, part.weights.empty() ? 1.0 : part.weights[e]);
      }
    }
    EXPECT_TRUE(std::all_of(ghost_used.begin(), ghost_used.end(), std::identity())) << "every ghost is a target";
  }
  EXPECT_TRUE(std::all_of(owned_times.begin(), owned_times.end(), [](int times) { return times == 1; }))
      << "every vertex owned exactly once";
  std::sort(edges.begin(), edges.end());
  EXPECT_EQ(edges, global_edges(graph)) << "every edge exactly once, with its weight";
}

TEST(Placement, SlotsAscendPerPart) {
  const std::vector<int32_t> part_of = {2, 0, 2, 1, 0, 2};
  const Placement placement = make_placement(part_of, 4);
  EXPECT_EQ(placement.part_count, 4u);
  EXPECT_EQ(placement.vertices, (std::vector<std::vector<uint32_t>>{{1, 4}, {3}, {0, 2, 5}, {}}));
  EXPECT_EQ(placement.slot_of, (std::vector<uint32_t>{0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(placement.part_of, part_of);
}

TEST(BuildParts, EveryVertexAndEdgeOnceUnderManyPlacements) {
  const std::vector<graphdata::DirectedGraph> graphs = {
      fixtures::awkward_graph(), fixtures::random_graph(200, 1500, 3, true), fixtures::random_graph(97, 400, 5, false),
      fixtures::directed_cycle(5), make_graph(0, {})};
  for (const graphdata::DirectedGraph& graph : graphs) {
    std::vector<double> value(static_cast<std::size_t>(graph.vertex_count));
    std::vector<double> delta(value.size());
    for (std::size_t v = 0; v < value.size(); ++v) {
      value[v] = static_cast<double>(v) * 0.5;
      delta[v] = -static_cast<double>(v);
    }
    for (uint32_t parts : {1u, 2u, 3u, 7u}) {
      for (const auto& part_of : {fixtures::scattered_placement(graph.vertex_count, parts),
                                  contiguous_placement(graph.vertex_count, parts)}) {
        SCOPED_TRACE(std::to_string(graph.vertex_count) + " vertices, " + std::to_string(parts) + " parts");
        const Placement placement = make_placement(part_of, parts);
        expect_parts_cover(graph, placement, build_parts(graph, placement, value, delta), value, delta);
      }
    }
  }
}

TEST(BuildParts, OnePartHasNoGhostsAndKeepsTheGraph) {
  const graphdata::DirectedGraph graph = fixtures::awkward_graph();
  const std::vector<double> zeros(static_cast<std::size_t>(graph.vertex_count), 0.0);
  const std::vector<GraphPart> parts = build_parts(graph, make_placement(std::vector<int32_t>(zeros.size(), 0), 1),
                                                   zeros, zeros);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_TRUE(parts[0].ghosts.empty());
  EXPECT_EQ(parts[0].offsets, graph.offsets);
  EXPECT_EQ(parts[0].targets, graph.targets);
  EXPECT_EQ(parts[0].weights, graph.weights);
}

TEST(BuildParts, GhostsAreSharedByEveryEdgeToTheSameVertex) {
  // 0 and 1 in part 0 both point at 2 and 3 in part 1: two ghosts, four edges.
  const graphdata::DirectedGraph graph = make_graph(4, {{0, 2}, {0, 3}, {1, 3}, {1, 2}, {1, 2}});
  const std::vector<double> zeros(4, 0.0);
  const std::vector<GraphPart> parts = build_parts(graph, make_placement(std::vector<int32_t>{0, 0, 1, 1}, 2), zeros, zeros);
  EXPECT_EQ(parts[0].ghosts, (std::vector<GhostRef>{{1, 0}, {1, 1}}));
  EXPECT_EQ(parts[0].targets, (std::vector<uint32_t>{2, 3, 2, 2, 3}));
  EXPECT_TRUE(parts[1].ghosts.empty());
  EXPECT_EQ(parts[1].edge_count(), 0u);
}

TEST(ScatterValues, RoundTripsThroughParts) {
  const graphdata::DirectedGraph graph = fixtures::random_graph(50, 200, 9, false);
  const Placement placement = make_placement(fixtures::scattered_placement(50, 3), 3);
  std::vector<double> value(50);
  for (std::size_t v = 0; v < value.size(); ++v) value[v] = static_cast<double>(v * v);
  const std::vector<GraphPart> parts = build_parts(graph, placement, value, std::vector<double>(50, 0.0));
  std::vector<double> gathered(50, -1.0);
  for (uint32_t p = 0; p < 3; ++p) scatter_values(placement, p, parts[p].value, gathered);
  EXPECT_EQ(gathered, value);
}

TEST(GraphPart, MemoryBytesCountsTheArrays) {
  const graphdata::DirectedGraph small = fixtures::random_graph(100, 100, 1, true);
  const graphdata::DirectedGraph large = fixtures::random_graph(100, 10000, 1, true);
  const std::vector<double> zeros(100, 0.0);
  const Placement placement = make_placement(std::vector<int32_t>(100, 0), 1);
  const uint64_t small_bytes = build_parts(small, placement, zeros, zeros)[0].memory_bytes();
  const uint64_t large_bytes = build_parts(large, placement, zeros, zeros)[0].memory_bytes();
  // 4 bytes of target and 8 of weight per edge.
  EXPECT_EQ(large_bytes - small_bytes, 9900u * 12u);
  EXPECT_GE(small_bytes, 100u * 12u + 101u * 8u + 100u * 16u);
}

GraphPart valid_part() {
  // Part 1 of 3: slots 0..2, ghosts 3 (part 0 slot 4) and 4 (part 2 slot 0).
  GraphPart part;
  part.part_index = 1;
  part.part_count = 3;
  part.local_count = 3;
  part.offsets = {0, 2, 2, 4};
  part.targets = {1, 3, 0, 4};
  part.weights = {1.0, 0.0, 2.5, 1.0};
  part.ghosts = {{0, 4}, {2, 0}};
  part.value = {0.0, 1.0, std::numeric_limits<double>::infinity()};
  part.delta = {0.5, 0.0, 0.25};
  return part;
}

TEST(GraphPartValidate, AcceptsAValidPartAndEmptyOnes) {
  EXPECT_TRUE(valid_part().validate().is_ok()) << valid_part().validate().to_string();
  GraphPart empty;
  empty.offsets = {0};
  EXPECT_TRUE(empty.validate().is_ok()) << empty.validate().to_string();
}

TEST(GraphPartValidate, RefusesEachCorruptionNamingIt) {
  struct Corruption {
    std::string name;
    std::function<void(GraphPart&)> apply;
    std::string expected;  // a piece of the message
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Corruption> corruptions = {
      {"no parts", [](GraphPart& p) { p.part_count = 0; }, "part count is 0"},
      {"index beyond count", [](GraphPart& p) { p.part_index = 3; }, "part index 3 is not below the part count 3"},
      {"offsets missing", [](GraphPart& p) { p.offsets.clear(); }, "0 offsets for 3 vertices"},
      {"offsets short", [](GraphPart& p) { p.offsets.pop_back(); }, "3 offsets for 3 vertices"},
      {"offsets start late", [](GraphPart& p) { p.offsets[0] = 1; }, "offsets[0] is 1"},
      {"offsets decrease", [](GraphPart& p) { p.offsets[2] = 1; }, "offsets decrease at slot 1"},
      {"offsets overrun", [](GraphPart& p) { p.offsets[3] = 5; }, "offsets end at 5 but there are 4 edge targets"},
      {"weights short", [](GraphPart& p) { p.weights.pop_back(); }, "3 weights for 4 edges"},
      {"weight NaN", [nan](GraphPart& p) { p.weights[2] = nan; }, "edge 2 has weight nan"},
      {"weight infinite", [](GraphPart& p) { p.weights[0] = std::numeric_limits<double>::infinity(); },
       "edge 0 has weight inf"},
      {"target beyond ghosts", [](GraphPart& p) { p.targets[3] = 5; }, "edge 3 targets slot 5 but the part has 5 slots"},
      {"target huge", [](GraphPart& p) { p.targets[0] = 0xffffffffu; }, "edge 0 targets slot 4294967295"},
      {"ghost owned by itself", [](GraphPart& p) { p.ghosts[0].owner = 1; }, "ghost 0 names owner part 1"},
      {"ghost owner beyond count", [](GraphPart& p) { p.ghosts[1].owner = 9; }, "ghost 1 names owner part 9"},
      {"values short", [](GraphPart& p) { p.value.pop_back(); }, "2 values and 3 deltas for 3 vertices"},
      {"deltas long", [](GraphPart& p) { p.delta.push_back(0.0); }, "3 values and 4 deltas"},
      {"value NaN", [nan](GraphPart& p) { p.value[1] = nan; }, "slot 1 has value nan"},
      {"delta NaN", [nan](GraphPart& p) { p.delta[2] = nan; }, "slot 2 has value inf and delta nan"},
      {"local count lies", [](GraphPart& p) { p.local_count = 1000000; }, "offsets for 1000000 vertices"},
      {"slot range overflows", [](GraphPart& p) { p.local_count = 0xffffffffu; }, "exceed the 32-bit slot range"},
  };
  for (const Corruption& corruption : corruptions) {
    GraphPart part = valid_part();
    corruption.apply(part);
    const Status status = part.validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << corruption.name;
    EXPECT_NE(status.message().find(corruption.expected), std::string::npos)
        << corruption.name << ": " << status.message();
    EXPECT_EQ(status.message().rfind("graph part ", 0), 0u) << status.message();
  }
}

TEST(GraphPartValidate, NeverCrashesOnArbitraryContent) {
  // Every single-field mutation of every array to a set of hostile values: validate answers
  // (OK or a message) without touching memory out of range (ASan/UBSan builds catch that).
  const std::vector<uint64_t> hostile_offsets = {0, 1, 3, 4, 5, 0xffffffffULL, ~0ULL};
  const std::vector<uint32_t> hostile_slots = {0, 2, 3, 4, 5, 0x7fffffffu, 0xffffffffu};
  int refused = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    for (uint64_t offset : hostile_offsets) {
      GraphPart part = valid_part();
      part.offsets[i] = offset;
      refused += part.validate().is_ok() ? 0 : 1;
    }
    for (uint32_t slot : hostile_slots) {
      GraphPart part = valid_part();
      part.targets[i] = slot;
      refused += part.validate().is_ok() ? 0 : 1;
      part = valid_part();
      part.ghosts[i % 2] = {slot, slot};
      refused += part.validate().is_ok() ? 0 : 1;
      part = valid_part();
      part.local_count = slot;
      refused += part.validate().is_ok() ? 0 : 1;
    }
  }
  EXPECT_GT(refused, 40);
}

}  // namespace
}  // namespace tessera::graph
