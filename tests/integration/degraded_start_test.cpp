// A cluster where a node does not answer at the start, against real worker processes on loopback
// TCP (users expect to run on the nodes that answer, as Dask and Ray do): three workers, one of
// them killed by pid before the run.
//  - `tessera multiply`, `graph` and `eval` run on the two that answer, exit 0 with a verified
//    answer, print one warning naming the node left out and why, and record it in --report;
//  - with --require-all each refuses, naming the node;
//  - a node left out is not profiled, and its saved figures stay in the profile for the others'
//    runs to use; the session narrows per-node lists (weights) made from the cluster file;
//  - when no node answers, the run fails naming each node and why.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/session/session.hpp"

namespace tessera::balance {
namespace {

using testing::CommandResult;
using testing::TempDir;

constexpr const char* kDegradedSecret = "degraded-start-secret";

// Three workers a, b, c; c is killed (by pid) before any run, so its port refuses connections.
class DegradedStart : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    cluster_ = new testing::LocalCluster(testing::start_local_cluster("degraded-start", kDegradedSecret, 3, *dir_));
    config_ = new std::string(testing::write_cluster_file(*dir_, cluster_->spec));
    cluster_->processes[2]->kill_now();
  }
  static void TearDownTestSuite() {
    delete cluster_;  // stops the workers still running, by pid
    delete config_;
    delete dir_;
    cluster_ = nullptr;
    config_ = nullptr;
    dir_ = nullptr;
  }

  static CommandResult run(const std::string& command, const std::string& flags) {
    return testing::run_command(std::string(TESSERA_CLI_BINARY) + " " + command + " " + *config_ + " --run-dir " +
                                dir_->file("run") + " " + flags);
  }
  static std::string dead_endpoint() { return cluster_->spec.nodes[2].endpoint(); }
  // The warning line, as the CLI prints it for c.
  static std::string left_out_line() {
    return "warning: node 'c' left out: connect to " + dead_endpoint() + " failed";
  }
  static nlohmann::json read_json(const std::string& path) {
    return nlohmann::json::parse(testing::read_file(path), nullptr, /*allow_exceptions=*/false);
  }
  static void expect_left_out_c(const nlohmann::json& report) {
    ASSERT_TRUE(report.contains("left_out_at_start")) << report.dump();
    ASSERT_EQ(report["left_out_at_start"].size(), 1u) << report.dump();
    EXPECT_EQ(report["left_out_at_start"][0]["node"], "c");
    EXPECT_NE(report["left_out_at_start"][0]["reason"].get<std::string>().find(dead_endpoint()), std::string::npos);
  }
  static void expect_refused_naming_c(const CommandResult& refused) {
    EXPECT_EQ(refused.exit_code, 1) << refused.output;
    EXPECT_NE(refused.output.find("node 'c' (" + dead_endpoint() + ") is unreachable"), std::string::npos)
        << refused.output;
    EXPECT_EQ(refused.output.find("left out"), std::string::npos) << refused.output;
  }

  static TempDir* dir_;
  static testing::LocalCluster* cluster_;
  static std::string* config_;
};

TempDir* DegradedStart::dir_ = nullptr;
testing::LocalCluster* DegradedStart::cluster_ = nullptr;
std::string* DegradedStart::config_ = nullptr;

TEST_F(DegradedStart, MultiplyRunsExactlyOnTheNodesThatAnswerAndSaysWhichWasLeftOut) {
  const std::string report_path = dir_->file("multiply.json");
  // 97 rows: shares that divide by neither two nor three nodes.
  const CommandResult ran = run("multiply", "--m 97 --n 61 --k 83 --policy even --verify exact --fill integers "
                                            "--report " + report_path);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find(left_out_line()), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("verified: true"), std::string::npos) << ran.output;
  const nlohmann::json report = read_json(report_path);
  EXPECT_EQ(report["verified"], true);
  ASSERT_EQ(report["nodes"].size(), 2u) << report.dump();
  expect_left_out_c(report);

  expect_refused_naming_c(run("multiply", "--n 32 --policy even --require-all"));
}

TEST_F(DegradedStart, GraphRunsVerifiedOnTheNodesThatAnswerAndSaysWhichWasLeftOut) {
  const std::string report_path = dir_->file("graph.json");
  const CommandResult ran = run("graph", "--algorithm cc --generate rmat:8 --verify --nodes all --weights 1,2,3 "
                                         "--placement-cache none --report " + report_path);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find(left_out_line()), std::string::npos) << ran.output;
  const nlohmann::json report = read_json(report_path);
  ASSERT_TRUE(report["verification"].is_object()) << report.dump();
  EXPECT_EQ(report["verification"]["passed"], true);
  ASSERT_EQ(report["nodes"].size(), 2u) << report.dump();
  // The weights given for the file's three nodes, narrowed to a and b.
  EXPECT_EQ(report["weights"], "explicit 1,2") << report.dump();
  expect_left_out_c(report);

  expect_refused_naming_c(run("graph", "--algorithm cc --generate rmat:5 --placement-cache none --require-all"));
  // Asked for by name, the node left out fails the run with its reason.
  const CommandResult named = run("graph", "--algorithm cc --generate rmat:5 --placement-cache none --nodes a,c");
  EXPECT_NE(named.exit_code, 0) << named.output;
  EXPECT_NE(named.output.find("node 'c' was asked for, but did not answer at the start"), std::string::npos)
      << named.output;
}

TEST_F(DegradedStart, EvalRunsVerifiedOnTheNodesThatAnswerAndSaysWhichWasLeftOut) {
  const std::string report_path = dir_->file("eval.json");
  const CommandResult ran = run("eval", "\"A*B*C\" --input A=integers:41x37 --input B=integers:37x29 "
                                        "--input C=integers:29x23 --mode sequence --policy even --verify exact "
                                        "--report " + report_path);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find(left_out_line()), std::string::npos) << ran.output;
  const nlohmann::json report = read_json(report_path);
  ASSERT_EQ(report["products"].size(), 2u) << report.dump();
  for (const nlohmann::json& product : report["products"]) EXPECT_EQ(product["verified"], true);
  expect_left_out_c(report);

  expect_refused_naming_c(run("eval", "\"A*B\" --input A=integers:8x8 --input B=integers:8x8 --mode sequence "
                                      "--policy even --require-all"));
}

TEST_F(DegradedStart, TheSessionNarrowsTheFilesPerNodeWeightsAndTheProductIsExact) {
  Result<session::Session> session = session::Session::open(cluster_->spec);
  ASSERT_TRUE(session) << session.status().message();
  ASSERT_EQ(session->cluster().nodes.size(), 2u);
  EXPECT_EQ(session->cluster().nodes[1].name, "b");
  ASSERT_EQ(session->left_out_at_start().size(), 1u);
  const cluster::LeftOutNode& left_out = session->left_out_at_start()[0];
  EXPECT_EQ(left_out.node, "c");
  EXPECT_EQ(left_out.code, StatusCode::kNetworkError);
  EXPECT_EQ(cluster::left_out_warning(left_out).rfind("node 'c' left out: connect to " + dead_endpoint(), 0), 0u)
      << cluster::left_out_warning(left_out);

  const linalg::Matrix a = linalg::random_matrix(101, 47, 5, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(47, 33, 6, linalg::FillKind::kIntegers);
  linalg::Matrix c(101, 33);
  session::MultiplyOptions options;
  options.policy = plan::ProportionalPolicy{{1.0, 3.0, 5.0}};  // one per node of the file
  options.verify = multiply::VerifyMode::kExact;
  Result<session::MultiplyOutcome> outcome = session->multiply(a, b, c, options);
  ASSERT_TRUE(outcome) << outcome.status().message();
  EXPECT_TRUE(outcome->report.verification.passed) << outcome->report.verification.detail;
  EXPECT_EQ(c.values, reference_product(a, b).values);
  ASSERT_EQ(outcome->report.plan.shares.size(), 2u);
  // a and b keep their weights 1 and 3 of the file: b gets three times a's rows (within one).
  const uint64_t a_rows = outcome->report.plan.shares[0].rows.count;
  EXPECT_NEAR(static_cast<double>(a_rows), 101.0 / 4.0, 1.0);
  EXPECT_EQ(outcome->report.left_out_at_start, session->left_out_at_start());
  session->close();

  session::SessionOptions strict;
  strict.require_all = true;
  Result<session::Session> refused = session::Session::open(cluster_->spec, strict);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kNetworkError);
  EXPECT_NE(refused.status().message().find("node 'c'"), std::string::npos) << refused.status().message();
}

// Profiled with all three up; with c gone, a profile measures nothing new and keeps c's figures
// in the file, and the model policy plans a and b from the saved profile.
TEST(DegradedStartProfile, ANodeLeftOutIsNotProfiledAndItsSavedFiguresAreKept) {
  TempDir dir;
  testing::LocalCluster cluster = testing::start_local_cluster("degraded-profile", kDegradedSecret, 3, dir);
  const std::string config = testing::write_cluster_file(dir, cluster.spec);
  const auto run = [&](const std::string& command, const std::string& flags) {
    return testing::run_command(std::string(TESSERA_CLI_BINARY) + " " + command + " " + config + " --run-dir " +
                                dir.file("run") + " " + flags);
  };
  const CommandResult all = run("profile", "--quick");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  const std::string profile_path = dir.file("cluster.profile.yaml");
  ASSERT_NE(testing::read_file(profile_path).find("name: c"), std::string::npos);

  cluster.processes[2]->kill_now();
  const CommandResult again = run("profile", "--quick");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("warning: node 'c' left out"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("measured 0 of 2 nodes"), std::string::npos) << again.output;
  EXPECT_NE(testing::read_file(profile_path).find("name: c"), std::string::npos) << "c's saved figures were dropped";

  const CommandResult named = run("profile", "--quick --node c");
  EXPECT_NE(named.exit_code, 0) << named.output;
  EXPECT_NE(named.output.find("node 'c' was asked for"), std::string::npos) << named.output;

  const CommandResult model = run("multiply", "--n 90 --policy model --verify exact");
  ASSERT_EQ(model.exit_code, 0) << model.output;
  EXPECT_NE(model.output.find("warning: node 'c' left out"), std::string::npos) << model.output;
  EXPECT_NE(model.output.find("verified: true"), std::string::npos) << model.output;
}

// Nothing listens on any node's port (workers never started): the run fails, naming each node.
TEST(DegradedStartNobody, WhenNoNodeAnswersTheRunFailsNamingEachNodeAndWhy) {
  TempDir dir;
  cluster::ClusterSpec spec;
  spec.name = "degraded-nobody";
  spec.secret = kDegradedSecret;
  for (const char* name : {"a", "b", "c"}) {
    cluster::NodeSpec node;
    node.name = name;
    node.host = "127.0.0.1";
    node.port = testing::free_loopback_port();
    spec.nodes.push_back(node);
  }
  const std::string config = testing::write_cluster_file(dir, spec);
  for (const std::string& command : {"multiply " + config + " --n 16 --policy even",
                                    "graph " + config + " --algorithm cc --generate rmat:5 --placement-cache none",
                                    "eval " + config + " \"A*B\" --input A=integers:8x8 --input B=integers:8x8 "
                                                       "--mode sequence --policy even"}) {
    const CommandResult failed =
        testing::run_command(std::string(TESSERA_CLI_BINARY) + " " + command + " --run-dir " + dir.file("run"));
    EXPECT_EQ(failed.exit_code, 1) << command << "\n" << failed.output;
    EXPECT_NE(failed.output.find("no node answered"), std::string::npos) << failed.output;
    for (const cluster::NodeSpec& node : spec.nodes) {
      EXPECT_NE(failed.output.find("node '" + node.name + "' (" + node.endpoint() + ") is unreachable"),
                std::string::npos)
          << failed.output;
    }
  }
}

}  // namespace
}  // namespace tessera::balance
