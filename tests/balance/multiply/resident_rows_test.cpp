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

TEST(ResidentRows, AMeasuredCostPerRowOverridesTheRate) {
  // The profile says the Pis run at a tenth of the desktop; products measured them at a third.
  std::vector<ResidentNodeCost> nodes = lab(1e9);
  const ResidentShares forecast = resident_rows(16384, 16384, 1, nodes);
  const double desktop_row_s = 2.0 * 16384 / 40e9;
  nodes[0].measured_row_s = desktop_row_s;
  for (std::size_t pi = 1; pi < 4; ++pi) nodes[pi].measured_row_s = 3.0 * desktop_row_s;
  const ResidentShares measured = resident_rows(16384, 16384, 1, nodes);
  EXPECT_EQ(total(measured), 16384u);
  const double x_bytes = 16384.0 * sizeof(double);
  for (std::size_t i = 0; i < 4; ++i) {
    if (i > 0) {
      EXPECT_GT(measured.rows[i], forecast.rows[i] * 2) << i;
    }
    // Every node finishes together by the measured costs: X's trip and round trip, then its rows.
    const double fixed = 2.0 * nodes[i].latency_s + x_bytes / nodes[i].to_node_bytes_per_s;
    const double finish = fixed + static_cast<double>(measured.rows[i]) * nodes[i].measured_row_s;
    EXPECT_NEAR(finish, measured.forecast_s, 3.01 * desktop_row_s) << i;  // within a Pi row of rounding
  }
}

}  // namespace
}  // namespace tessera::balance::multiply
