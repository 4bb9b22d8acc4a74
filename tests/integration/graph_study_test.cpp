// `tessera experiment` on a tiny graph study with real workers on loopback: the best node alone
// against the set the placement model picks, one warm-up pass, and what results.csv, summary.csv
// and report.md say of them. No timing is asserted (a loaded 2-core machine runs this).
#include "tessera/experiment/graph_study.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "process_fixture.hpp"
#include "study_fixture.hpp"

namespace tessera::balance {
namespace {

class TinyGraphStudy : public testing::TwoNodeStudyTest {
 protected:
  TinyGraphStudy() : TwoNodeStudyTest("tiny-graph-study", "graph-study-secret") {}
};

TEST_F(TinyGraphStudy, BestNodeAgainstAutoWithAWarmUpPass) {
  testing::write_file(dir_.file("study.yaml"),
                      "study: tiny-graph\nworkload: graph\nclusters: [cluster.yaml]\ngraphs: [mesh2d:8x8]\n"
                      "algorithms: [pagerank]\nvariants:\n  - {nodes: best}\n  - {nodes: auto, partition: auto}\n"
                      "warmup: 1\nrepeat: 1\n");
  const std::string out = dir_.file("out");
  // A stale file in the cache must not survive: `cache: fresh` empties it.
  std::filesystem::create_directories(out + "/graph-cache");
  testing::write_file(out + "/graph-cache/stale", "x");
  testing::CommandResult result = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                       dir_.file("study.yaml") + " --out " + out + " --run-dir " +
                                                       dir_.file("run"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[4/4]"), std::string::npos) << result.output;  // 2 variants x (1 warm-up + 1 timed)
  EXPECT_NE(result.output.find("warm-up 1"), std::string::npos) << result.output;
  EXPECT_TRUE(live_workers().empty()) << "the study must stop the cluster it started";
  EXPECT_FALSE(std::filesystem::exists(out + "/graph-cache/stale"));
  EXPECT_TRUE(std::filesystem::is_directory(out + "/graph-cache/tiny-graph-study"));

  std::vector<std::string> header;
  const auto results = testing::read_study_csv(out + "/results.csv", &header);
  for (const char* column : {"nodes", "partition", "repetition", "warmup", "taking_part", "placement_method",
                             "placement_cached", "total_s", "placement_s", "wall_s", "forecast_s", "verified"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), column), header.end()) << column;
  }
  ASSERT_EQ(results.size(), 4u);
  int warmups = 0;
  for (const auto& row : results) {
    SCOPED_TRACE(row.at("nodes") + " warm-up " + row.at("warmup"));
    warmups += row.at("warmup") == "yes" ? 1 : 0;
    EXPECT_EQ(row.at("repetition"), "1");
    EXPECT_EQ(row.at("verified"), "yes");
    EXPECT_FALSE(row.at("taking_part").empty());
    EXPECT_FALSE(row.at("placement_method").empty());
    const double total = std::stod(row.at("total_s"));
    EXPECT_NEAR(total, std::stod(row.at("placement_s")) + std::stod(row.at("wall_s")), 1e-5 * total + 2e-6);
    if (row.at("nodes") == "best") {
      EXPECT_TRUE(row.at("taking_part") == "a" || row.at("taking_part") == "b") << row.at("taking_part");
    } else {
      EXPECT_EQ(row.at("nodes"), "auto");
      EXPECT_EQ(row.at("partition"), "auto");
      EXPECT_FALSE(row.at("forecast_s").empty()) << "auto forecasts the set it runs";
    }
  }
  EXPECT_EQ(warmups, 2);
  EXPECT_EQ(results[0].at("warmup"), "yes") << "the warm-up pass runs first";
  EXPECT_EQ(results[1].at("warmup"), "yes");

  const auto summary = testing::read_study_csv(out + "/summary.csv", &header);
  ASSERT_EQ(summary.size(), 2u);  // warm-ups are in no group
  for (const auto& group : summary) {
    SCOPED_TRACE(group.at("nodes"));
    EXPECT_EQ(group.at("runs"), "1");
    const auto timed = std::find_if(results.begin(), results.end(), [&](const auto& row) {
      return row.at("warmup") == "no" && row.at("nodes") == group.at("nodes");
    });
    ASSERT_NE(timed, results.end());
    EXPECT_EQ(group.at("total_median_s"), timed->at("total_s")) << "one run is its own median";
    EXPECT_EQ(group.at("total_min_s"), timed->at("total_s"));
    EXPECT_EQ(group.at("total_max_s"), timed->at("total_s"));
    EXPECT_EQ(group.at("taking_part"), timed->at("taking_part"));
    EXPECT_EQ(group.at("all_verified"), "yes");
  }

  const std::string report = testing::read_file(out + "/report.md");
  for (const char* phrase : {"# Study: tiny-graph", "after 1 untimed warm-up pass", "### Cluster against its best node",
                             "| best / auto |", "graph-cache/<cluster>"}) {
    EXPECT_NE(report.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in:\n" << report;
  }
  const std::size_t section = report.find("### Cluster against its best node");
  ASSERT_NE(section, std::string::npos);
  const std::string rows = report.substr(section);
  EXPECT_NE(rows.find("| tiny-graph-study | mesh2d:8x8 | pagerank | async auto profile |"), std::string::npos) << rows;
  EXPECT_TRUE(rows.find("cluster faster") != std::string::npos || rows.find("best node alone chosen") != std::string::npos ||
              rows.find("slower by") != std::string::npos || rows.find("on par") != std::string::npos)
      << rows;
  EXPECT_EQ(report.find("Incomplete"), std::string::npos);
  EXPECT_TRUE(testing::is_png(out + "/total-tiny-graph-study-pagerank.png"));
}

}  // namespace
}  // namespace tessera::balance
