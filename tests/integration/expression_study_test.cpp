// `tessera experiment` on a tiny expression study with real workers on loopback: the files it
// writes and what is in them, the clusters it started stopped again, and a broken study refused
// with its file and line. The scheduled modes need the scheduled executor; the sequence mode runs
// here.
#include "tessera/experiment/expression_study.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "process_fixture.hpp"
#include "study_fixture.hpp"

namespace tessera::balance {
namespace {

using testing::is_png;

class TinyExpressionStudy : public testing::TwoNodeStudyTest {
 protected:
  TinyExpressionStudy() : TwoNodeStudyTest("tiny-expressions", "expression-study-secret") {}
};

TEST_F(TinyExpressionStudy, SequenceModeWritesResultsSummaryPlotAndReport) {
  testing::write_file(dir_.file("study.yaml"),
                      "study: tiny-expressions\nworkload: expressions\nclusters: [cluster.yaml]\nbenchmarks:\n"
                      "  - {name: markov, expression: \"u * P^4\", inputs: {u: \"random:1x96\", P: \"random:96x96\"}}\n"
                      "  - name: chain\n    expression: \"A * B * C\"\n"
                      "    inputs: {A: \"random:80x12\", B: \"random:12x90\", C: \"integers:90x40\"}\n"
                      "modes: [sequence]\nrepeat: 1\n");
  const std::string out = dir_.file("out");
  testing::CommandResult result = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                       dir_.file("study.yaml") + " --out " + out + " --run-dir " +
                                                       dir_.file("run"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[2/2] tiny-expressions chain sequence #1"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("stopped cluster 'tiny-expressions'"), std::string::npos) << result.output;
  EXPECT_TRUE(live_workers().empty()) << "the study must stop the cluster it started";

  std::vector<std::string> header;
  const auto results = testing::read_study_csv(out + "/results.csv", &header);
  EXPECT_EQ(header, (std::vector<std::string>{"cluster", "benchmark", "mode", "repeat", "wall_s", "makespan_s",
                                              "predicted_s", "theoretical_s", "fastest_alone_s", "bytes_moved",
                                              "naive_bytes", "tile", "coordinator_bytes_sent", "verified"}));
  ASSERT_EQ(results.size(), 2u);  // 2 benchmarks x 1 mode x 1 repetition
  EXPECT_EQ(results[0].at("benchmark"), "markov");
  EXPECT_EQ(results[1].at("benchmark"), "chain");
  for (const auto& row : results) {
    SCOPED_TRACE(row.at("benchmark"));
    EXPECT_EQ(row.at("cluster"), "tiny-expressions");
    EXPECT_EQ(row.at("mode"), "sequence");
    EXPECT_EQ(row.at("repeat"), "1");
    EXPECT_EQ(row.at("verified"), "yes");
    EXPECT_GT(std::stod(row.at("makespan_s")), 0.0);
    EXPECT_GE(std::stod(row.at("wall_s")), std::stod(row.at("makespan_s"))) << "the products run inside the evaluation";
    EXPECT_GT(std::stod(row.at("bytes_moved")), 0.0);
    // What only a scheduled run has stays empty.
    for (const char* column : {"theoretical_s", "fastest_alone_s", "naive_bytes", "tile", "coordinator_bytes_sent"}) {
      EXPECT_EQ(row.at(column), "") << column;
    }
  }

  const auto summary = testing::read_study_csv(out + "/summary.csv", &header);
  ASSERT_EQ(summary.size(), 2u);
  for (std::size_t i = 0; i < summary.size(); ++i) {
    EXPECT_EQ(summary[i].at("benchmark"), results[i].at("benchmark"));
    EXPECT_EQ(summary[i].at("runs"), "1");
    EXPECT_EQ(summary[i].at("makespan_median_s"), results[i].at("makespan_s")) << "one run is its own median";
    EXPECT_EQ(summary[i].at("makespan_min_s"), results[i].at("makespan_s"));
    EXPECT_EQ(summary[i].at("wall_max_s"), results[i].at("wall_s"));
    EXPECT_EQ(summary[i].at("all_verified"), "yes");
  }

  const std::string report = testing::read_file(out + "/report.md");
  for (const char* phrase : {"# Study: tiny-expressions", "Machine:", "## Against the targets", "## Cluster tiny-expressions",
                             "### markov on tiny-expressions: `u * P^4`", "### chain on tiny-expressions: `A * B * C`",
                             "Evaluated as `", "| sequence | 1 | ", "](modes-tiny-expressions.png)"}) {
    EXPECT_NE(report.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in:\n" << report;
  }
  EXPECT_EQ(report.find("Incomplete"), std::string::npos);
  EXPECT_TRUE(is_png(out + "/modes-tiny-expressions.png"));
  EXPECT_FALSE(std::filesystem::exists(out + "/predicted-vs-measured.png")) << "no scheduled run to draw";
}

TEST_F(TinyExpressionStudy, ABrokenStudyIsRefusedWithFileAndLineBeforeAnythingStarts) {
  testing::write_file(dir_.file("bad.yaml"),
                      "study: bad\nworkload: expressions\nclusters: [cluster.yaml]\nbenchmarks:\n"
                      "  - {name: m, expression: \"u * P\", inputs: {u: \"random:1x8\", P: \"random:9x9\"}}\n");
  testing::CommandResult bad = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                    dir_.file("bad.yaml") + " --out " + dir_.file("out") +
                                                    " --run-dir " + dir_.file("run"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("bad.yaml:5: benchmark 'm': "), std::string::npos) << bad.output;
  EXPECT_TRUE(live_workers().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out")));
}

}  // namespace
}  // namespace tessera::balance
