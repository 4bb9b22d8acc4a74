// Expression study files parsed without running anything: every field lands where it belongs,
// each benchmark's expression is checked against its generated inputs' shapes, and every broken
// file is refused with its file, line and what to write instead. Running one:
// tests/integration/expression_study_test.cpp.
#include "tessera/experiment/expression_study.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/experiment/graph_study.hpp"

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

class ExpressionStudyParse : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-expression-study-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

TEST_F(ExpressionStudyParse, EveryFieldIsParsedAndPathsAreResolvedAgainstTheStudy) {
  const std::string path = write("s.yaml",
                                 "study: expr-all\n"
                                 "workload: expressions\n"
                                 "description: every key\n"
                                 "clusters: [a.yaml, ../b.yaml]\n"
                                 "benchmarks:\n"
                                 "  - {name: markov, expression: \"u * P^16\", inputs: {u: \"random:1x64\", P: \"random:64x64\"}}\n"
                                 "  - name: hits\n"
                                 "    expression: \"(A' * A)^4 * h\"\n"
                                 "    inputs: {A: \"integers:40x64\", h: \"random:64x1\"}\n"
                                 "  - {name: leontief, expression: \"I + A + A^2\", inputs: {A: \"random:8x8\"}}\n"
                                 "modes: [sequence, fastest-alone]\n"
                                 "repeat: 2\n");
  EXPECT_EQ(experiment::study_workload(path), "expressions");
  Result<experiment::ExpressionStudy> study = experiment::load_expression_study(path);
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  EXPECT_EQ(study->name, "expr-all");
  EXPECT_EQ(study->description, "every key");
  EXPECT_EQ(study->source_path, path);
  EXPECT_EQ(study->cluster_paths, (std::vector<std::string>{(dir_ / "a.yaml").string(),
                                                             (dir_.parent_path() / "b.yaml").string()}));
  ASSERT_EQ(study->benchmarks.size(), 3u);
  EXPECT_EQ(study->benchmarks[0],
            (experiment::ExpressionBenchmark{"markov", "u * P^16", {{"u", "random:1x64"}, {"P", "random:64x64"}}}))
      << "inputs keep the file's order";
  EXPECT_EQ(study->benchmarks[1].expression, "(A' * A)^4 * h");
  EXPECT_EQ(study->benchmarks[1].inputs.front(), (std::pair<std::string, std::string>{"A", "integers:40x64"}));
  EXPECT_EQ(study->benchmarks[2].name, "leontief");
  EXPECT_EQ(study->modes, (std::vector<experiment::ExpressionMode>{experiment::ExpressionMode::kSequence, experiment::ExpressionMode::kFastestAlone}));
  EXPECT_EQ(study->repeat, 2u);
}

TEST_F(ExpressionStudyParse, DefaultsAreAllThreeModesAndThreeRepetitions) {
  Result<experiment::ExpressionStudy> study = experiment::load_expression_study(
      write("d.yaml", "study: d\nworkload: expressions\nclusters: [c.yaml]\n"
                      "benchmarks: [{name: chain, expression: \"A * B\", inputs: {A: \"random:4x3\", B: \"random:3x5\"}}]\n"));
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  EXPECT_EQ(study->modes, (std::vector<experiment::ExpressionMode>{experiment::ExpressionMode::kScheduled, experiment::ExpressionMode::kSequence,
                                                       experiment::ExpressionMode::kFastestAlone}));
  EXPECT_EQ(study->repeat, 3u);
  EXPECT_TRUE(study->description.empty());
}

TEST(ExpressionModeNames, RoundTripAndUnknownNamesListTheValidOnes) {
  for (experiment::ExpressionMode mode : {experiment::ExpressionMode::kScheduled, experiment::ExpressionMode::kSequence,
                                     experiment::ExpressionMode::kFastestAlone, experiment::ExpressionMode::kDirect,
                                     experiment::ExpressionMode::kViaCoordinator}) {
    Result<experiment::ExpressionMode> parsed = experiment::parse_expression_mode(experiment::expression_mode_name(mode));
    ASSERT_TRUE(parsed.is_ok()) << experiment::expression_mode_name(mode);
    EXPECT_EQ(*parsed, mode);
  }
  Result<experiment::ExpressionMode> unknown = experiment::parse_expression_mode("fastest");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("scheduled, sequence, fastest-alone, direct or via-coordinator"), std::string::npos)
      << unknown.status().message();
}

struct BrokenStudy {
  std::string yaml;
  int line;
  std::string phrase;
};

TEST_F(ExpressionStudyParse, BrokenStudiesAreRefusedWithFileLineAndFix) {
  const std::string head = "study: e\nworkload: expressions\nclusters: [c.yaml]\n";  // lines 1-3
  const std::string good = "  - {name: m, expression: \"u * P\", inputs: {u: \"random:1x4\", P: \"random:4x4\"}}\n";
  const std::vector<BrokenStudy> cases = {
      {head + "benchmark:\n" + good, 4, "unknown key 'benchmark' in the study; valid keys are study, workload"},
      {head, 1, "the study has no benchmarks; add benchmarks:"},
      {"study: e\nworkload: expressions\nbenchmarks:\n" + good, 1, "the study has no clusters; add clusters:"},
      {"study: 'e f'\nworkload: expressions\nclusters: [c.yaml]\nbenchmarks:\n" + good, 1, "it names the output folder"},
      {"study: e\nworkload: expression\nclusters: [c.yaml]\nbenchmarks:\n" + good, 2, "write workload: expressions"},
      {head + "benchmarks:\n" + good + "modes: [sequence, fast]\n", 6, "unknown mode 'fast'"},
      {head + "benchmarks:\n" + good + "modes: [sequence, sequence]\n", 6, "a mode is listed twice"},
      {head + "benchmarks:\n" + good + "repeat: 0\n", 6, "repeat"},
      {head + "benchmarks:\n  - markov\n", 5, "a benchmark is 'markov'; each is a mapping"},
      {head + "benchmarks:\n  - name: m\n    expr: \"u * P\"\n", 6, "unknown key 'expr' in the benchmark"},
      {head + "benchmarks:\n  - {name: m, expression: \"u * P\"}\n", 5, "the benchmark has no inputs; add inputs:"},
      {head + "benchmarks:\n  - {expression: \"u * P\", inputs: {u: \"random:1x4\"}}\n", 5,
       "the benchmark has no name; add name:"},
      {head + "benchmarks:\n  - {name: 'm k', expression: \"u\", inputs: {u: \"random:1x4\"}}\n", 5,
       "benchmark name 'm k' has characters other than"},
      {head + "benchmarks:\n" + good + good, 6, "benchmark 'm' is named twice"},
      {head + "benchmarks:\n  - {name: m, expression: \"u\", inputs: [u]}\n", 5, "inputs must map each name"},
      {head + "benchmarks:\n  - name: m\n    expression: \"u * P\"\n    inputs:\n      u: \"random:1x4\"\n"
              "      P: \"random:4\"\n",
       9, "benchmark 'm' input P: 'random:4' is not a generated matrix; write random:ROWSxCOLS"},
      {head + "benchmarks:\n  - {name: m, expression: \"u\", inputs: {u: \"random:0x4\"}}\n", 5, "each 1..65536"},
      {head + "benchmarks:\n  - {name: m, expression: \"u\", inputs: {u: \"file.npy\"}}\n", 5, "not a generated matrix"},
      {head + "benchmarks:\n  - name: m\n    inputs: {u: \"random:1x4\", P: \"random:5x5\"}\n    expression: \"u * P\"\n",
       7, "benchmark 'm': "},
      {head + "benchmarks:\n  - name: m\n    expression: \"u * Q\"\n    inputs: {u: \"random:1x4\", P: \"random:4x4\"}\n",
       6, "benchmark 'm': "},
      {head + "benchmarks:\n  - name: m\n    expression: \"u * u'\"\n    inputs: {u: \"random:1x4\", P: \"random:4x4\"}\n",
       7, "benchmark 'm' gives input P, which its expression does not use"},
      {head + "benchmarks:\n  - {name: m, expression: \"A + A'\", inputs: {A: \"random:4x4\"}}\n", 5,
       "benchmark 'm': 'A + A'' multiplies no matrices"},
      {"- study\n", 1, "an expression study is a mapping with keys study, workload"},
  };
  for (const BrokenStudy& c : cases) {
    SCOPED_TRACE(c.yaml);
    const std::string path = write("broken.yaml", c.yaml);
    Result<experiment::ExpressionStudy> study = experiment::load_expression_study(path);
    ASSERT_FALSE(study.is_ok());
    EXPECT_EQ(study.status().code(), StatusCode::kInvalidConfig);
    const std::string message = study.status().message();
    EXPECT_EQ(message.rfind(path + ":" + std::to_string(c.line) + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(c.phrase), std::string::npos) << "missing \"" << c.phrase << "\" in: " << message;
  }
}

}  // namespace
}  // namespace tessera::balance
