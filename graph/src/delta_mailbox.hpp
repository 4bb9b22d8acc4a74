// DeltaMailbox: where deltas for one slice's own vertices wait until the slice's thread takes
// them in, whether they come from a sibling slice's flush or from another part (deliver()).
// A framework primitive of the engine: slots and deltas in the slice's own numbering, a count of
// pushes, and the wake-up of a slice that sleeps for lack of work. It does no residual accounting
// (DeltaRouter counts a push before it is made, ProgressLedger holds the figures).
// Owns what was pushed until take() hands it over. Thread-safe: push() and wake_all() from any
// thread, take() and wait() from the slice's own thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace tessera::graph::detail {

using Clock = std::chrono::steady_clock;

class DeltaMailbox {
 public:
  // What take() handed over besides the deltas themselves.
  struct Taken {
    uint64_t pushes = 0;
    double remote_residual = 0.0;  // what the remote pushes among them carried
  };

  // Appends the entries and wakes the slice if it sleeps. `remote`: they come from another part,
  // worth `residual` (what the slice's arrival tracking reads; see Slice::arrival_residual).
  void push(std::vector<uint32_t>&& slots, std::vector<double>&& deltas, bool remote, double residual);
  // Swaps everything pushed so far into `slots` and `deltas` (cleared first).
  Taken take(std::vector<uint32_t>& slots, std::vector<double>& deltas);
  // Sleeps while nothing was pushed and `awake()` is false, until `deadline`, checking again
  // every `poll` at the latest (a safety net: a flag set without wake_all() is still seen).
  // `awake` is called under the mailbox's mutex.
  template <typename Awake>
  void wait(Clock::time_point deadline, Clock::duration poll, Awake&& awake) {
    std::unique_lock lock(mutex_);
    while (pushes_ == 0 && !awake()) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      wake_.wait_for(lock, std::min<Clock::duration>(poll, deadline - now));
    }
  }
  // Wakes a sleeping slice so that it checks its `awake` again. A waiter that is between its
  // check and its sleep sees the change, since this takes the mutex.
  void wake_all();

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<uint32_t> slots_;
  std::vector<double> deltas_;
  uint64_t pushes_ = 0;
  double remote_residual_ = 0.0;  // what the pushes from deliver() (other parts) carry
};

}  // namespace tessera::graph::detail
