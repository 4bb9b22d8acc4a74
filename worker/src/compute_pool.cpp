#include "tessera/worker/compute_pool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <future>
#include <utility>

#include "tessera/linalg/gemm.hpp"
#include "tessera/worker/thread_cpu.hpp"

namespace tessera::worker {

namespace {

uint32_t online_cpus() {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1u : static_cast<uint32_t>(cpus);
}

// While a completion runs on this thread: the seconds it has declared as communication.
thread_local double* completion_io_seconds = nullptr;

}  // namespace

ComputePool::ComputePool(uint32_t threads) {
  // Each strip is one BLAS call; BLAS threads of its own would oversubscribe the cores and, under
  // a cgroup quota, burn the budget spinning.
  linalg::set_blas_threads(1);
  const uint32_t count = threads == 0 ? online_cpus() : threads;
  threads_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) threads_.emplace_back([this] { thread_main(); });
}

ComputePool::~ComputePool() {
  std::deque<Job> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped.swap(queue_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ComputePool::submit(const GemmTask& task, Completion done) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Job{task, std::move(done)});
  }
  work_cv_.notify_one();
}

double ComputePool::run(const GemmTask& task) {
  std::promise<double> finished;
  auto seconds = finished.get_future();
  submit(task, [&finished](double s) { finished.set_value(s); });
  return seconds.get();
}

std::size_t ComputePool::cancel_pending() {
  std::deque<Job> dropped;  // completions (and the tiles they hold) die outside the lock
  {
    std::lock_guard lock(mutex_);
    dropped.swap(queue_);
    if (idle()) idle_cv_.notify_all();
  }
  return dropped.size();
}

ComputePool::Totals ComputePool::totals() const {
  std::lock_guard lock(mutex_);
  return totals_;
}

void ComputePool::count_as_io(double cpu_seconds) {
  if (completion_io_seconds != nullptr && cpu_seconds > 0.0) *completion_io_seconds += cpu_seconds;
}

void ComputePool::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_cv_.wait(lock, [this] { return idle(); });
}

bool ComputePool::has_work() const {
  if (running_) return next_strip_ < strip_count_;
  return !completing_ && !queue_.empty();
}

void ComputePool::thread_main() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || has_work(); });
    // Strips already handed out must still finish, so a stopping thread leaves only when none
    // remain for it; the thread holding the last strip runs the completion.
    if (!has_work()) return;
    if (!running_) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      // No empty strips: a job with fewer rows than threads uses one thread per row.
      strip_count_ = std::min<std::size_t>(threads_.size(), std::max<std::size_t>(current_.task.m, 1));
      next_strip_ = 0;
      strips_done_ = 0;
      started_ = std::chrono::steady_clock::now();
      if (strip_count_ > 1) work_cv_.notify_all();
    }
    const std::size_t strip = next_strip_++;
    const std::size_t strips = strip_count_;
    const GemmTask task = current_.task;
    lock.unlock();

    // Rows [strip*m/strips, (strip+1)*m/strips): sizes differ by at most one row.
    const std::size_t first = strip * task.m / strips;
    const std::size_t last = (strip + 1) * task.m / strips;
    const double strip_cpu_start = thread_cpu_seconds();
    linalg::gemm(last - first, task.n, task.k, 1.0, task.a + first * task.lda, task.lda, task.b, task.ldb,
         task.overwrite ? 0.0 : 1.0, task.c + first * task.ldc, task.ldc);
    const double strip_cpu = thread_cpu_seconds() - strip_cpu_start;

    lock.lock();
    totals_.compute_cpu_seconds += std::max(strip_cpu, 0.0);
    if (++strips_done_ < strip_count_) continue;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    ++totals_.jobs;
    totals_.wall_seconds += seconds;
    Job finished = std::move(current_);
    current_ = Job{};
    running_ = false;
    completing_ = true;  // keeps the next job from touching C while the completion reads it
    lock.unlock();

    // The completion's CPU time, including destroying it (it may hold the last reference to a
    // tile), is compute except what it declares as communication through count_as_io().
    double io_seconds = 0.0;
    const double completion_cpu_start = thread_cpu_seconds();
    completion_io_seconds = &io_seconds;
    try {
      if (finished.done) finished.done(seconds);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera-worker: job completion failed: %s\n", e.what());
    }
    completion_io_seconds = nullptr;
    finished = Job{};
    const double completion_cpu = std::max(thread_cpu_seconds() - completion_cpu_start, 0.0);
    const double completion_io = std::min(io_seconds, completion_cpu);

    lock.lock();
    totals_.compute_cpu_seconds += completion_cpu - completion_io;
    totals_.io_cpu_seconds += completion_io;
    completing_ = false;
    if (idle()) idle_cv_.notify_all();
    if (!queue_.empty()) work_cv_.notify_all();
  }
}

}  // namespace tessera::worker
