// The one way the coordinator notices a node that went silent: the profiler (a node stopped
// mid-measurement), the multiply driver (a node that owes tiles), the expression DAG runner (a node
// that owes frames) and the graph driver (a call that moves no byte) all use it.
//
// What those four had in common, and what this class is: per node, a deadline that progress
// pushes forward (a frame or bytes in, a reply, owed work answered); a thread that checks it a few
// times a second; and an action when it passes: the node's reason is recorded (the "lost reason"
// text users see) and the caller's action runs once, which shuts the node's connection down so
// that whatever its threads are blocked in (a read, or a write into a stopped node's full socket)
// returns and the ordinary lost-node path takes over.
//
// A node is timed out only while it owes something (begin_owing without its end_owing): a node
// that owes nothing is not expected to talk, and its clock starts when it begins to owe. The
// deadline is fixed, or computed at each check from what the node owes (the multiply driver's
// deadline grows with the bytes and flops in flight). Progress is reported (progress()) or
// sampled (Options::progress_counter: a counter of bytes moved; a change counts as progress).
//
// The caller owns the watchdog and the callbacks' captures; they must outlive it (or stop()).
// Thread-safe: any thread may report progress while the watchdog's thread checks. The callbacks
// run on the watchdog's thread without its lock held, so they may call back into it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tessera::balance::cluster {

class SilentNodeWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // A node whose deadline passed, as the reason text is written from it.
  struct Silence {
    std::size_t node = 0;
    double quiet_s = 0.0;     // since its last progress, or since it began to owe
    double deadline_s = 0.0;  // what it was allowed
  };

  struct Options {
    // How often deadlines are checked: a node is found at most this long after its deadline.
    Clock::duration period = std::chrono::milliseconds(50);
    // Seconds a node that owes may stay silent. Called on the watchdog's thread for nodes that
    // owe, at every check, so a deadline may follow what the node owes. Required.
    std::function<double(std::size_t node)> deadline_s;
    // The reason recorded for a silent node. Default: "no progress for Q s (deadline D s)".
    std::function<std::string(const Silence&)> describe;
    // Runs once per silent node, after its reason is recorded (typically: shut its connection
    // down). May be empty.
    std::function<void(std::size_t node, const std::string& reason)> on_silent;
    // Optional: a counter of what the node moved (bytes), read at every check; a change is progress.
    std::function<uint64_t(std::size_t node)> progress_counter;
  };

  // Starts the checking thread. REQUIRES: options.deadline_s is set.
  SilentNodeWatchdog(std::size_t nodes, Options options);
  // Stops the thread (promptly: it waits on a condition variable, not a sleep).
  ~SilentNodeWatchdog();
  SilentNodeWatchdog(const SilentNodeWatchdog&) = delete;
  SilentNodeWatchdog& operator=(const SilentNodeWatchdog&) = delete;

  // REQUIRES (every call taking `node`): node < the count given to the constructor.
  // Heard from the node (a frame, a reply): its deadline starts again.
  void progress(std::size_t node);
  // The node now owes `units` more (a job, a reply, a write in progress). When it owed nothing,
  // its clock starts now.
  void begin_owing(std::size_t node, uint64_t units = 1);
  // `units` of what it owed arrived or ended (never below zero).
  void end_owing(std::size_t node, uint64_t units = 1);
  // While paused (nested), the node is not timed out: its thread waits on something else. Resuming
  // counts as progress, so the node's clock starts again.
  void pause(std::size_t node);
  void resume(std::size_t node);
  // The node is done (or lost another way): it is watched no more. False when it had already been
  // found silent (then its action ran or is running).
  bool retire(std::size_t node);
  // The recorded reason once the node was found silent.
  std::optional<std::string> silent_reason(std::size_t node) const;
  bool found_silent(std::size_t node) const { return silent_reason(node).has_value(); }
  // Stops checking; nothing is found silent after it returns. Reports are still accepted.
  // REQUIRES: not called from a callback (it joins the thread that runs them).
  void stop();

 private:
  struct Watched {
    uint64_t owing = 0;
    int paused = 0;
    bool retired = false;
    Clock::time_point quiet_since = Clock::now();
    uint64_t last_counter = 0;
    std::optional<std::string> reason;
  };
  // REQUIRES: mutex_ held.
  bool watching(const Watched& node) const { return !node.retired && !node.reason && node.paused == 0 && node.owing > 0; }
  void check_all();

  Options options_;
  mutable std::mutex mutex_;
  std::vector<Watched> nodes_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: starts after the members it uses exist
};

}  // namespace tessera::balance::cluster
