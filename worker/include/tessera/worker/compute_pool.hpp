// ComputePool: the worker's compute threads, running tasks of any service one at a time.
//
// A task (PoolTask) says into how many parts it splits; the pool runs those parts concurrently on
// its threads and then the task's completion. Tasks run in submission order (FIFO), one task at a
// time across the whole pool, so tasks writing the same memory need no locks; a completion runs on
// a pool thread after the task's last part and before the next task starts, so it may read the
// task's output (e.g. send it) safely. GEMM (C += A*B) is one kind of task: GemmRowStrips splits
// it into one row strip of C per thread, each strip a single-threaded BLAS call (A or B may be
// read transposed, straight from their stored layout). A scaled sum (C += s*A) is another:
// AddScaledRowStrips splits it by rows too, but only into strips large enough to be worth waking
// a thread for, since it is memory-bound. Idle threads sleep on a condition variable (workers
// often run under a cgroup CPU quota, where spinning would steal the budget from compute).
// Accounting: totals() reports the tasks finished, their wall time, and the pool threads' CPU time
// split into compute and communication. A part's thread CPU time is compute; a completion's is
// compute too except what the completion declares with count_as_io() (the worker's completions
// write CREDIT/RESULT frames, and that is communication even though it runs on a pool thread).
// Ownership: the pool owns a submitted task until its completion has run or it is cancelled, and
// destroys it on a pool thread (after the completion) or in cancel_pending()/the destructor. A
// task keeps what it reads and writes alive itself, usually through owning references.
// Thread-safe: every member may be called from any thread except that wait_idle() and the
// destructor must not be called from a task.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::worker {

// One unit of pool work. Subclasses hold their inputs and outputs (by owning reference when they
// may otherwise go away) and say how they split.
class PoolTask {
 public:
  virtual ~PoolTask() = default;
  // Parts to run for a pool of `threads` threads; 0 counts as 1. Called once, when the task starts.
  virtual std::size_t part_count(std::size_t threads) const = 0;
  // Runs part `part` of `parts`. Different parts run concurrently on different threads, so they
  // must touch disjoint memory.
  virtual void run_part(std::size_t part, std::size_t parts) = 0;
  // After the last part, on one pool thread, before the next task starts. `wall_seconds` is the
  // task's wall time from its first part's start to its last part's end. An exception is logged
  // and otherwise ignored.
  virtual void complete(double wall_seconds) { (void)wall_seconds; }
};

// C[m x n] += op(A)[m x k] * op(B)[k x n], row-major with leading dimensions; with `overwrite`,
// C = op(A) * op(B) and C's old contents are never read (a fresh output tile needs no zero-fill).
// op(A) is A, or A^T with `transpose_a` (then `a` points at a k x m block); op(B) is B, or B^T
// with `transpose_b` (an n x k block).
struct GemmTask {
  std::size_t m = 0, n = 0, k = 0;
  const double* a = nullptr;
  std::size_t lda = 0;
  const double* b = nullptr;
  std::size_t ldb = 0;
  double* c = nullptr;
  std::size_t ldc = 0;
  bool overwrite = false;
  bool transpose_a = false;
  bool transpose_b = false;
};

// A GEMM split into row strips of C, one per pool thread (never an empty strip: a GEMM with fewer
// rows than threads uses one thread per row). Strip sizes differ by at most one row. A strip of
// C's rows reads the same rows of op(A): rows of A, or columns of A when it is transposed; every
// strip reads all of op(B). Subclasses add what happens after the product (complete()) and what
// the product's memory is kept alive by.
class GemmRowStrips : public PoolTask {
 public:
  explicit GemmRowStrips(const GemmTask& gemm) : gemm_(gemm) {}
  std::size_t part_count(std::size_t threads) const final;
  void run_part(std::size_t part, std::size_t parts) final;

 protected:
  GemmTask gemm_;
};

// C[m x n] += s * op(A)[m x n], row-major with leading dimensions, where s = *scale is read when
// the task runs (a stored 1x1 tile, written by earlier tasks in the queue); with `overwrite`,
// C = s * op(A) and C's old contents are never read. op(A) is A, or A^T with `transpose_a` (then
// `a` points at an n x m block). REQUIRES: C's block overlaps neither A's block nor *scale.
struct AddScaledTask {
  std::size_t m = 0, n = 0;
  const double* scale = nullptr;
  const double* a = nullptr;
  std::size_t lda = 0;
  double* c = nullptr;
  std::size_t ldc = 0;
  bool overwrite = false;
  bool transpose_a = false;
};

// A scaled sum split into row strips of C (sizes differ by at most one row), one per pool thread
// but never one of fewer than kMinStripEntries entries: each entry is two loads and a store, and
// for a small block waking the other threads costs more than the work. With a transposed A, a
// strip of C's rows reads that many columns of A, walked in kTransposeBlock-square blocks so each
// block of A and of C stays in cache while it is read across.
class AddScaledRowStrips : public PoolTask {
 public:
  static constexpr std::size_t kMinStripEntries = std::size_t{1} << 15;  // 256 KiB of C
  static constexpr std::size_t kTransposeBlock = 32;                     // 8 KiB of A, 8 KiB of C
  explicit AddScaledRowStrips(const AddScaledTask& sum) : sum_(sum) {}
  std::size_t part_count(std::size_t threads) const final;
  void run_part(std::size_t part, std::size_t parts) final;

 protected:
  AddScaledTask sum_;
};

class ComputePool {
 public:
  // Called with a GEMM's wall time in seconds, from first strip start to last strip end.
  using Completion = std::function<void(double compute_seconds)>;

  // threads: 0 = online CPUs. Sets BLAS to one thread per call (the pool parallelises itself).
  explicit ComputePool(uint32_t threads);
  // Drops queued tasks, waits for the running one, joins the threads.
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()); }

  // Queues the task behind all earlier ones. REQUIRES: task is not null.
  void submit(std::unique_ptr<PoolTask> task);
  // Queues a GEMM whose completion is `done` (which may be empty).
  void submit(const GemmTask& task, Completion done);

  // Runs `task` behind the queued tasks and returns its wall time once it has finished.
  double run(const GemmTask& task);

  // Drops tasks not yet started (destroyed without their completion being called) and returns
  // how many. The running task, if any, finishes normally.
  std::size_t cancel_pending();

  // Blocks until no task is queued or running.
  void wait_idle();
  // True while a task is queued, running or completing (a session with work here is not idle).
  bool busy() const;

  // Cumulative figures since the pool started; a period's figures are the difference of two
  // snapshots (the worker takes one when a session starts). A task's wall and part CPU time are
  // included before its completion is called; a completion's own CPU time once it has returned.
  // Time the threads spend waking up and handing out parts is in neither CPU figure.
  struct Totals {
    uint64_t jobs = 0;                 // tasks finished, submit() and run() alike
    double wall_seconds = 0.0;         // sum of the tasks' wall times, first part start to last part end
    double compute_cpu_seconds = 0.0;  // thread CPU in parts and completions, minus io_cpu_seconds
    double io_cpu_seconds = 0.0;       // completion thread CPU declared with count_as_io()
  };
  Totals totals() const;

  // For a completion: `cpu_seconds` of the calling thread's CPU time within this completion went
  // to communication, so totals() counts it as io instead of compute (at most the completion's
  // whole CPU time moves). Ignored when the calling thread is not running a completion.
  static void count_as_io(double cpu_seconds);

 private:
  void thread_main();
  // REQUIRES: mutex_ held.
  bool has_work() const;
  bool idle() const { return queue_.empty() && !running_ && !completing_; }

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // a part or a new task is available, or stopping
  std::condition_variable idle_cv_;  // the pool went idle
  std::deque<std::unique_ptr<PoolTask>> queue_;
  // The running task: parts [0, part_count_) of it; next_part_ is the next one to hand out.
  bool running_ = false;
  bool completing_ = false;  // the completion of the last task is running; the next task waits
  std::unique_ptr<PoolTask> current_;
  std::size_t part_count_ = 0;
  std::size_t next_part_ = 0;
  std::size_t parts_done_ = 0;
  std::chrono::steady_clock::time_point started_;
  bool stopping_ = false;
  Totals totals_;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::worker
