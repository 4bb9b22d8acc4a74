// What past runs measured on one graph, kept in the placement cache's folder so that the next
// forecast on the same graph starts from measurements instead of estimates: the sweeps per edge
// one node alone needed, the extra sweeps several parts needed per unit of cut fraction, the share
// of ghost vertices that carried a delta at a flush, each node's edge updates per second on this
// graph (measured alone), how much more than the profile's figures its remote deltas cost it
// (measured with others), what each node set took beyond its forecast and the shares its runs
// taught, and how long METIS took per edge. Keyed by the graph's content hash, the algorithm and
// the tolerance and the mode. A file that is missing, unreadable or malformed is an empty memory (a hint, never
// trusted); saving writes a temporary file and renames it. Used by the driver; values and free
// functions, thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/graphs/graph_placement.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"

namespace tessera::balance::graphs {

struct RunMemory {
  std::optional<double> updates_per_edge_alone;
  std::optional<double> spread_per_cut;
  // The last run on several parts: its sweeps per edge and cut fraction, from which spread_per_cut
  // follows once a run alone has measured the sweeps without remote deltas.
  std::optional<double> updates_per_edge_spread;
  std::optional<double> spread_cut_fraction;
  std::optional<double> delta_fraction;
  std::optional<double> metis_s_per_edge;
  // Seconds runs took beyond their forecast, alone and on several nodes (smoothed), and per node
  // set (set_key): a set that ran before is forecast with its own figure, the others with these.
  std::optional<double> extra_alone_s;
  std::optional<double> extra_several_s;
  std::map<std::string, double> extra_by_set;
  // Node name -> edge updates per second on this graph, measured while it ran alone: with others,
  // its busy time also holds deltas and the re-sweeps they cause, which delta_cost_scale carries.
  std::map<std::string, double> edge_updates_per_s;
  // Node name -> edge updates per second of its busy time less its deltas at the profile's costs,
  // measured with others: what a share of several parts should be sized by (a Pi busy mostly with
  // remote deltas takes a smaller share next time).
  std::map<std::string, double> share_edge_updates_per_s;
  // Node name -> how many times the profile's per-delta and per-batch costs its remote deltas
  // took in runs with others (busy time less its edge updates at its rate, over what the profile's
  // costs give for the deltas and batches it sent and received; smoothed geometrically). The
  // probe measures a delta's encoding and folding; a run adds the sweeps that small batches start.
  std::map<std::string, double> delta_cost_scale;
  // Node set (set_key) -> the target shares its next run takes (sum 1, the set's order), learned
  // from its runs by shares_for_equal_need: a set that ran before is sized by the time its nodes
  // needed rather than by their edge rates alone.
  std::map<std::string, std::vector<double>> shares_by_set;
  // The shapes of the placements candidate sets were weighed with (shape_key), so that the next
  // run weighs them without placing anything.
  struct Shape {
    int64_t cut_edges = 0;
    std::vector<graphs::GraphPartShape> parts;
    std::vector<double> shares;  // the parts' target shares it was made with (sum 1)
    bool operator==(const Shape&) const = default;
    // The shape for other shares: each part's vertices and edges scaled by its share's change,
    // its ghosts and the cut by the change of s (1 - s) (edge rates move the shares from run to
    // run, and the shares a node set's runs teach move them further; weighing a set needs the
    // shape, not the placement). REQUIRES: shares.size() == parts.size().
    Shape rescaled(const std::vector<double>& new_shares) const;
  };
  std::map<std::string, Shape> shapes;
  bool operator==(const RunMemory&) const = default;
};

// The key of a candidate's placement in RunMemory::shapes: its method and nodes (one shape per
// set, the latest, with the shares it was made with).
std::string shape_key(std::string_view method, const std::vector<std::string>& nodes);

// `weights` normalised to sum 1 (equal shares when they sum to 0).
std::vector<double> shares_of(const std::vector<double>& weights);

// The key of a node set in RunMemory::extra_by_set.
std::string set_key(const std::vector<std::string>& nodes);

// "<dir>/run-<hash>-<algorithm>-<mode>-<the algorithm's parameters>.json"; empty when dir is empty.
std::string run_memory_path(const std::string& dir, uint64_t graph_hash, const graph::AlgorithmSpec& spec, double tolerance,
                            std::string_view mode);

// The memory at `path`; empty when there is none or it cannot be read (the reason in `note`).
RunMemory load_run_memory(const std::string& path, std::string* note = nullptr);
Status save_run_memory(const std::string& path, const RunMemory& memory);

// `workload` with what the memory measured in place of the estimates; `source` says which.
graphs::GraphWorkload remembered_workload(graphs::GraphWorkload workload, const RunMemory& memory, std::string& source);

// The memory after a run: `parts` parts (1: alone), `updates_per_edge` and `cut_fraction` as
// measured, each node's edge rate, the ghosts' share sending, METIS' time per edge if it ran.
struct RunMeasurement {
  std::size_t parts = 1;
  double updates_per_edge = 0.0;
  double cut_fraction = 0.0;
  std::optional<double> delta_fraction;
  std::map<std::string, double> edge_updates_per_s;  // only from a run alone (see RunMemory)
  std::map<std::string, double> share_edge_updates_per_s;  // only from a run with others
  std::map<std::string, double> delta_cost_scale;    // only from a run with others
  std::optional<double> metis_s_per_edge;
  std::map<std::string, RunMemory::Shape> shapes;  // weighed this run
  std::optional<double> extra_s;  // measured total less the forecast without any extra
  std::vector<double> next_shares;  // shares_for_equal_need of the run, for its set; empty: none
  std::string set_key;            // the nodes that ran (set_key())
};
RunMemory remember(RunMemory memory, const RunMeasurement& run);

// One node's part of a run of several parts, as the shares learn from it.
struct PartRun {
  double share = 0.0;  // its target share (the set's shares sum to 1)
  int64_t edges = 0;   // of its part
  double edge_updates = 0.0;
  double busy_s = 0.0;
};
// The shares the set's next run should take so that its nodes need the same time. A node's need is
// its busy time, less the sweeps per edge it made beyond the least-sweeping part's: a node done
// early keeps re-sweeping its part with each batch the slower ones send, which no share needs (a
// fast node given too small a share re-sweeps while nodes slowed by their remote deltas set the
// pace; given more, it sweeps less per edge and the run ends sooner). Each share moves toward
// share / need (normalised), halfway (geometric mean) and by at most a factor of 2, so that one
// noisy run does not swing the next. Empty when a part has no edges, updates or busy time, or
// there is a single part.
std::vector<double> shares_for_equal_need(const std::vector<PartRun>& parts);

// Node costs as forecasts read them: each node's edge rate on this graph where it ran it alone,
// else its profiled rate times what this graph's edges cost against the probe (the median over the
// nodes that ran it alone); its rate beside others (edge_updates_per_s_with_others) where a run
// with others measured one, which forecasts of several nodes use; its delta costs scaled where
// the memory has a scale.
std::vector<graphs::GraphNodeCosts> remembered_costs(std::vector<graphs::GraphNodeCosts> costs, const RunMemory& memory);
// Node costs whose edge rates size the shares of several parts: each node's rate measured with
// others where the memory has one (within a band around the profile's), else its forecast rate.
std::vector<graphs::GraphNodeCosts> remembered_share_costs(std::vector<graphs::GraphNodeCosts> costs, const RunMemory& memory);

}  // namespace tessera::balance::graphs
