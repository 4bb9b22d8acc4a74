#include "tessera/balance/expr/rewrite.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace tessera::balance::expr {

namespace {

// The dynamic programme is cubic in the chain's length; longer chains (u * P^5000) are
// multiplied from whichever end is cheaper, which is what the programme picks for them anyway
// when one end is a vector.
constexpr std::size_t kMaxDpFactors = 256;
// A power is offered as chain factors only up to this exponent; beyond it, by squaring.
constexpr uint32_t kMaxExpandedExponent = 4096;

double dim(uint64_t value) { return static_cast<double>(value); }

// Builders on shapes already checked: these products and sums cannot fail.
Expr must(Result<Expr> built) { return std::move(*built); }

Expr with_operands(const Expr& e, std::vector<Expr> operands) {
  bool unchanged = operands.size() == e->operands.size();
  for (std::size_t i = 0; unchanged && i < operands.size(); ++i) unchanged = operands[i] == e->operands[i];
  if (unchanged) return e;
  Node node = *e;
  node.operands = std::move(operands);
  return std::make_shared<const Node>(std::move(node));
}

void flatten(const Expr& e, std::vector<Expr>& factors) {
  if (e->op == Op::kProduct) {
    flatten(e->operands[0], factors);
    flatten(e->operands[1], factors);
  } else {
    factors.push_back(e);
  }
}

// Fewest-flop parenthesisation of factors[0] x ... x factors[n-1] (shapes chain up).
Expr best_chain(const std::vector<Expr>& factors) {
  const std::size_t n = factors.size();
  if (n == 1) return factors[0];
  std::vector<double> dims(n + 1);
  dims[0] = dim(factors[0]->rows);
  for (std::size_t i = 0; i < n; ++i) dims[i + 1] = dim(factors[i]->cols);
  if (n > kMaxDpFactors) {
    // Left to right costs sum 2 d0 d_i d_{i+1}; right to left sum 2 d_{i} d_{i+1} d_n.
    double left = 0.0, right = 0.0;
    for (std::size_t i = 1; i < n; ++i) left += 2.0 * dims[0] * dims[i] * dims[i + 1];
    for (std::size_t i = 0; i + 1 < n; ++i) right += 2.0 * dims[i] * dims[i + 1] * dims[n];
    Expr result = left <= right ? factors[0] : factors[n - 1];
    if (left <= right) {
      for (std::size_t i = 1; i < n; ++i) result = must(product(result, factors[i]));
    } else {
      for (std::size_t i = n - 1; i-- > 0;) result = must(product(factors[i], result));
    }
    return result;
  }
  // flops[i][j], bytes[i][j]: the best way to multiply factors i..j; split[i][j] where it splits.
  std::vector<std::vector<double>> flops(n, std::vector<double>(n, 0.0)), bytes = flops;
  std::vector<std::vector<std::size_t>> split(n, std::vector<std::size_t>(n, 0));
  for (std::size_t length = 2; length <= n; ++length) {
    for (std::size_t i = 0; i + length <= n; ++i) {
      const std::size_t j = i + length - 1;
      flops[i][j] = std::numeric_limits<double>::infinity();
      for (std::size_t k = i; k < j; ++k) {
        const double f = flops[i][k] + flops[k + 1][j] + 2.0 * dims[i] * dims[k + 1] * dims[j + 1];
        const double b = bytes[i][k] + bytes[k + 1][j] + 8.0 * dims[i] * dims[j + 1];
        if (f < flops[i][j] || (f == flops[i][j] && b < bytes[i][j])) {
          flops[i][j] = f;
          bytes[i][j] = b;
          split[i][j] = k;
        }
      }
    }
  }
  auto build = [&](auto&& self, std::size_t i, std::size_t j) -> Expr {
    if (i == j) return factors[i];
    const std::size_t k = split[i][j];
    return must(product(self(self, i, k), self(self, k + 1, j)));
  };
  return build(build, 0, n - 1);
}

Expr lower(const Expr& e, const CostWeights& weights);

// A product chain with its powers lowered: each power tries being k factors of the chain
// instead of one squared factor, and keeps whichever makes the chain cheaper.
Expr lower_chain(const Expr& chain, const CostWeights& weights) {
  std::vector<Expr> written;
  flatten(chain, written);
  struct Part {
    Expr base;          // lowered factor, or the lowered base of a power
    uint32_t exponent;  // 1 for a plain factor
    bool expanded = false;
  };
  std::vector<Part> parts;
  for (const Expr& factor : written) {
    if (factor->op == Op::kPower) {
      parts.push_back({lower(factor->operands[0], weights), factor->exponent});
    } else {
      parts.push_back({lower(factor, weights), 1});
    }
  }
  auto assemble = [&] {
    std::vector<Expr> factors;
    for (const Part& part : parts) {
      if (part.exponent == 1) {
        factors.push_back(part.base);
      } else if (part.expanded) {
        // A base that is itself a product joins the chain factor by factor, so (A' A)^4 h can be
        // eight vector products instead of A' A's n^3 and four more.
        std::vector<Expr> base_factors;
        flatten(part.base, base_factors);
        for (uint32_t k = 0; k < part.exponent; ++k) factors.insert(factors.end(), base_factors.begin(), base_factors.end());
      } else {
        factors.push_back(power_by_squaring(part.base, part.exponent));
      }
    }
    return eliminate_common(best_chain(factors));
  };
  Expr best = assemble();
  double best_seconds = weights.seconds(cost(best));
  for (Part& part : parts) {
    if (part.exponent == 1 || part.exponent > kMaxExpandedExponent) continue;
    part.expanded = true;
    Expr candidate = assemble();
    const double candidate_seconds = weights.seconds(cost(candidate));
    if (candidate_seconds < best_seconds) {
      best = std::move(candidate);
      best_seconds = candidate_seconds;
    } else {
      part.expanded = false;
    }
  }
  return best;
}

Expr lower(const Expr& e, const CostWeights& weights) {
  switch (e->op) {
    case Op::kInput:
    case Op::kIdentity: return e;
    case Op::kProduct: return lower_chain(e, weights);
    case Op::kPower: return power_by_squaring(lower(e->operands[0], weights), e->exponent);
    default: break;
  }
  std::vector<Expr> operands;
  for (const Expr& operand : e->operands) operands.push_back(lower(operand, weights));
  return with_operands(e, std::move(operands));
}

Expr order(const Expr& e) {
  if (e->op == Op::kProduct) {
    std::vector<Expr> factors;
    flatten(e, factors);
    for (Expr& factor : factors) factor = order(factor);
    return best_chain(factors);
  }
  std::vector<Expr> operands;
  for (const Expr& operand : e->operands) operands.push_back(order(operand));
  return with_operands(e, std::move(operands));
}

}  // namespace

Expr power_by_squaring(const Expr& base, uint32_t exponent) {
  std::optional<Expr> result;
  Expr square = base;
  for (uint32_t bits = exponent; bits != 0; bits >>= 1) {
    if (bits & 1u) result = result ? must(product(*result, square)) : square;
    if (bits > 1) square = must(product(square, square));
  }
  return *result;
}

Cost cost(const Expr& e) {
  Cost total;
  for (const Expr& node : nodes_in_order(e)) {
    const double size = dim(node->rows) * dim(node->cols);
    switch (node->op) {
      case Op::kInput:
      case Op::kIdentity: continue;
      case Op::kProduct: {
        const Expr& left = node->operands[0];
        const Expr& right = node->operands[1];
        total.flops += 2.0 * size * dim(left->cols);
        total.moved_bytes += 8.0 * (dim(left->rows) * dim(left->cols) + dim(right->rows) * dim(right->cols) + size);
        ++total.products;
        break;
      }
      case Op::kPower: {
        // By squaring, as it would be lowered.
        uint32_t products = 0;
        for (uint32_t bits = node->exponent; bits > 1; bits >>= 1) products += 1 + (bits & 1u);
        total.flops += 2.0 * size * dim(node->cols) * products;
        total.moved_bytes += 8.0 * 3.0 * size * products;
        total.products += products;
        break;
      }
      case Op::kSum:
      case Op::kDifference:
      case Op::kScale: total.flops += size; break;
      case Op::kTranspose: break;
    }
    total.intermediate_bytes += 8.0 * size;
  }
  return total;
}

Expr eliminate_common(const Expr& e) {
  std::map<std::string, Expr> by_key;
  std::unordered_map<const Node*, std::pair<Expr, std::size_t>> canonical;  // node -> (shared node, its id)
  std::unordered_map<const Node*, std::size_t> ids;                         // shared node -> id
  for (const Expr& node : nodes_in_order(e)) {
    std::string key = fmt::format("{}|{}x{}|{}|{:a}|{}", static_cast<int>(node->op), node->rows, node->cols, node->name,
                                  node->scalar, node->exponent);
    std::vector<Expr> operands;
    for (const Expr& operand : node->operands) {
      const auto& [shared, id] = canonical.at(operand.get());
      key += fmt::format("|#{}", id);
      operands.push_back(shared);
    }
    auto [slot, fresh] = by_key.try_emplace(key);
    if (fresh) {
      slot->second = with_operands(node, std::move(operands));
      ids.emplace(slot->second.get(), ids.size());
    }
    canonical.emplace(node.get(), std::make_pair(slot->second, ids.at(slot->second.get())));
  }
  return canonical.at(e.get()).first;
}

Expr order_chains(const Expr& e) { return eliminate_common(order(e)); }

Expr rewrite(const Expr& e, const CostWeights& weights) { return eliminate_common(lower(e, weights)); }

Expr powers_by_squaring(const Expr& e) {
  std::unordered_map<const Node*, Expr> done;
  auto walk = [&](auto&& self, const Expr& node) -> Expr {
    if (const auto found = done.find(node.get()); found != done.end()) return found->second;
    std::vector<Expr> operands;
    for (const Expr& operand : node->operands) operands.push_back(self(self, operand));
    Expr lowered = node->op == Op::kPower ? power_by_squaring(operands[0], node->exponent)
                                          : with_operands(node, std::move(operands));
    done.emplace(node.get(), lowered);
    return lowered;
  };
  return walk(walk, e);
}

Expr transposes_to_inputs(const Expr& e) {
  // (node, transposed?) -> the rewritten node; shared subtrees are rewritten once per sense.
  std::map<std::pair<const Node*, bool>, Expr> done;
  auto walk = [&](auto&& self, const Expr& node, bool flip) -> Expr {
    const auto key = std::make_pair(node.get(), flip);
    if (const auto found = done.find(key); found != done.end()) return found->second;
    Expr out;
    switch (node->op) {
      case Op::kInput: out = flip ? must(transpose(node)) : node; break;
      case Op::kIdentity: out = node; break;
      case Op::kTranspose: out = self(self, node->operands[0], !flip); break;
      case Op::kProduct:
        out = flip ? must(product(self(self, node->operands[1], true), self(self, node->operands[0], true)))
                   : with_operands(node, {self(self, node->operands[0], false), self(self, node->operands[1], false)});
        break;
      default: {  // sums, differences and scales commute with the transpose
        std::vector<Expr> operands;
        for (const Expr& operand : node->operands) operands.push_back(self(self, operand, flip));
        if (!flip) {
          out = with_operands(node, std::move(operands));
        } else {
          Node flipped = *node;
          flipped.rows = node->cols;
          flipped.cols = node->rows;
          flipped.operands = std::move(operands);
          out = std::make_shared<const Node>(std::move(flipped));
        }
        break;
      }
    }
    done.emplace(key, out);
    return out;
  };
  return walk(walk, e, false);
}

std::string explain(const Expr& before, const Expr& after) {
  auto describe = [](const Expr& e) {
    const Cost c = cost(e);
    return fmt::format("{:.4g} flops in {} product{}, {:.4g} MB of intermediates", c.flops, c.products,
                       c.products == 1 ? "" : "s", c.intermediate_bytes / 1e6);
  };
  // The rewritten DAG as steps: every computed node used more than once gets a name.
  std::unordered_map<const Node*, int> uses;
  const std::vector<Expr> order = nodes_in_order(after);
  for (const Expr& node : order) {
    for (const Expr& operand : node->operands) ++uses[operand.get()];
  }
  std::unordered_map<const Node*, std::string> names;
  std::string steps;
  auto text = [&](auto&& self, const Expr& node) -> std::string {
    if (const auto named = names.find(node.get()); named != names.end()) return named->second;
    if (node->operands.empty()) return to_string(node);
    std::vector<std::string> parts;
    for (const Expr& operand : node->operands) parts.push_back(self(self, operand));
    switch (node->op) {
      case Op::kProduct: return "(" + parts[0] + " * " + parts[1] + ")";
      case Op::kSum: return "(" + parts[0] + " + " + parts[1] + ")";
      case Op::kDifference: return "(" + parts[0] + " - " + parts[1] + ")";
      case Op::kScale: return fmt::format("({} * {})", node->scalar, parts[0]);
      case Op::kTranspose: return parts[0] + "'";
      case Op::kPower: return fmt::format("{}^{}", parts[0], node->exponent);
      default: return parts[0];
    }
  };
  for (const Expr& node : order) {
    if (node->operands.empty() || node == after || uses[node.get()] < 2) continue;
    const std::string name = fmt::format("t{}", names.size() + 1);
    steps += fmt::format("  {} = {}\n", name, text(text, node));
    names.emplace(node.get(), name);
  }
  return fmt::format("before: {}\n  {}\nafter:\n{}  result = {}\n  {}\n", to_string(before), describe(before), steps,
                     text(text, after), describe(after));
}

}  // namespace tessera::balance::expr
