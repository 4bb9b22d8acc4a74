#include "tessera/worker/compute_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <cstddef>
#include <mutex>
#include <vector>

#include "tessera/linalg/gemm.hpp"

namespace tessera::worker {
namespace {

using linalg::gemm;
using linalg::gemm_accumulate;

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

TEST(ComputePool, DestructorWithQueuedJobsReturns) {
  Matrix a(200, 200), b(200, 200), c(200, 200);
  {
    ComputePool pool(2);
    for (int i = 0; i < 50; ++i) pool.submit(task_for(a, b, c), nullptr);
  }
  SUCCEED();
}

}  // namespace
}  // namespace tessera::worker
