// Plan: which node multiplies which part of C = A x B, and how B travels. A plan is a value: it
// can be printed, compared and tested without sockets; the multiply driver carries it out.
//
// Policies are values too: `even` gives every node the same share (the baseline the papers
// compare against); `proportional` gives node i the share pw_i, its measured relative power
// (Tinetti & Luque: floor(m * pw_i) rows plus at most one remainder row). The layout says what a
// share is made of: row blocks (default), 2D rectangles of C (column-based or square-corner,
// which move less of A and B), or 3D boxes that also split k (nodes then return partial sums the
// coordinator adds into C). Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/partition/block_tiling.hpp"
#include "tessera/partition/row_partition.hpp"

namespace tessera::balance::plan {

// kModel plans come from make_model_plan (model.hpp), which needs the performance model.
// kDynamic plans fix no rows in advance: tiles of rows are handed out as nodes ask for work
// (multiply.hpp), so a plan's shares are all empty and `tile_rows` sets the tile size.
enum class Policy { kEven, kProportional, kModel, kDynamic };

std::string_view policy_name(Policy policy);
// Fails with the list of valid names: "unknown policy 'fast'; use one of: even, proportional, model, dynamic".
Result<Policy> parse_policy(std::string_view name);

// --- Policies as values, each with the options only it has --------------------------------------

struct EvenPolicy {
  bool operator==(const EvenPolicy&) const = default;
};
struct ProportionalPolicy {
  std::vector<double> weights;  // one per node, any scale; empty: the profile's measured speeds
  bool operator==(const ProportionalPolicy&) const = default;
};
struct ModelPolicy {
  bool operator==(const ModelPolicy&) const = default;
};
struct DynamicPolicy {
  uint64_t tile_rows = 0;  // rows per tile handed out; 0: about m / (8 x nodes), at least 16
  bool operator==(const DynamicPolicy&) const = default;
};
using PolicyChoice = std::variant<EvenPolicy, ProportionalPolicy, ModelPolicy, DynamicPolicy>;

Policy policy_kind(const PolicyChoice& choice);
// The policy with its default options ("dynamic" -> DynamicPolicy{}).
PolicyChoice default_choice(Policy policy);
// Whether planning `choice` needs the cluster's profile (proportional without weights, model).
bool needs_profile(const PolicyChoice& choice);

struct NodeShare {
  std::string node_name;
  double weight = 0.0;  // normalised share of the work the policy aimed for
  partition::RowBlock rows;               // layout kRows: the node's rows of C (all columns, all of k)
  std::vector<partition::Block> blocks;   // other layouts: the node's boxes of the m x n x k space
  bool operator==(const NodeShare&) const = default;
};

// How B's pieces reach the nodes. kStar: the coordinator sends every node each piece it reads
// (B crosses the coordinator's link once per node). kChain (rows and 2d layouts, static
// policies): the coordinator sends each piece once, to the first node of a chain, and every node
// forwards the pieces it receives to the next node of the chain over a worker-to-worker link while
// it computes (the pipelined broadcast of Tinetti and Luque), so the coordinator's link carries B
// once. The rows layout has one chain (every node reads all of B); the 2d layout one per group of
// columns (its nodes read the same columns of B), the chains one after another in Plan::chain.
enum class Distribution { kStar, kChain };
std::string_view distribution_name(Distribution distribution);
// Fails with the valid names: "unknown distribution 'ring'; use one of: star, chain".
Result<Distribution> parse_distribution(std::string_view name);

struct Plan {
  Policy policy = Policy::kEven;
  uint64_t m = 0, n = 0, k = 0;  // C is m x n, A is m x k, B is k x n
  uint64_t panel_width = 0;      // rows of B (columns of A) per panel
  uint32_t panels_in_flight = 0; // queue depth: jobs (one per panel) a node may hold unanswered
  uint32_t refill_threshold = 1; // jobs are sent once this many credits are back (or none is out)
  partition::Layout layout = partition::Layout::kRows;
  uint64_t tile_rows = 0;        // kDynamic: rows per tile handed out; 0 otherwise
  std::vector<NodeShare> shares; // one per node, cluster order
  Distribution distribution = Distribution::kStar;
  // kChain: the nodes with work, in forwarding order: the coordinator feeds chain[0] and every node
  // whose columns of B differ from the one before it (chain_heads); empty for kStar.
  std::vector<uint32_t> chain;
  bool operator==(const Plan&) const = default;

  uint64_t panel_count() const { return panel_width == 0 ? 0 : (k + panel_width - 1) / panel_width; }
  // Node i's share as boxes of the m x n x k space, whatever the layout (empty for kDynamic).
  std::vector<partition::Block> blocks_of(std::size_t node) const;
  std::string to_string() const;
};

// Row tiles of a dynamic plan: a quarter-size tile per node first (every node starts at once) and
// last (a short tail), tiles of plan.tile_rows between. They cover rows [0, m) in order. The
// driver hands these out and predict_pull replays the same ones.
std::vector<partition::Block> cut_row_tiles(const Plan& plan, std::size_t nodes);

struct PlanRequest {
  Policy policy = Policy::kEven;
  uint64_t m = 0, n = 0, k = 0;
  uint64_t panel_width = 256;     // clipped to k
  uint32_t panels_in_flight = 4;  // >= 1
  uint32_t refill_threshold = 1;  // 1..panels_in_flight
  partition::Layout layout = partition::Layout::kRows;  // kDynamic and kModel plan rows only
  uint64_t tile_rows = 0;         // kDynamic only; 0 = about m / (8 x nodes), at least 16
  std::vector<std::string> node_names;
  std::vector<double> weights;    // proportional only: one per node, >= 0, any scale
  // kChain needs the rows layout and a static policy; the chain is the nodes with rows in cluster
  // order (make_model_plan orders it by the measured links). Unset: the model policy chooses star
  // or chain by forecast; the other policies use star.
  std::optional<Distribution> distribution;
};

// Whether B can travel along a chain under `policy` and `layout`: a static policy with the rows or
// 2d layout (set_chain, and the CLI and Python settings, ask this one question).
bool chain_possible(Policy policy, partition::Layout layout);
// The chain of a rows plan: the nodes with rows, in cluster order; of a 2d plan: its groups of
// columns left to right, each group's nodes in cluster order. Fails (kInvalidArgument) for another
// layout, the dynamic policy (no fixed rows to chain), or a 2d node holding several boxes.
Status set_chain(Plan& plan);
// The positions in plan.chain that start a chain (the coordinator feeds them): the first, and each
// node whose columns of B differ from the node's before it. REQUIRES: check_distribution passed.
std::vector<std::size_t> chain_heads(const Plan& plan);
// A plan's distribution is whole: kChain with the rows or 2d layout, a static policy and a chain
// that lists every node with work exactly once and no other, the nodes of one group of columns
// together; kStar with no chain. kInvalidArgument says what is wrong (plans can come edited from
// Python's Plan.from_dict).
Status check_distribution(const Plan& plan);

// The checks every planner makes of a request: dimensions >= 1, at least one node, panel width
// >= 1, and the credit window (check_credit_window). kInvalidArgument says which.
Status check_plan_request(const PlanRequest& request);
// Queue depth >= 1 and refill threshold within 1..depth. Plans are also checked by the driver.
Status check_credit_window(uint32_t queue_depth, uint32_t refill_threshold);
// The model and dynamic policies plan row blocks only: any other layout is refused with the reason.
Status check_layout(Policy policy, partition::Layout layout);

// Checks the request (dimensions >= 1, one weight per node for proportional, panel width >= 1,
// refill threshold within the queue depth, a layout the policy supports) and returns the plan.
// Every element of the m x n x k space is assigned exactly once. kModel is refused here (it
// needs the model: see make_model_plan); kProportional with explicit row weights is how
// make_model_plan builds its plan.
Result<Plan> make_plan(const PlanRequest& request);

}  // namespace tessera::balance::plan
