#include "tessera/core/stats.hpp"

#include <algorithm>
#include <cmath>

namespace tessera {

double median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  const double upper = *middle;
  if (values.size() % 2 == 1) return upper;
  // After nth_element everything before `middle` is <= it, so the lower middle is their maximum.
  const double lower = *std::max_element(values.begin(), middle);
  return 0.5 * (lower + upper);
}

double mean_without_slowest(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  if (values.size() == 1) return values.front();
  values.erase(std::min_element(values.begin(), values.end()));
  double sum = 0.0;
  for (double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

}  // namespace tessera
