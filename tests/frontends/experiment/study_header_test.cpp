// The keys every study file shares (study, description, workload, cluster or clusters, repeat) are
// read by one parser for the three kinds of study: the same checks and messages whichever kind
// loads the file, at the key's line.
#include "tessera/experiment/study.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/experiment/expression_study.hpp"
#include "tessera/experiment/graph_study.hpp"
#include "tessera/experiment/multiply_study.hpp"

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

class StudyHeader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-study-header-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const fs::path path = dir_ / "study.yaml";
    std::ofstream(path, std::ios::trunc) << text;
    return path.string();
  }

  // The message of the first kind's loader that fails on `text`; "" when every one accepts it.
  std::vector<std::string> messages_of_all_kinds(const std::string& multiply, const std::string& graph,
                                                 const std::string& expressions) {
    std::vector<std::string> messages;
    Result<experiment::Study> m = experiment::load_study(write(multiply));
    messages.push_back(m ? "" : m.status().message());
    Result<experiment::GraphStudy> g = experiment::load_graph_study(write(graph));
    messages.push_back(g ? "" : g.status().message());
    Result<experiment::ExpressionStudy> e = experiment::load_expression_study(write(expressions));
    messages.push_back(e ? "" : e.status().message());
    return messages;
  }

  fs::path dir_;
};

constexpr char kGraphRest[] = "graphs: [rmat:8]\nalgorithms: [cc]\n";
constexpr char kExpressionRest[] =
    "benchmarks:\n  - {name: m, expression: \"u * P\", inputs: {u: \"random:1x4\", P: \"random:4x4\"}}\n";
constexpr char kMultiplyRest[] = "policies: [even]\nsizes: [64]\n";

TEST_F(StudyHeader, AStudyNameThatCannotNameAFolderIsRefusedByEveryKind) {
  for (const std::string& message :
       messages_of_all_kinds("study: 'a b'\ncluster: c.yaml\n" + std::string(kMultiplyRest),
                             "study: 'a b'\nworkload: graph\nclusters: [c.yaml]\n" + std::string(kGraphRest),
                             "study: 'a b'\nworkload: expressions\nclusters: [c.yaml]\n" + std::string(kExpressionRest))) {
    EXPECT_NE(message.find("study.yaml:1: study name 'a b' has characters other than"), std::string::npos) << message;
  }
}

TEST_F(StudyHeader, AWorkloadOfAnotherKindIsRefusedAtItsLine) {
  const std::vector<std::string> messages = messages_of_all_kinds(
      "study: s\nworkload: graph\ncluster: c.yaml\n" + std::string(kMultiplyRest),
      "study: s\nworkload: expressions\nclusters: [c.yaml]\n" + std::string(kGraphRest),
      "study: s\nworkload: graph\nclusters: [c.yaml]\n" + std::string(kExpressionRest));
  EXPECT_NE(messages[0].find(":2: workload 'graph' is not a study; write workload: multiply"), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find(":2: workload 'expressions' is not a graph study; write workload: graph"),
            std::string::npos)
      << messages[1];
  EXPECT_NE(messages[2].find(":2: workload 'graph' is not an expression study; write workload: expressions"),
            std::string::npos)
      << messages[2];
}

TEST_F(StudyHeader, CommonKeysLandInEveryKindAndRepeatIsChecked) {
  const std::string head = "study: s\ndescription: words\nrepeat: 5\n";
  const std::vector<std::string> ok = messages_of_all_kinds(
      head + "cluster: c.yaml\n" + kMultiplyRest, head + "workload: graph\nclusters: [c.yaml]\n" + kGraphRest,
      head + "workload: expressions\nclusters: [c.yaml]\n" + kExpressionRest);
  for (const std::string& message : ok) EXPECT_EQ(message, "");
  Result<experiment::GraphStudy> graph =
      experiment::load_graph_study(write(head + "workload: graph\nclusters: [c.yaml]\n" + kGraphRest));
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  EXPECT_EQ(graph->name, "s");
  EXPECT_EQ(graph->description, "words");
  EXPECT_EQ(graph->repeat, 5u);
  EXPECT_EQ(graph->cluster_paths, std::vector<std::string>{(dir_ / "c.yaml").string()});

  const std::vector<std::string> zero = messages_of_all_kinds(
      "study: s\nrepeat: 0\ncluster: c.yaml\n" + std::string(kMultiplyRest),
      "study: s\nworkload: graph\nrepeat: 0\nclusters: [c.yaml]\n" + std::string(kGraphRest),
      "study: s\nworkload: expressions\nrepeat: 0\nclusters: [c.yaml]\n" + std::string(kExpressionRest));
  EXPECT_NE(zero[0].find(":2: the study has repeat: 0"), std::string::npos) << zero[0];
  EXPECT_NE(zero[1].find(":3: the study has repeat: 0"), std::string::npos) << zero[1];
  EXPECT_NE(zero[2].find(":3: the study has repeat: 0"), std::string::npos) << zero[2];
}

TEST_F(StudyHeader, AFileThatIsNoMappingNamesTheKindAndItsKeys) {
  for (const std::string& message : messages_of_all_kinds("- study\n", "- study\n", "- study\n")) {
    EXPECT_NE(message.find("study.yaml:1: the study file holds"), std::string::npos) << message;
    EXPECT_NE(message.find("is a mapping with keys study,"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tessera::balance
