// CoordinatorSlot: the one coordinator session a worker serves at a time. Connections handshake
// concurrently (so a port check or a stalled peer cannot lock the real coordinator out), and only
// an authenticated connection claims the slot. The session marks its activity here, so a refusal
// can say how long it has been idle and a newcomer can ask an idle one to yield. Thread-safe.
// Internal to the worker library.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

namespace tessera::worker {

// How long a coordinator that authenticated waits for a session that is only cleaning up (its
// peer said BYE) before it is told the worker is busy.
inline constexpr auto kClaimWait = std::chrono::seconds(10);

class CoordinatorSlot {
 public:
  using Clock = std::chrono::steady_clock;

  // Who holds the slot and for how long its session has been idle.
  struct Holder {
    std::string peer;
    Clock::duration idle{};
  };

  // The holder of an authenticated, still-running session, if any.
  std::optional<Holder> busy_with() const {
    std::lock_guard lock(mutex_);
    if (active_ && !closing_) return Holder{peer_, idle_locked()};
    return std::nullopt;
  }

  // The session had a frame, or work of it progressed: its idle clock restarts. Called for every
  // frame, so it takes no lock.
  void touch() { last_activity_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  // The session is handling a frame (a GEMM probe can take seconds in its handler): it is not idle
  // meanwhile, whatever its clock says. Called around every handler, so it takes no lock.
  void set_in_frame(bool in_frame) { in_frame_.store(in_frame, std::memory_order_relaxed); }

  // True once another coordinator has asked this session to yield (see claim()).
  bool yield_requested() const { return yield_requested_.load(std::memory_order_relaxed); }

  // Claims the slot for `peer`. Waits (at most kClaimWait) for a session that has hung up and is
  // only cleaning up (a coordinator reconnecting right after an ERROR should not be refused), or
  // for one idle for at least `idle_timeout` (not 0) to yield. Returns the holder when the slot
  // cannot be claimed, or a holder with an empty peer if the worker is stopping.
  std::optional<Holder> claim(const std::string& peer, std::chrono::milliseconds idle_timeout) {
    std::unique_lock lock(mutex_);
    const bool asked = active_ && !closing_ && idle_timeout.count() > 0 && idle_locked() >= idle_timeout;
    if (asked) yield_requested_ = true;
    changed_.wait_for(lock, kClaimWait, [this] {
      if (stopping_ || !active_) return true;
      return !closing_ && !yield_requested_;  // a running session that was not asked to yield
    });
    if (stopping_) return Holder{};
    if (active_) {
      if (asked) yield_requested_ = false;  // it did not yield in time; keep it undisturbed
      return Holder{peer_, idle_locked()};
    }
    active_ = true;
    closing_ = false;
    yield_requested_ = false;
    peer_ = peer;
    touch();
    return std::nullopt;
  }

  void mark_closing() {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }

  void release() {
    {
      std::lock_guard lock(mutex_);
      active_ = false;
      closing_ = false;
      yield_requested_ = false;
    }
    changed_.notify_all();
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
  }

 private:
  Clock::duration idle_locked() const {
    if (in_frame_.load(std::memory_order_relaxed)) return Clock::duration::zero();
    const Clock::duration since = Clock::now().time_since_epoch() -
                                  Clock::duration(last_activity_ns_.load(std::memory_order_relaxed));
    return std::max(since, Clock::duration::zero());
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool active_ = false;
  bool closing_ = false;
  bool stopping_ = false;
  std::atomic<bool> yield_requested_{false};
  std::atomic<Clock::rep> last_activity_ns_{0};
  std::atomic<bool> in_frame_{false};
  std::string peer_;
};

// The text of a BUSY refusal: whose session holds the worker and how long it has been idle, so
// the coordinator refused knows whether waiting is worth it.
std::string busy_text(const CoordinatorSlot::Holder& holder, std::chrono::milliseconds idle_timeout);

// "10 s", "2.5 s".
std::string seconds_text(std::chrono::milliseconds span);

}  // namespace tessera::worker
