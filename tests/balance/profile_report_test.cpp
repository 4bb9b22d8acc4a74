#include "tessera/balance/profile.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/balance/report.hpp"

namespace tessera::balance {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera-unit-" + std::to_string(::getpid()) + "-" + name)).string();
}

ClusterProfile sample_profile() {
  ClusterProfile profile;
  profile.cluster = "lab";
  profile.measured_at = "2026-11-21T10:00:00Z";
  profile.nodes = {{"desktop", "127.0.0.1:1", 40.0, 512, 100, 0.3, 2, 2, "x86_64", "0.1.0"},
                   {"pi", "127.0.0.1:2", 10.0, 512, 25, 0.3, 1, 2, "x86_64", "0.1.0"}};
  return profile;
}

TEST(ProfileTest, RelativePowersSumToOne) {
  const std::vector<double> powers = sample_profile().relative_powers();
  ASSERT_EQ(powers.size(), 2u);
  EXPECT_DOUBLE_EQ(powers[0], 0.8);
  EXPECT_DOUBLE_EQ(powers[1], 0.2);
}

TEST(ProfileTest, SavedProfileReadsBackEqual) {
  const std::string path = temp_path("profile.yaml");
  ASSERT_TRUE(save_profile(path, sample_profile()).is_ok());
  Result<ClusterProfile> loaded = load_profile(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(*loaded, sample_profile());
  std::filesystem::remove(path);
}

TEST(ProfileTest, DefaultPathSitsNextToTheConfig) {
  EXPECT_EQ(default_profile_path("configs/lab.yaml"), "configs/lab.profile.yaml");
}

TEST(ProfileTest, MissingOrBrokenProfilesSayWhatToRun) {
  Result<ClusterProfile> missing = load_profile(temp_path("absent.yaml"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tessera profile"), std::string::npos);

  const std::string path = temp_path("broken.yaml");
  std::ofstream(path) << "cluster: lab\nnodes:\n  - name: a\n    gflops: [\n";
  Result<ClusterProfile> broken = load_profile(path);
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidConfig);
  EXPECT_NE(broken.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
}

TEST(ProfileTest, WeightsFollowClusterOrderAndNameMissingNodes) {
  ClusterSpec cluster;
  cluster.source_path = "lab.yaml";
  cluster.nodes.push_back(NodeSpec{"pi", "127.0.0.1", 2, 1, "", 1, {}});
  cluster.nodes.push_back(NodeSpec{"desktop", "127.0.0.1", 1, 1, "", 2, {}});
  Result<std::vector<double>> weights = profile_weights(sample_profile(), cluster, "lab.profile.yaml");
  ASSERT_TRUE(weights.is_ok());
  EXPECT_EQ(*weights, (std::vector<double>{10.0, 40.0}));
  cluster.nodes.push_back(NodeSpec{"new-node", "127.0.0.1", 3, 1, "", 3, {}});
  Result<std::vector<double>> missing = profile_weights(sample_profile(), cluster, "lab.profile.yaml");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'new-node'"), std::string::npos);
}

TEST(ReportTest, JsonHasTheDocumentedKeys) {
  MultiplyReport report;
  report.cluster = "lab";
  report.plan.policy = Policy::kProportional;
  report.plan.m = report.plan.n = report.plan.k = 100;
  report.run.makespan_s = 0.5;
  report.run.gflops = 4.0;
  report.run.imbalance = 1.1;
  report.run.nodes.push_back({"a", 60, 0.6, 1000, 500, 0.4, 0.05, 0.1, 0.5, 4});
  report.run.nodes.push_back({"b", 40, 0.4, 800, 400, 0.3, 0.04, 0.2, 0.45, 4});
  report.verification.mode = VerifyMode::kFreivalds;
  report.verification.passed = true;
  const nlohmann::json json = nlohmann::json::parse(report_json(report));
  EXPECT_EQ(json["policy"], "proportional");
  EXPECT_EQ(json["n"], 100);
  EXPECT_EQ(json["verified"], true);
  EXPECT_DOUBLE_EQ(json["makespan_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(json["imbalance"].get<double>(), 1.1);
  ASSERT_EQ(json["nodes"].size(), 2u);
  EXPECT_EQ(json["nodes"][1]["name"], "b");
  EXPECT_EQ(json["nodes"][1]["rows"], 40);
  for (const char* key : {"weight", "compute_s", "comm_s", "idle_s", "finish_s"}) {
    EXPECT_TRUE(json["nodes"][0].contains(key)) << key;
  }
  report.verification.mode = VerifyMode::kNone;
  EXPECT_TRUE(nlohmann::json::parse(report_json(report))["verified"].is_null());

  const std::string table = format_report_table(report);
  EXPECT_NE(table.find("makespan 0.500 s"), std::string::npos) << table;
  EXPECT_NE(table.find("not checked"), std::string::npos) << table;
}

}  // namespace
}  // namespace tessera::balance
