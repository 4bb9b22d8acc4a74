// Running library calls from Python without holding the GIL, and interruptibly.
//
// run_interruptible runs a long call (a multiply, a graph run, a profile) on its own std::thread
// while the calling thread waits with the GIL released, waking every 50 ms to take the GIL just
// long enough for PyErr_CheckSignals() and for `on_poll` (which hands progress to Python
// callbacks). Python runs signal handlers only on its main thread between bytecodes, so without
// this a Ctrl-C would wait for the whole run. When a signal handler raises (KeyboardInterrupt) or
// `on_poll` throws, `cancel` is set (the run stops within about 50 ms: RunControl::cancel), the
// thread is joined, and the exception propagates: the caller must treat its Session as closed.
// REQUIRES: the GIL is held on entry; `work` touches no Python object.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace tessera::python {

// f() with the GIL released.
template <typename F>
auto without_gil(F&& f) {
  pybind11::gil_scoped_release release;
  return f();
}

inline constexpr std::chrono::milliseconds kSignalPollInterval{50};

template <typename Work>
auto run_interruptible(std::atomic<bool>& cancel, Work&& work, const std::function<void()>& on_poll) {
  using ResultType = decltype(work());
  std::optional<ResultType> result;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::thread runner([&] {
    ResultType value = work();
    std::lock_guard<std::mutex> lock(mutex);
    result.emplace(std::move(value));
    done = true;
    finished.notify_all();
  });
  // Joins on every way out; on an exception first stops the run.
  struct Joiner {
    std::thread& thread;
    std::atomic<bool>& cancel;
    ~Joiner() {
      if (!thread.joinable()) return;
      cancel.store(true);
      pybind11::gil_scoped_release release;
      thread.join();
    }
  } joiner{runner, cancel};
  for (;;) {
    const bool over = without_gil([&] {
      std::unique_lock<std::mutex> lock(mutex);
      return finished.wait_for(lock, kSignalPollInterval, [&] { return done; });
    });
    if (over) break;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    if (on_poll) on_poll();
  }
  without_gil([&] { runner.join(); });
  if (on_poll) on_poll();  // the last progress and notices
  return std::move(*result);
}

}  // namespace tessera::python
