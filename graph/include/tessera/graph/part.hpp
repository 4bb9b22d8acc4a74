// GraphPart: the piece of a directed graph one worker owns, in the worker's own numbering.
//
// A worker owns `local_count` vertices (slots 0 .. local_count-1) with ALL their out-edges. An
// edge's target is a slot: < local_count for an owned vertex, local_count + g for ghost g, a
// vertex owned by another part, known by (owner part, its slot there). Updates accumulate into
// ghost slots like into owned ones; the engine ships a ghost's accumulated delta to its owner in
// batches. The coordinator builds every part from the global graph and a placement (build_parts)
// and keeps the mapping back to global ids (Placement).
// Values; thread-compatible.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::graph {

struct GhostRef {
  uint32_t owner = 0;  // part index
  uint32_t slot = 0;   // the vertex's slot in its owner's part
  bool operator==(const GhostRef&) const = default;
};

struct GraphPart {
  uint32_t part_index = 0;
  uint32_t part_count = 1;
  uint32_t local_count = 0;
  std::vector<uint64_t> offsets;  // local_count + 1
  std::vector<uint32_t> targets;  // slots, one per edge
  std::vector<double> weights;    // empty (unweighted) or one per edge
  std::vector<GhostRef> ghosts;   // ghost slot local_count + g is ghosts[g]
  std::vector<double> value;      // v of each owned vertex (local_count)
  std::vector<double> delta;      // dv of each owned vertex (local_count)

  uint64_t edge_count() const { return targets.size(); }
  // Bytes the part's arrays take (what the worker holds per run, before the engine's own state).
  uint64_t memory_bytes() const;
  // Checks every invariant above (sizes, offsets monotone, slots in range, ghost owners != own
  // index and < part_count, finite weights). Workers call it on what they receive; kInvalidArgument
  // names the first violation.
  Status validate() const;
  bool operator==(const GraphPart&) const = default;
};

// Which part owns each vertex and its slot there.
struct Placement {
  uint32_t part_count = 0;
  std::vector<int32_t> part_of;                 // per global vertex
  std::vector<uint32_t> slot_of;                // per global vertex: slot in its part
  std::vector<std::vector<uint32_t>> vertices;  // per part: global ids in slot order (ascending)
  bool operator==(const Placement&) const = default;
};

// REQUIRES: part_of.size() == vertex_count, every entry in [0, part_count). Parts may be empty.
Placement make_placement(std::span<const int32_t> part_of, uint32_t part_count);

// One GraphPart per part of `placement`, with the state's values and deltas of its vertices.
// REQUIRES: state sizes == graph.vertex_count == placement.part_of.size().
std::vector<GraphPart> build_parts(const graphdata::DirectedGraph& graph, const Placement& placement,
                                   std::span<const double> value, std::span<const double> delta);

// Part `part` alone, as build_parts makes it: O(V) scratch plus the part's own edges, so the
// driver builds each part on the thread that ships it, the parts in parallel. Thread-safe for
// concurrent calls on one graph and placement.
GraphPart build_part(const graphdata::DirectedGraph& graph, const Placement& placement, uint32_t part,
                     std::span<const double> value, std::span<const double> delta);

// Scatters a part's values (slot order) back into a global vector.
void scatter_values(const Placement& placement, uint32_t part, std::span<const double> part_values,
                    std::span<double> global_values);

}  // namespace tessera::graph
