// A matrix placed once on three real workers and multiplied by thin operands again and again:
// each product ships only X and Y, is exact, and is checked at a cost that does not read A; a row
// block that went wrong on a node fails the check; a node killed before a product is named.
#include "tessera/balance/multiply/resident.hpp"
#include "tessera/balance/multiply/iterate.hpp"
#include "tessera/balance/session/session.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <sys/stat.h>

#include <cmath>
#include <vector>

#include "process_fixture.hpp"
#include "tessera/gemm/client.hpp"
#include "tessera/linalg/gemm.hpp"

namespace tessera::balance {
namespace {

using linalg::random_matrix;  // uniform in [-1, 1), seeded

// M M^T + n I for a random M: symmetric positive definite, well conditioned.
linalg::Matrix spd_matrix(std::size_t n, uint64_t seed) {
  const linalg::Matrix m = random_matrix(n, n, seed);
  linalg::Matrix spd(n, n);
  linalg::gemm_ex(false, true, n, n, n, 1.0, m.values.data(), n, m.values.data(), n, 0.0, spd.values.data(), n);
  for (std::size_t i = 0; i < n; ++i) spd.at(i, i) += static_cast<double>(n);
  return spd;
}

class ResidentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = testing::start_local_cluster("resident", "resident-secret", 3, dir_);
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_.spec);
    ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
    connection_.emplace(std::move(*connection));
  }
  void TearDown() override {
    if (connection_) connection_->close();
  }

  testing::TempDir dir_;
  testing::LocalCluster cluster_;
  std::optional<cluster::ClusterConnection> connection_;
};

TEST_F(ResidentTest, ProductsShipOnlyTheThinOperandAndAreExactAndChecked) {
  const linalg::Matrix a = random_matrix(300, 200, 1);
  const std::vector<std::size_t> links{0, 1, 2};
  const std::vector<uint64_t> rows{100, 120, 80};
  multiply::ResidentOptions options;
  options.largest_tile_bytes = 40 * 200 * sizeof(double);  // several tiles per node
  Result<multiply::ResidentMatrix> placed = multiply::place_rows(*connection_, a, links, rows, options);
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  EXPECT_EQ(placed->bytes_placed, 300u * 200u * sizeof(double));
  ASSERT_EQ(placed->shares.size(), 3u);
  // Rows 100..220 cut on the grid of 40 and where the node's rows end: 20, 40, 40, 20.
  ASSERT_EQ(placed->block_rows, 40u);
  ASSERT_EQ(placed->shares[1].blocks.size(), 4u);
  EXPECT_EQ(placed->shares[1].blocks[0].row_begin, 100u);
  EXPECT_EQ(placed->shares[1].blocks[0].rows, 20u);
  EXPECT_EQ(placed->shares[1].blocks[1].rows, 40u);
  EXPECT_EQ(placed->shares[1].blocks[3].rows, 20u);

  for (uint64_t call = 0; call < 5; ++call) {
    SCOPED_TRACE(call);
    const linalg::Matrix x = random_matrix(200, 1 + call % 3, 10 + call);
    linalg::Matrix y(300, x.cols);
    Result<multiply::ResidentProduct> product = multiply::multiply_resident(*connection_, *placed, x, y, options);
    ASSERT_TRUE(product.is_ok()) << product.status().to_string();
    EXPECT_TRUE(product->verification.passed) << product->verification.detail;
    linalg::Matrix expected(300, x.cols);
    linalg::gemm(300, x.cols, 200, 1.0, a.values.data(), 200, x.values.data(), x.cols, 0.0, expected.values.data(),
                 x.cols);
    for (std::size_t i = 0; i < y.values.size(); ++i) {
      ASSERT_NEAR(y.values[i], expected.values[i], 1e-12) << "entry " << i;
    }
    // Each node was sent X and its jobs, not its rows of A again.
    for (const multiply::ResidentNodeRun& node : product->nodes) {
      const uint64_t x_bytes = x.values.size() * sizeof(double);
      EXPECT_GE(node.bytes_to_node, x_bytes);
      EXPECT_LT(node.bytes_to_node, x_bytes + 4096) << "node " << node.link;
    }
  }
  multiply::release_resident(*connection_, *placed);
}

TEST_F(ResidentTest, ARowBlockThatWentWrongOnANodeFailsTheCheck) {
  const linalg::Matrix a = random_matrix(90, 60, 2);
  const std::vector<std::size_t> links{0, 1, 2};
  const std::vector<uint64_t> rows{30, 30, 30};
  Result<multiply::ResidentMatrix> placed = multiply::place_rows(*connection_, a, links, rows);
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  // Node 1's block replaced by other values under the same id, as a worker gone wrong would hold.
  const linalg::Matrix other = random_matrix(30, 60, 3);
  gemm::GemmClient client(*connection_->links()[1].connection);
  ASSERT_TRUE(client.store(placed->shares[1].blocks[0].tile_id, 30, 60, other.values.data()).is_ok());
  const linalg::Matrix x = random_matrix(60, 2, 4);
  linalg::Matrix y(90, 2);
  Result<multiply::ResidentProduct> product = multiply::multiply_resident(*connection_, *placed, x, y);
  ASSERT_TRUE(product.is_ok()) << product.status().to_string();
  EXPECT_FALSE(product->verification.passed);
  EXPECT_NE(product->verification.detail.find("column 0 of Y"), std::string::npos) << product->verification.detail;
}

TEST_F(ResidentTest, ANodeKilledBeforeAProductIsNamed) {
  const linalg::Matrix a = random_matrix(60, 40, 5);
  Result<multiply::ResidentMatrix> placed =
      multiply::place_rows(*connection_, a, std::vector<std::size_t>{0, 1, 2}, std::vector<uint64_t>{20, 20, 20});
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  cluster_.processes[2]->kill_now();
  const linalg::Matrix x = random_matrix(40, 1, 6);
  linalg::Matrix y(60, 1);
  multiply::ResidentOptions options;
  options.node_timeout_s = 5.0;
  Result<multiply::ResidentProduct> product = multiply::multiply_resident(*connection_, *placed, x, y, options);
  ASSERT_FALSE(product.is_ok());
  EXPECT_NE(product.status().message().find("node '" + cluster_.spec.nodes[2].name + "'"), std::string::npos)
      << product.status().to_string();
}

TEST_F(ResidentTest, ANodeStoppedDuringAProductIsDroppedAtItsDeadline) {
  const linalg::Matrix a = random_matrix(60, 40, 8);
  Result<multiply::ResidentMatrix> placed =
      multiply::place_rows(*connection_, a, std::vector<std::size_t>{0, 1, 2}, std::vector<uint64_t>{20, 20, 20});
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  cluster_.processes[1]->signal(SIGSTOP);
  const linalg::Matrix x = random_matrix(40, 1, 9);
  linalg::Matrix y(60, 1);
  multiply::ResidentOptions options;
  options.node_timeout_s = 1.0;
  Result<multiply::ResidentProduct> product = multiply::multiply_resident(*connection_, *placed, x, y, options);
  cluster_.processes[1]->signal(SIGCONT);
  ASSERT_FALSE(product.is_ok());
  EXPECT_NE(product.status().message().find("node '" + cluster_.spec.nodes[1].name + "': unresponsive"),
            std::string::npos)
      << product.status().to_string();
}

// A product of the placed matrix by a random X, against A X computed here.
void expect_exact_products(cluster::ClusterConnection& connection, const multiply::ResidentMatrix& placed,
                           const linalg::Matrix& a, uint64_t seed) {
  const linalg::Matrix x = random_matrix(a.cols, 2, seed);
  linalg::Matrix y(a.rows, 2);
  Result<multiply::ResidentProduct> product = multiply::multiply_resident(connection, placed, x, y);
  ASSERT_TRUE(product.is_ok()) << product.status().to_string();
  EXPECT_TRUE(product->verification.passed) << product->verification.detail;
  linalg::Matrix expected(a.rows, 2);
  linalg::gemm(a.rows, 2, a.cols, 1.0, a.values.data(), a.cols, x.values.data(), 2, 0.0, expected.values.data(), 2);
  for (std::size_t i = 0; i < y.values.size(); ++i) ASSERT_NEAR(y.values[i], expected.values[i], 1e-12) << "entry " << i;
}

uint64_t rows_on(const multiply::ResidentMatrix& placed, std::size_t link) {
  for (const multiply::ResidentShare& share : placed.shares) {
    if (share.link == link) return share.rows;
  }
  return 0;
}

// Moving shares moves whole pieces: only the rows that change hands travel, every row is held
// once afterwards (products stay exact), the pieces a node gave away are gone from it, and a node
// that held nothing can gain rows.
TEST_F(ResidentTest, RebalancingMovesWholePiecesAndKeepsProductsExact) {
  const linalg::Matrix a = random_matrix(400, 100, 13);
  multiply::ResidentOptions options;
  options.largest_tile_bytes = 20 * 100 * sizeof(double);  // pieces of 20 rows
  const std::vector<std::size_t> links{0, 1, 2};
  Result<multiply::ResidentMatrix> placed =
      multiply::place_rows(*connection_, a, links, std::vector<uint64_t>{300, 100, 0}, options);
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  ASSERT_EQ(placed->block_rows, 20u);
  const uint64_t placed_bytes = placed->bytes_placed;
  Result<uint64_t> moved = multiply::rebalance_rows(*connection_, a, *placed, links, std::vector<uint64_t>{140, 130, 130}, options);
  ASSERT_TRUE(moved.is_ok()) << moved.status().to_string();
  // Node 0 gives 160 rows (8 pieces); node 1 gains 40 (rounded to pieces) and node 2 about 120.
  EXPECT_EQ(*moved, 160u * 100u * sizeof(double));
  EXPECT_EQ(placed->bytes_placed, placed_bytes + *moved);
  EXPECT_EQ(rows_on(*placed, 0), 140u);
  EXPECT_EQ(rows_on(*placed, 0) + rows_on(*placed, 1) + rows_on(*placed, 2), 400u);
  EXPECT_NEAR(static_cast<double>(rows_on(*placed, 1)), 130.0, 10.0);
  EXPECT_NEAR(static_cast<double>(rows_on(*placed, 2)), 130.0, 10.0);
  expect_exact_products(*connection_, *placed, a, 14);
  ASSERT_EQ(placed->shares.front().link, 0u);
  EXPECT_EQ(placed->shares.front().blocks.size(), 7u) << "node 0 keeps 7 of its 15 pieces";
  // Back again: products still exact.
  ASSERT_TRUE(multiply::rebalance_rows(*connection_, a, *placed, links, std::vector<uint64_t>{300, 100, 0}, options).is_ok());
  EXPECT_EQ(rows_on(*placed, 2), 0u);
  expect_exact_products(*connection_, *placed, a, 15);
  multiply::release_resident(*connection_, *placed);
}

// A profile that is badly wrong (it calls node 2 forty times faster than the others, and all three
// are the same workers) is corrected by measuring: node 2 gives rows back, and products stay exact.
TEST_F(ResidentTest, MeasuringOnThePlacedRowsCorrectsAWrongForecast) {
  const linalg::Matrix a = random_matrix(6000, 2000, 16);
  const std::vector<std::size_t> links{0, 1, 2};
  std::vector<multiply::ResidentNodeCost> costs;
  for (std::size_t i = 0; i < 3; ++i) {
    costs.push_back({cluster_.spec.nodes[i].name, i == 2 ? 40e9 : 1e9, 1e9, 1e9, 50e-6});
  }
  const multiply::ResidentShares forecast = multiply::resident_rows(6000, 2000, 1, costs);
  ASSERT_GT(forecast.rows[2], 5000u);
  Result<multiply::ResidentMatrix> placed = multiply::place_rows(*connection_, a, links, forecast.rows);
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  multiply::BalanceOptions balance;
  balance.products_per_round = 5;  // medians that a loaded machine does not turn around
  Result<multiply::ResidentBalance> balanced = multiply::balance_resident(*connection_, a, *placed, links, costs, balance);
  ASSERT_TRUE(balanced.is_ok()) << balanced.status().to_string();
  ASSERT_GE(balanced->rounds.size(), 2u) << "the first measurement shows node 2 far behind";
  EXPECT_GT(balanced->bytes_moved, 0u);
  // At least a piece (256 rows of 16 KB) moved off node 2; how far the shares get in three rounds
  // depends on how noisy this machine is.
  EXPECT_LE(rows_on(*placed, 2) + placed->block_rows, forecast.rows[2]) << "node 2 gave nothing back";
  EXPECT_EQ(rows_on(*placed, 0) + rows_on(*placed, 1) + rows_on(*placed, 2), 6000u);
  for (double row_s : balanced->measured_row_s) EXPECT_GT(row_s, 0.0);
  expect_exact_products(*connection_, *placed, a, 17);
  multiply::release_resident(*connection_, *placed);
}

// A node killed between products, or stopped during one: its rows are placed again on the others
// from the matrix placed, the loss is told, and the product that ran into it is exact.
TEST_F(ResidentTest, ANodeLostIsReplacedOnTheOthersAndTheProductIsExact) {
  const linalg::Matrix a = random_matrix(600, 300, 18);
  const std::vector<std::size_t> links{0, 1, 2};
  Result<multiply::ResidentMatrix> placed =
      multiply::place_rows(*connection_, a, links, std::vector<uint64_t>{200, 200, 200});
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  const uint64_t placed_bytes = placed->bytes_placed;
  multiply::ResidentOptions options;
  options.node_timeout_s = 1.0;
  std::vector<std::string> told;
  const auto tell = [&](const std::string& notice) { told.push_back(notice); };
  const linalg::Matrix x = random_matrix(300, 2, 19);
  linalg::Matrix y(600, 2), expected(600, 2);
  linalg::gemm(600, 2, 300, 1.0, a.values.data(), 300, x.values.data(), 2, 0.0, expected.values.data(), 2);

  cluster_.processes[2]->kill_now();
  Result<multiply::ResidentProduct> product = multiply::multiply_resident_surviving(*connection_, a, *placed, x, y, tell, options);
  ASSERT_TRUE(product.is_ok()) << product.status().to_string();
  EXPECT_TRUE(product->verification.passed) << product->verification.detail;
  for (std::size_t i = 0; i < y.values.size(); ++i) ASSERT_NEAR(y.values[i], expected.values[i], 1e-12) << i;
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find("node '" + cluster_.spec.nodes[2].name + "' lost"), std::string::npos) << told[0];
  EXPECT_EQ(placed->shares.size(), 2u);
  EXPECT_EQ(rows_on(*placed, 0) + rows_on(*placed, 1), 600u);
  EXPECT_EQ(placed->bytes_placed, placed_bytes + 200u * 300u * sizeof(double)) << "only the lost node's rows travel";

  // Node 1 stopped: dropped at its deadline, its rows to node 0, the product exact again.
  cluster_.processes[1]->signal(SIGSTOP);
  told.clear();
  product = multiply::multiply_resident_surviving(*connection_, a, *placed, x, y, tell, options);
  cluster_.processes[1]->signal(SIGCONT);
  ASSERT_TRUE(product.is_ok()) << product.status().to_string();
  for (std::size_t i = 0; i < y.values.size(); ++i) ASSERT_NEAR(y.values[i], expected.values[i], 1e-12) << i;
  ASSERT_EQ(told.size(), 1u);
  EXPECT_NE(told[0].find("unresponsive"), std::string::npos) << told[0];
  EXPECT_EQ(rows_on(*placed, 0), 600u);

  // The last node lost: nothing left to place on, and the call says so.
  cluster_.processes[0]->kill_now();
  product = multiply::multiply_resident_surviving(*connection_, a, *placed, x, y, tell, options);
  ASSERT_FALSE(product.is_ok());
  EXPECT_NE(product.status().message().find("every node holding the matrix's rows was lost"), std::string::npos)
      << product.status().to_string();
}

// Through the session, as Python and `tessera iterate` run it: conjugate gradient with a node
// killed before it starts converges to the same exact answer, and the notice names the node.
TEST_F(ResidentTest, ConjugateGradientFinishesExactAfterANodeIsKilled) {
  connection_->close();  // the session takes its own connections
  connection_.reset();
  const std::size_t n = 300;
  const linalg::Matrix spd = spd_matrix(n, 20);
  const linalg::Matrix b = random_matrix(n, 1, 21);
  Result<session::Session> opened = session::Session::open(cluster_.spec);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  session::PlacementOptions placement;
  placement.split = session::PlacementOptions::Split::kEven;
  Result<session::ResidentPlacement> placed = opened->place_rows(spd, placement);
  ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
  cluster_.processes[1]->kill_now();
  std::vector<std::string> notices;
  session::RunControl control;
  control.on_notice = [&](const std::string& notice) { notices.push_back(notice); };
  multiply::CgOptions options;
  Result<multiply::IterationOutcome> solved = opened->conjugate_gradient(placed->id, b.values, options, control);
  ASSERT_TRUE(solved.is_ok()) << solved.status().to_string();
  EXPECT_TRUE(solved->converged);
  EXPECT_LT(solved->residual, 1e-9);
  ASSERT_FALSE(notices.empty());
  EXPECT_NE(notices[0].find("node '" + cluster_.spec.nodes[1].name + "' lost"), std::string::npos) << notices[0];
  opened->close();
}

TEST_F(ResidentTest, SharesThatDoNotAddUpAreRefused) {
  const linalg::Matrix a = random_matrix(10, 4, 7);
  Result<multiply::ResidentMatrix> placed =
      multiply::place_rows(*connection_, a, std::vector<std::size_t>{0, 1}, std::vector<uint64_t>{5, 4});
  ASSERT_FALSE(placed.is_ok());
  EXPECT_EQ(placed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(placed.status().message().find("9 rows, the matrix 10"), std::string::npos) << placed.status().message();
}

// `tessera iterate`: a matrix placed once, then CG or power iteration, each step one product by a
// vector; the written vector is the answer, and a command without what its method needs is
// refused before anything is placed.
TEST_F(ResidentTest, TheIterateCommandSolvesAndFindsTheEigenpair) {
  connection_->close();  // the workers take one coordinator at a time: the command's
  connection_.reset();
  const std::string config = testing::write_cluster_file(dir_, cluster_.spec);
  ::chmod(config.c_str(), 0600);
  const std::size_t n = 120;
  const linalg::Matrix spd = spd_matrix(n, 11);
  const linalg::Matrix b = random_matrix(n, 1, 12);
  ASSERT_TRUE(linalg::write_npy(dir_.file("A.npy"), spd).is_ok());
  ASSERT_TRUE(linalg::write_npy(dir_.file("b.npy"), b).is_ok());
  const std::string cli = std::string(TESSERA_CLI_BINARY) + " iterate " + config + " --matrix " + dir_.file("A.npy");

  testing::CommandResult cg = testing::run_command(cli + " --method cg --rhs " + dir_.file("b.npy") + " --out " +
                                                   dir_.file("x.npy"));
  ASSERT_EQ(cg.exit_code, 0) << cg.output;
  EXPECT_NE(cg.output.find("; converged"), std::string::npos) << cg.output;
  Result<linalg::Matrix> x = linalg::read_npy(dir_.file("x.npy"));
  ASSERT_TRUE(x.is_ok()) << x.status().to_string();
  linalg::Matrix ax(n, 1);
  linalg::gemm(n, 1, n, 1.0, spd.values.data(), n, x->values.data(), 1, 0.0, ax.values.data(), 1);
  double residual = 0.0, b_norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    residual += (ax.values[i] - b.values[i]) * (ax.values[i] - b.values[i]);
    b_norm += b.values[i] * b.values[i];
  }
  EXPECT_LT(std::sqrt(residual / b_norm), 1e-9);

  testing::CommandResult power = testing::run_command(cli + " --method power --tol 1e-12");
  ASSERT_EQ(power.exit_code, 0) << power.output;
  EXPECT_NE(power.output.find("eigenvalue "), std::string::npos) << power.output;

  testing::CommandResult refused = testing::run_command(cli + " --method cg");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--method cg needs --rhs"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace tessera::balance
