// `tessera experiment` on a tiny graph study with real workers on loopback: the best node alone
// against the set the placement model picks, one warm-up pass, and what results.csv, summary.csv
// and report.md say of them. No timing is asserted (a loaded 2-core machine runs this).
#include "tessera/balance/study/graph_study.hpp"

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/local/local_cluster.hpp"

namespace tessera::balance {
namespace {

// The study's CSVs hold no quoted cells: a row is its cells split at commas, by column name.
std::vector<std::map<std::string, std::string>> read_graph_study_csv(const std::string& path, std::vector<std::string>* header) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream text(line);
    for (std::string cell; std::getline(text, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  std::istringstream text(testing::read_file(path));
  std::string line;
  std::getline(text, line);
  *header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(text, line)) {
    const std::vector<std::string> cells = split(line);
    EXPECT_EQ(cells.size(), header->size()) << line;
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header->size() && i < cells.size(); ++i) row[(*header)[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

class TinyGraphStudy : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<uint16_t> ports = testing::free_loopback_ports(2);
    testing::write_file(dir_.file("cluster.yaml"),
                        "cluster: tiny-graph-study\nsecret: graph-study-secret\nnodes:\n"
                        "  - {name: a, host: 127.0.0.1, port: " + std::to_string(ports[0]) +
                            ", threads: 1}\n"
                            "  - {name: b, host: 127.0.0.1, port: " + std::to_string(ports[1]) +
                            ", threads: 1}\n");
  }

  // Whatever happened, no worker of the study survives the test.
  void TearDown() override {
    for (int pid : live_workers()) ::kill(pid, SIGKILL);
  }

  std::vector<int> live_workers() {
    Result<cluster::ClusterSpec> spec = cluster::load_cluster_spec(dir_.file("cluster.yaml"));
    if (!spec) return {};
    return local::local_cluster_pids(*spec, {dir_.file("run"), "", {}});
  }

  testing::TempDir dir_;
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
  const auto results = read_graph_study_csv(out + "/results.csv", &header);
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

  const auto summary = read_graph_study_csv(out + "/summary.csv", &header);
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
