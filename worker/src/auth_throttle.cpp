#include "tessera/worker/auth_throttle.hpp"

#include <algorithm>
#include <cstdint>

namespace tessera::worker {

AuthThrottle::AuthThrottle(AuthThrottleOptions options) : options_(options) {}

AuthThrottle::Clock::duration AuthThrottle::delay_after(uint32_t failures) const {
  if (failures <= options_.free_failures) return Clock::duration::zero();
  // Doubling stops once past the cap, so the shift never overflows.
  Clock::duration delay = options_.first_delay;
  for (uint32_t extra = failures - options_.free_failures - 1; extra > 0 && delay < options_.max_delay; --extra) {
    delay *= 2;
  }
  return std::min<Clock::duration>(delay, options_.max_delay);
}

AuthThrottle::Admission AuthThrottle::admit(const std::string& source, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  const auto found = sources_.find(source);
  if (found == sources_.end()) return {};
  Entry& entry = found->second;
  if (now - entry.last_failure >= options_.forget_after) {
    sources_.erase(found);
    return {};
  }
  const Clock::duration delay = delay_after(entry.failures);
  if (delay == Clock::duration::zero()) return {};
  const Clock::time_point start = std::max(now, entry.next_start);
  Admission admission;
  if (start - now > options_.max_delay) {
    admission.refused = true;
    admission.retry_after = start - now;
    return admission;
  }
  admission.wait = start - now;
  entry.next_start = start + delay;
  return admission;
}

void AuthThrottle::record_failure(const std::string& source, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto found = sources_.find(source);
  if (found == sources_.end()) {
    make_room(now);
    found = sources_.emplace(source, Entry{}).first;
  } else if (now - found->second.last_failure >= options_.forget_after) {
    found->second = Entry{};
  }
  Entry& entry = found->second;
  if (entry.failures < UINT32_MAX) ++entry.failures;
  entry.last_failure = now;
  entry.next_start = std::max(entry.next_start, now + delay_after(entry.failures));
}

void AuthThrottle::record_success(const std::string& source) {
  std::lock_guard lock(mutex_);
  sources_.erase(source);
}

std::size_t AuthThrottle::tracked() const {
  std::lock_guard lock(mutex_);
  return sources_.size();
}

void AuthThrottle::make_room(Clock::time_point now) {
  if (sources_.size() < std::max<std::size_t>(options_.max_sources, 1)) return;
  std::erase_if(sources_, [&](const auto& item) { return now - item.second.last_failure >= options_.forget_after; });
  while (sources_.size() >= std::max<std::size_t>(options_.max_sources, 1)) {
    // A linear scan, only when the table is full: a spoofing peer pays for it, the memory stays bounded.
    const auto oldest = std::min_element(sources_.begin(), sources_.end(), [](const auto& a, const auto& b) {
      return a.second.last_failure < b.second.last_failure;
    });
    sources_.erase(oldest);
  }
}

}  // namespace tessera::worker
