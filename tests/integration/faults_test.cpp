// Exact or refused under faults: real workers, one of them the test twin tessera-worker-faulty
// that dies or freezes (SIGSTOP) in the middle of its first RESULT, damages one byte of it, or
// drops the connection after some STOREs, at exactly that point. For every policy and layout the run must either hold
// the exact product (integer fills: bit for bit equal to the local one) and name the lost node,
// or fail naming it when no node is left.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/multiply/multiply.hpp"

namespace tessera::balance {
namespace {

using partition::Layout;

struct Variant {
  const char* name;
  plan::Policy policy;
  Layout layout;
};

// Every policy the driver runs without a profile, and every layout.
const Variant kVariants[] = {
    {"even rows", plan::Policy::kEven, Layout::kRows},
    {"proportional rows", plan::Policy::kProportional, Layout::kRows},
    {"2d column-based", plan::Policy::kEven, Layout::kColumnBased},
    {"2d square-corner", plan::Policy::kProportional, Layout::kSquareCorner},
    {"3d", plan::Policy::kEven, Layout::kRecursive3d},
    {"dynamic", plan::Policy::kDynamic, Layout::kRows},
};

constexpr uint64_t kM = 200, kN = 180, kK = 160;

class FaultyWorkers : public ::testing::Test {
 protected:
  ~FaultyWorkers() override { stop_workers(); }

  // A worker frozen by its fault is continued first (by pid), so that it ends on SIGTERM at once.
  void stop_workers() {
    for (const auto& worker : workers_) {
      if (worker->pid() > 0) ::kill(worker->pid(), SIGCONT);
    }
    workers_.clear();
  }

  // Healthy workers named a, b, ... and, last, one faulty worker started with `fault_flags`.
  void start_workers(std::size_t healthy, const std::vector<std::string>& fault_flags) {
    testing::write_file(dir_.file("secret"), "fault-secret");
    cluster_ = cluster::ClusterSpec{};
    cluster_.name = "faults";
    cluster_.secret = "fault-secret";
    stop_workers();
    for (std::size_t i = 0; i <= healthy; ++i) {
      const bool faulty = i == healthy;
      cluster::NodeSpec node;
      node.name = std::string(1, static_cast<char>('a' + i));
      node.host = "127.0.0.1";
      node.port = testing::free_loopback_port();
      node.threads = 1;
      node.line = static_cast<int>(i + 1);
      std::vector<std::string> args{faulty ? TESSERA_FAULTY_WORKER_BINARY : TESSERA_WORKER_BINARY,
                                    "--listen", node.endpoint(), "--threads", "1", "--secret-file",
                                    dir_.file("secret")};
      if (faulty) args.insert(args.end(), fault_flags.begin(), fault_flags.end());
      workers_.push_back(std::make_unique<testing::ChildProcess>(
          args, dir_.file("worker-" + node.name + "-" + std::to_string(++started_) + ".log")));
      cluster_.nodes.push_back(node);
    }
    for (const cluster::NodeSpec& node : cluster_.nodes) {
      ASSERT_TRUE(testing::wait_until_listening(node)) << node.name << " never listened";
    }
  }

  plan::Plan plan_for(const Variant& variant) const {
    plan::PlanRequest request;
    request.policy = variant.policy;
    request.layout = variant.layout;
    request.m = kM;
    request.n = kN;
    request.k = kK;
    request.panel_width = 48;
    request.panels_in_flight = 3;
    if (variant.policy == plan::Policy::kDynamic) request.tile_rows = 25;
    for (const cluster::NodeSpec& node : cluster_.nodes) request.node_names.push_back(node.name);
    // The faulty node (last) gets the largest share, so it surely has results to send.
    if (variant.policy == plan::Policy::kProportional) {
      request.weights.assign(cluster_.nodes.size(), 1.0);
      request.weights.back() = 3.0;  // more than half: square-corner needs one such node
    }
    Result<plan::Plan> plan = plan::make_plan(request);
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    return plan.is_ok() ? *plan : plan::Plan{};
  }

  // Runs every variant against fresh workers (the faulty one is lost each time) and checks the
  // product is exact and the faulty node is named, its lost reason containing one of `reasons`.
  // `lost_reasons`, when given, collects the faulty node's lost reason of every variant.
  void expect_exact_without_the_faulty_node(const std::vector<std::string>& fault_flags,
                                            const std::vector<std::string>& reasons, const multiply::MultiplyHooks& hooks = {},
                                            std::vector<std::string>* lost_reasons = nullptr) {
    const linalg::Matrix a = linalg::random_matrix(kM, kK, 31, linalg::FillKind::kIntegers);
    const linalg::Matrix b = linalg::random_matrix(kK, kN, 32, linalg::FillKind::kIntegers);
    const linalg::Matrix expected = reference_product(a, b);
    for (const Variant& variant : kVariants) {
      SCOPED_TRACE(variant.name);
      ASSERT_NO_FATAL_FAILURE(start_workers(2, fault_flags));
      Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
      ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
      const plan::Plan plan = plan_for(variant);
      linalg::Matrix c(kM, kN);
      for (double& value : c.values) value = -7.0;  // nothing of an earlier C may survive
      Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan, a, b, c, hooks);
      ASSERT_TRUE(run.is_ok()) << run.status().to_string();
      EXPECT_EQ(c, expected);
      uint64_t volume = 0, faulty_volume = 0;
      for (const multiply::NodeRunStats& node : run->nodes) {
        volume += node.volume;
        if (node.name == "c") faulty_volume += node.volume;
      }
      EXPECT_EQ(volume, kM * kN * kK) << "every cell counted once: no tile done twice or half";
      if (variant.policy == plan::Policy::kDynamic && run->lost_nodes.empty()) {
        // On a loaded machine the healthy nodes can finish every tile before the faulty node's
        // result arrives: the faulty node's tile by a speculative copy, or every tile because the
        // faulty node's thread came late to the board and was never sent one. Then the run ends
        // without it, and nothing it computed may be in C.
        uint64_t faulty_pieces = 0;
        for (const multiply::NodeRunStats& node : run->nodes) {
          if (node.name == "c") faulty_pieces += node.panels;
        }
        EXPECT_TRUE(run->speculative_copies > 0 || faulty_pieces == 0)
            << "the faulty node was sent a tile (" << faulty_pieces << " pieces of B) that no copy covered";
        EXPECT_EQ(faulty_volume, 0u) << "the faulty node contributed nothing";
        continue;
      }
      ASSERT_EQ(run->lost_nodes, std::vector<std::string>{"c"}) << ::testing::PrintToString(run->lost_reasons);
      ASSERT_EQ(run->lost_reasons.size(), 1u);
      EXPECT_NE(run->lost_reasons[0].find("node 'c'"), std::string::npos) << run->lost_reasons[0];
      const std::string& why = run->lost_reasons[0];
      if (lost_reasons != nullptr) lost_reasons->push_back(why);
      EXPECT_TRUE(std::any_of(reasons.begin(), reasons.end(),
                              [&](const std::string& reason) { return why.find(reason) != std::string::npos; }))
          << why;
      // Its tiles went to the others: reissued, or (dynamic) finished by a speculative copy.
      EXPECT_TRUE(!run->reissued_tiles.empty() || run->speculative_copies > 0);
    }
  }

  testing::TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<testing::ChildProcess>> workers_;
  int started_ = 0;
};

TEST_F(FaultyWorkers, ANodeDyingMidResultIsReissuedAndTheProductIsExact) {
  // 1000 bytes: well inside every result block of these plans (the smallest has thousands of
  // values), so the coordinator has part of a block in hand when the connection breaks.
  // A killed process's socket ends in FIN or RST depending on what it had left unread, and the
  // coordinator may notice while reading (the RESULT) or while writing (its next STORE or JOB).
  expect_exact_without_the_faulty_node({"--fault-die-after-result-bytes", "1000"},
                                       {"closed the connection", "Connection reset by peer", "Broken pipe"});
}

TEST_F(FaultyWorkers, ANodeFrozenMidResultIsDroppedAsUnresponsiveAndTheProductIsExact) {
  // Its job's CREDIT is in before the RESULT stops short: the coordinator then owes no job to the
  // node but still a result, and must count the silence against its deadline (this hung before).
  // The frozen worker is killed by pid when the fixture stops it (SIGKILL ends a stopped process).
  multiply::MultiplyHooks hooks;
  hooks.deadlines.node_timeout_s = 2.0;
  std::vector<std::string> reasons;
  ASSERT_NO_FATAL_FAILURE(expect_exact_without_the_faulty_node({"--fault-stop-after-result-bytes", "1000"},
                                                               {"unresponsive: no frame for 2 s while"}, hooks,
                                                               &reasons));
  // Where the frozen RESULT finished the node's share, nothing but that result was owed: the case
  // that hung. Layouts that had more jobs queued behind it owe those too.
  EXPECT_TRUE(std::any_of(reasons.begin(), reasons.end(), [](const std::string& reason) {
    return reason.find("while 1 result was in flight") != std::string::npos;
  })) << ::testing::PrintToString(reasons);
}

TEST_F(FaultyWorkers, ACorruptedResultIsRefusedNamedAndReissued) {
  expect_exact_without_the_faulty_node({"--fault-corrupt-result"}, {"checksum mismatch"});
}

TEST_F(FaultyWorkers, AConnectionDroppedAfterSomeStoresIsReissued) {
  expect_exact_without_the_faulty_node({"--fault-close-after-stores", "2"},
                                       {"closed the connection", "Connection reset by peer", "Broken pipe"});
}

TEST_F(FaultyWorkers, TheOnlyNodeDyingMidResultFailsTheRunNamingIt) {
  const linalg::Matrix a = linalg::random_matrix(kM, kK, 41, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(kK, kN, 42, linalg::FillKind::kIntegers);
  for (const Variant& variant : {kVariants[0], kVariants[4], kVariants[5]}) {
    SCOPED_TRACE(variant.name);
    for (const char* fault : {"--fault-die-after-result-bytes", "--fault-corrupt-result"}) {
      SCOPED_TRACE(fault);
      std::vector<std::string> flags{fault};
      if (std::string(fault) == "--fault-die-after-result-bytes") flags.push_back("1000");
      ASSERT_NO_FATAL_FAILURE(start_workers(0, flags));
      Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
      ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
      linalg::Matrix c;
      Result<multiply::MultiplyRun> run = multiply::run_multiply(*connection, plan_for(variant), a, b, c);
      ASSERT_FALSE(run.is_ok()) << "a run whose only node failed must not claim a product";
      EXPECT_NE(run.status().message().find("node 'a'"), std::string::npos) << run.status().to_string();
    }
  }
}

}  // namespace
}  // namespace tessera::balance
