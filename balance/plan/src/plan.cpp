#include "tessera/balance/plan/plan.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace tessera::balance::plan {

std::string_view policy_name(Policy policy) {
  switch (policy) {
    case Policy::kEven: return "even";
    case Policy::kProportional: return "proportional";
    case Policy::kModel: return "model";
    case Policy::kDynamic: return "dynamic";
  }
  return "unknown";
}

Result<Policy> parse_policy(std::string_view name) {
  if (name == "even") return Policy::kEven;
  if (name == "proportional") return Policy::kProportional;
  if (name == "model") return Policy::kModel;
  if (name == "dynamic") return Policy::kDynamic;
  return invalid_argument(fmt::format("unknown policy '{}'; use one of: even, proportional, model, dynamic", name));
}

std::string_view distribution_name(Distribution distribution) {
  switch (distribution) {
    case Distribution::kStar: return "star";
    case Distribution::kChain: return "chain";
  }
  return "unknown";
}

Result<Distribution> parse_distribution(std::string_view name) {
  if (name == "star") return Distribution::kStar;
  if (name == "chain") return Distribution::kChain;
  return invalid_argument(fmt::format("unknown distribution '{}'; use one of: star, chain", name));
}

bool chain_possible(Policy policy, partition::Layout layout) {
  const bool chained_layout = layout == partition::Layout::kRows || layout == partition::Layout::kColumnBased;
  return chained_layout && policy != Policy::kDynamic;
}

namespace {
Status check_chain(Policy policy, partition::Layout layout) {
  if (!chain_possible(policy, layout)) {
    return invalid_argument(fmt::format("distribution 'chain' forwards B along the nodes of a static rows or 2d plan; "
                                        "the {} policy with layout '{}' has none (use distribution 'star')",
                                        policy_name(policy), partition::layout_name(layout)));
  }
  return Status::ok();
}

// The columns of C whose B a node of a chained plan reads (first column, count): all of them in
// the rows layout, its box's in the 2d layout; none when it has no work.
using Columns = std::optional<std::pair<uint64_t, uint64_t>>;

// A node's Columns. A 2d node must hold one box spanning all of k.
Result<Columns> chain_columns(const Plan& plan, std::size_t node) {
  if (plan.layout == partition::Layout::kRows) {
    return plan.shares[node].rows.count > 0 ? Columns{{0, plan.n}} : Columns{};
  }
  const std::vector<partition::Block>& blocks = plan.shares[node].blocks;
  if (blocks.empty()) return Columns{};
  if (blocks.size() != 1 || blocks[0].k_begin != 0 || blocks[0].depth != plan.k) {
    return invalid_argument(fmt::format("'{}' holds {} boxes of the 2d plan; a chain forwards B to nodes with one box "
                                        "each, spanning all of k (use distribution 'star')",
                                        plan.shares[node].node_name, blocks.size()));
  }
  return Columns{{blocks[0].col_begin, blocks[0].cols}};
}
}  // namespace

Status set_chain(Plan& plan) {
  TESSERA_RETURN_IF_ERROR(check_chain(plan.policy, plan.layout));
  // One chain per group of columns (the rows layout has one group): the groups one after another,
  // each in cluster order, so a member whose columns differ from the one before heads a chain.
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, uint32_t>> members;
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    Result<Columns> columns = chain_columns(plan, i);
    if (!columns) return columns.status();
    if (*columns) members.emplace_back(**columns, static_cast<uint32_t>(i));
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const auto& a, const auto& b) { return a.first.first < b.first.first; });
  plan.distribution = Distribution::kChain;
  plan.chain.clear();
  for (const auto& [columns, node] : members) plan.chain.push_back(node);
  return Status::ok();
}

std::vector<std::size_t> chain_heads(const Plan& plan) {
  std::vector<std::size_t> heads;
  Columns previous;
  for (std::size_t position = 0; position < plan.chain.size(); ++position) {
    Result<Columns> columns = chain_columns(plan, plan.chain[position]);
    Columns these;
    if (columns.is_ok()) these = *columns;
    if (position == 0 || these != previous) heads.push_back(position);
    previous = these;
  }
  return heads;
}

Status check_distribution(const Plan& plan) {
  if (plan.distribution == Distribution::kStar) {
    if (!plan.chain.empty()) return invalid_argument("the plan sends B to each node (star) but lists a chain");
    return Status::ok();
  }
  TESSERA_RETURN_IF_ERROR(check_chain(plan.policy, plan.layout));
  std::vector<bool> listed(plan.shares.size(), false);
  std::vector<std::pair<uint64_t, uint64_t>> groups_done;  // column groups whose chain has ended
  Columns current;
  for (uint32_t node : plan.chain) {
    if (node >= plan.shares.size()) {
      return invalid_argument(fmt::format("the plan's chain names node {}, and the plan has {} nodes", node,
                                          plan.shares.size()));
    }
    if (listed[node]) return invalid_argument(fmt::format("the plan's chain lists '{}' twice", plan.shares[node].node_name));
    Result<Columns> columns = chain_columns(plan, node);
    if (!columns) return columns.status();
    if (!*columns) {
      return invalid_argument(fmt::format("the plan's chain lists '{}', which has no work", plan.shares[node].node_name));
    }
    if (*columns != current) {
      if (std::find(groups_done.begin(), groups_done.end(), **columns) != groups_done.end()) {
        return invalid_argument(fmt::format("the plan's chain returns to the columns of '{}' after others: the nodes "
                                            "of one group of columns must follow each other",
                                            plan.shares[node].node_name));
      }
      if (current) groups_done.push_back(*current);
      current = *columns;
    }
    listed[node] = true;
  }
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    Result<Columns> columns = chain_columns(plan, i);
    if (columns && *columns && !listed[i]) {
      return invalid_argument(
          fmt::format("'{}' has work but is not in the plan's chain: it would never get B", plan.shares[i].node_name));
    }
  }
  return Status::ok();
}

std::vector<partition::Block> Plan::blocks_of(std::size_t node) const {
  if (layout != partition::Layout::kRows) return shares[node].blocks;
  const partition::RowBlock& rows = shares[node].rows;
  if (rows.count == 0) return {};
  return {partition::Block{rows.begin, rows.count, 0, n, 0, k}};
}

std::vector<partition::Block> cut_row_tiles(const Plan& plan, std::size_t nodes) {
  const uint64_t m = plan.m;
  const uint64_t small = std::max<uint64_t>(1, plan.tile_rows / 4);
  std::vector<partition::Block> tiles;
  uint64_t row = 0;
  auto add = [&](uint64_t size) {
    size = std::min(size, m - row);
    if (size > 0) tiles.push_back(partition::Block{row, size, 0, plan.n, 0, plan.k});
    row += size;
  };
  for (std::size_t i = 0; i < nodes; ++i) add(small);
  const uint64_t tail = std::min<uint64_t>(nodes * small, m - row);
  while (m - row > tail) add(std::min(plan.tile_rows, m - row - tail));
  while (row < m) add(small);
  return tiles;
}

std::string Plan::to_string() const {
  std::string out = fmt::format(
      "plan {} ({} layout): C {}x{} = A {}x{} * B {}x{}, {} panels of {} (queue depth {}, refill at {})\n",
      policy_name(policy), partition::layout_name(layout), m, n, m, k, k, n, panel_count(), panel_width,
      panels_in_flight, refill_threshold);
  if (policy == Policy::kDynamic) {
    out += fmt::format("  tiles of {} rows handed out on demand (smaller ones first and last)\n", tile_rows);
  }
  if (distribution == Distribution::kChain) {
    const std::vector<std::size_t> heads = chain_heads(*this);
    std::string order;
    for (std::size_t position = 0; position < chain.size(); ++position) {
      const bool head = std::find(heads.begin(), heads.end(), position) != heads.end();
      order += head ? (order.empty() ? "coordinator -> " : " | coordinator -> ") : " -> ";
      order += shares[chain[position]].node_name;
    }
    out += fmt::format("  B forwarded along the chain{}: {}\n", heads.size() > 1 ? "s" : "", order);
  }
  for (const NodeShare& share : shares) {
    if (layout == partition::Layout::kRows) {
      out += fmt::format("  {:<16} weight {:.4f} rows [{}, {}) = {}\n", share.node_name, share.weight,
                         share.rows.begin, share.rows.end(), share.rows.count);
      continue;
    }
    out += fmt::format("  {:<16} weight {:.4f}", share.node_name, share.weight);
    if (share.blocks.empty()) out += " nothing";
    for (const partition::Block& block : share.blocks) {
      out += fmt::format(" rows [{}, {}) cols [{}, {}) k [{}, {})", block.row_begin, block.row_begin + block.rows,
                         block.col_begin, block.col_begin + block.cols, block.k_begin, block.k_begin + block.depth);
    }
    out += "\n";
  }
  return out;
}

Status check_credit_window(uint32_t queue_depth, uint32_t refill_threshold) {
  if (queue_depth == 0) return invalid_argument("panels in flight must be >= 1");
  if (refill_threshold == 0 || refill_threshold > queue_depth) {
    return invalid_argument(fmt::format("refill threshold {} must be between 1 and the queue depth {}",
                                        refill_threshold, queue_depth));
  }
  return Status::ok();
}

Status check_plan_request(const PlanRequest& request) {
  if (request.m == 0 || request.n == 0 || request.k == 0) {
    return invalid_argument(fmt::format("matrix dimensions must be >= 1 (got m={} n={} k={})", request.m,
                                        request.n, request.k));
  }
  if (request.node_names.empty()) return invalid_argument("the cluster has no nodes");
  if (request.panel_width == 0) return invalid_argument("panel width must be >= 1");
  return check_credit_window(request.panels_in_flight, request.refill_threshold);
}

Status check_layout(Policy policy, partition::Layout layout) {
  if (layout == partition::Layout::kRows || policy == Policy::kEven || policy == Policy::kProportional) {
    return Status::ok();
  }
  const char* why = policy == Policy::kModel ? "its simulator replays row strips" : "it hands out row tiles";
  return invalid_argument(fmt::format("the {} policy plans row tiles only ({}); layout '{}' needs policy even or "
                                      "proportional", policy_name(policy), why, partition::layout_name(layout)));
}

Result<Plan> make_plan(const PlanRequest& request) {
  TESSERA_RETURN_IF_ERROR(check_plan_request(request));
  if (request.policy == Policy::kModel) {
    return invalid_argument("the model policy needs the performance model; use make_model_plan");
  }
  TESSERA_RETURN_IF_ERROR(check_layout(request.policy, request.layout));
  if (request.distribution == Distribution::kChain) TESSERA_RETURN_IF_ERROR(check_chain(request.policy, request.layout));

  const std::size_t node_count = request.node_names.size();
  // What every plan takes from the request as it is; the shares follow per policy and layout.
  Plan plan;
  plan.policy = request.policy;
  plan.layout = request.layout;
  plan.m = request.m;
  plan.n = request.n;
  plan.k = request.k;
  plan.panel_width = std::min(request.panel_width, request.k);
  plan.panels_in_flight = request.panels_in_flight;
  plan.refill_threshold = request.refill_threshold;
  if (request.policy == Policy::kDynamic) {
    plan.tile_rows = request.tile_rows != 0 ? std::min(request.tile_rows, request.m)
                                            : std::clamp<uint64_t>(request.m / (8 * node_count), 16, request.m);
    for (const std::string& name : request.node_names) plan.shares.push_back({name, 0.0, {0, 0}, {}});
    return plan;
  }
  std::vector<double> weights;
  if (request.policy == Policy::kEven) {
    weights.assign(node_count, 1.0);
  } else {
    if (request.weights.size() != node_count) {
      return invalid_argument(fmt::format("{} weights given for {} nodes; give one weight per node",
                                          request.weights.size(), node_count));
    }
    weights = request.weights;
  }
  Result<std::vector<double>> normalised = partition::normalise_weights(weights);
  if (!normalised) return normalised.status();
  if (request.layout != partition::Layout::kRows) {
    Result<partition::NodeBlocks> blocks =
        partition::tile_blocks(request.layout, request.m, request.n, request.k, *normalised);
    if (!blocks) return blocks.status();
    for (std::size_t i = 0; i < node_count; ++i) {
      plan.shares.push_back({request.node_names[i], (*normalised)[i], {0, 0}, std::move((*blocks)[i])});
    }
    if (request.distribution == Distribution::kChain) TESSERA_RETURN_IF_ERROR(set_chain(plan));
    return plan;
  }
  Result<std::vector<partition::RowBlock>> blocks =
      request.policy == Policy::kEven
          ? Result<std::vector<partition::RowBlock>>(partition::even_rows(request.m, node_count))
          : partition::proportional_rows(request.m, *normalised);
  if (!blocks) return blocks.status();
  for (std::size_t i = 0; i < node_count; ++i) {
    plan.shares.push_back({request.node_names[i], (*normalised)[i], (*blocks)[i], {}});
  }
  if (request.distribution == Distribution::kChain) TESSERA_RETURN_IF_ERROR(set_chain(plan));
  return plan;
}

namespace {

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

}  // namespace

Policy policy_kind(const PolicyChoice& choice) {
  return std::visit(Overloaded{[](const EvenPolicy&) { return Policy::kEven; },
                               [](const ProportionalPolicy&) { return Policy::kProportional; },
                               [](const ModelPolicy&) { return Policy::kModel; },
                               [](const DynamicPolicy&) { return Policy::kDynamic; }},
                    choice);
}

PolicyChoice default_choice(Policy policy) {
  switch (policy) {
    case Policy::kEven: return EvenPolicy{};
    case Policy::kProportional: return ProportionalPolicy{};
    case Policy::kModel: return ModelPolicy{};
    case Policy::kDynamic: return DynamicPolicy{};
  }
  return EvenPolicy{};
}

bool needs_profile(const PolicyChoice& choice) {
  if (const auto* proportional = std::get_if<ProportionalPolicy>(&choice)) return proportional->weights.empty();
  return std::holds_alternative<ModelPolicy>(choice);
}

}  // namespace tessera::balance::plan
