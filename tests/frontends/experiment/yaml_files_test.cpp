// Studies and saved profiles are read by the strict YAML reader: repeated and unknown keys and
// wrong types are refused with the file and line, as in cluster files.
#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/experiment/expression_study.hpp"
#include "tessera/experiment/resident_study.hpp"
#include "tessera/experiment/graph_study.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/balance/profile/profile.hpp"

namespace tessera::balance {
namespace {

const std::string kInstances = std::string(TESSERA_TEST_INSTANCES) + "/";

void expect_has(const std::string& message, const std::string& phrase) {
  EXPECT_NE(message.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << message;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera-files-" + std::to_string(::getpid()) + "-" + name)).string();
}

struct BrokenFile {
  std::string file;
  int line;
  std::vector<std::string> phrases;
};

// "duplicate-key.profile.yaml" -> "duplicate_key"
std::string instance_name(const testing::TestParamInfo<BrokenFile>& param_info) {
  std::string name = param_info.param.file.substr(0, param_info.param.file.find('.'));
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

class BrokenStudy : public testing::TestWithParam<BrokenFile> {};

TEST_P(BrokenStudy, FailsWithFileLineAndFix) {
  const BrokenFile& c = GetParam();
  const std::string path = kInstances + "study/" + c.file;
  Result<experiment::Study> study = experiment::load_study(path);
  ASSERT_FALSE(study.is_ok()) << c.file << " parsed";
  EXPECT_EQ(study.status().code(), StatusCode::kInvalidConfig) << study.status().to_string();
  EXPECT_EQ(study.status().message().rfind(path + ":" + std::to_string(c.line) + ": ", 0), 0u) << study.status().message();
  for (const std::string& phrase : c.phrases) expect_has(study.status().message(), phrase);
}

INSTANTIATE_TEST_SUITE_P(
    Instances, BrokenStudy,
    testing::Values(BrokenFile{"duplicate-key.yaml", 8, {"key 'kind' appears twice in sweep (first on line 6)", "keep one"}},
                    BrokenFile{"unknown-key.yaml", 4,
                               {"unknown key 'sizez' in the study", "valid keys are study, description, cluster",
                                "did you mean 'sizes'?"}},
                    BrokenFile{"bad-size.yaml", 6, {"'big' in sizes", "sizes must be integers 1..65536"}},
                    BrokenFile{"both-windows.yaml", 6, {"give overlap or panels_in_flight, not both"}},
                    BrokenFile{"leading-zero.yaml", 6,
                               {"'01024' in sizes: a leading zero is ambiguous (octal in YAML 1.1); write 1024"}}),
    instance_name);

TEST(StudyFile, GoodStudyReadsEveryField) {
  const std::string path = kInstances + "study/good.yaml";
  Result<experiment::Study> study = experiment::load_study(path);
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  EXPECT_EQ(study->name, "lab-check");
  EXPECT_EQ(study->description, "every field once");
  EXPECT_EQ(study->cluster_path, kInstances + "config/good-inline-secret.yaml");
  ASSERT_EQ(study->policies.size(), 2u);
  EXPECT_EQ(study->policies[0].name(), "even");
  EXPECT_EQ(study->policies[1].name(), "proportional/2d");
  EXPECT_EQ(study->sizes, (std::vector<uint64_t>{512, 1024}));
  EXPECT_EQ(study->repeat, 2u);
  EXPECT_EQ(study->windows, (std::vector<uint32_t>{1, 8}));
  EXPECT_EQ(study->node_counts, (std::vector<uint32_t>{2, 3}));
  ASSERT_TRUE(study->sweep.has_value());
  EXPECT_EQ(study->sweep->kind, "pi");
  EXPECT_EQ(study->sweep->cpu, (std::vector<double>{1.0, 0.25}));
  EXPECT_EQ(study->verify, "exact");
  EXPECT_EQ(study->source_path, path);
}

TEST(StudyFile, RefusesBadValuesFromText) {
  struct Case {
    std::string yaml;
    int line;
    std::string phrase;
  };
  const std::string head = "study: s\ncluster: c.yaml\npolicies: [even]\nsizes: [8]\n";
  const std::vector<Case> cases = {
      {head + "repeat: 0\n", 5, "repeat must be an integer 1..1000"},
      {head + "overlap: [maybe]\n", 5, "overlap 'maybe' unknown; use on or off"},
      {head + "node_counts: [1, 300]\n", 5, "node_counts must be integers 1..256"},
      {head + "sweep: {kind: pi}\n", 5, "sweep has no cpu; add cpu:"},
      {head + "sweep: {kind: pi, cpu: [2, 0]}\n", 5, "cpu must be numbers in (0, 64]"},
      {head + "sweep: {kind: pi, cpus: [1]}\n", 5, "did you mean 'cpu'?"},
      {head + "verify: maybe\n", 5, "unknown verification 'maybe'"},
      {head + "policies: [even]\n", 5, "key 'policies' appears twice in the top level (first on line 3)"},
      {"study: 'a b'\ncluster: c.yaml\npolicies: [even]\nsizes: [8]\n", 1, "it names the output folder"},
      {"study: s\npolicies: [even]\nsizes: [8]\n", 1, "the study has no cluster; add cluster:"},
      {"study: s\ncluster: c.yaml\npolicies: [fastest]\nsizes: [8]\n", 3, "unknown policy 'fastest'"},
      {"- study\n", 1, "a study is a mapping with keys study, description"},
  };
  for (const Case& c : cases) {
    const std::string path = temp_path("study.yaml");
    std::ofstream(path) << c.yaml;
    Result<experiment::Study> study = experiment::load_study(path);
    ASSERT_FALSE(study.is_ok()) << c.yaml;
    EXPECT_EQ(study.status().code(), StatusCode::kInvalidConfig);
    expect_has(study.status().message(), path + ":" + std::to_string(c.line) + ": ");
    expect_has(study.status().message(), c.phrase);
    std::filesystem::remove(path);
  }
}

TEST(StudyFile, EveryShippedStudyStillLoads) {
  const std::filesystem::path experiments = std::filesystem::path(TESSERA_TEST_INSTANCES) / "../../experiments";
  int loaded = 0;
  int graph_studies = 0;
  int expression_studies = 0;
  int resident_studies = 0;
  for (const auto& entry : std::filesystem::directory_iterator(experiments)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string workload = experiment::study_workload(entry.path().string());
    if (workload == "graph") {
      Result<experiment::GraphStudy> study = experiment::load_graph_study(entry.path().string());
      EXPECT_TRUE(study.is_ok()) << study.status().to_string();
      ++graph_studies;
    } else if (workload == "expressions") {
      Result<experiment::ExpressionStudy> study = experiment::load_expression_study(entry.path().string());
      EXPECT_TRUE(study.is_ok()) << study.status().to_string();
      ++expression_studies;
    } else if (workload == "resident") {
      Result<experiment::ResidentStudy> study = experiment::load_resident_study(entry.path().string());
      EXPECT_TRUE(study.is_ok()) << study.status().to_string();
      ++resident_studies;
    } else {
      Result<experiment::Study> study = experiment::load_study(entry.path().string());
      EXPECT_TRUE(study.is_ok()) << study.status().to_string();
    }
    ++loaded;
  }
  EXPECT_GE(loaded, 9);
  EXPECT_GE(graph_studies, 3);
  EXPECT_GE(expression_studies, 1);
  EXPECT_GE(resident_studies, 1);
}

class BrokenProfile : public testing::TestWithParam<BrokenFile> {};

TEST_P(BrokenProfile, FailsWithFileLineAndFix) {
  const BrokenFile& c = GetParam();
  const std::string path = kInstances + "profile/" + c.file;
  Result<profile::ClusterProfile> profile = profile::load_profile(path);
  ASSERT_FALSE(profile.is_ok()) << c.file << " parsed";
  EXPECT_EQ(profile.status().code(), StatusCode::kInvalidConfig) << profile.status().to_string();
  EXPECT_EQ(profile.status().message().rfind(path + ":" + std::to_string(c.line) + ": ", 0), 0u)
      << profile.status().message();
  for (const std::string& phrase : c.phrases) expect_has(profile.status().message(), phrase);
  // A profile is written by Tessera; the way out is to measure again.
  expect_has(profile.status().message(), "tessera profile --refresh");
}

INSTANTIATE_TEST_SUITE_P(
    Instances, BrokenProfile,
    testing::Values(BrokenFile{"unknown-key.profile.yaml", 7, {"unknown key 'gflop' in node 'pi'", "did you mean 'gflops'?"}},
                    BrokenFile{"duplicate-key.profile.yaml", 9,
                               {"key 'latency_s' appears twice in nodes[0].link (first on line 6)"}},
                    BrokenFile{"wrong-type.profile.yaml", 5, {"node 'desktop' has threads: four", "threads must be an integer"}},
                    BrokenFile{"tagged.profile.yaml", 4, {"nodes[0].gflops has the YAML tag '!!float'", "tags are not supported"}}),
    instance_name);

TEST(ProfileFile, GoodProfileReadsEveryField) {
  Result<profile::ClusterProfile> profile = profile::load_profile(kInstances + "profile/good.profile.yaml");
  ASSERT_TRUE(profile.is_ok()) << profile.status().to_string();
  EXPECT_EQ(profile->cluster, "lab");
  EXPECT_EQ(profile->measured_at, "2026-11-21T10:00:00Z");
  EXPECT_EQ(profile->coordinator_send_bytes_per_s, 3e9);
  ASSERT_EQ(profile->nodes.size(), 2u);
  const profile::NodeProfile& desktop = profile->nodes[0];
  EXPECT_EQ(desktop.endpoint, "127.0.0.1:7070");
  EXPECT_FALSE(desktop.quick);
  EXPECT_EQ(desktop.gflops, 40.0);
  EXPECT_EQ(desktop.probe_size, 1024u);
  ASSERT_EQ(desktop.speed.size(), 2u);
  EXPECT_EQ(desktop.speed[0].size, 128.0);
  EXPECT_EQ(desktop.speed[0].gflops, 20.0);
  EXPECT_TRUE(desktop.has_link);
  EXPECT_EQ(desktop.link.from_node_bytes_per_s, 2e8);
  EXPECT_EQ(desktop.link.busy_latency_s, 0.003);
  EXPECT_EQ(desktop.memory_bytes, 1073741824u);
  EXPECT_EQ(desktop.worker_version, "0.1.0");
  // An older, shorter entry: absent fields keep their defaults.
  const profile::NodeProfile& pi = profile->nodes[1];
  EXPECT_EQ(pi.gflops, 10.0);
  EXPECT_EQ(pi.measured_at, "2026-11-21T10:00:00Z");
  EXPECT_FALSE(pi.has_link);
  EXPECT_TRUE(pi.speed.empty());
}

TEST(ProfileFile, ZeroGflopsSaysToMeasureAgain) {
  const std::string path = temp_path("zero.profile.yaml");
  std::ofstream(path) << "cluster: lab\nnodes:\n  - name: a\n    gflops: 0\n";
  Result<profile::ClusterProfile> profile = profile::load_profile(path);
  ASSERT_FALSE(profile.is_ok());
  expect_has(profile.status().message(), path + ":4: node 'a' has gflops 0; re-run `tessera profile --refresh`");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::balance

namespace tessera::balance {
namespace {

TEST(GraphStudyFile, ReadsEveryFieldAndRefusesBadOnesWithFileLine) {
  const std::string path = "/tmp/tessera-graph-study-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << "study: g\nworkload: graph\nclusters: [../configs/local.yaml]\ngraphs: [rmat:10, web.edges]\n"
                         "algorithms: [pagerank, sssp]\nmodes: [async, sync]\npartitions: [metis, hash]\n"
                         "weights: [profile, equal]\ntolerance: 1e-7\nsource: 3\nrepeat: 2\n";
  EXPECT_EQ(experiment::study_workload(path), "graph");
  Result<experiment::GraphStudy> study = experiment::load_graph_study(path);
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  EXPECT_EQ(study->graphs.front(), "rmat:10");
  EXPECT_EQ(study->graphs.back(), "/tmp/web.edges");  // files are relative to the study file
  EXPECT_EQ(study->algorithms.size(), 2u);
  EXPECT_EQ(study->modes.size(), 2u);
  EXPECT_EQ(study->weights.size(), 2u);
  EXPECT_EQ(study->tolerance, 1e-7);
  EXPECT_EQ(study->source, 3);
  EXPECT_EQ(study->repeat, 2u);

  const std::vector<std::pair<std::string, std::string>> broken = {
      {"study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:10]\nalgorithms: [bfs]\n", ":5: unknown algorithm"},
      {"study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:10]\nalgorithms: [cc]\nmodes: [lazy]\n", ":6: "},
      {"study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:10]\nalgorithms: [cc]\nweights: [equal]\n"
       "fast_shares: [0.5]\n", "not both"},
      {"study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:10]\nalgorithms: [cc]\nfast_shares: [1.5]\n", ":6: "},
      {"study: g\nworkload: graph\ngraphs: [rmat:10]\nalgorithms: [cc]\n", "add clusters"},
  };
  for (const auto& [text, phrase] : broken) {
    std::ofstream(path, std::ios::trunc) << text;
    Result<experiment::GraphStudy> bad = experiment::load_graph_study(path);
    ASSERT_FALSE(bad.is_ok()) << text;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidConfig);
    EXPECT_NE(bad.status().message().find(phrase), std::string::npos) << bad.status().message();
  }
  std::filesystem::remove(path);
}

TEST(GraphStudyFile, WithoutTheNewKeysEveryRunIsOnEveryNodeWithAFreshCache) {
  const std::string path = temp_path("graph-defaults.yaml");
  std::ofstream(path) << "study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:8]\nalgorithms: [cc]\n"
                         "modes: [async, sync]\npartitions: [metis, hash]\n";
  Result<experiment::GraphStudy> study = experiment::load_graph_study(path);
  ASSERT_TRUE(study.is_ok()) << study.status().to_string();
  ASSERT_EQ(study->nodes.size(), 1u);
  EXPECT_EQ(study->nodes.front().mode, graphs::NodeChoice::Mode::kAll);
  EXPECT_TRUE(study->variants.empty());
  EXPECT_EQ(study->warmup, 0u);
  EXPECT_EQ(study->cache, experiment::GraphCache::kFresh);
  // The product, nodes outermost: all x {async, sync} x {metis, hash}.
  const std::vector<experiment::GraphVariant> variants = experiment::graph_variants(*study);
  ASSERT_EQ(variants.size(), 4u);
  EXPECT_EQ(variants[1].mode, graphs::GraphMode::kAsync);
  EXPECT_EQ(variants[1].partition.method, partition::PartitionMethod::kHash);
  EXPECT_FALSE(variants[1].partition.automatic);
  for (const experiment::GraphVariant& variant : variants) EXPECT_EQ(variant.nodes.mode, graphs::NodeChoice::Mode::kAll);
  std::filesystem::remove(path);
}

TEST(GraphStudyFile, ReadsNodesAutoPartitionsVariantsWarmupAndCache) {
  const std::string path = temp_path("graph-best.yaml");
  const std::string head = "study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:8]\nalgorithms: [pagerank]\n";
  std::ofstream(path) << head
                      << "nodes: [best, auto, all, \"desktop,pi1\"]\npartitions: [auto, fennel]\nwarmup: 2\ncache: none\n";
  Result<experiment::GraphStudy> product = experiment::load_graph_study(path);
  ASSERT_TRUE(product.is_ok()) << product.status().to_string();
  ASSERT_EQ(product->nodes.size(), 4u);
  EXPECT_EQ(product->nodes[0].mode, graphs::NodeChoice::Mode::kBest);
  EXPECT_EQ(product->nodes[1].mode, graphs::NodeChoice::Mode::kAuto);
  EXPECT_EQ(product->nodes[2].mode, graphs::NodeChoice::Mode::kAll);
  EXPECT_EQ(product->nodes[3].listed, (std::vector<std::string>{"desktop", "pi1"}));
  EXPECT_TRUE(product->partitions[0].automatic);
  EXPECT_EQ(experiment::graph_partition_name(product->partitions[0]), "auto");
  EXPECT_EQ(experiment::graph_partition_name(product->partitions[1]), "fennel");
  EXPECT_EQ(product->warmup, 2u);
  EXPECT_EQ(product->cache, experiment::GraphCache::kNone);
  EXPECT_EQ(experiment::graph_variants(*product).size(), 8u);

  // Variants replace the product; a key a variant leaves out takes the study-level value.
  std::ofstream(path, std::ios::trunc) << head << "partitions: [auto]\nvariants:\n"
                                          "  - {nodes: best, mode: async}\n"
                                          "  - {nodes: auto}\n"
                                          "  - {nodes: all, partition: metis}\n"
                                          "  - {nodes: all, mode: sync}\n";
  Result<experiment::GraphStudy> chosen = experiment::load_graph_study(path);
  ASSERT_TRUE(chosen.is_ok()) << chosen.status().to_string();
  const std::vector<experiment::GraphVariant> variants = experiment::graph_variants(*chosen);
  ASSERT_EQ(variants.size(), 4u);
  EXPECT_EQ(variants[0].nodes.mode, graphs::NodeChoice::Mode::kBest);
  EXPECT_TRUE(variants[0].partition.automatic);
  EXPECT_EQ(variants[1].nodes.mode, graphs::NodeChoice::Mode::kAuto);
  EXPECT_EQ(variants[1].mode, graphs::GraphMode::kAsync);
  EXPECT_FALSE(variants[2].partition.automatic);
  EXPECT_EQ(variants[2].partition.method, partition::PartitionMethod::kMetis);
  EXPECT_EQ(variants[3].mode, graphs::GraphMode::kSync);
  EXPECT_TRUE(variants[3].partition.automatic);
  EXPECT_EQ(chosen->cache, experiment::GraphCache::kFresh);
  std::filesystem::remove(path);
}

TEST(GraphStudyFile, RefusesBadNodesVariantsWarmupAndCacheAtTheirLine) {
  const std::string head = "study: g\nworkload: graph\nclusters: [a.yaml]\ngraphs: [rmat:8]\nalgorithms: [cc]\n";
  struct Case {
    std::string yaml;
    int line;
    std::string phrase;
  };
  const std::vector<Case> cases = {
      {head + "nodes: [all, \"a,,b\"]\n", 6, "empty name"},
      {head + "nodes: [best, best]\n", 6, "nodes lists a value twice"},
      {head + "nodes: [\"a,a\"]\n", 6, "twice"},
      {head + "partitions: [automatic]\n", 6, "use auto (locality placement"},
      {head + "partitions: [auto, auto]\n", 6, "partitions lists a value twice"},
      {head + "variants:\n  - {nodes: best}\n  - {nodes: auto, mode: lazy}\n", 8, "variant 2: "},
      {head + "variants:\n  - {nodes: best, partition: random}\n", 7, "variant 1: partition 'random' unknown"},
      {head + "variants:\n  - {node: best}\n", 7, "did you mean 'nodes'?"},
      {head + "variants:\n  - best\n", 7, "each variant is a mapping of nodes, mode and partition"},
      {head + "variants:\n  - {nodes: best}\n  - {nodes: auto}\n  - {nodes: best, mode: async}\n", 9,
       "variant 3 (best async metis) is variant 1 again (line 7)"},
      {head + "modes: [async, sync]\nvariants:\n  - {nodes: best}\n", 6, "with variants, modes only gives"},
      {head + "variants: best\n", 6, "variants must be a non-empty list"},
      {head + "warmup: -1\n", 6, "warmup"},
      {head + "warmup: 1000\n", 6, "warmup"},
      {head + "cache: warm\n", 6, "cache 'warm' unknown; write cache: fresh"},
  };
  const std::string path = temp_path("graph-bad.yaml");
  for (const Case& c : cases) {
    std::ofstream(path, std::ios::trunc) << c.yaml;
    Result<experiment::GraphStudy> bad = experiment::load_graph_study(path);
    ASSERT_FALSE(bad.is_ok()) << c.yaml;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidConfig) << c.yaml;
    expect_has(bad.status().message(), path + ":" + std::to_string(c.line) + ": ");
    expect_has(bad.status().message(), c.phrase);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::balance
