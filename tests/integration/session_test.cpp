// The coordinator facade against real tessera-worker processes: caller-owned (strided) matrices,
// a profile measured on the way, cancellation, and a cluster with a node that is not there.
#include "tessera/balance/session/session.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>

#include "process_fixture.hpp"
#include "reference_product.hpp"

namespace tessera::balance {
namespace {

using testing::ChildProcess;
using testing::TempDir;

using testing::kSecret;

class SessionTest : public ::testing::Test {
 protected:
  void start_workers(std::size_t count) {
    testing::LocalCluster started = testing::start_local_cluster("session", kSecret, count, dir_);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  session::Session open() {
    Result<session::Session> session = session::Session::open(cluster_);
    EXPECT_TRUE(session.is_ok()) << session.status().to_string();
    if (!session.is_ok()) throw std::runtime_error(session.status().to_string());
    return std::move(*session);
  }

  TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(SessionTest, MultipliesStridedCallerOwnedMatricesExactlyAndLeavesThePaddingAlone) {
  start_workers(2);
  session::Session session = open();
  const std::size_t m = 131, k = 77, n = 59, pad = 5;
  const linalg::Matrix a = linalg::random_matrix(m, k, 11, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(k, n, 12, linalg::FillKind::kIntegers);
  // A lives inside a wider buffer (every row followed by padding), as a numpy slice would.
  std::vector<double> a_buffer(m * (k + pad), -1.0);
  for (std::size_t r = 0; r < m; ++r) std::copy_n(a.row(r), k, a_buffer.data() + r * (k + pad));
  std::vector<double> c_buffer(m * (n + pad), 7.5);
  const linalg::MatrixView a_view(a_buffer.data(), m, k, k + pad);
  const linalg::MutableMatrixView c_view(c_buffer.data(), m, n, n + pad);

  session::MultiplyOptions options;
  options.policy = plan::EvenPolicy{};
  options.panel_width = 32;
  options.verify = multiply::VerifyMode::kExact;
  Result<session::MultiplyOutcome> outcome = session.multiply(a_view, b, c_view, options);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  EXPECT_TRUE(outcome->report.verification.passed) << outcome->report.verification.detail;
  EXPECT_EQ(outcome->report.plan.policy, plan::Policy::kEven);
  EXPECT_EQ(outcome->report.run.nodes.size(), 2u);

  const linalg::Matrix expected = reference_product(a, b);
  for (std::size_t r = 0; r < m; ++r) {
    for (std::size_t j = 0; j < n; ++j) ASSERT_EQ(c_view.at(r, j), expected.at(r, j)) << r << "," << j;
    for (std::size_t j = n; j < n + pad; ++j) ASSERT_EQ(c_buffer[r * (n + pad) + j], 7.5) << "padding written";
  }

  // The same session runs again, with another policy and layout, into a plain Matrix.
  options.policy = plan::ProportionalPolicy{{0.7, 0.3}};
  options.layout = partition::Layout::kRecursive3d;
  linalg::Matrix c(m, n);
  Result<session::MultiplyOutcome> again = session.multiply(a, b, c, options);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(c, expected);
  EXPECT_FALSE(again->report.prediction.has_value()) << "no profile, no forecast";
}

TEST_F(SessionTest, APolicyThatNeedsAProfileMeasuresAQuickOneSavesItAndForecasts) {
  start_workers(2);
  session::Session session = open();
  ASSERT_FALSE(session.profile().has_value());
  const linalg::Matrix a = linalg::random_matrix(96, 64, 1), b = linalg::random_matrix(64, 80, 2);
  linalg::Matrix c(96, 80);
  std::vector<std::string> notices;
  std::size_t progress_lines = 0;
  session::RunControl control;
  control.on_notice = [&](const std::string& notice) { notices.push_back(notice); };
  control.on_profile_progress = [&](const std::string&, const std::string&, bool) { ++progress_lines; };
  Result<session::MultiplyOutcome> outcome = session.multiply(a, b, c, session::MultiplyOptions{}, control);  // proportional
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find(session.profile_path()), std::string::npos) << notices[0];
  EXPECT_GT(progress_lines, 0u);
  ASSERT_TRUE(session.profile().has_value());
  EXPECT_TRUE(std::filesystem::exists(session.profile_path()));
  EXPECT_TRUE(outcome->report.prediction.has_value());
  EXPECT_TRUE(outcome->report.verification.passed);

  // A second session finds the saved profile and plans without measuring.
  session.close();
  session::Session reopened = open();
  ASSERT_TRUE(reopened.profile().has_value());
  EXPECT_EQ(*reopened.profile(), *session.profile());
  session::MultiplyOptions model;
  model.policy = plan::ModelPolicy{};
  Result<session::PlannedMultiply> planned = reopened.plan(96, 80, 64, model);
  ASSERT_TRUE(planned.is_ok()) << planned.status().to_string();
  EXPECT_EQ(planned->plan.policy, plan::Policy::kModel);
}

TEST_F(SessionTest, RunStartCountsTheJobsEveryNodeThenCreditsForStaticAndDynamicPlans) {
  start_workers(2);
  session::Session session = open();
  const linalg::Matrix a = linalg::random_matrix(150, 70, 5), b = linalg::random_matrix(70, 40, 6);
  for (const plan::PolicyChoice& policy : {plan::PolicyChoice{plan::ProportionalPolicy{{0.7, 0.3}}}, plan::PolicyChoice{plan::DynamicPolicy{20}}}) {
    const bool dynamic = std::holds_alternative<plan::DynamicPolicy>(policy);
    SCOPED_TRACE(dynamic ? "dynamic" : "proportional");
    std::vector<session::RunStart> starts;
    std::vector<std::atomic<uint64_t>> credits(2);
    session::RunControl control;
    control.on_run_start = [&](const session::RunStart& start) { starts.push_back(start); };
    control.on_credit = [&](std::size_t node, uint64_t jobs_done) {
      ASSERT_LT(node, credits.size());
      credits[node] = jobs_done;  // cumulative per node, each node's thread its own slot
    };
    session::MultiplyOptions options;
    options.policy = policy;
    options.panel_width = 16;
    linalg::Matrix c(150, 40);
    Result<session::MultiplyOutcome> outcome = session.multiply(a, b, c, options, control);
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    ASSERT_EQ(starts.size(), 1u);
    const session::RunStart& start = starts.front();
    EXPECT_EQ(start.plan, outcome->report.plan);
    EXPECT_EQ(start.forecast.has_value(), outcome->report.prediction.has_value());
    ASSERT_EQ(start.jobs.per_node.size(), 2u);
    if (dynamic) {
      EXPECT_EQ(start.jobs.per_node, (std::vector<uint64_t>{0, 0})) << "tiles go to whoever asks";
      // Near the end an idle node may also run a copy of a tile running elsewhere.
      EXPECT_GE(credits[0] + credits[1], start.jobs.total);
    } else {
      EXPECT_EQ(start.jobs.total, credits[0] + credits[1]) << "one credit per job, no node lost";
      EXPECT_EQ(start.jobs.per_node[0], credits[0].load());
      EXPECT_EQ(start.jobs.per_node[1], credits[1].load());
      EXPECT_EQ(start.jobs.per_node[0] + start.jobs.per_node[1], start.jobs.total);
    }
  }
}

TEST_F(SessionTest, CancellingMidRunStopsPromptlyAndTheWorkersServeTheNextSession) {
  start_workers(2);
  session::Session session = open();
  const linalg::Matrix a = linalg::random_matrix(1024, 1024, 1), b = linalg::random_matrix(1024, 1024, 2);
  linalg::Matrix c(1024, 1024);
  std::atomic<bool> cancel{false};
  session::RunControl control;
  control.cancel = &cancel;
  control.on_credit = [&](std::size_t, uint64_t) { cancel = true; };  // stop at the first sign of progress
  session::MultiplyOptions options;
  options.policy = plan::EvenPolicy{};
  options.panel_width = 16;  // many small jobs: the run is far from done at the first credit
  const auto start = std::chrono::steady_clock::now();
  Result<session::MultiplyOutcome> outcome = session.multiply(a, b, c, options, control);
  ASSERT_FALSE(outcome.is_ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kCancelled) << outcome.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));

  Result<session::MultiplyOutcome> refused = session.multiply(a, b, c, options, control);
  EXPECT_EQ(refused.status().code(), StatusCode::kCancelled) << "the flag is still set";

  // The workers let the cancelled session go and serve a new one (retry while they notice).
  const linalg::Matrix small_a = linalg::random_matrix(40, 30, 3), small_b = linalg::random_matrix(30, 20, 4);
  linalg::Matrix small_c(40, 20);
  Result<session::Session> next = session::Session::open(cluster_);
  for (int attempt = 0; attempt < 50 && !next.is_ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    next = session::Session::open(cluster_);
  }
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  Result<session::MultiplyOutcome> fine = next->multiply(small_a, small_b, small_c, options);
  ASSERT_TRUE(fine.is_ok()) << fine.status().to_string();
  EXPECT_TRUE(fine->report.verification.passed);
}

TEST_F(SessionTest, ANodeThatIsNotThereIsNamedWhenOpening) {
  start_workers(1);
  cluster::NodeSpec ghost;
  ghost.name = "ghost";
  ghost.host = "127.0.0.1";
  ghost.port = testing::free_loopback_port();
  cluster_.nodes.push_back(ghost);
  session::SessionOptions options;
  options.connect.timeout = std::chrono::milliseconds(2000);
  options.require_all = true;
  Result<session::Session> session = session::Session::open(cluster_, options);
  ASSERT_FALSE(session.is_ok());
  EXPECT_NE(session.status().message().find("ghost"), std::string::npos) << session.status().message();
  EXPECT_NE(session.status().message().find(ghost.endpoint()), std::string::npos) << session.status().message();

  // By default the session goes ahead without it, naming it.
  options.require_all = false;
  Result<session::Session> without = session::Session::open(cluster_, options);
  ASSERT_TRUE(without.is_ok()) << without.status().message();
  EXPECT_EQ(without->cluster().nodes.size(), 1u);
  ASSERT_EQ(without->left_out_at_start().size(), 1u);
  EXPECT_EQ(without->left_out_at_start()[0].node, "ghost");
  without->close();
}

TEST_F(SessionTest, MismatchedShapesAreRefusedBeforeAnythingIsSent) {
  start_workers(1);
  session::Session session = open();
  const linalg::Matrix a(4, 5), b(6, 3);
  linalg::Matrix c(4, 3);
  Result<session::MultiplyOutcome> outcome = session.multiply(a, b, c, session::MultiplyOptions{.policy = plan::EvenPolicy{}, .distribution = std::nullopt});
  ASSERT_FALSE(outcome.is_ok());
  EXPECT_EQ(outcome.status().code(), StatusCode::kInvalidArgument);
  const linalg::Matrix good_b(5, 3);
  linalg::Matrix wrong_c(3, 3);
  Result<session::MultiplyOutcome> wrong = session.multiply(a, good_b, wrong_c, session::MultiplyOptions{.policy = plan::EvenPolicy{}, .distribution = std::nullopt});
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("C is 3x3"), std::string::npos) << wrong.status().message();
}

}  // namespace
}  // namespace tessera::balance
