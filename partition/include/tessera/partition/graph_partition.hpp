// Graph partitioning with target part weights: part i should get target_i of the total vertex
// weight (node i's share of the cluster's speed) while cutting as few edges as possible.
//
// Methods (PartitionMethod, parsed from "metis" | "contiguous" | "chunks" | "fennel" | "hash"):
//   metis       METIS 5 multilevel k-way (METIS_PartGraphKway) with tpwgts = the targets;
//   contiguous  proportional blocks in vertex order (row_partition.hpp's proportional_rows applied
//               to the vertex weights), the baseline for inputs whose order already has locality;
//   chunks      Gemini's chunking (Zhu et al., OSDI 2016): contiguous blocks in vertex order whose
//               cost alpha * vertex weight + adjacency entries follows the targets, alpha =
//               8 * (parts with target > 0 - 1) as in Gemini. O(V + E), no state beyond the output;
//   fennel      one-pass streaming Fennel (Tsourakakis et al., WSDM 2014) in vertex order: v goes
//               to argmax_i w(N(v) in P_i) - alpha * gamma * (W_i / (k * t_i))^(gamma - 1), gamma
//               1.5, alpha = sqrt(k) * m / n^1.5, with a hard cap W_i + w(v) <= imbalance * t_i * W
//               (W_i the part's vertex weight, t_i its target, k the parts with target > 0).
//               O(V * k + E);
//   hash        each vertex to a part drawn from the targets by a seeded hash: balanced only in
//               expectation, the "random partition" baseline.
// partition_graph checks its inputs, runs the method, and checks the output (every vertex in
// exactly one part in range, parts with target 0 empty) before computing the quality, so a wrong
// result is an error, not a silent bad plan. It handles METIS' traps itself rather than calling
// METIS where METIS crashes or errs; Partition::note says which one applied:
//   - one part with target > 0: METIS 5.1 is not called (nparts = 1 crashes or errs in some
//     builds); everything goes to that part;
//   - zero-target parts are left out of the METIS call (a tpwgts entry of 0 is invalid there) and
//     the remaining parts are renumbered 0..k-1 for METIS and mapped back;
//   - no vertices: an empty partition; no edges, or no more vertices than parts: METIS is not
//     called (it errs or leaves parts empty), vertices are placed greedily, heaviest first, each
//     on the part left furthest below its target; nothing is cut either way;
//   - parts whose share is below one unit of vertex weight are left out of the METIS call too
//     (METIS' recursive bisection would split off an empty subgraph for them, print "***Cannot
//     bisect a graph with 0 vertices!" and leave parts empty at random), unless no part reaches
//     one unit; if METIS still leaves a part empty (it does on tiny graphs), the greedy placement
//     replaces its result;
//   - targets are normalised and rounded to METIS' 32-bit floats so their float sum is exactly 1
//     (METIS rejects tpwgts whose sum is off);
//   - a graph whose vertex weights are all 0 is partitioned as if every vertex weighed 1;
//   - a METIS error code becomes a Status (metis_status).
// METIS calls are serialised by a process-wide mutex (METIS 5.1 does not document thread safety),
// so partition_graph is thread-safe; the other methods run concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::partition {

enum class PartitionMethod { kMetis, kContiguous, kHash, kChunks, kFennel };
enum class Objective { kCut, kVolume };

// Unknown names fail (kInvalidArgument) listing the valid ones.
Result<PartitionMethod> parse_partition_method(std::string_view name);
Result<Objective> parse_objective(std::string_view name);
std::string_view method_name(PartitionMethod method);
std::string_view objective_name(Objective objective);

struct PartitionOptions {
  PartitionMethod method = PartitionMethod::kMetis;
  // One per part, >= 0, finite, not all 0; normalised to sum 1. A part with weight 0 gets nothing.
  std::vector<double> target_weights;
  // Allowed max over parts of weight / (target * total), >= 1. Default 1.03 (3%). METIS takes it
  // in thousandths: ufactor = round((imbalance - 1) * 1000), so 1.0305 and 1.03 are the same.
  // metis aims for it and fennel caps every part at it; contiguous is within one vertex of the
  // target by construction, chunks within one vertex of the target in its own cost (vertex weight
  // and edges, so the vertex weights alone may be further off on skewed degrees), and hash is not
  // balanced at all.
  double imbalance = 1.03;
  Objective objective = Objective::kCut;  // metis only: minimise edge cut or communication volume
  uint64_t seed = 1;  // metis: METIS_OPTION_SEED (seed mod 2^31); hash: the hash key
};

struct PartQuality {
  double target = 0;       // normalised target share, 0..1
  int64_t weight = 0;      // sum of the part's vertex weights
  int64_t vertices = 0;
  bool operator==(const PartQuality&) const = default;
};

struct PartitionQuality {
  std::vector<PartQuality> parts;  // one per target weight, in order
  int64_t total_weight = 0;
  // Max over parts with target > 0 of weight / (target * total_weight): 1 is perfect, 1.03 is 3%
  // over on the worst part; METIS' own definition, so it is what `imbalance` bounds. 1 when the
  // graph has no weight.
  double imbalance = 1;
  // Max over parts with target > 0 of |weight - target * total| / (target * total): also counts
  // parts left under their target.
  double max_target_deviation = 0;
  int64_t edge_cut = 0;     // sum of weights of edges whose ends are in different parts
  // Sum over vertices of the number of OTHER parts among its neighbours: the values a vertex's
  // part must send per iteration of a neighbour exchange (METIS' totalv with unit sizes).
  int64_t comm_volume = 0;
  bool operator==(const PartitionQuality&) const = default;
};

struct Partition {
  std::vector<int32_t> part;  // part of each vertex, 0 .. target_weights.size()-1
  PartitionQuality quality;
  std::string note;           // which trap handling applied (see the file comment), or empty
  bool operator==(const Partition&) const = default;
};

// Partitions `graph` as `options` say. Fails (kInvalidArgument) on bad targets or imbalance < 1 or
// not finite; (kInternal) if METIS fails or a method breaks the output invariants.
Result<Partition> partition_graph(const graphdata::Graph& graph, const PartitionOptions& options);

// Quality of any assignment. Fails (kInvalidArgument) when `part` has the wrong length or a part
// outside 0 .. targets.size()-1, or the targets are invalid.
Result<PartitionQuality> evaluate_partition(const graphdata::Graph& graph, std::span<const int32_t> part,
                                            std::span<const double> target_weights);

// METIS' return codes as a Status naming the call: METIS_OK -> OK, METIS_ERROR_INPUT ->
// kInvalidArgument, METIS_ERROR_MEMORY -> kResourceExhausted, METIS_ERROR and unknown -> kInternal.
Status metis_status(int metis_code, std::string_view call);

}  // namespace tessera::partition
