#include "tessera/partition/row_partition.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <sstream>

namespace tessera::partition {
namespace {

std::string format_weight(double w) {
  std::ostringstream out;
  out.precision(17);
  out << w;
  return out.str();
}

// Quotas in long double: its 64-bit mantissa keeps n * pw_i exact enough for every n below 2^63,
// where double would already round n itself above 2^53.
struct Quota {
  uint64_t floor = 0;
  long double fraction = 0;
};

std::vector<RowBlock> blocks_from_counts(const std::vector<uint64_t>& counts) {
  std::vector<RowBlock> blocks;
  blocks.reserve(counts.size());
  uint64_t begin = 0;
  for (uint64_t count : counts) {
    blocks.push_back({begin, count});
    begin += count;
  }
  return blocks;
}

}  // namespace

Result<std::vector<double>> normalise_weights(std::span<const double> weights) {
  if (weights.empty()) {
    return invalid_argument("no weights given; pass one weight per node (at least one)");
  }
  double max_weight = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double w = weights[i];
    if (std::isnan(w) || std::isinf(w)) {
      return invalid_argument("weight[" + std::to_string(i) + "] = " + format_weight(w) +
                              " is not finite; use a finite weight >= 0");
    }
    if (w < 0) {
      return invalid_argument("weight[" + std::to_string(i) + "] = " + format_weight(w) +
                              " is negative; use a weight >= 0");
    }
    max_weight = std::max(max_weight, w);
  }
  if (max_weight == 0) {
    return invalid_argument("all " + std::to_string(weights.size()) +
                            " weights are zero; give at least one node a weight > 0");
  }
  // Scaling by the largest weight first keeps the sum finite even for weights near DBL_MAX.
  std::vector<double> normalised(weights.begin(), weights.end());
  long double sum = 0;
  for (double& w : normalised) {
    w /= max_weight;
    sum += w;
  }
  for (double& w : normalised) w = static_cast<double>(static_cast<long double>(w) / sum);
  return normalised;
}

Result<std::vector<RowBlock>> proportional_rows(uint64_t n, std::span<const double> weights) {
  auto normalised = normalise_weights(weights);
  if (!normalised) return normalised.status();
  const std::vector<double>& pw = normalised.value();

  // Recompute the quotas from the raw weights (scaled by the largest) rather than from the
  // rounded pw_i, so that equal weights give bit-identical quotas and ties really are ties.
  const double max_weight = *std::max_element(weights.begin(), weights.end());
  long double weight_sum = 0;
  for (double w : weights) weight_sum += static_cast<long double>(w / max_weight);

  std::vector<Quota> quotas(pw.size());
  uint64_t assigned = 0;
  for (std::size_t i = 0; i < pw.size(); ++i) {
    const long double exact =
        static_cast<long double>(n) * static_cast<long double>(weights[i] / max_weight) / weight_sum;
    const long double whole = std::floor(exact);
    quotas[i].floor = std::min<uint64_t>(static_cast<uint64_t>(whole), n);
    quotas[i].fraction = exact - whole;
    assigned += quotas[i].floor;
  }

  // Rounding can, in principle, push a quota like 2.9999... up to 3 and the floors past n; give
  // the excess back from the nodes whose quotas were closest to their floor.
  while (assigned > n) {
    std::size_t victim = pw.size();
    for (std::size_t i = 0; i < pw.size(); ++i) {
      if (quotas[i].floor == 0) continue;
      if (victim == pw.size() || quotas[i].fraction < quotas[victim].fraction) victim = i;
    }
    --quotas[victim].floor;
    quotas[victim].fraction += 1;
    --assigned;
  }

  // Largest remainder: one row each, largest fraction first, ties to the lower index. Only nodes
  // with weight > 0 are eligible so that a zero weight always means zero rows.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < pw.size(); ++i) {
    if (weights[i] > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return quotas[a].fraction > quotas[b].fraction;
  });
  std::vector<uint64_t> counts(pw.size());
  for (std::size_t i = 0; i < pw.size(); ++i) counts[i] = quotas[i].floor;
  uint64_t remainder = n - assigned;
  // The remainder is the sum of the fractions, so it is below the number of eligible nodes; the
  // outer loop only guards against rounding breaking that.
  while (remainder > 0) {
    for (std::size_t i = 0; i < order.size() && remainder > 0; ++i, --remainder) ++counts[order[i]];
  }

  std::vector<RowBlock> blocks = blocks_from_counts(counts);
  const uint64_t total = blocks.empty() ? 0 : blocks.back().end();
  if (total != n) {
    return internal_error("proportional_rows assigned " + std::to_string(total) + " of " +
                          std::to_string(n) + " rows: " + to_string(blocks));
  }
  return blocks;
}

std::vector<RowBlock> even_rows(uint64_t n, std::size_t parts) {
  assert(parts >= 1);
  if (parts == 0) return {};
  const uint64_t base = n / parts;
  const uint64_t extra = n % parts;
  std::vector<uint64_t> counts(parts, base);
  for (uint64_t i = 0; i < extra; ++i) ++counts[i];
  return blocks_from_counts(counts);
}

std::string to_string(std::span<const RowBlock> blocks) {
  std::string out;
  for (const RowBlock& block : blocks) {
    if (!out.empty()) out += ' ';
    out += '[' + std::to_string(block.begin) + ',' + std::to_string(block.end()) + ')';
  }
  return out;
}

}  // namespace tessera::partition
