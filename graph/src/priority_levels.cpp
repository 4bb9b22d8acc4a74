// PriorityLevels (priority_levels.hpp).
#include "priority_levels.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/core/time.hpp"

namespace tessera::graph::detail {

PriorityLevels::PriorityLevels(uint32_t part_count, uint64_t edges, double peer_level_share,
                               const ProgressLedger& ledger)
    : ledger_(ledger), edges_(edges), peer_level_share_(peer_level_share), peer_scales_(part_count, 0.0) {}

void PriorityLevels::set(PriorityLevel wanted) {
  const auto usable = [](double x) { return std::isfinite(x) && x >= 0.0 ? x : 0.0; };
  {
    std::lock_guard lock(mutex_);
    level_ = {usable(wanted.base), usable(wanted.base_decay), usable(wanted.per_residual)};
    set_at_ = Clock::now();
  }
  generation_.fetch_add(1);
}

double PriorityLevels::current(Clock::time_point now) const {
  PriorityLevel l;
  Clock::time_point set_at;
  {
    std::lock_guard lock(mutex_);
    l = level_;
    set_at = set_at_;
  }
  double value = l.base;
  if (l.base_decay > 0.0) value *= std::exp(-l.base_decay * seconds_between(set_at, now));
  if (l.per_residual > 0.0) value += l.per_residual * ledger_.totals().residual;
  return value;
}

// Parts that hold little of the residual against the others then leave their small deltas to
// add up.
double PriorityLevels::peer_level() const {
  if (peer_level_share_ <= 0.0) return 0.0;
  double sum = 0.0;
  uint32_t known = 0;
  {
    std::lock_guard lock(mutex_);
    for (double scale : peer_scales_) {
      sum += scale;
      known += scale > 0.0 ? 1 : 0;
    }
  }
  if (known == 0) return 0.0;
  sum += ledger_.totals().residual / static_cast<double>(std::max<uint64_t>(1, edges_));
  return peer_level_share_ * sum / static_cast<double>(known + 1);
}

void PriorityLevels::note_peer_scale(uint32_t from_part, float scale) {
  std::lock_guard lock(mutex_);
  peer_scales_[from_part] = scale;
}

void PriorityLevels::forget_peer_scales() {
  std::lock_guard lock(mutex_);
  std::fill(peer_scales_.begin(), peer_scales_.end(), 0.0);
}

}  // namespace tessera::graph::detail
