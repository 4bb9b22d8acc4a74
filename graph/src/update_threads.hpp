// UpdateThreads: the lifecycle of an async engine's update threads, one per slice: starting them,
// the stop flag their rounds check, how many are still live (progress()'s `running`), joining.
// What a thread runs and how a sleeping one is woken are the caller's (the engine passes the
// rounds and a function that wakes every mailbox).
// Owns the threads. start(), join() and started() from the one controlling thread;
// request_stop(), stop_requested() and running() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace tessera::graph::detail {

class UpdateThreads {
 public:
  // `wake_sleepers` runs after the stop flag is set, so that a thread asleep for lack of work
  // sees it.
  explicit UpdateThreads(std::function<void()> wake_sleepers) : wake_sleepers_(std::move(wake_sleepers)) {}
  ~UpdateThreads();  // REQUIRES: joined (the engine stops before it goes)
  UpdateThreads(const UpdateThreads&) = delete;
  UpdateThreads& operator=(const UpdateThreads&) = delete;

  bool started() const { return started_; }
  // Clears the stop flag and runs body(i) on thread i, i < count; a thread counts as live until
  // its body returns. REQUIRES: not started.
  void start(uint32_t count, const std::function<void(uint32_t)>& body);
  // Sets the stop flag and wakes the sleepers. Idempotent.
  void request_stop();
  // Relaxed: what a round checks between chunks. A sleeper checks again under its mailbox's
  // mutex, which request_stop() takes to wake it.
  bool stop_requested() const { return stop_.load(std::memory_order_relaxed); }
  bool stop_requested_now() const { return stop_.load(); }
  bool running() const { return live_.load() > 0; }
  // Joins every thread. REQUIRES: request_stop() called (the threads end only then).
  void join();

 private:
  std::function<void()> wake_sleepers_;
  std::vector<std::thread> threads_;  // controlling thread only
  bool started_ = false;              // controlling thread only
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> live_{0};
};

}  // namespace tessera::graph::detail
