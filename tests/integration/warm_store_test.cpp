// Resident pieces kept in the workers' block stores (--store): a second session on the same matrix
// loads them instead of receiving them, and is exact; a corrupted file is dropped and its piece
// sent again; workers with another secret find nothing of the first secret's; a store too small
// for a piece keeps nothing and the placement goes on by sending. Real workers on loopback.
#include "tessera/balance/multiply/resident.hpp"
#include "tessera/balance/session/session.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "process_fixture.hpp"
#include "tessera/linalg/gemm.hpp"

namespace tessera::balance::warm_store {
namespace {

namespace fs = std::filesystem;

using linalg::random_matrix;  // uniform in [-1, 1), seeded

constexpr std::size_t kRows = 240;
constexpr std::size_t kCols = 100;

class WarmStore : public ::testing::Test {
 protected:
  // Three workers, each with a store folder of its own under the test's folder.
  void start(const std::string& secret, const std::string& store_bytes = "64MiB") {
    stop();
    cluster_ = testing::start_local_cluster("warm", secret, 3, dir_, "", {},
                                            {"--store", dir_.file("store{i}"), "--store-bytes", store_bytes});
  }
  void stop() {
    for (auto& process : cluster_.processes) process->stop();
    cluster_.processes.clear();
  }
  void TearDown() override { stop(); }

  // One session: connect, place `a` in three shares, multiply once (checked and compared), release.
  multiply::ResidentMatrix session(const linalg::Matrix& a) {
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_.spec);
    EXPECT_TRUE(connection.is_ok()) << connection.status().to_string();
    if (!connection) return {};
    for (const cluster::NodeLink& link : connection->links()) {
      EXPECT_NE(link.hello.capabilities & transport::kCapabilityBlockStore, 0u) << link.spec.name;
    }
    multiply::ResidentOptions options;
    options.largest_tile_bytes = 20 * kCols * sizeof(double);  // pieces of 20 rows: several per node
    const std::vector<std::size_t> links{0, 1, 2};
    const std::vector<uint64_t> rows{100, 80, 60};
    Result<multiply::ResidentMatrix> placed = multiply::place_rows(*connection, a, links, rows, options);
    EXPECT_TRUE(placed.is_ok()) << placed.status().to_string();
    if (!placed) return {};
    const linalg::Matrix x = random_matrix(kCols, 3, 99);
    linalg::Matrix y(kRows, 3);
    Result<multiply::ResidentProduct> product = multiply::multiply_resident(*connection, *placed, x, y, options);
    EXPECT_TRUE(product.is_ok()) << product.status().to_string();
    if (product) {
      EXPECT_TRUE(product->verification.passed) << product->verification.detail;
      linalg::Matrix expected(kRows, 3);
      linalg::gemm(kRows, 3, kCols, 1.0, a.values.data(), kCols, x.values.data(), 3, 0.0, expected.values.data(), 3);
      for (std::size_t i = 0; i < y.values.size(); ++i) {
        EXPECT_NEAR(y.values[i], expected.values[i], 1e-12 * (1.0 + std::abs(expected.values[i]))) << "entry " << i;
      }
    }
    multiply::release_resident(*connection, *placed);
    connection->close();
    return *placed;
  }

  std::vector<fs::path> block_files(std::size_t worker) const {
    std::vector<fs::path> files;
    const fs::path root = dir_.file("store" + std::to_string(worker));
    if (!fs::exists(root)) return files;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.is_regular_file() && entry.path().extension() == ".blk") files.push_back(entry.path());
    }
    return files;
  }

  testing::TempDir dir_;
  testing::LocalCluster cluster_;
};

constexpr uint64_t kMatrixBytes = kRows * kCols * sizeof(double);

TEST_F(WarmStore, ASecondSessionLoadsTheMatrixInsteadOfReceivingIt) {
  ASSERT_NO_FATAL_FAILURE(start("warm-secret"));
  const linalg::Matrix a = random_matrix(kRows, kCols, 1);
  const multiply::ResidentMatrix cold = session(a);
  EXPECT_EQ(cold.bytes_placed, kMatrixBytes);
  EXPECT_EQ(cold.bytes_reused, 0u);
  const multiply::ResidentMatrix warm = session(a);
  EXPECT_EQ(warm.bytes_placed, 0u) << "every piece came from the nodes' stores";
  EXPECT_EQ(warm.bytes_reused, kMatrixBytes);

  // After a restart of every worker (the same folders and secret) the blocks are still there.
  ASSERT_NO_FATAL_FAILURE(start("warm-secret"));
  const multiply::ResidentMatrix restarted = session(a);
  EXPECT_EQ(restarted.bytes_placed, 0u);
  EXPECT_EQ(restarted.bytes_reused, kMatrixBytes);

  // Another matrix shares nothing with it.
  const multiply::ResidentMatrix other = session(random_matrix(kRows, kCols, 2));
  EXPECT_EQ(other.bytes_placed, kMatrixBytes);
  EXPECT_EQ(other.bytes_reused, 0u);
}

TEST_F(WarmStore, ACorruptedBlockFileIsDroppedAndItsPieceSentAgain) {
  ASSERT_NO_FATAL_FAILURE(start("warm-secret"));
  const linalg::Matrix a = random_matrix(kRows, kCols, 3);
  (void)session(a);
  // Worker 1 holds 80 rows in pieces of 20: flip a value in one of its files.
  const std::vector<fs::path> files = block_files(1);
  ASSERT_EQ(files.size(), 4u);
  {
    std::fstream file(files[0], std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-8, std::ios::end);
    const double wrong = 12345.0;
    file.write(reinterpret_cast<const char*>(&wrong), sizeof(wrong));
  }
  const multiply::ResidentMatrix warm = session(a);  // exact: checked and compared inside
  const uint64_t piece = 20 * kCols * sizeof(double);
  EXPECT_EQ(warm.bytes_placed, piece) << "only the damaged piece travelled";
  EXPECT_EQ(warm.bytes_reused, kMatrixBytes - piece);
  EXPECT_EQ(block_files(1).size(), 4u) << "the piece sent again is kept again, under its right content";
}

TEST_F(WarmStore, WorkersWithAnotherSecretFindNothingOfTheFirstSecretsBlocks) {
  ASSERT_NO_FATAL_FAILURE(start("first-secret"));
  const linalg::Matrix a = random_matrix(kRows, kCols, 4);
  (void)session(a);
  ASSERT_NO_FATAL_FAILURE(start("second-secret"));
  const multiply::ResidentMatrix other = session(a);
  EXPECT_EQ(other.bytes_placed, kMatrixBytes) << "another secret's folder holds nothing";
  EXPECT_EQ(other.bytes_reused, 0u);
  ASSERT_NO_FATAL_FAILURE(start("first-secret"));
  EXPECT_EQ(session(a).bytes_reused, kMatrixBytes) << "the first secret's blocks are still its own";
}

TEST_F(WarmStore, AStoreTooSmallForAPieceKeepsNothingAndThePlacementGoesOnBySending) {
  ASSERT_NO_FATAL_FAILURE(start("warm-secret", "1KiB"));
  const linalg::Matrix a = random_matrix(kRows, kCols, 5);
  EXPECT_EQ(session(a).bytes_placed, kMatrixBytes);
  const multiply::ResidentMatrix again = session(a);
  EXPECT_EQ(again.bytes_placed, kMatrixBytes) << "nothing was kept, everything sent again";
  EXPECT_EQ(again.bytes_reused, 0u);
  EXPECT_TRUE(block_files(0).empty());
  EXPECT_NE(testing::read_file(dir_.file("worker0.log")).find("not kept on disk"), std::string::npos)
      << "the worker says why";
}

// Through the session, as Python and `tessera iterate` place: the first session measures its
// shares and remembers them; the next one on the same matrix places exactly those pieces, measures
// nothing and, the stores warm, sends nothing. A damaged memory is no memory.
TEST_F(WarmStore, ASessionPlacesTheSharesAnEarlierOneMeasuredAndMeasuresNothing) {
  ASSERT_NO_FATAL_FAILURE(start("warm-secret"));
  cluster_.spec.source_path = dir_.file("warm.yaml");  // the profile is kept beside it
  {
    Result<session::Session> measuring = session::Session::open(cluster_.spec);
    ASSERT_TRUE(measuring.is_ok()) << measuring.status().to_string();
    profile::ProfileOptions quick;
    quick.quick = true;
    ASSERT_TRUE(measuring->measure_profile(quick).is_ok());
  }
  const linalg::Matrix a = random_matrix(3000, 1000, 6);  // 24 MB: pieces of 4 MiB, several per node
  session::PlacementOptions options;
  options.memory_dir = dir_.file("memory");
  const auto place = [&](bool expect_remembered) -> session::ResidentPlacement {
    Result<session::Session> opened = session::Session::open(cluster_.spec);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    if (!opened) return {};
    Result<session::ResidentPlacement> placed = opened->place_rows(a, options);
    EXPECT_TRUE(placed.is_ok()) << placed.status().to_string();
    if (!placed) return {};
    EXPECT_EQ(placed->remembered, expect_remembered);
    const linalg::Matrix x = random_matrix(1000, 1, 8);
    linalg::Matrix y(3000, 1);
    Result<multiply::ResidentProduct> product = opened->multiply_resident(placed->id, x, y);
    EXPECT_TRUE(product.is_ok()) << product.status().to_string();
    if (product) EXPECT_TRUE(product->verification.passed) << product->verification.detail;
    linalg::Matrix expected(3000, 1);
    linalg::gemm(3000, 1, 1000, 1.0, a.values.data(), 1000, x.values.data(), 1, 0.0, expected.values.data(), 1);
    for (std::size_t i = 0; i < y.values.size(); ++i) {
      EXPECT_NEAR(y.values[i], expected.values[i], 1e-9 * (1.0 + std::abs(expected.values[i]))) << "row " << i;
    }
    return *placed;
  };
  const session::ResidentPlacement first = place(false);
  EXPECT_GT(first.measuring_rounds, 0);
  std::vector<fs::path> memories;
  for (const auto& entry : fs::recursive_directory_iterator(dir_.file("memory"))) {
    if (entry.path().extension() == ".json") memories.push_back(entry.path());
  }
  ASSERT_EQ(memories.size(), 1u) << "one memory for this matrix, width and node set";

  const session::ResidentPlacement second = place(true);
  EXPECT_EQ(second.measuring_rounds, 0) << "nothing measured again";
  EXPECT_EQ(second.bytes_placed, 0u) << "every piece is one a node kept";
  EXPECT_EQ(second.bytes_reused, a.values.size() * sizeof(double));
  EXPECT_EQ(second.rows_per_node, first.rows_per_node) << "the shares the first session ended with";

  testing::write_file(memories[0].string(), "{\"version\": 1, \"pieces\": [[\"a\", 0, 7]]}");
  const session::ResidentPlacement damaged = place(false);
  EXPECT_GT(damaged.measuring_rounds, 0) << "a damaged memory is measured again, and rewritten";
  EXPECT_TRUE(place(true).remembered);
}

}  // namespace
}  // namespace tessera::balance::warm_store
