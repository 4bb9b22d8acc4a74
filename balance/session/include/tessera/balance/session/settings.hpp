// The options of a multiply, of a graph run and of a profile measurement as the front ends take
// them: by name ("proportional", "2d", "async"), every default defined here once and every check
// made here once. The `tessera` CLI
// binds its flags to these fields and the Python module its keyword arguments (its signatures
// read the defaults from a default-constructed value at import time), so a default or a check
// cannot differ between the two. The resolved values the facade runs with are MultiplyOptions
// (session.hpp) and graphs::GraphRunOptions; each default here is read from those.
//
// A failed check names the option through the caller's OptionSpelling, so the CLI says
// `--refill 9 must be between 1 and --panels-in-flight 4` and Python `refill_threshold=9 must be
// between 1 and panels_in_flight=4` from the same code. Plain values and pure functions: no I/O,
// thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::balance::session {

// How a front end writes an option, given the option's field id (the field's name in the
// structs below, e.g. "refill_threshold"). kFlag: `--refill-threshold`, `--refill-threshold 9`;
// kKeyword: `refill_threshold`, `refill_threshold=9`, text values quoted (`policy="even"`).
// `renamed` maps a field id to the front end's own name where it differs ("refill_threshold" ->
// "--refill"; "node_timeout_s" -> "node_timeout").
class OptionSpelling {
 public:
  enum class Style { kFlag, kKeyword };
  explicit OptionSpelling(Style style, std::map<std::string, std::string, std::less<>> renamed = {});

  // The option alone: "--panels-in-flight" | "panels_in_flight".
  std::string name(std::string_view field) const;
  // The option set to `value`: "--policy proportional" | "policy=\"proportional\"" (text) or
  // "panels_in_flight=4".
  std::string assignment(std::string_view field, std::string_view value, bool text = false) const;
  // A switch turned on: "--allow-nonfinite" | "allow_nonfinite=True".
  std::string switched_on(std::string_view field) const;

 private:
  Style style_;
  std::map<std::string, std::string, std::less<>> renamed_;
};

// A multiply's options by name. Defaults: MultiplyOptions{}'s (policy proportional, layout rows,
// verify freivalds, panels of 256 rows of B, 4 in flight, refill at 1 credit back, no explicit
// node timeout), DynamicPolicy{}'s tile rows, overlap on, NaN/inf refused.
struct MultiplySettings {
  std::string policy = std::string(plan::policy_name(plan::policy_kind(MultiplyOptions{}.policy)));
  std::string layout = std::string(partition::layout_name(MultiplyOptions{}.layout));
  // star | chain | auto (MultiplyOptions::distribution unset).
  std::string distribution = "auto";
  std::string verify = std::string(multiply::verify_mode_name(MultiplyOptions{}.verify));
  std::vector<double> weights;  // proportional only, one per node; empty: the profile's speeds
  // Freivalds' random vector (and, in the CLI, the random inputs' seed).
  uint64_t seed = MultiplyOptions{}.verify_seed;
  uint64_t panel_width = MultiplyOptions{}.panel_width;
  uint32_t panels_in_flight = MultiplyOptions{}.panels_in_flight;
  uint32_t refill_threshold = MultiplyOptions{}.refill_threshold;
  // true: panels_in_flight panels travel while the node computes (Tinetti's OvrMsg). false: one
  // panel at a time, sent after the node finished the previous one (SeqMsg); this sets
  // panels_in_flight and refill_threshold to 1.
  bool overlap = true;
  uint64_t tile_rows = plan::DynamicPolicy{}.tile_rows;  // dynamic only; 0: about m / (8 x nodes)
  double node_timeout_s = MultiplyOptions{}.node_timeout_s;  // 0: derived from the profile
  // NaN and infinities in A or B are refused (naming the first) unless this is set; then the
  // product is computed and verification counts matching non-finite entries as equal.
  bool allow_nonfinite = false;
  bool operator==(const MultiplySettings&) const = default;
};

// Bounds of MultiplySettings' queue, checked by resolve_multiply_settings.
inline constexpr uint64_t kMaxPanelWidth = uint64_t{1} << 20;
inline constexpr uint32_t kMaxPanelsInFlight = 1024;

// `settings` checked and resolved for a cluster of `node_count` nodes described by `config_path`
// (named in the weights message). Fails (kInvalidArgument) on an unknown policy, layout or verify
// mode (listing the valid ones), weights with another policy or of the wrong count, a layout the
// policy cannot plan, panel_width outside 1..kMaxPanelWidth, panels_in_flight outside
// 1..kMaxPanelsInFlight, refill_threshold outside 1..panels_in_flight, or node_timeout_s outside
// 0..86400; the message names the option as `spelling` writes it.
Result<MultiplyOptions> resolve_multiply_settings(const MultiplySettings& settings, std::size_t node_count,
                                                  const std::string& config_path, const OptionSpelling& spelling);

// Refuses, before anything more is allocated, a multiply of A (m x k) by B (k x n) whose working
// memory cannot fit in this machine's memory (core/memory.hpp): C unless the caller gives its own
// (`allocates_c` false), the copy of B's pieces the driver encodes, and verification's copies
// (|A| and |B| for the rounding bound; exact also a reference C and its magnitude); and A and B
// themselves unless `inputs_in_memory`, each alone first so that the message names the matrix
// that cannot fit. `remedy` says what to shrink ("; use a smaller --n"); the way out through
// verify is spelled by `spelling`. Saturating: shapes from files can make m x n wrap.
Status check_multiply_memory(uint64_t m, uint64_t n, uint64_t k, multiply::VerifyMode verify, bool inputs_in_memory,
                             bool allocates_c, std::string_view remedy, const OptionSpelling& spelling);

// A's columns against B's rows, before anything is allocated; `a_name` and `b_name` say where
// each came from ("A", or the file it was read from).
Status check_product_shapes(std::string_view a_name, uint64_t a_rows, uint64_t a_cols, std::string_view b_name,
                            uint64_t b_rows, uint64_t b_cols);

// A NaN or infinity in input `name` (read from `source`, a file; empty: given in memory) is
// refused, naming its first cell, unless allow_nonfinite is set: usually it is a bug upstream,
// and a product full of NaN is not what anyone meant to compute.
Status check_finite_input(linalg::MatrixView matrix, std::string_view name, std::string_view source,
                          const OptionSpelling& spelling);

// An expression evaluation's options by name (`tessera eval`, Python's Expression.compute).
// Defaults: EvalOptions{}'s mode, rewriting, tile, node choice and tile route, MultiplySettings{}'
// policy and verify mode.
struct EvalSettings {
  std::string mode = std::string(eval_mode_name(EvalOptions{}.mode));  // scheduled | sequence
  bool rewrite = EvalOptions{}.rewrite;                                // false: as written
  uint64_t tile = EvalOptions{}.tile;            // scheduled: the tile size; 0: chosen by simulation
  std::vector<std::string> nodes;                // scheduled: only these; empty: every node
  bool every_node = EvalOptions{}.every_node;    // scheduled: every node gets tasks
  double cache_mb = EvalOptions{}.cache_bytes / 1e6;  // scheduled: each node's tile cache; 0: half its tile memory
  // scheduled: how tiles move between nodes: auto | direct (worker to worker) | coordinator.
  std::string tile_route = std::string(expr::tile_route_name(EvalOptions{}.tile_route));
  std::string policy = MultiplySettings{}.policy;  // sequence: each product's policy
  std::string verify = MultiplySettings{}.verify;  // the value (scheduled) or each product (sequence)
  bool operator==(const EvalSettings&) const = default;
};

// `settings` checked and resolved. Fails (kInvalidArgument) on an unknown mode, tile route, policy
// or verify mode (listing the valid ones), or cache_mb negative or not finite; the message names the option
// as `spelling` writes it.
Result<EvalOptions> resolve_eval_settings(const EvalSettings& settings, const std::string& config_path,
                                          const OptionSpelling& spelling);

// A graph run's options by name. Defaults: AlgorithmSpec{}'s damping and label, GraphRunOptions{}'s
// mode, placement, seed, intervals, timeouts and priority level, EngineOptions{}' batching.
struct GraphSettings {
  std::string algorithm;  // pagerank | katz | cc | sssp; required
  std::optional<double> tolerance;  // pagerank/katz: sum |pending delta|; none: kDefaultGraphTolerance
  std::optional<int64_t> source;    // sssp (required) and katz (single-source)
  double damping = graph::AlgorithmSpec{}.damping;  // pagerank
  std::optional<double> beta;       // katz, required: below 1/lambda_max
  std::string label = graph::AlgorithmSpec{}.max_label ? "max" : "min";  // cc: max | min
  std::string mode = std::string(graphs::graph_mode_name(graphs::GraphRunOptions{}.mode));
  // auto (default): the locality placement, METIS where the forecast says it pays; or a method name.
  std::string partition = "auto";
  // auto (default): the nodes the graph placement model forecasts fastest; all; or names a,b,c.
  std::string nodes = "auto";
  // Where placements and past runs' figures are kept: empty (default) $XDG_CACHE_HOME/tessera/graphs
  // or ~/.cache/tessera/graphs; "none": nothing is read or written.
  std::string placement_cache;
  uint64_t seed = graphs::GraphRunOptions{}.seed;  // METIS seed, hash key (and generators')
  bool verify = graphs::GraphRunOptions{}.verify;
  uint32_t poll_ms = static_cast<uint32_t>(graphs::GraphRunOptions{}.poll_interval.count());
  uint32_t snapshot_ms = static_cast<uint32_t>(graphs::GraphRunOptions{}.snapshot_interval.count());
  double node_timeout_s = graphs::GraphRunOptions{}.node_timeout_s;
  double max_seconds = graphs::GraphRunOptions{}.max_wall_s;
  double level_fraction = graphs::GraphRunOptions{}.priority_level_fraction;  // 0: off
  double batch_age_ms =
      std::chrono::duration<double, std::milli>(graph::EngineOptions{}.batch_max_age).count();
  uint32_t batch_entries = graph::EngineOptions{}.batch_max_entries;
  double priority_fraction = graph::EngineOptions{}.priority_fraction;
  bool operator==(const GraphSettings&) const = default;
};

// The algorithm of `settings` as a spec. Fails (kInvalidArgument) on no or an unknown algorithm,
// an unknown label, or katz without beta; that message suggests a beta from `graph`'s spectral
// bound. Range checks of the values are check_graph_run's.
Result<graph::AlgorithmSpec> graph_algorithm(const GraphSettings& settings, const graphdata::DirectedGraph& graph,
                                             const OptionSpelling& spelling);

// The whole run's options: graph_algorithm, then mode, placement, tolerance (> 0 and finite for
// pagerank/katz), intervals (>= 1 ms), node_timeout_s in (0, 86400], max_seconds > 0,
// level_fraction in [0, 1], batch_age_ms in [0, 10000], batch_entries in 1..2^24,
// priority_fraction in (0, 1]. Weights and peer hosts are the caller's (they need the file
// system). Fails (kInvalidArgument) naming the option as `spelling` writes it.
Result<graphs::GraphRunOptions> graph_run_options(const GraphSettings& settings,
                                                        const graphdata::DirectedGraph& graph,
                                                        const OptionSpelling& spelling);

// The directory GraphSettings::placement_cache names: "" for none, the default when empty
// (tessera/`kind` in the user's cache folder: graphs, resident).
std::string placement_cache_dir(const std::string& setting, const std::string& kind = "graphs");

// A graph partitioning's options by name (`tessera partition`, Python's tessera.partition).
// Defaults: partition::PartitionOptions{}' method, imbalance, objective and seed.
struct PartitionSettings {
  std::string method = std::string(partition::method_name(partition::PartitionOptions{}.method));
  double imbalance = partition::PartitionOptions{}.imbalance;  // metis: max part weight / target, >= 1
  std::string objective = std::string(partition::objective_name(partition::PartitionOptions{}.objective));
  uint64_t seed = partition::PartitionOptions{}.seed;  // METIS' seed, the hash key, a generator's seed
  bool operator==(const PartitionSettings&) const = default;
};

// `settings` as partition options (the caller sets target_weights). Fails (kInvalidArgument) on an unknown
// method or objective (listing the valid ones), naming the option as `spelling` writes it; the
// weights and the imbalance are checked by partition::partition_graph.
Result<partition::PartitionOptions> resolve_partition_settings(const PartitionSettings& settings,
                                                               const OptionSpelling& spelling);

// How a matrix kept on the nodes is shared out, by name (`tessera iterate`, Python's
// Cluster.scatter). Defaults: PlacementOptions{}'s (balanced and measured, every node, for a
// vector). split: "balanced" | "even".
struct PlacementSettings {
  uint64_t columns = PlacementOptions{}.columns;
  std::vector<std::string> nodes;
  std::string split = "balanced";
  bool measure = PlacementOptions{}.measure;
  uint64_t expected_products = PlacementOptions{}.expected_products;
  // Where measured shares are remembered for the next session: empty (default)
  // $XDG_CACHE_HOME/tessera/resident or ~/.cache/tessera/resident; "none": neither read nor written.
  std::string placement_cache;
  bool operator==(const PlacementSettings&) const = default;
};

// `settings` as placement options; fails (kInvalidArgument) on columns 0 or an unknown split,
// naming the option as `spelling` writes it (the nodes are checked by Session::place_rows).
Result<PlacementOptions> resolve_placement_settings(const PlacementSettings& settings, const OptionSpelling& spelling);

// The measurement options of `tessera profile` and Python's Cluster.profile are
// profile::ProfileOptions itself (its defaults are both front ends'). Checks reference_size within
// 16..8192, window_seconds within 0.05..30 and that every name in only_nodes is a node of
// `cluster` (read from `config_path`); fails (kInvalidArgument) naming the option as `spelling`
// writes it.
Status check_profile_options(const profile::ProfileOptions& options, const cluster::ClusterSpec& cluster,
                             const std::string& config_path, const OptionSpelling& spelling);

}  // namespace tessera::balance::session
