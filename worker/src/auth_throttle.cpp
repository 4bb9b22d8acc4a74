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

bool AuthThrottle::remembered(const Entry& entry, Clock::time_point now) const {
  return entry.failures > 0 && now - entry.last_failure < options_.forget_after;
}

bool AuthThrottle::place_free(const Entry& entry) const {
  return entry.held < std::max<std::size_t>(options_.max_held_per_source, 1) &&
         held_ < std::max<std::size_t>(options_.max_held, 1);
}

AuthThrottle::Clock::duration AuthThrottle::take_place(Entry& entry, Clock::time_point now) {
  const Clock::duration delay = remembered(entry, now) ? delay_after(entry.failures) : Clock::duration::zero();
  ++entry.held;
  ++held_;
  entry.last_hold_end = std::max(entry.last_hold_end, now + delay);
  return delay;
}

AuthThrottle::Hold AuthThrottle::hold(const std::string& source, bool wrong, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto found = sources_.find(source);
  if (found != sources_.end() && !remembered(found->second, now)) {
    found->second.failures = 0;
    if (!busy(found->second)) {
      sources_.erase(found);
      found = sources_.end();
    }
  }
  const Clock::duration delay = found == sources_.end() ? Clock::duration::zero() : delay_after(found->second.failures);
  if (delay == Clock::duration::zero()) {
    if (wrong) count_failure(source, now);
    return {};
  }
  Entry& entry = found->second;
  Hold hold;
  if (entry.line.empty() && place_free(entry)) {
    hold.kind = Hold::Kind::kHeld;
    hold.wait = take_place(entry, now);
    return hold;
  }
  if (entry.line.size() >= std::max<std::size_t>(options_.max_queued_per_source, 1) ||
      queued_ >= std::max<std::size_t>(options_.max_queued, 1)) {
    hold.kind = Hold::Kind::kRefused;
    hold.retry_after = delay;  // a place frees within one hold, and the line moves up by as many
    hold.queued = entry.line.size();
    return hold;
  }
  hold.kind = Hold::Kind::kQueued;
  hold.ticket = next_ticket_++;
  hold.ahead = entry.held + entry.line.size();
  entry.line.push_back(hold.ticket);
  ++queued_;
  // The places free a hold at a time: this answer's turn comes after one hold per full set of
  // places ahead of it, roughly.
  const auto places = static_cast<Clock::rep>(std::max<std::size_t>(options_.max_held_per_source, 1));
  hold.wait = delay * (1 + static_cast<Clock::rep>(entry.line.size() - 1) / places);
  return hold;
}

std::optional<AuthThrottle::Clock::duration> AuthThrottle::start(const std::string& source, uint64_t ticket,
                                                                 Clock::time_point now, std::size_t* ahead) {
  std::lock_guard lock(mutex_);
  const auto found = sources_.find(source);
  if (found == sources_.end()) return std::nullopt;  // not in line: abandoned, or never queued
  Entry& entry = found->second;
  const auto position = std::find(entry.line.begin(), entry.line.end(), ticket);
  if (position == entry.line.end()) return std::nullopt;
  if (position == entry.line.begin() && place_free(entry)) {
    entry.line.pop_front();
    --queued_;
    return take_place(entry, now);
  }
  if (ahead != nullptr) *ahead = entry.held + static_cast<std::size_t>(position - entry.line.begin());
  return std::nullopt;
}

void AuthThrottle::abandon(const std::string& source, uint64_t ticket) {
  std::lock_guard lock(mutex_);
  const auto found = sources_.find(source);
  if (found == sources_.end()) return;
  std::deque<uint64_t>& line = found->second.line;
  if (const auto position = std::find(line.begin(), line.end(), ticket); position != line.end()) {
    line.erase(position);
    --queued_;
  }
}

void AuthThrottle::release(const std::string& source, bool wrong, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  // An entry that holds an answer is never forgotten, so it is there.
  const auto found = sources_.find(source);
  if (found != sources_.end() && found->second.held > 0) {
    --found->second.held;
    --held_;
  }
  if (wrong) count_failure(source, now);
}

void AuthThrottle::count_failure(const std::string& source, Clock::time_point now) {
  auto found = sources_.find(source);
  if (found == sources_.end()) {
    make_room(now);
    found = sources_.emplace(source, Entry{}).first;
  }
  Entry& entry = found->second;
  if (!remembered(entry, now)) entry.failures = 0;
  if (entry.failures < UINT32_MAX) ++entry.failures;
  entry.last_failure = now;
}

std::size_t AuthThrottle::tracked() const {
  std::lock_guard lock(mutex_);
  return sources_.size();
}

void AuthThrottle::make_room(Clock::time_point now) {
  const std::size_t bound = std::max<std::size_t>(options_.max_sources, 1);
  if (sources_.size() < bound) return;
  std::erase_if(sources_, [&](const auto& item) { return !busy(item.second) && !remembered(item.second, now); });
  while (sources_.size() >= bound) {
    // A linear scan, only when the table is full: a spoofing peer pays for it, the memory stays
    // bounded. An address holding or queueing answers stays: its places must be given back to it.
    auto oldest = sources_.end();
    for (auto it = sources_.begin(); it != sources_.end(); ++it) {
      if (!busy(it->second) && (oldest == sources_.end() || it->second.last_failure < oldest->second.last_failure)) {
        oldest = it;
      }
    }
    if (oldest == sources_.end()) return;
    sources_.erase(oldest);
  }
}

}  // namespace tessera::worker
