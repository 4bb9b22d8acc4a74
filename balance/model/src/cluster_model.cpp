// The performance model's values (cluster_model.hpp): the speed curve's interpolation, the
// square-equivalent size a job's rate is looked up at, and a model cut down to some nodes.
#include "tessera/balance/model/cluster_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tessera::balance::model {

std::vector<bool> behind_switch_of(const ClusterModel& model) {
  std::vector<bool> behind;
  for (const NodeModel& node : model.nodes) behind.push_back(model.switch_uplink_bytes_per_s > 0.0 && node.link.behind_switch);
  return behind;
}

ClusterModel model_of_nodes(const ClusterModel& model, const std::vector<std::size_t>& nodes) {
  ClusterModel out = model;
  out.nodes.clear();
  for (std::size_t node : nodes) out.nodes.push_back(model.nodes[node]);
  return out;
}

double square_equivalent_size(double m, double n, double k) {
  const double bytes = m * k + k * n + m * n;
  return bytes > 0.0 ? 3.0 * m * n * k / bytes : 0.0;
}

SpeedCurve::SpeedCurve(std::vector<SpeedPoint> points) : points_(std::move(points)) {
  // A point without a positive, finite size has no place on a log axis; dropping it (rather
  // than failing) keeps a partly broken profile usable, as does keeping the first of duplicates.
  std::erase_if(points_, [](const SpeedPoint& point) { return !(point.size > 0.0) || std::isinf(point.size); });
  std::stable_sort(points_.begin(), points_.end(),
                   [](const SpeedPoint& a, const SpeedPoint& b) { return a.size < b.size; });
  points_.erase(std::unique(points_.begin(), points_.end(),
                            [](const SpeedPoint& a, const SpeedPoint& b) { return a.size == b.size; }),
                points_.end());
}

double SpeedCurve::gflops_at(double size) const {
  if (points_.empty()) return 0.0;
  if (!(size > points_.front().size)) return points_.front().gflops;
  if (size >= points_.back().size) return points_.back().gflops;
  const auto upper = std::upper_bound(points_.begin(), points_.end(), size,
                                      [](double value, const SpeedPoint& point) { return value < point.size; });
  const SpeedPoint& hi = *upper;
  const SpeedPoint& lo = *(upper - 1);
  // GEMM rates rise roughly with the logarithm of the size (cache blocking pays off in steps
  // of 2x), so log(size) is the axis on which straight lines fit profiles measured at 2^i.
  const double t = (std::log(size) - std::log(lo.size)) / (std::log(hi.size) - std::log(lo.size));
  return lo.gflops + t * (hi.gflops - lo.gflops);
}

}  // namespace tessera::balance::model
