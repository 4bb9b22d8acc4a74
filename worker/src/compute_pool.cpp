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

// A GEMM whose completion is a callable, for callers that need no task type of their own.
class GemmWithCompletion final : public GemmRowStrips {
 public:
  GemmWithCompletion(const GemmTask& gemm, ComputePool::Completion done)
      : GemmRowStrips(gemm), done_(std::move(done)) {}
  void complete(double wall_seconds) override {
    if (done_) done_(wall_seconds);
  }

 private:
  ComputePool::Completion done_;
};

}  // namespace

std::size_t GemmRowStrips::part_count(std::size_t threads) const {
  return std::min<std::size_t>(threads, std::max<std::size_t>(gemm_.m, 1));
}

void GemmRowStrips::run_part(std::size_t part, std::size_t parts) {
  // Rows [part*m/parts, (part+1)*m/parts): sizes differ by at most one row.
  const std::size_t first = part * gemm_.m / parts;
  const std::size_t last = (part + 1) * gemm_.m / parts;
  // Row i of A^T is column i of the stored k x m block.
  const double* a = gemm_.a + (gemm_.transpose_a ? first : first * gemm_.lda);
  linalg::gemm_ex(gemm_.transpose_a, gemm_.transpose_b, last - first, gemm_.n, gemm_.k, 1.0, a, gemm_.lda,
                  gemm_.b, gemm_.ldb, gemm_.overwrite ? 0.0 : 1.0, gemm_.c + first * gemm_.ldc, gemm_.ldc);
}

std::size_t AddScaledRowStrips::part_count(std::size_t threads) const {
  const std::size_t by_size = std::max<std::size_t>(sum_.m * sum_.n / kMinStripEntries, 1);
  return std::min({threads, std::max<std::size_t>(sum_.m, 1), by_size});
}

void AddScaledRowStrips::run_part(std::size_t part, std::size_t parts) {
  const std::size_t first = part * sum_.m / parts;
  const std::size_t last = (part + 1) * sum_.m / parts;
  const double s = *sum_.scale;
  if (sum_.transpose_a) {
    // C[i][j] reads A[j][i]: a row of C walks down a column of A, so go block by block.
    for (std::size_t i0 = first; i0 < last; i0 += kTransposeBlock) {
      const std::size_t i1 = std::min(i0 + kTransposeBlock, last);
      for (std::size_t j0 = 0; j0 < sum_.n; j0 += kTransposeBlock) {
        const std::size_t j1 = std::min(j0 + kTransposeBlock, sum_.n);
        for (std::size_t i = i0; i < i1; ++i) {
          double* c = sum_.c + i * sum_.ldc;
          if (sum_.overwrite) {
            for (std::size_t j = j0; j < j1; ++j) c[j] = s * sum_.a[j * sum_.lda + i];
          } else {
            for (std::size_t j = j0; j < j1; ++j) c[j] += s * sum_.a[j * sum_.lda + i];
          }
        }
      }
    }
    return;
  }
  for (std::size_t i = first; i < last; ++i) {
    const double* a = sum_.a + i * sum_.lda;
    double* c = sum_.c + i * sum_.ldc;
    if (sum_.overwrite) {
      for (std::size_t j = 0; j < sum_.n; ++j) c[j] = s * a[j];
    } else {
      for (std::size_t j = 0; j < sum_.n; ++j) c[j] += s * a[j];
    }
  }
}

ComputePool::ComputePool(uint32_t threads) {
  // Each strip is one BLAS call; BLAS threads of its own would oversubscribe the cores and, under
  // a cgroup quota, burn the budget spinning.
  linalg::set_blas_threads(1);
  const uint32_t count = threads == 0 ? online_cpus() : threads;
  threads_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) threads_.emplace_back([this] { thread_main(); });
}

ComputePool::~ComputePool() {
  std::deque<std::unique_ptr<PoolTask>> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped.swap(queue_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ComputePool::submit(std::unique_ptr<PoolTask> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void ComputePool::submit(const GemmTask& task, Completion done) {
  submit(std::make_unique<GemmWithCompletion>(task, std::move(done)));
}

double ComputePool::run(const GemmTask& task) {
  std::promise<double> finished;
  auto seconds = finished.get_future();
  submit(task, [&finished](double s) { finished.set_value(s); });
  return seconds.get();
}

std::size_t ComputePool::cancel_pending() {
  std::deque<std::unique_ptr<PoolTask>> dropped;  // tasks (and the tiles they hold) die outside the lock
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

bool ComputePool::busy() const {
  std::lock_guard lock(mutex_);
  return !idle();
}

bool ComputePool::has_work() const {
  if (running_) return next_part_ < part_count_;
  return !completing_ && !queue_.empty();
}

void ComputePool::thread_main() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || has_work(); });
    // Parts already handed out must still finish, so a stopping thread leaves only when none
    // remain for it; the thread finishing the last part runs the completion.
    if (!has_work()) return;
    if (!running_) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      part_count_ = std::max<std::size_t>(current_->part_count(threads_.size()), 1);
      next_part_ = 0;
      parts_done_ = 0;
      started_ = std::chrono::steady_clock::now();
      if (part_count_ > 1) work_cv_.notify_all();
    }
    const std::size_t part = next_part_++;
    const std::size_t parts = part_count_;
    // current_ only changes hands after its last part is done, so the pointer stays valid.
    PoolTask* task = current_.get();
    lock.unlock();

    const double part_cpu_start = thread_cpu_seconds();
    task->run_part(part, parts);
    const double part_cpu = thread_cpu_seconds() - part_cpu_start;

    lock.lock();
    totals_.compute_cpu_seconds += std::max(part_cpu, 0.0);
    if (++parts_done_ < part_count_) continue;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    ++totals_.jobs;
    totals_.wall_seconds += seconds;
    std::unique_ptr<PoolTask> finished = std::move(current_);
    running_ = false;
    completing_ = true;  // keeps the next task from touching the output while the completion reads it
    lock.unlock();

    // The completion's CPU time, including destroying the task (it may hold the last reference to
    // a tile), is compute except what it declares as communication through count_as_io().
    double io_seconds = 0.0;
    const double completion_cpu_start = thread_cpu_seconds();
    completion_io_seconds = &io_seconds;
    try {
      finished->complete(seconds);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera-worker: task completion failed: %s\n", e.what());
    }
    completion_io_seconds = nullptr;
    finished.reset();
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
