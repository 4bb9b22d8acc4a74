// `tessera experiment` on a tiny resident study with real workers on loopback: every workload in
// every variant, the summary's columns and what they hold, the report's tables, the cluster it
// started stopped again, and a broken study refused with its file and line.
#include "tessera/experiment/resident_study.hpp"

#include <gtest/gtest.h>

#include <set>

#include "process_fixture.hpp"
#include "study_fixture.hpp"

namespace tessera::balance {
namespace {

using testing::is_png;

class TinyResidentStudy : public testing::TwoNodeStudyTest {
 protected:
  TinyResidentStudy() : TwoNodeStudyTest("tiny-resident", "resident-study-secret") {}
};

TEST_F(TinyResidentStudy, EveryWorkloadInEveryVariantIsTimedCheckedAndSummarised) {
  testing::write_file(dir_.file("study.yaml"),
                      "study: tiny-resident\nworkload: resident\nclusters: [cluster.yaml]\nworkloads:\n"
                      "  - {name: power, n: 256, iterations: 4}\n"
                      "  - {name: thin-products, n: 256, columns: 8, iterations: 2}\n"
                      "  - {name: cg, n: 256, tol: 1e-10}\n"
                      "  - {name: layer-stack, n: 128, layers: 3, iterations: 2}\n"
                      "repeat: 2\n");
  const std::string out = dir_.file("out");
  testing::CommandResult result = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                       dir_.file("study.yaml") + " --out " + out + " --run-dir " +
                                                       dir_.file("run"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[8/8] layer-stack on tiny-resident #2: cluster "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("stopped cluster 'tiny-resident'"), std::string::npos) << result.output;
  EXPECT_TRUE(live_workers().empty()) << "the study must stop the cluster it started";

  std::vector<std::string> header;
  const auto summary = testing::read_study_csv(out + "/summary.csv", &header);
  for (const char* column : {"workload", "cluster", "variant", "per_iteration_median_s", "per_iteration_min_s",
                             "per_iteration_max_s", "placement_s", "bytes_sent", "verified"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), column), header.end()) << column;
  }
  ASSERT_EQ(summary.size(), 16u);  // 4 workloads x 4 variants
  std::set<std::string> seen;
  for (const auto& row : summary) {
    SCOPED_TRACE(row.at("workload") + " " + row.at("variant"));
    seen.insert(row.at("workload") + "/" + row.at("variant"));
    EXPECT_EQ(row.at("cluster"), "tiny-resident");
    EXPECT_EQ(row.at("runs"), "2");
    EXPECT_EQ(row.at("verified"), "yes");
    const double low = std::stod(row.at("per_iteration_min_s"));
    const double middle = std::stod(row.at("per_iteration_median_s"));
    EXPECT_GT(low, 0.0);
    EXPECT_LE(low, middle);
    EXPECT_LE(middle, std::stod(row.at("per_iteration_max_s")));
    if (row.at("workload") == "power" || row.at("workload") == "thin-products" || row.at("workload") == "layer-stack") {
      const unsigned per_run = row.at("workload") == "power" ? 4 : 2;
      EXPECT_EQ(row.at("iterations"), std::to_string(2 * per_run));
    }
    if (row.at("variant") == "blas-1core") {
      EXPECT_EQ(std::stod(row.at("bytes_sent")), 0.0) << "nothing is placed or sent on one core here";
      EXPECT_EQ(row.at("rows"), "");
    } else {
      // Placed once: the matrix's bytes (moves included) and then only vectors.
      EXPECT_GT(std::stod(row.at("placement_s")), 0.0);
      const double matrix_bytes = row.at("workload") == "layer-stack" ? 3.0 * 128 * 128 * 8 : 256.0 * 256 * 8;
      EXPECT_GE(std::stod(row.at("bytes_sent")), matrix_bytes);
      EXPECT_NE(row.at("rows").find("a:"), std::string::npos) << row.at("rows");
    }
    if (row.at("variant") == "desktop-alone") {
      EXPECT_EQ(std::stod(row.at("to_desktop_alone")), 1.0);
      EXPECT_TRUE(row.at("rows").find(":0") != std::string::npos) << "one node holds every row: " << row.at("rows");
    }
    if (row.at("variant") == "even" && row.at("workload") != "layer-stack") {
      EXPECT_EQ(row.at("rows"), "a:128 b:128");
    }
  }
  EXPECT_EQ(seen.size(), 16u);

  const std::string report = testing::read_file(out + "/report.md");
  for (const char* phrase : {"# Study: tiny-resident", "### power on tiny-resident", "### cg on tiny-resident",
                             "| variant | per iteration s | / desktop alone |", "| blas-1core | ",
                             "](per-iteration-tiny-resident.png)"}) {
    EXPECT_NE(report.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in:\n" << report;
  }
  EXPECT_EQ(report.find("Incomplete"), std::string::npos);
  EXPECT_TRUE(is_png(out + "/per-iteration-tiny-resident.png"));
}

TEST_F(TinyResidentStudy, ABrokenStudyIsRefusedWithFileAndLineBeforeAnythingStarts) {
  struct Case {
    std::string workloads;
    std::string phrase;
  };
  const Case cases[] = {
      {"  - {name: power, n: 64}\n", "bad.yaml:5: "},
      {"  - {name: cg, n: 64, iterations: 3}\n", "cg runs to its tol"},
      {"  - {name: spin, n: 64, iterations: 3}\n", "unknown workload 'spin'"},
      {"  - {name: power, n: 64, iterations: 3, columns: 4}\n", "columns belongs to thin-products only"},
      {"  - {name: power, n: 64, iterations: 3}\n  - {name: power, n: 64, iterations: 3}\n", "listed twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.workloads);
    testing::write_file(dir_.file("bad.yaml"),
                        "study: bad\nworkload: resident\nclusters: [cluster.yaml]\nworkloads:\n" + c.workloads);
    testing::CommandResult bad = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                      dir_.file("bad.yaml") + " --out " + dir_.file("out") +
                                                      " --run-dir " + dir_.file("run"));
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find("bad.yaml:"), std::string::npos) << bad.output;
    EXPECT_NE(bad.output.find(c.phrase), std::string::npos) << bad.output;
  }
  EXPECT_TRUE(live_workers().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out")));
}

}  // namespace
}  // namespace tessera::balance
