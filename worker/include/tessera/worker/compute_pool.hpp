// ComputePool: the worker's compute threads, running GEMM jobs C += A*B one at a time.
//
// Jobs run in submission order (FIFO), one job at a time across the whole pool; each job is split
// into one row strip of C per thread, each strip a single-threaded BLAS call. Because only one job
// runs at a time, jobs accumulating into the same C need no locks. A job's completion callback
// runs on a pool thread after its last strip and before the next job starts, so it may read C
// (e.g. send it) safely. Idle threads sleep on a condition variable (workers often run under a
// cgroup CPU quota, where spinning would steal the budget from compute).
// Accounting: totals() reports the jobs finished, their wall time, and the pool threads' CPU time
// split into compute and communication. A strip's thread CPU time is compute; a completion's is
// compute too except what the completion declares with count_as_io() (the worker's completions
// write CREDIT/RESULT frames, and that is communication even though it runs on a pool thread).
// Ownership: the caller keeps A, B and C alive until the completion runs or the job is cancelled;
// the usual way is to capture owning references in the completion, which the pool destroys after
// calling it (or on cancel). Thread-safe: every member may be called from any thread except that
// wait_idle() and the destructor must not be called from a completion.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::worker {

// C[m x n] += A[m x k] * B[k x n], row-major with leading dimensions; with `overwrite`,
// C = A * B and C's old contents are never read (a fresh output tile needs no zero-fill).
struct GemmTask {
  std::size_t m = 0, n = 0, k = 0;
  const double* a = nullptr;
  std::size_t lda = 0;
  const double* b = nullptr;
  std::size_t ldb = 0;
  double* c = nullptr;
  std::size_t ldc = 0;
  bool overwrite = false;
};

class ComputePool {
 public:
  // Called with the job's wall time in seconds, from first strip start to last strip end.
  using Completion = std::function<void(double compute_seconds)>;

  // threads: 0 = online CPUs. Sets BLAS to one thread per call (the pool parallelises itself).
  explicit ComputePool(uint32_t threads);
  // Drops queued jobs, waits for the running one, joins the threads.
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()); }

  // Queues the job behind all earlier ones. `done` may be empty.
  void submit(const GemmTask& task, Completion done);

  // Runs `task` behind the queued jobs and returns its wall time once it has finished.
  double run(const GemmTask& task);

  // Drops jobs not yet started (their completions are destroyed without being called) and
  // returns how many. The running job, if any, finishes normally.
  std::size_t cancel_pending();

  // Blocks until no job is queued or running.
  void wait_idle();

  // Cumulative figures since the pool started; a period's figures are the difference of two
  // snapshots (the worker takes one when a session starts). A job's wall and strip CPU time are
  // included before its completion is called; a completion's own CPU time once it has returned.
  // Time the threads spend waking up and handing out strips is in neither CPU figure.
  struct Totals {
    uint64_t jobs = 0;                 // jobs finished, submit() and run() alike
    double wall_seconds = 0.0;         // sum of the jobs' wall times, first strip start to last strip end
    double compute_cpu_seconds = 0.0;  // thread CPU in strips and completions, minus io_cpu_seconds
    double io_cpu_seconds = 0.0;       // completion thread CPU declared with count_as_io()
  };
  Totals totals() const;

  // For a completion: `cpu_seconds` of the calling thread's CPU time within this completion went
  // to communication, so totals() counts it as io instead of compute (at most the completion's
  // whole CPU time moves). Ignored when the calling thread is not running a completion.
  static void count_as_io(double cpu_seconds);

 private:
  struct Job {
    GemmTask task;
    Completion done;
  };

  void thread_main();
  // REQUIRES: mutex_ held.
  bool has_work() const;
  bool idle() const { return queue_.empty() && !running_ && !completing_; }

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // a strip or a new job is available, or stopping
  std::condition_variable idle_cv_;  // the pool went idle
  std::deque<Job> queue_;
  // The running job: strips [0, strip_count_) of it; next_strip_ is the next one to hand out.
  bool running_ = false;
  bool completing_ = false;  // the completion of the last job is running; the next job waits
  Job current_;
  std::size_t strip_count_ = 0;
  std::size_t next_strip_ = 0;
  std::size_t strips_done_ = 0;
  std::chrono::steady_clock::time_point started_;
  bool stopping_ = false;
  Totals totals_;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::worker
