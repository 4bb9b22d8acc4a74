#include "tessera/balance/graphs/priority_levels.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::balance::graphs {

PriorityLevels::PriorityLevels(double fraction, uint64_t edges, double tolerance)
    : fraction_(std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0)),
      edges_(static_cast<double>(std::max<uint64_t>(1, edges))),
      tolerance_(tolerance) {}

void PriorityLevels::reset() { have_previous_ = false; }

std::vector<graph::PriorityLevel> PriorityLevels::observe(std::span<const NodeCounters> poll,
                                                          std::chrono::steady_clock::time_point now) {
  std::vector<graph::PriorityLevel> levels(poll.size());
  uint64_t updates = 0;
  double residual = 0.0;
  for (const NodeCounters& node : poll) {
    updates += node.updates;
    residual += node.residual;
  }
  const bool stalled = have_previous_ && updates == previous_updates_ && residual > tolerance_;
  double decay = 0.0;
  if (have_previous_ && previous_residual_ > residual && residual > 0.0) {
    const double seconds = std::chrono::duration<double>(now - previous_at_).count();
    decay = std::log(previous_residual_ / residual) / std::max(1e-6, seconds);
  }
  have_previous_ = true;
  previous_updates_ = updates;
  previous_residual_ = residual;
  previous_at_ = now;
  if (fraction_ == 0.0 || stalled) return levels;
  const double per_residual = fraction_ / edges_;
  for (std::size_t node = 0; node < poll.size(); ++node) {
    levels[node] = {per_residual * std::max(0.0, residual - poll[node].residual), decay, per_residual};
  }
  return levels;
}

}  // namespace tessera::balance::graphs
