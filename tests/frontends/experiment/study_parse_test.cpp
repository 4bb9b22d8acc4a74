// Study files parsed without running anything: every field lands where it belongs (overlap and
// credit windows become the windows a study compares) and policy names with layouts are checked.
// Broken studies and the shipped ones: yaml_files_test.cpp.
#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

class StudyParse : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-study-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write("cluster.yaml", "cluster: c\nsecret: s\nnodes:\n  - {name: a, host: 127.0.0.1, port: 7000}\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

TEST_F(StudyParse, EveryFieldIsParsedAndPathsAreResolvedAgainstTheStudy) {
  const std::string path = write("s.yaml",
                                 "study: all-fields\n"
                                 "description: every key\n"
                                 "cluster: cluster.yaml\n"
                                 "policies: [even, proportional/2d, model, dynamic, even/3d]\n"
                                 "sizes: [64, 128]\n"
                                 "repeat: 2\n"
                                 "overlap: [on, off]\n"
                                 "node_counts: [1]\n"
                                 "verify: exact\n");
  Result<experiment::Study> study = experiment::load_study(path);
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  EXPECT_EQ(study->name, "all-fields");
  EXPECT_EQ(study->description, "every key");
  EXPECT_TRUE(fs::equivalent(study->cluster_path, dir_ / "cluster.yaml"));
  ASSERT_EQ(study->policies.size(), 5u);
  EXPECT_EQ(study->policies[1], (experiment::StudyPolicy{plan::Policy::kProportional, partition::Layout::kColumnBased, std::nullopt}));
  EXPECT_EQ(study->policies[4], (experiment::StudyPolicy{plan::Policy::kEven, partition::Layout::kRecursive3d, std::nullopt}));
  EXPECT_EQ(study->sizes, (std::vector<uint64_t>{64, 128}));
  EXPECT_EQ(study->repeat, 2u);
  EXPECT_EQ(study->windows, (std::vector<uint32_t>{4, 1})) << "overlap on is 4 panels in flight, off is 1";
  EXPECT_EQ(study->node_counts, (std::vector<uint32_t>{1}));
  EXPECT_EQ(study->verify, "exact");
}

TEST_F(StudyParse, ACreditWindowListReplacesOverlap) {
  Result<experiment::Study> study =
      experiment::load_study(write("w.yaml", "study: w\ncluster: cluster.yaml\npolicies: [even]\nsizes: [8]\npanels_in_flight: [1, 40]\n"));
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  EXPECT_EQ(study->windows, (std::vector<uint32_t>{1, 40}));
  EXPECT_EQ(study->repeat, 3u) << "the default";
}

TEST(StudyPolicyNames, PoliciesWithLayoutsParseAndUnknownNamesListTheValidOnes) {
  Result<experiment::StudyPolicy> square = experiment::parse_study_policy("proportional/square-corner");
  ASSERT_TRUE(square.is_ok()) << square.status().to_string();
  EXPECT_EQ(square->name(), "proportional/square-corner");
  EXPECT_EQ(experiment::parse_study_policy("even")->name(), "even");
  Result<experiment::StudyPolicy> unknown = experiment::parse_study_policy("fastest");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("proportional"), std::string::npos) << unknown.status().message();
  EXPECT_FALSE(experiment::parse_study_policy("dynamic/2d").is_ok()) << "dynamic plans rows only";
  EXPECT_FALSE(experiment::parse_study_policy("even/4d").is_ok());
}

TEST(StudyParseTest, StudyPoliciesNameALayoutAfterASlash) {
  Result<experiment::StudyPolicy> plain = experiment::parse_study_policy("dynamic");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->name(), "dynamic");
  Result<experiment::StudyPolicy> blocks = experiment::parse_study_policy("proportional/2d");
  ASSERT_TRUE(blocks.is_ok()) << blocks.status().to_string();
  EXPECT_EQ(blocks->layout, partition::Layout::kColumnBased);
  EXPECT_EQ(blocks->name(), "proportional/2d");
  Result<experiment::StudyPolicy> model_3d = experiment::parse_study_policy("model/3d");
  ASSERT_FALSE(model_3d.is_ok());
  EXPECT_NE(model_3d.status().message().find("row tiles only"), std::string::npos);
  EXPECT_FALSE(experiment::parse_study_policy("even/diagonal").is_ok());
}

}  // namespace
}  // namespace tessera::balance
