#include "tessera/balance/cluster/silent_node_watchdog.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace tessera::balance::cluster {

SilentNodeWatchdog::SilentNodeWatchdog(std::size_t nodes, Options options)
    : options_(std::move(options)), nodes_(nodes) {
  if (options_.progress_counter) {
    for (std::size_t i = 0; i < nodes; ++i) nodes_[i].last_counter = options_.progress_counter(i);
  }
  thread_ = std::jthread([this](std::stop_token stop) {
    // The condition variable is only a stoppable sleep: stop() wakes it at once.
    std::mutex sleeping;
    std::unique_lock lock(sleeping);
    while (!stop.stop_requested()) {
      wake_.wait_for(lock, stop, options_.period, [] { return false; });
      if (stop.stop_requested()) return;
      check_all();
    }
  });
}

SilentNodeWatchdog::~SilentNodeWatchdog() { stop(); }

void SilentNodeWatchdog::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  wake_.notify_all();
  thread_.join();
}

void SilentNodeWatchdog::progress(std::size_t node) {
  std::lock_guard lock(mutex_);
  nodes_[node].quiet_since = Clock::now();
}

void SilentNodeWatchdog::begin_owing(std::size_t node, uint64_t units) {
  std::lock_guard lock(mutex_);
  Watched& watched = nodes_[node];
  // A node that owed nothing was not expected to talk: its silence counts from now.
  if (watched.owing == 0) watched.quiet_since = Clock::now();
  watched.owing += units;
}

void SilentNodeWatchdog::end_owing(std::size_t node, uint64_t units) {
  std::lock_guard lock(mutex_);
  Watched& watched = nodes_[node];
  watched.owing -= std::min(units, watched.owing);
}

void SilentNodeWatchdog::pause(std::size_t node) {
  std::lock_guard lock(mutex_);
  ++nodes_[node].paused;
}

void SilentNodeWatchdog::resume(std::size_t node) {
  std::lock_guard lock(mutex_);
  Watched& watched = nodes_[node];
  --watched.paused;
  watched.quiet_since = Clock::now();
}

bool SilentNodeWatchdog::retire(std::size_t node) {
  std::lock_guard lock(mutex_);
  Watched& watched = nodes_[node];
  watched.retired = true;
  return !watched.reason.has_value();
}

std::optional<std::string> SilentNodeWatchdog::silent_reason(std::size_t node) const {
  std::lock_guard lock(mutex_);
  return nodes_[node].reason;
}

void SilentNodeWatchdog::check_all() {
  const auto now = Clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    // The counter and the callbacks run outside the lock: they take the caller's locks, and the
    // caller's threads take those before reporting here.
    const std::optional<uint64_t> counter =
        options_.progress_counter ? std::optional<uint64_t>(options_.progress_counter(i)) : std::nullopt;
    Clock::time_point since;
    {
      std::lock_guard lock(mutex_);
      Watched& watched = nodes_[i];
      if (counter && *counter != watched.last_counter) {
        watched.last_counter = *counter;
        watched.quiet_since = now;
      }
      if (!watching(watched)) continue;
      since = watched.quiet_since;
    }
    const double deadline_s = options_.deadline_s(i);
    const double quiet_s = std::chrono::duration<double>(now - since).count();
    if (quiet_s < deadline_s) continue;
    const Silence silence{i, quiet_s, deadline_s};
    std::string reason = options_.describe
                             ? options_.describe(silence)
                             : fmt::format("no progress for {:.3g} s (deadline {:.3g} s)", quiet_s, deadline_s);
    {
      std::lock_guard lock(mutex_);
      Watched& watched = nodes_[i];
      // Heard from, done or paid up while the reason was written: not silent after all.
      if (!watching(watched) || watched.quiet_since != since) continue;
      watched.reason = reason;
    }
    if (options_.on_silent) options_.on_silent(i, reason);
  }
}

}  // namespace tessera::balance::cluster
