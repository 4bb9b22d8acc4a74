// Matrix expressions against real tessera-worker processes on loopback: Session::evaluate and
// `tessera eval` give exactly what the same expression gives computed here (integer inputs keep
// every product exact), each product verified on the cluster; bad expressions, inputs and
// absent nodes are refused by name.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "process_fixture.hpp"
#include "tessera/balance/expr/evaluate.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/balance/expr/rewrite.hpp"
#include "tessera/balance/session/session.hpp"

namespace tessera::balance {
namespace {

using testing::ChildProcess;
using testing::TempDir;

class EvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::LocalCluster started = testing::start_local_cluster("eval", "eval-secret", 3, dir_);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  TempDir dir_;
  ClusterSpec cluster_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

// Entries in -2..2 (integers in [-8, 8] mod 3): products of a few stay exact in float64.
linalg::Matrix small_integers(std::size_t rows, std::size_t cols, uint64_t seed) {
  linalg::Matrix m = linalg::random_matrix(rows, cols, seed, linalg::FillKind::kIntegers);
  for (double& v : m.values) v = std::fmod(v, 3.0);
  return m;
}

TEST_F(EvalTest, EveryBenchmarkShapeMatchesTheLocalValueExactly) {
  Result<Session> session = Session::open(cluster_);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  const std::map<std::string, linalg::Matrix> values = {
      {"u", small_integers(1, 48, 1)},  {"P", small_integers(48, 48, 2)}, {"A", small_integers(40, 70, 3)},
      {"B", small_integers(70, 9, 4)},  {"C", small_integers(9, 55, 5)},  {"D", small_integers(55, 3, 6)},
      {"H", small_integers(30, 48, 7)}, {"L", small_integers(48, 48, 8)}};
  std::map<std::string, expr::Shape> shapes;
  std::map<std::string, linalg::MatrixView> views;
  for (const auto& [name, m] : values) {
    shapes.emplace(name, expr::Shape{m.rows, m.cols});
    views.emplace(name, linalg::MatrixView(m));
  }
  // Markov chain, matrix power, a HITS step, a Leontief series, a mixed-shape chain.
  for (const std::string text : {"u * P^6", "P^5", "H' * H * (H' * H) * u'", "I + L + L^2 + L^3", "A * B * C * D"}) {
    SCOPED_TRACE(text);
    Result<expr::Expr> e = expr::parse(text, shapes);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    Result<linalg::Matrix> local = expr::evaluate(*e, views);
    ASSERT_TRUE(local.is_ok()) << local.status().to_string();
    for (bool rewrite : {true, false}) {
      EvalOptions options;
      options.rewrite = rewrite;
      options.multiply.policy = EvenPolicy{};
      options.multiply.verify = VerifyMode::kExact;
      Result<EvalOutcome> outcome = session->evaluate(*e, views, options);
      ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
      EXPECT_EQ(outcome->value.values, local->values) << "rewrite " << rewrite;
      EXPECT_EQ(outcome->products.size(), expr::cost(outcome->evaluated).products);
      for (const EvalProduct& product : outcome->products) {
        EXPECT_TRUE(product.report.verification.passed) << product.expression;
      }
    }
  }
}

TEST_F(EvalTest, TheCliWritesTheResultAndAReportAndRefusesBadExpressionsByColumn) {
  const std::string config = testing::write_cluster_file(dir_, cluster_);
  const std::string cli = std::string(TESSERA_CLI_BINARY) + " eval " + config + " ";
  const testing::CommandResult run =
      testing::run_command(cli + "'u * P^4' --input u=integers:1x64 --input P=integers:64x64 --explain --out " +
                           dir_.file("r.npy") + " --report " + dir_.file("r.json") + " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("expression: u * P^4  (1x64)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("before: u * P^4"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("total: 4 products on the cluster"), std::string::npos) << run.output;
  Result<linalg::Matrix> written = linalg::read_npy(dir_.file("r.npy"));
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
  EXPECT_EQ(written->rows, 1u);
  EXPECT_EQ(written->cols, 64u);
  const nlohmann::json report = nlohmann::json::parse(testing::read_file(dir_.file("r.json")));
  EXPECT_EQ(report["products"].size(), 4u);
  for (const auto& product : report["products"]) EXPECT_EQ(product["verified"], true);

  const testing::CommandResult misshapen =
      testing::run_command(cli + "'P * u' --input u=random:1x8 --input P=random:8x8 2>&1");
  EXPECT_EQ(misshapen.exit_code, 2) << misshapen.output;
  EXPECT_NE(misshapen.output.find("column 3: cannot multiply 8x8 by 1x8"), std::string::npos) << misshapen.output;
  const testing::CommandResult missing =
      testing::run_command(cli + "'P * P' --input P=" + dir_.file("absent.npy") + " 2>&1");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("absent.npy"), std::string::npos) << missing.output;
  const testing::CommandResult unknown = testing::run_command(cli + "'P * Q' --input P=random:4x4 2>&1");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("no input named Q"), std::string::npos) << unknown.output;
}

TEST_F(EvalTest, AnAbsentNodeIsNamed) {
  workers_.back().reset();  // stops worker c by its pid
  const std::string config = testing::write_cluster_file(dir_, cluster_);
  const testing::CommandResult run = testing::run_command(std::string(TESSERA_CLI_BINARY) + " eval " + config +
                                                          " 'P * P' --input P=random:16x16 2>&1");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("'c'"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace tessera::balance
