// Choosing a resident matrix's shares (resident.hpp): from the nodes' costs (resident_rows), and
// from products measured on the placed rows, moving pieces to where those costs put them
// (balance_resident). Holding the pieces and multiplying them is resident.cpp's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "tessera/balance/multiply/resident.hpp"
#include "tessera/core/stats.hpp"

namespace tessera::balance::multiply {

namespace {

// What a node pays for a product whatever its share: a round trip, and X reaching it.
double fixed_cost(const ResidentNodeCost& node, uint64_t k, uint64_t n) {
  const double x_bytes = static_cast<double>(k) * static_cast<double>(n) * sizeof(double);
  return 2.0 * node.latency_s + (node.to_node_bytes_per_s > 0.0 ? x_bytes / node.to_node_bytes_per_s : 0.0);
}

}  // namespace

ResidentShares resident_rows(uint64_t m, uint64_t k, uint64_t n, std::span<const ResidentNodeCost> nodes) {
  struct Cost {
    std::size_t index;
    double fixed;
    double per_row;
  };
  std::vector<Cost> usable;
  ResidentShares shares;
  shares.rows.assign(nodes.size(), 0);
  const double row_flops = 2.0 * static_cast<double>(k) * static_cast<double>(n);
  const double row_bytes = static_cast<double>(n) * sizeof(double);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const ResidentNodeCost& node = nodes[i];
    if (!(node.flops_per_s > 0.0) || !(node.to_node_bytes_per_s > 0.0) || !(node.from_node_bytes_per_s > 0.0)) {
      shares.left_out.push_back(fmt::format("node '{}' gets no rows: its profile has no rate or link for the product",
                                            node.name));
      continue;
    }
    const double per_row = node.measured_row_s > 0.0 ? node.measured_row_s
                                                     : row_flops / node.flops_per_s + row_bytes / node.from_node_bytes_per_s;
    usable.push_back({i, fixed_cost(node, k, n), per_row});
  }
  if (usable.empty() || m == 0) return shares;
  std::sort(usable.begin(), usable.end(), [](const Cost& a, const Cost& b) { return a.fixed < b.fixed; });
  // The first j nodes by fixed cost take part; T for them, kept while it is past the next one's.
  double finish = 0.0;
  std::size_t taking = 0;
  double inverse_sum = 0.0, fixed_over_rate = 0.0;
  for (std::size_t j = 0; j < usable.size(); ++j) {
    inverse_sum += 1.0 / usable[j].per_row;
    fixed_over_rate += usable[j].fixed / usable[j].per_row;
    const double t = (static_cast<double>(m) + fixed_over_rate) / inverse_sum;
    if (j > 0 && t <= usable[j].fixed) break;  // this node's X alone arrives after the others finish
    finish = t;
    taking = j + 1;
  }
  // Rows by the common finish, floors first, then the remainder to the largest fractions.
  std::vector<std::pair<double, std::size_t>> fractions;
  uint64_t given = 0;
  for (std::size_t j = 0; j < taking; ++j) {
    const double exact = std::max(0.0, (finish - usable[j].fixed) / usable[j].per_row);
    const auto whole = static_cast<uint64_t>(std::min(exact, static_cast<double>(m)));
    shares.rows[usable[j].index] = whole;
    given += whole;
    fractions.emplace_back(exact - static_cast<double>(whole), usable[j].index);
  }
  std::sort(fractions.begin(), fractions.end(), std::greater<>());
  for (std::size_t f = 0; given < m; f = (f + 1) % fractions.size(), ++given) ++shares.rows[fractions[f].second];
  while (given > m) {  // floors of a rounded finish can overshoot by a row
    for (std::size_t j = 0; j < taking && given > m; ++j) {
      if (shares.rows[usable[j].index] > 0) {
        --shares.rows[usable[j].index];
        --given;
      }
    }
  }
  shares.forecast_s = 0.0;
  for (std::size_t j = 0; j < taking; ++j) {
    const uint64_t rows = shares.rows[usable[j].index];
    if (rows > 0) shares.forecast_s = std::max(shares.forecast_s, usable[j].fixed + static_cast<double>(rows) * usable[j].per_row);
  }
  for (std::size_t j = taking; j < usable.size(); ++j) {
    shares.left_out.push_back(fmt::format(
        "node '{}' gets no rows: the operand alone takes {:.3g} s to reach it, and the product is forecast to end at "
        "{:.3g} s without it",
        nodes[usable[j].index].name, usable[j].fixed, shares.forecast_s));
  }
  return shares;
}

Result<ResidentBalance> balance_resident(cluster::ClusterConnection& cluster, linalg::MatrixView a,
                                         ResidentMatrix& placed, std::span<const std::size_t> links,
                                         std::vector<ResidentNodeCost> costs, const BalanceOptions& balance,
                                         const ResidentOptions& options) {
  if (costs.size() != links.size()) return invalid_argument("balance_resident: one cost per node");
  if (balance.columns == 0 || balance.products_per_round < 1) {
    return invalid_argument("balance_resident: products of at least one column, at least one per round");
  }
  const auto start = std::chrono::steady_clock::now();
  ResidentBalance outcome;
  outcome.measured_row_s.assign(links.size(), 0.0);
  linalg::Matrix x(placed.cols, balance.columns);
  std::mt19937_64 random(balance.seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (double& v : x.values) v = uniform(random);
  linalg::Matrix y(placed.rows, balance.columns);
  auto rows_now = [&] {
    std::vector<uint64_t> rows(links.size(), 0);
    for (const ResidentShare& share : placed.shares) {
      rows[static_cast<std::size_t>(std::find(links.begin(), links.end(), share.link) - links.begin())] = share.rows;
    }
    return rows;
  };
  std::size_t best = 0;
  double forecast = 0.0;
  uint64_t moved = 0;
  for (int round = 0;; ++round) {
    BalanceRound measured{rows_now(), 0.0, forecast, moved};
    std::vector<std::vector<double>> finishes(links.size());
    std::vector<double> makespans;
    for (int p = 0; p < balance.products_per_round; ++p) {
      Result<ResidentProduct> product = multiply_resident(cluster, placed, x, y, options);
      if (!product) return product.status();
      if (!product->verification.passed) {
        return verification_failed(fmt::format("a product measuring the shares failed its check: {}",
                                               product->verification.detail));
      }
      makespans.push_back(product->seconds);
      for (const ResidentNodeRun& node : product->nodes) {
        finishes[static_cast<std::size_t>(std::find(links.begin(), links.end(), node.link) - links.begin())]
            .push_back(node.finish_s);
      }
    }
    measured.measured_s = median(makespans);
    outcome.rounds.push_back(measured);
    if (measured.measured_s < outcome.rounds[best].measured_s) best = outcome.rounds.size() - 1;
    if (round >= balance.rounds) break;
    // A node's cost per row is its finish past its fixed cost; never less than a quarter of its
    // finish over its rows, so a node whose fixed cost was overestimated is not thought free.
    for (std::size_t i = 0; i < links.size(); ++i) {
      if (finishes[i].empty() || measured.rows[i] == 0) continue;
      const double finish = median(finishes[i]);
      const double per_row = std::max(finish - fixed_cost(costs[i], placed.cols, balance.columns), 0.25 * finish) /
                             static_cast<double>(measured.rows[i]);
      costs[i].measured_row_s = outcome.measured_row_s[i] = per_row;
    }
    const ResidentShares next = resident_rows(placed.rows, placed.cols, balance.columns, costs);
    if (std::accumulate(next.rows.begin(), next.rows.end(), uint64_t{0}) != placed.rows) break;
    if (next.forecast_s > (1.0 - balance.worth_moving) * measured.measured_s) break;
    // The rows a node gains reach it over its link while the others' reach theirs.
    double move_s = 0.0;
    for (std::size_t i = 0; i < links.size(); ++i) {
      const double gained = static_cast<double>(next.rows[i]) - static_cast<double>(measured.rows[i]);
      if (gained > 0.0 && costs[i].to_node_bytes_per_s > 0.0) {
        move_s = std::max(move_s, gained * static_cast<double>(placed.cols) * sizeof(double) / costs[i].to_node_bytes_per_s);
      }
    }
    const double saved_s = (measured.measured_s - next.forecast_s) * static_cast<double>(balance.expected_products);
    if (saved_s < move_s) break;
    Result<uint64_t> bytes = rebalance_rows(cluster, a, placed, links, next.rows, options);
    if (!bytes) return bytes.status();
    outcome.bytes_moved += *bytes;
    forecast = next.forecast_s;
    moved = *bytes;
  }
  // A capped node's rate depends on its share, so the last move can be a step back: then the best
  // measured shares are restored, when they were clearly (10%) faster; within that the difference
  // is as likely the machine's noise.
  outcome.kept_round = outcome.rounds.size() - 1;
  if (best + 1 != outcome.rounds.size() &&
      outcome.rounds[best].measured_s < 0.9 * outcome.rounds.back().measured_s) {
    Result<uint64_t> bytes = rebalance_rows(cluster, a, placed, links, outcome.rounds[best].rows, options);
    if (!bytes) return bytes.status();
    outcome.bytes_moved += *bytes;
    outcome.kept_round = best;
  }
  const std::vector<uint64_t> final_rows = rows_now();
  for (std::size_t i = 0; i < links.size(); ++i) {
    const bool held_some = std::any_of(outcome.rounds.begin(), outcome.rounds.end(),
                                       [&](const BalanceRound& r) { return r.rows[i] > 0; });
    if (final_rows[i] == 0 && held_some) {
      outcome.left_out.push_back(fmt::format(
          "node '{}' gives its rows back: measured in products run all at once, the others finish sooner without it",
          costs[i].name));
    }
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace tessera::balance::multiply
