#include "tessera/balance/multiply/resident.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace tessera::balance::multiply {
namespace {

// A desktop and three Pis, as the emulated labs are: rates in flops/s, links in bytes/s.
std::vector<ResidentNodeCost> lab(double pi_link_bytes_per_s) {
  return {{"desktop", 40e9, 2e9, 2e9, 50e-6},
          {"pi1", 4e9, pi_link_bytes_per_s, pi_link_bytes_per_s, 200e-6},
          {"pi2", 4e9, pi_link_bytes_per_s, pi_link_bytes_per_s, 200e-6},
          {"pi3", 4e9, pi_link_bytes_per_s, pi_link_bytes_per_s, 200e-6}};
}

uint64_t total(const ResidentShares& shares) { return std::accumulate(shares.rows.begin(), shares.rows.end(), uint64_t{0}); }

TEST(ResidentRows, OnAFastLinkEveryNodeTakesRowsByItsRate) {
  const ResidentShares shares = resident_rows(4096, 4096, 64, lab(1e9));
  ASSERT_EQ(shares.rows.size(), 4u);
  EXPECT_EQ(total(shares), 4096u);
  EXPECT_TRUE(shares.left_out.empty());
  for (std::size_t pi = 1; pi < 4; ++pi) {
    EXPECT_GT(shares.rows[pi], 0u);
    // A tenth of the desktop's rate: fewer than a tenth of its rows (the operand costs it more).
    EXPECT_LT(shares.rows[pi] * 10, shares.rows[0]);
  }
  // Together sooner than the desktop alone.
  const ResidentShares alone = resident_rows(4096, 4096, 64, std::vector<ResidentNodeCost>{lab(1e9)[0]});
  EXPECT_LT(shares.forecast_s, alone.forecast_s);
}

TEST(ResidentRows, ANodeWhoseOperandAloneArrivesTooLateIsLeftOutAndTold) {
  // 100 Mbit/s: X (2 MB) takes 0.17 s to a Pi, the desktop alone needs about 0.055 s.
  const ResidentShares shares = resident_rows(4096, 4096, 64, lab(12e6));
  EXPECT_EQ(shares.rows[0], 4096u);
  EXPECT_EQ(shares.rows[1] + shares.rows[2] + shares.rows[3], 0u);
  ASSERT_EQ(shares.left_out.size(), 3u);
  EXPECT_NE(shares.left_out[0].find("node 'pi1' gets no rows: the operand alone takes 0.175 s"), std::string::npos)
      << shares.left_out[0];
  // A vector is small enough to be worth sending even at 100 Mbit/s.
  const ResidentShares vector = resident_rows(16384, 16384, 1, lab(12e6));
  EXPECT_EQ(total(vector), 16384u);
  EXPECT_GT(vector.rows[1], 0u);
}

TEST(ResidentRows, ANodeWithoutARateOrLinkGetsNothingAndEveryRowIsPlacedOnce) {
  std::vector<ResidentNodeCost> nodes = lab(1e9);
  nodes[2].flops_per_s = 0.0;
  for (uint64_t m : {1u, 2u, 3u, 7u, 1000u, 4097u}) {
    const ResidentShares shares = resident_rows(m, 300, 3, nodes);
    EXPECT_EQ(total(shares), m) << m;
    EXPECT_EQ(shares.rows[2], 0u);
  }
  EXPECT_NE(resident_rows(10, 10, 1, nodes).left_out.front().find("'pi2' gets no rows: its profile has no rate"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::balance::multiply
