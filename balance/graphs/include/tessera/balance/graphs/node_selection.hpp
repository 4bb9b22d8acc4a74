// What the graph driver hands the placement model: the shape of each part a placement makes
// (edges, ghosts, peers), the workload estimate when no past run on the graph says better, and
// the candidate sets of nodes, and the choice itself (select_and_place). Used by the driver;
// public so that its pieces are tested on hand-made graphs. Pure functions of values, thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/graphs/run_memory.hpp"
#include "tessera/balance/graphs/graph_placement.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance::graphs {

// Part shapes of `part_of` (one entry per vertex of `graph`, in [0, parts)) and the number of
// directed edges whose ends lie in different parts.
struct PlacementShape {
  std::vector<graphs::GraphPartShape> parts;
  int64_t cut_edges = 0;
};
PlacementShape placement_shape(const graphdata::DirectedGraph& graph, std::span<const int32_t> part_of, uint32_t parts);

// Sweeps per edge when no run on this graph measured them: the synchronous steps the series needs
// to fall below the tolerance (pagerank: (1 - d) d^k <= tol; katz: beta-series alike), times 0.6,
// since asynchronous Gauss-Seidel sweeps use each delta as soon as it arrives and need fewer
// updates than Jacobi steps (async_rounds.hpp); 2 for cc and sssp (most labels settle in one or
// two waves on low-diameter graphs). Remote deltas add `spread_per_cut` per unit of cut fraction.
// Each is a starting guess that the run memory replaces with the graph's own figures.
graphs::GraphWorkload default_workload(const graph::AlgorithmSpec& spec, double tolerance,
                                      const graphdata::DirectedGraph& graph, double poll_interval_s);

// The candidate node sets of `auto`: among `usable` (cluster indices), the fastest alone, the
// fastest two, ..., all (graphs::nodes_by_graph_speed order).
std::vector<std::vector<std::size_t>> candidate_sets(const std::vector<graphs::GraphNodeCosts>& costs,
                                                     const std::vector<std::size_t>& usable);

// The nodes of the run and its first placement, chosen as options.nodes says (NodeChoice), with
// options.method or, with choose_method, the method the forecast prefers.
struct SelectionInput {
  const graphdata::DirectedGraph& graph;  // what the algorithm runs on
  const graphdata::Graph& placement_graph;
  std::vector<std::string> node_names;    // cluster order
  const GraphRunOptions& options;
  double tolerance = 0.0;
  std::string memory_path;  // run_memory_path of this graph and algorithm; empty: no memory
  uint64_t graph_hash = 0;  // partition::graph_content_hash(placement_graph), when cache_dir is set
};
struct Selection {
  std::vector<std::size_t> nodes;  // cluster indices, ascending: part i is nodes[i]
  std::vector<double> weights;     // target weight of each part
  partition::Partition partition;  // over nodes.size() parts
  partition::PartitionMethod method = partition::PartitionMethod::kMetis;  // for later placements
  NodeChoiceRecord record;
  PlacementRecord placing;
  // What the forecast used, for learning from the run (remember).
  RunMemory memory;
  std::vector<graphs::GraphNodeCosts> costs;  // the options' costs with remembered edge rates
  std::vector<graphs::GraphNodeCosts> share_costs;  // whose rates size the shares of several parts
  graphs::GraphWorkload workload;
  graphs::GraphCandidate candidate;           // the chosen set as placed
  std::optional<double> metis_seconds;       // METIS ran (not read from the cache) and took this
  std::map<std::string, RunMemory::Shape> shapes;  // placements weighed this run (shape_key)
};
// Fails (kInvalidArgument) naming a listed node the cluster lacks, or a weights list of the wrong
// length; partitioning failures as partition_graph's.
Result<Selection> select_and_place(const SelectionInput& input);

// How the run's vertices are partitioned with `method` among parts weighing `weights`: the run's
// imbalance and seed; one part takes everything by the contiguous method (METIS is never asked for
// one part). Every placement of a run, the first and those after a loss, is made with these.
partition::PartitionOptions placement_options(const GraphRunOptions& run, partition::PartitionMethod method,
                                              const std::vector<double>& weights);

// The target weights of `nodes` (cluster indices): with options.weights_from_rates each node's
// edge updates per second in `costs` (the profile's, or what past runs on the graph measured),
// else the explicit weights of those nodes, or equal. All zero: equal.
std::vector<double> target_weights_of(const GraphRunOptions& options, const std::vector<graphs::GraphNodeCosts>& costs,
                                      const std::vector<std::size_t>& nodes);

}  // namespace tessera::balance::graphs
