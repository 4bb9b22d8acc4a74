// `tessera experiment` end to end on a tiny study with real workers: the files it writes, the
// statistics in them, the plots, and a clean stop on Ctrl-C.
#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "process_fixture.hpp"
#include "study_fixture.hpp"

namespace tessera::balance {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};

Csv read_csv(const std::string& path) {
  Csv csv;
  std::istringstream text(testing::read_file(path));
  std::string line;
  if (std::getline(text, line)) csv.header = split_csv_line(line);
  while (std::getline(text, line)) {
    const std::vector<std::string> fields = split_csv_line(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < csv.header.size() && i < fields.size(); ++i) row[csv.header[i]] = fields[i];
    csv.rows.push_back(row);
  }
  return csv;
}

using testing::is_png;

class TinyStudy : public testing::TwoNodeStudyTest {
 protected:
  TinyStudy() : TwoNodeStudyTest("tiny-study", "study-secret", {"tiny-study-n1"}) {}
};

TEST_F(TinyStudy, WritesResultsSummaryPlotsAndReport) {
  testing::write_file(dir_.file("study.yaml"),
                      "study: tiny\ncluster: cluster.yaml\npolicies: [even, proportional, model]\nsizes: [256]\n"
                      "repeat: 2\nnode_counts: [1, 2]\n");
  const std::string out = dir_.file("out");
  testing::CommandResult result = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                       dir_.file("study.yaml") + " --out " + out + " --run-dir " +
                                                       dir_.file("run"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("[12/12]"), std::string::npos) << result.output;
  EXPECT_TRUE(live_workers().empty()) << "the study must stop the clusters it started";

  const Csv results = read_csv(out + "/results.csv");
  for (const char* column : {"variant", "nodes", "policy", "overlap", "n", "repetition", "makespan_s", "gflops",
                             "imbalance", "predicted_makespan_s", "prediction_error", "verified"}) {
    EXPECT_NE(std::find(results.header.begin(), results.header.end(), column), results.header.end()) << column;
  }
  ASSERT_EQ(results.rows.size(), 12u);  // 2 node counts x 3 policies x 2 repetitions
  for (const auto& row : results.rows) EXPECT_EQ(row.at("verified"), "true");
  EXPECT_EQ(read_csv(out + "/nodes.csv").rows.size(), 2u * 3 * 1 + 2u * 3 * 2);  // nodes per run

  // Each summary median is the median of its runs (two runs: their mean).
  const Csv summary = read_csv(out + "/summary.csv");
  ASSERT_EQ(summary.rows.size(), 6u);
  for (const auto& group : summary.rows) {
    std::vector<double> makespans;
    for (const auto& row : results.rows) {
      if (row.at("variant") == group.at("variant") && row.at("policy") == group.at("policy")) {
        makespans.push_back(std::stod(row.at("makespan_s")));
      }
    }
    ASSERT_EQ(makespans.size(), 2u);
    EXPECT_NEAR(std::stod(group.at("makespan_median_s")), (makespans[0] + makespans[1]) / 2, 1e-5);
    EXPECT_NEAR(std::stod(group.at("makespan_min_s")), std::min(makespans[0], makespans[1]), 1e-6);
    EXPECT_NEAR(std::stod(group.at("makespan_max_s")), std::max(makespans[0], makespans[1]), 1e-6);
  }

  const std::string report = testing::read_file(out + "/report.md");
  for (const char* plot : {"makespan.png", "timeline.png", "scaling.png"}) {
    EXPECT_TRUE(is_png(out + "/" + plot)) << plot;
    EXPECT_NE(report.find(std::string("](") + plot + ")"), std::string::npos) << plot;
  }
  EXPECT_NE(report.find("Machine:"), std::string::npos);
  EXPECT_NE(report.find("### Scale-out"), std::string::npos);
}

TEST_F(TinyStudy, BrokenStudiesAreRefusedWithFileAndLine) {
  testing::write_file(dir_.file("bad.yaml"), "study: x\ncluster: cluster.yaml\npolicies: [even, fastest]\nsizes: [8]\n");
  testing::CommandResult bad = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " + dir_.file("bad.yaml"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("bad.yaml:3"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("unknown policy 'fastest'"), std::string::npos) << bad.output;

  testing::write_file(dir_.file("typo.yaml"), "study: x\ncluster: cluster.yaml\npolicies: [even]\nsize: [8]\n");
  testing::CommandResult typo = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " + dir_.file("typo.yaml"));
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_NE(typo.output.find("typo.yaml:4: unknown key 'size'"), std::string::npos) << typo.output;
}

TEST_F(TinyStudy, CtrlCStopsEverythingItStarted) {
  testing::write_file(dir_.file("long.yaml"),
                      "study: long\ncluster: cluster.yaml\npolicies: [even]\nsizes: [512]\nrepeat: 1000\n");
  const std::string log = dir_.file("experiment.log");
  testing::ChildProcess experiment({TESSERA_CLI_BINARY, "experiment", dir_.file("long.yaml"), "--out", dir_.file("out"),
                                    "--run-dir", dir_.file("run")},
                                   log);
  // Wait until runs are under way, with the workers up.
  bool running = false;
  for (int i = 0; i < 600 && !running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    running = testing::read_file(log).find("[3/1000]") != std::string::npos;
  }
  ASSERT_TRUE(running) << testing::read_file(log);
  const std::vector<int> workers = live_workers();
  ASSERT_EQ(workers.size(), 2u);

  experiment.signal(SIGINT);
  EXPECT_EQ(experiment.wait_exit(std::chrono::seconds(30)), 130) << testing::read_file(log);
  for (int pid : workers) EXPECT_FALSE(testing::process_alive(pid)) << pid;
  EXPECT_TRUE(live_workers().empty());
  const std::string report = testing::read_file(dir_.file("out/report.md"));
  EXPECT_NE(report.find("Incomplete"), std::string::npos) << report;
}

TEST_F(TinyStudy, LeavesAClusterTheUserStartedRunning) {
  // The user's own cluster, started before the study: the study must use it and leave it up.
  testing::CommandResult up = testing::run_command(std::string(TESSERA_CLI_BINARY) + " up " +
                                                   dir_.file("cluster.yaml") + " --run-dir " + dir_.file("run"));
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const std::vector<int> workers = live_workers();
  ASSERT_EQ(workers.size(), 2u);

  testing::write_file(dir_.file("study.yaml"), "study: reuse\ncluster: cluster.yaml\npolicies: [even]\nsizes: [128]\n");
  testing::CommandResult study = testing::run_command(std::string(TESSERA_CLI_BINARY) + " experiment " +
                                                      dir_.file("study.yaml") + " --out " + dir_.file("out") +
                                                      " --run-dir " + dir_.file("run"));
  ASSERT_EQ(study.exit_code, 0) << study.output;
  EXPECT_NE(study.output.find("using the running cluster 'tiny-study'"), std::string::npos) << study.output;
  EXPECT_EQ(study.output.find("stopped cluster"), std::string::npos) << study.output;
  for (int pid : workers) EXPECT_TRUE(testing::process_alive(pid)) << pid;
}

}  // namespace
}  // namespace tessera::balance
