#include "tessera/worker/compute_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/linalg/gemm.hpp"

namespace tessera::worker {
namespace {

using linalg::gemm;
using linalg::gemm_accumulate;
using linalg::gemm_ex;

struct Matrix {
  std::size_t rows, cols, ld;
  std::vector<double> values;
  Matrix(std::size_t r, std::size_t c, std::size_t pad = 0) : rows(r), cols(c), ld(c + pad), values(r * (c + pad), 0.0) {}
  double* data() { return values.data(); }
};

// Small integers: every sum is exact, so the row-split product must equal one big GEMM bitwise.
void fill_integers(Matrix& m, int seed) {
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j)
      m.values[i * m.ld + j] = static_cast<double>((static_cast<int>(i * 5 + j * 11) + seed) % 9 - 4);
}

GemmTask task_for(Matrix& a, Matrix& b, Matrix& c) {
  return GemmTask{c.rows, c.cols, a.cols, a.data(), a.ld, b.data(), b.ld, c.data(), c.ld};
}

// The transpose of `m` with `pad` extra columns: how a transposed operand is stored.
Matrix transposed(const Matrix& m, std::size_t pad) {
  Matrix t(m.cols, m.rows, pad);
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) t.values[j * t.ld + i] = m.values[i * m.ld + j];
  return t;
}

class ComputePoolThreads : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ComputePoolThreads, RowSplitAccumulationEqualsOneGemm) {
  ComputePool pool(GetParam());
  EXPECT_EQ(pool.threads(), GetParam());
  for (std::size_t m : {1u, 2u, 6u, 50u, 101u}) {
    Matrix a(m, 23, 3), b(23, 31, 1), c(m, 31, 2), expected(m, 31, 2);
    fill_integers(a, 1);
    fill_integers(b, 2);
    fill_integers(c, 3);
    expected.values = c.values;
    gemm_accumulate(m, 31, 23, a.data(), a.ld, b.data(), b.ld, expected.data(), expected.ld);
    const double seconds = pool.run(task_for(a, b, c));
    EXPECT_GE(seconds, 0.0);
    ASSERT_EQ(c.values, expected.values) << "m=" << m << " threads=" << GetParam();
  }
}

TEST_P(ComputePoolThreads, ManyJobsAccumulateIntoTheSameC) {
  ComputePool pool(GetParam());
  Matrix a(17, 9), b(9, 13), c(17, 13), once(17, 13);
  fill_integers(a, 5);
  fill_integers(b, 6);
  gemm_accumulate(17, 13, 9, a.data(), a.ld, b.data(), b.ld, once.data(), once.ld);
  constexpr int kJobs = 500;
  std::atomic<int> completed{0};
  for (int i = 0; i < kJobs; ++i) pool.submit(task_for(a, b, c), [&](double) { ++completed; });
  pool.wait_idle();
  EXPECT_EQ(completed.load(), kJobs);
  for (std::size_t i = 0; i < c.values.size(); ++i) ASSERT_EQ(c.values[i], kJobs * once.values[i]);
}

INSTANTIATE_TEST_SUITE_P(Threads, ComputePoolThreads, ::testing::Values(1u, 2u, 3u, 7u));

// With A^T a strip of C's rows reads the same columns of the stored k x m A, with B^T every strip
// reads all of the stored n x k B; either way the split product must equal the untransposed one.
TEST_P(ComputePoolThreads, RowSplitWithTransposedOperandsEqualsOneGemm) {
  ComputePool pool(GetParam());
  constexpr std::size_t n = 31, k = 23;
  for (std::size_t m : {1u, 2u, 6u, 50u, 101u}) {
    Matrix a(m, k, 3), b(k, n, 1), c(m, n, 2), expected(m, n, 2);
    fill_integers(a, 1);
    fill_integers(b, 2);
    fill_integers(c, 3);
    expected.values = c.values;
    gemm_accumulate(m, n, k, a.data(), a.ld, b.data(), b.ld, expected.data(), expected.ld);
    Matrix a_t = transposed(a, 4), b_t = transposed(b, 1);
    for (const bool transpose_a : {false, true}) {
      for (const bool transpose_b : {false, true}) {
        if (!transpose_a && !transpose_b) continue;
        Matrix& stored_a = transpose_a ? a_t : a;
        Matrix& stored_b = transpose_b ? b_t : b;
        Matrix out = c;
        GemmTask task{m, n, k, stored_a.data(), stored_a.ld, stored_b.data(), stored_b.ld, out.data(), out.ld};
        task.transpose_a = transpose_a;
        task.transpose_b = transpose_b;
        pool.run(task);
        ASSERT_EQ(out.values, expected.values) << "m=" << m << " threads=" << GetParam()
                                               << " transpose_a=" << transpose_a << " transpose_b=" << transpose_b;
      }
    }
  }
}

TEST_P(ComputePoolThreads, OverwriteWithATransposedNeverReadsTheOldC) {
  ComputePool pool(GetParam());
  Matrix a_t(19, 37, 2), b(19, 29), c(37, 29, 3), expected(37, 29, 3);  // A^T: A stored 19 x 37
  fill_integers(a_t, 4);
  fill_integers(b, 5);
  for (double& value : c.values) value = std::numeric_limits<double>::quiet_NaN();  // recycled garbage
  GemmTask task{37, 29, 19, a_t.data(), a_t.ld, b.data(), b.ld, c.data(), c.ld};
  task.overwrite = true;
  task.transpose_a = true;
  pool.run(task);
  gemm_ex(true, false, 37, 29, 19, 1.0, a_t.data(), a_t.ld, b.data(), b.ld, 0.0, expected.data(), expected.ld);
  for (std::size_t i = 0; i < 37; ++i) {
    for (std::size_t j = 0; j < 29; ++j) ASSERT_EQ(c.values[i * c.ld + j], expected.values[i * c.ld + j]);
  }
}

TEST_P(ComputePoolThreads, OverwriteNeverReadsTheOldC) {
  ComputePool pool(GetParam());
  Matrix a(37, 19), b(19, 29), c(37, 29, 3), expected(37, 29, 3);
  fill_integers(a, 4);
  fill_integers(b, 5);
  for (double& value : c.values) value = std::numeric_limits<double>::quiet_NaN();  // recycled garbage
  GemmTask task = task_for(a, b, c);
  task.overwrite = true;
  pool.run(task);
  gemm(37, 29, 19, 1.0, a.data(), a.ld, b.data(), b.ld, 0.0, expected.data(), expected.ld);
  for (std::size_t i = 0; i < 37; ++i) {
    for (std::size_t j = 0; j < 29; ++j) ASSERT_EQ(c.values[i * c.ld + j], expected.values[i * c.ld + j]);
  }
}

TEST(ComputePool, JobsCompleteInSubmissionOrderOneAtATime) {
  ComputePool pool(3);
  Matrix a(40, 40), b(40, 40);
  fill_integers(a, 1);
  fill_integers(b, 1);
  constexpr int kJobs = 200;
  std::vector<Matrix> outputs(kJobs, Matrix(40, 40));
  std::mutex mutex;
  std::vector<int> order;
  std::atomic<int> in_completion{0};
  std::atomic<bool> overlapped{false};
  for (int i = 0; i < kJobs; ++i) {
    // Varying sizes make later jobs finish faster than earlier ones if order were not kept.
    GemmTask task = task_for(a, b, outputs[static_cast<std::size_t>(i)]);
    task.m = i % 2 == 0 ? 40 : 1;
    pool.submit(task, [&, i](double) {
      if (in_completion.fetch_add(1) != 0) overlapped = true;
      {
        std::lock_guard lock(mutex);
        order.push_back(i);
      }
      in_completion.fetch_sub(1);
    });
  }
  pool.wait_idle();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_FALSE(overlapped);
}

TEST(ComputePool, CompletionRunsBeforeTheNextJobTouchesC) {
  // A completion that reads C (as RESULT does) must see exactly its own job's contribution.
  ComputePool pool(2);
  Matrix a(64, 64), b(64, 64), c(64, 64), once(64, 64);
  fill_integers(a, 2);
  fill_integers(b, 3);
  gemm_accumulate(64, 64, 64, a.data(), a.ld, b.data(), b.ld, once.data(), once.ld);
  std::atomic<int> mismatches{0};
  for (int i = 1; i <= 50; ++i) {
    pool.submit(task_for(a, b, c), [&, i](double) {
      for (std::size_t e = 0; e < c.values.size(); ++e)
        if (c.values[e] != i * once.values[e]) ++mismatches;
    });
  }
  pool.wait_idle();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ComputePool, CancelPendingDropsQueuedJobsWithoutCallingThem) {
  ComputePool pool(1);
  Matrix a(300, 300), b(300, 300), c(300, 300);
  std::atomic<int> completed{0};
  auto token = std::make_shared<int>(0);  // stands in for the tiles a job holds
  for (int i = 0; i < 20; ++i) pool.submit(task_for(a, b, c), [&, token](double) { ++completed; });
  const std::size_t cancelled = pool.cancel_pending();
  pool.wait_idle();
  EXPECT_EQ(completed.load() + static_cast<int>(cancelled), 20);
  EXPECT_EQ(token.use_count(), 1) << "cancelled completions must be destroyed";
}

TEST(ComputePool, ZeroThreadsMeansOnlineCpus) {
  ComputePool pool(0);
  EXPECT_GE(pool.threads(), 1u);
}

// Records what the pool did with a task: completion and destruction.
struct TaskLog {
  std::atomic<int> completed{0};
  std::atomic<int> destroyed{0};
};

class LoggedGemm final : public GemmRowStrips {
 public:
  LoggedGemm(const GemmTask& gemm, TaskLog& log) : GemmRowStrips(gemm), log_(log) {}
  ~LoggedGemm() override { ++log_.destroyed; }
  void complete(double) override { ++log_.completed; }

 private:
  TaskLog& log_;
};

TEST(ComputePool, DestructorWithQueuedTasksDropsThemAndReturns) {
  Matrix a(200, 200), b(200, 200), c(200, 200);
  constexpr int kTasks = 50;
  std::vector<TaskLog> logs(kTasks);
  {
    ComputePool pool(2);
    for (int i = 0; i < kTasks; ++i) pool.submit(std::make_unique<LoggedGemm>(task_for(a, b, c), logs[i]));
  }
  bool dropped_earlier = false;
  for (int i = 0; i < kTasks; ++i) {
    const TaskLog& log = logs[static_cast<std::size_t>(i)];
    // Every task is destroyed exactly once, whether it ran or was dropped.
    EXPECT_EQ(log.destroyed.load(), 1) << "task " << i;
    EXPECT_LE(log.completed.load(), 1) << "task " << i;
    // Tasks run in order, so the ones that completed are a prefix and the dropped ones the rest.
    if (log.completed.load() == 1) {
      EXPECT_FALSE(dropped_earlier) << "task " << i << " ran after a dropped one";
    }
    if (log.completed.load() == 0) dropped_earlier = true;
  }
}

// A non-GEMM task: sums of squares over disjoint slices, one slot per part, combined by the
// completion. Splits into more parts than threads so threads take several parts each.
class SumOfSquares final : public PoolTask {
 public:
  explicit SumOfSquares(const std::vector<double>& values) : values_(values) {}
  std::size_t part_count(std::size_t threads) const override { return 3 * threads + 1; }
  void run_part(std::size_t part, std::size_t parts) override {
    if (partial_.size() != parts) return;  // parts is fixed for the whole task; checked below
    const std::size_t first = part * values_.size() / parts;
    const std::size_t last = (part + 1) * values_.size() / parts;
    double sum = 0.0;
    for (std::size_t i = first; i < last; ++i) sum += values_[i] * values_[i];
    partial_[part] = sum;
    ++runs_[part];
  }
  void complete(double wall_seconds) override {
    wall_seconds_ = wall_seconds;
    for (double part_sum : partial_) total_ += part_sum;
    completed_ = true;
  }
  void prepare(std::size_t parts) {
    partial_.assign(parts, 0.0);
    runs_ = std::vector<std::atomic<int>>(parts);
  }

  const std::vector<double>& values_;
  std::vector<double> partial_;
  std::vector<std::atomic<int>> runs_;
  double total_ = 0.0;
  double wall_seconds_ = -1.0;
  bool completed_ = false;
};

// Keeps the task alive after the pool is done with it, so the test can read its results.
class Borrowed final : public PoolTask {
 public:
  Borrowed(PoolTask& task, std::atomic<bool>& done) : task_(task), done_(done) {}
  std::size_t part_count(std::size_t threads) const override { return task_.part_count(threads); }
  void run_part(std::size_t part, std::size_t parts) override { task_.run_part(part, parts); }
  void complete(double wall_seconds) override {
    task_.complete(wall_seconds);
    done_ = true;
  }

 private:
  PoolTask& task_;
  std::atomic<bool>& done_;
};

TEST_P(ComputePoolThreads, RunsANonGemmTaskSplitIntoParts) {
  ComputePool pool(GetParam());
  std::vector<double> values(10007);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 13);  // exact sums
  double expected = 0.0;
  for (double v : values) expected += v * v;

  SumOfSquares task(values);
  const std::size_t parts = 3 * GetParam() + 1;
  task.prepare(parts);
  const ComputePool::Totals before = pool.totals();
  std::atomic<bool> done{false};
  pool.submit(std::make_unique<Borrowed>(task, done));
  pool.wait_idle();
  ASSERT_TRUE(done.load());
  EXPECT_TRUE(task.completed_);
  for (std::size_t part = 0; part < parts; ++part) EXPECT_EQ(task.runs_[part].load(), 1) << "part " << part;
  EXPECT_EQ(task.total_, expected);
  EXPECT_GE(task.wall_seconds_, 0.0);
  const ComputePool::Totals after = pool.totals();
  EXPECT_EQ(after.jobs, before.jobs + 1);
  EXPECT_GE(after.wall_seconds, before.wall_seconds + task.wall_seconds_);
}

// A task asking for no parts still runs once and completes.
class NoParts final : public PoolTask {
 public:
  explicit NoParts(std::atomic<int>& runs) : runs_(runs) {}
  std::size_t part_count(std::size_t) const override { return 0; }
  void run_part(std::size_t part, std::size_t parts) override {
    if (part == 0 && parts == 1) ++runs_;
  }

 private:
  std::atomic<int>& runs_;
};

TEST(ComputePool, TaskWithZeroPartsRunsAsOnePart) {
  ComputePool pool(3);
  std::atomic<int> runs{0};
  pool.submit(std::make_unique<NoParts>(runs));
  pool.wait_idle();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(pool.totals().jobs, 1u);
}

TEST(ComputePool, GemmAndOtherTasksKeepSubmissionOrder) {
  // A completion of each kind appends to one log; FIFO across kinds keeps it sorted.
  ComputePool pool(2);
  Matrix a(30, 30), b(30, 30), c(30, 30);
  std::mutex mutex;
  std::vector<int> order;
  class Append final : public PoolTask {
   public:
    Append(int id, std::mutex& m, std::vector<int>& out) : id_(id), mutex_(m), out_(out) {}
    std::size_t part_count(std::size_t) const override { return 1; }
    void run_part(std::size_t, std::size_t) override {}
    void complete(double) override {
      std::lock_guard lock(mutex_);
      out_.push_back(id_);
    }

   private:
    int id_;
    std::mutex& mutex_;
    std::vector<int>& out_;
  };
  for (int i = 0; i < 40; ++i) {
    if (i % 2 == 0) {
      pool.submit(task_for(a, b, c), [&, i](double) {
        std::lock_guard lock(mutex);
        order.push_back(i);
      });
    } else {
      pool.submit(std::make_unique<Append>(i, mutex, order));
    }
  }
  pool.wait_idle();
  ASSERT_EQ(order.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

// An AddScaledRowStrips with nothing after the sum; exposes how it splits.
class PlainSum final : public AddScaledRowStrips {
 public:
  explicit PlainSum(const AddScaledTask& sum) : AddScaledRowStrips(sum) {}
  std::size_t parts_for(std::size_t threads) const { return part_count(threads); }
};

AddScaledTask sum_for(const double* scale, Matrix& a, Matrix& c) {
  return AddScaledTask{c.rows, c.cols, scale, a.data(), a.ld, c.data(), c.ld};
}

TEST(AddScaledRowStrips, SplitsByRowsOnlyIntoStripsWorthAThread) {
  constexpr std::size_t kMin = AddScaledRowStrips::kMinStripEntries;
  auto parts = [](std::size_t m, std::size_t n, std::size_t threads) {
    return PlainSum(AddScaledTask{m, n}).parts_for(threads);
  };
  EXPECT_EQ(parts(3, 4, 8), 1u) << "a small block stays on one thread";
  EXPECT_EQ(parts(2, kMin - 1, 4), 1u);
  EXPECT_EQ(parts(1, 8 * kMin, 8), 1u) << "one row is one strip, however long";
  EXPECT_EQ(parts(5, kMin, 8), 5u) << "never more strips than rows";
  EXPECT_EQ(parts(1000, 1000, 4), 4u);
  EXPECT_EQ(parts(1000, 1000, 64), 1000u * 1000u / kMin);
}

TEST_P(ComputePoolThreads, AddScaledEqualsTheElementwiseSum) {
  ComputePool pool(GetParam());
  // 1 x 1, a block below one strip, and one large enough to split over every thread (rows not
  // divisible by the thread counts); padded leading dimensions on both sides.
  for (std::size_t m : {1u, 6u, 301u}) {
    const std::size_t n = m == 301 ? 401 : m + 2;
    Matrix a(m, n, 3), c(m, n, 2);
    fill_integers(a, 1);
    fill_integers(c, 2);
    Matrix expected = c;
    const double scale = -3.0;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) expected.values[i * c.ld + j] += scale * a.values[i * a.ld + j];
    pool.submit(std::make_unique<PlainSum>(sum_for(&scale, a, c)));
    pool.wait_idle();
    ASSERT_EQ(c.values, expected.values) << "m=" << m << " threads=" << GetParam();
  }
}

// C += s * A^T from the stored n x m A: shapes below, across and beyond the transpose blocks, and
// one large enough to split over every thread (rows not divisible by the thread counts).
TEST_P(ComputePoolThreads, AddScaledWithATransposedEqualsTheElementwiseSum) {
  ComputePool pool(GetParam());
  constexpr std::size_t kBlock = AddScaledRowStrips::kTransposeBlock;
  const std::pair<std::size_t, std::size_t> shapes[] = {
      {1, 1}, {1, 2 * kBlock + 3}, {kBlock + 1, 1}, {kBlock - 1, 2 * kBlock + 1}, {301, 401}};
  for (const auto& [m, n] : shapes) {
    SCOPED_TRACE(::testing::Message() << m << " x " << n << ", threads " << GetParam());
    Matrix a_t(n, m, 3), c(m, n, 2);
    fill_integers(a_t, 1);
    fill_integers(c, 2);
    const double scale = -3.0;
    Matrix expected = c;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) expected.values[i * c.ld + j] += scale * a_t.values[j * a_t.ld + i];
    AddScaledTask sum = sum_for(&scale, a_t, c);
    sum.transpose_a = true;
    EXPECT_EQ(PlainSum(sum).parts_for(GetParam()), PlainSum(AddScaledTask{m, n}).parts_for(GetParam()))
        << "a transposed sum splits like any other";
    pool.submit(std::make_unique<PlainSum>(sum));
    pool.wait_idle();
    ASSERT_EQ(c.values, expected.values);

    // Overwriting: C = s * A^T, the old C (garbage) never read, the padding never written.
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) c.values[i * c.ld + j] = std::numeric_limits<double>::quiet_NaN();
    sum.overwrite = true;
    pool.submit(std::make_unique<PlainSum>(sum));
    pool.wait_idle();
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(c.values[i * c.ld + j], scale * a_t.values[j * a_t.ld + i]);
      for (std::size_t j = n; j < c.ld; ++j) ASSERT_EQ(c.values[i * c.ld + j], expected.values[i * c.ld + j]);
    }
  }
}

TEST_P(ComputePoolThreads, AddScaledOverwriteNeverReadsTheOldCAndReadsTheScaleWhenItRuns) {
  ComputePool pool(GetParam());
  Matrix a(301, 401), c(301, 401, 1), scale(1, 1), four(1, 1);
  fill_integers(a, 4);
  for (double& value : c.values) value = std::numeric_limits<double>::quiet_NaN();  // recycled garbage
  // The task queued before the sum writes its scale (0.5 * 4), as an earlier job writes a tile a
  // later one reads.
  const double half = 0.5;
  four.values[0] = 4.0;
  AddScaledTask make_scale = sum_for(&half, four, scale);
  make_scale.overwrite = true;
  pool.submit(std::make_unique<PlainSum>(make_scale));
  AddScaledTask sum = sum_for(scale.data(), a, c);
  sum.overwrite = true;
  pool.submit(std::make_unique<PlainSum>(sum));
  pool.wait_idle();
  for (std::size_t i = 0; i < 301; ++i) {
    for (std::size_t j = 0; j < 401; ++j) ASSERT_EQ(c.values[i * c.ld + j], 2.0 * a.values[i * a.ld + j]);
  }
}

}  // namespace
}  // namespace tessera::worker
