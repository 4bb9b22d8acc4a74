#include "tessera/balance/profile/profile.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/balance/multiply/report.hpp"

namespace tessera::balance {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera-unit-" + std::to_string(::getpid()) + "-" + name)).string();
}

profile::NodeProfile sample_node(const std::string& name, double gflops) {
  profile::NodeProfile node;
  node.name = name;
  node.endpoint = "127.0.0.1:1";
  node.gflops = gflops;
  node.probe_size = 1024;
  node.repetitions = 10;
  node.probe_seconds = 0.3;
  node.speed = {{128, gflops / 2}, {1024, gflops}};
  node.link = {0.0001, 1e8, 2e8};
  node.has_link = true;
  node.threads = 1;
  node.cores = 2;
  node.memory_bytes = 1u << 30;
  node.arch = "x86_64";
  node.hostname = "host";
  node.worker_version = "0.1.0";
  node.fingerprint = "fp-" + name;
  node.measured_at = "2026-11-21T10:00:00Z";
  return node;
}

profile::ClusterProfile sample_profile() {
  profile::ClusterProfile profile;
  profile.cluster = "lab";
  profile.measured_at = "2026-11-21T10:00:00Z";
  profile.coordinator_send_bytes_per_s = 3e9;
  profile.nodes = {sample_node("desktop", 40.0), sample_node("pi", 10.0)};
  profile.nodes[0].concurrent_gflops = 30.0;  // slowed by the others; the pi's is not measured
  profile.nodes[1].compute_cores = 0.25;      // and the CPU figures of the pi only
  profile.nodes[1].receive_cpu_s_per_byte = 7.5e-10;
  profile.nodes[1].job_overhead_s = 2.5e-5;
  profile.nodes[1].vector_gflops = 0.8;
  profile.nodes[1].link.busy_latency_s = 0.004;  // a quarter core answers late while it computes
  profile.coordinator_cpu_s_per_byte = 3e-10;
  profile.switch_uplink_bytes_per_s = 1.1e8;
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
  ASSERT_TRUE(profile::save_profile(path, sample_profile()).is_ok());
  Result<profile::ClusterProfile> loaded = profile::load_profile(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(*loaded, sample_profile());
  std::filesystem::remove(path);
}

TEST(ProfileTest, GraphRatesReadBackEqualAndOldProfilesHaveNone) {
  profile::ClusterProfile measured = sample_profile();
  measured.nodes[1].graph = model::GraphRates{9.5e6, 8.25e-8, 1.2e-5, 6.5e-8, 9.75e-6};
  const std::string path = temp_path("graph-profile.yaml");
  ASSERT_TRUE(profile::save_profile(path, measured).is_ok());
  Result<profile::ClusterProfile> loaded = profile::load_profile(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(*loaded, measured);
  EXPECT_FALSE(loaded->nodes[0].graph.has_value());
  ASSERT_TRUE(loaded->nodes[1].graph.has_value());
  EXPECT_EQ(loaded->nodes[1].graph->edge_updates_per_s, 9.5e6);
  const std::string table = profile::graph_rates_table(*loaded);
  EXPECT_NE(table.find("pi"), std::string::npos) << table;
  EXPECT_EQ(table.find("desktop"), std::string::npos) << "a node without graph rates has no row: " << table;
  EXPECT_EQ(profile::graph_rates_table(sample_profile()), "");
  std::filesystem::remove(path);
}

// A graph map the loader refuses: FILE:LINE, what is wrong, and the way out.
void expect_graph_refused(const std::string& graph_lines, int line, const std::string& phrase) {
  const std::string path = temp_path("bad-graph.yaml");
  std::ofstream(path) << "cluster: lab\nnodes:\n  - name: pi\n    gflops: 2.5\n    graph:\n" << graph_lines;
  Result<profile::ClusterProfile> loaded = profile::load_profile(path);
  ASSERT_FALSE(loaded.is_ok()) << graph_lines;
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidConfig);
  EXPECT_EQ(loaded.status().message().rfind(path + ":" + std::to_string(line) + ": ", 0), 0u) << loaded.status().message();
  EXPECT_NE(loaded.status().message().find(phrase), std::string::npos) << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("tessera profile --refresh"), std::string::npos) << loaded.status().message();
  std::filesystem::remove(path);
}

constexpr const char* kGoodGraphTail =
    "      send_s_per_delta: 2e-8\n      send_s_per_batch: 3e-6\n      receive_s_per_delta: 1e-8\n"
    "      receive_s_per_batch: 2e-6\n";

TEST(ProfileTest, MalformedGraphRatesNameFileLineAndFix) {
  expect_graph_refused(std::string("      edge_updates_per_s: fast\n") + kGoodGraphTail, 6, "edge_updates_per_s");
  expect_graph_refused(std::string("      edge_updates_per_s: -3\n") + kGoodGraphTail, 6, "edge_updates_per_s");
  expect_graph_refused(std::string("      edge_updates_per_s: 0\n") + kGoodGraphTail, 6, "above 0");
  expect_graph_refused(std::string("      edge_update_per_s: 4e7\n") + kGoodGraphTail, 6, "edge_updates_per_s");
  // A missing figure or a graph that is not a map: the line of `graph:`.
  expect_graph_refused("      edge_updates_per_s: 4e7\n      send_s_per_delta: 2e-8\n", 5,
                       "graph of node 'pi' has no send_s_per_batch; add send_s_per_batch:");
  expect_graph_refused("      - 4e7\n", 5, "graph of node 'pi' is a list; it must be a mapping");
}

TEST(ProfileTest, DefaultPathSitsNextToTheConfig) {
  EXPECT_EQ(profile::default_profile_path("configs/lab.yaml"), "configs/lab.profile.yaml");
}

TEST(ProfileTest, MissingOrBrokenProfilesSayWhatToRun) {
  Result<profile::ClusterProfile> missing = profile::load_profile(temp_path("absent.yaml"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tessera profile"), std::string::npos);

  const std::string path = temp_path("broken.yaml");
  std::ofstream(path) << "cluster: lab\nnodes:\n  - name: a\n    gflops: [\n";
  Result<profile::ClusterProfile> broken = profile::load_profile(path);
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidConfig);
  EXPECT_NE(broken.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
}

TEST(ProfileTest, ModelCarriesCurvesLinksAndCapacity) {
  cluster::ClusterSpec cluster;
  cluster.source_path = "lab.yaml";
  cluster.nodes.push_back(cluster::NodeSpec{"pi", "127.0.0.1", 2, 1, "", 1, {}});
  Result<model::ClusterModel> model = profile::profile_model(sample_profile(), cluster, "lab.profile.yaml");
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  ASSERT_EQ(model->nodes.size(), 1u);
  EXPECT_EQ(model->nodes[0].name, "pi");
  EXPECT_DOUBLE_EQ(model->nodes[0].speed.gflops_at(1024), 10.0);
  EXPECT_DOUBLE_EQ(model->nodes[0].link.from_node_bytes_per_s, 2e8);
  EXPECT_DOUBLE_EQ(model->nodes[0].link.latency_s, 1e-4);
  EXPECT_DOUBLE_EQ(model->nodes[0].link.busy_latency_s, 0.004);
  EXPECT_DOUBLE_EQ(model->nodes[0].link.loaded_latency(), 0.004);
  EXPECT_DOUBLE_EQ(model->coordinator_send_bytes_per_s, 3e9);

  profile::ClusterProfile old = sample_profile();
  old.nodes[1].has_link = false;  // a profile written before link probes existed
  Result<model::ClusterModel> refused = profile::profile_model(old, cluster, "lab.profile.yaml");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("--refresh"), std::string::npos);
}

TEST(ProfileTest, ModelChargesTheSwitchAsMeasuredOrAsWrittenUntilMeasured) {
  Result<cluster::ClusterSpec> cluster = cluster::parse_cluster_spec(
      "cluster: lab\nsecret: s\nswitch: {uplink: 1gbit}\nnodes:\n  - {name: desktop, host: 127.0.0.1, port: 1}\n"
      "  - {name: pi, host: 10.0.0.2, port: 2}\n",
      "lab.yaml");
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  Result<model::ClusterModel> model = profile::profile_model(sample_profile(), *cluster, "lab.profile.yaml");
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_DOUBLE_EQ(model->switch_uplink_bytes_per_s, 1.1e8);
  EXPECT_FALSE(model->nodes[0].link.behind_switch);
  EXPECT_TRUE(model->nodes[1].link.behind_switch);
  profile::ClusterProfile unmeasured = sample_profile();
  unmeasured.switch_uplink_bytes_per_s = 0.0;
  EXPECT_DOUBLE_EQ(profile::profile_model(unmeasured, *cluster, "lab.profile.yaml")->switch_uplink_bytes_per_s, 1.25e8);
}

TEST(ProfileTest, ModelKeepsTheCurvesMeasuredAloneWhateverTheConcurrentRates) {
  cluster::ClusterSpec cluster;
  cluster.source_path = "lab.yaml";
  cluster.nodes.push_back(cluster::NodeSpec{"desktop", "127.0.0.1", 1, 1, "", 1, {}});
  cluster.nodes.push_back(cluster::NodeSpec{"pi", "127.0.0.1", 2, 1, "", 2, {}});
  profile::ClusterProfile profile = sample_profile();
  profile.nodes[1].concurrent_gflops = 12.0;  // "faster together": noise, not a real gain
  Result<model::ClusterModel> model = profile::profile_model(profile, cluster, "lab.profile.yaml");
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  // Scaling by the all-at-once ratio overcorrected in measurement (see profile_model).
  EXPECT_DOUBLE_EQ(model->nodes[0].speed.gflops_at(1024), 40.0);
  EXPECT_DOUBLE_EQ(model->nodes[0].speed.gflops_at(128), 20.0);
  EXPECT_DOUBLE_EQ(model->nodes[1].speed.gflops_at(1024), 10.0);
}

TEST(ProfileTest, WeightsFollowClusterOrderAndNameMissingNodes) {
  cluster::ClusterSpec cluster;
  cluster.source_path = "lab.yaml";
  cluster.nodes.push_back(cluster::NodeSpec{"pi", "127.0.0.1", 2, 1, "", 1, {}});
  cluster.nodes.push_back(cluster::NodeSpec{"desktop", "127.0.0.1", 1, 1, "", 2, {}});
  Result<std::vector<double>> weights = profile_weights(sample_profile(), cluster, "lab.profile.yaml");
  ASSERT_TRUE(weights.is_ok());
  EXPECT_EQ(*weights, (std::vector<double>{10.0, 40.0}));
  cluster.nodes.push_back(cluster::NodeSpec{"new-node", "127.0.0.1", 3, 1, "", 3, {}});
  Result<std::vector<double>> missing = profile_weights(sample_profile(), cluster, "lab.profile.yaml");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'new-node'"), std::string::npos);
}

TEST(ReportTest, JsonHasTheDocumentedKeys) {
  multiply::MultiplyReport report;
  report.cluster = "lab";
  report.plan.policy = plan::Policy::kProportional;
  report.plan.m = report.plan.n = report.plan.k = 100;
  report.run.makespan_s = 0.5;
  report.run.gflops = 4.0;
  report.run.imbalance = 1.1;
  report.run.nodes.push_back({"a", 60, 0.6, 1000, 500, 0.4, 0.05, 0.1, 0.5, 4});
  report.run.nodes.push_back({"b", 40, 0.4, 800, 400, 0.3, 0.04, 0.2, 0.45, 4});
  report.verification.mode = multiply::VerifyMode::kFreivalds;
  report.verification.passed = true;
  const nlohmann::json json = nlohmann::json::parse(multiply::report_json(report));
  EXPECT_EQ(json["policy"], "proportional");
  EXPECT_EQ(json["n"], 100);
  EXPECT_EQ(json["verified"], true);
  EXPECT_DOUBLE_EQ(json["makespan_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(json["imbalance"].get<double>(), 1.1);
  ASSERT_EQ(json["nodes"].size(), 2u);
  EXPECT_EQ(json["nodes"][1]["name"], "b");
  EXPECT_EQ(json["nodes"][1]["rows"], 40);
  EXPECT_EQ(json["coordinator_bytes_sent"], 1800) << "every byte written to the nodes";
  for (const char* key : {"weight", "compute_s", "comm_s", "idle_s", "finish_s"}) {
    EXPECT_TRUE(json["nodes"][0].contains(key)) << key;
  }
  EXPECT_TRUE(json["predicted_makespan_s"].is_null());
  EXPECT_TRUE(json["prediction_error"].is_null());
  EXPECT_TRUE(json["nodes"][0]["predicted_finish_s"].is_null());
  ASSERT_TRUE(json["left_out_at_start"].is_array());
  EXPECT_TRUE(json["left_out_at_start"].empty());

  // A node that did not answer at the start: named with its reason, apart from the nodes that ran.
  const cluster::LeftOutNode absent{"c", "connect to 127.0.0.1:7203 failed: Connection refused", StatusCode::kNetworkError};
  report.left_out_at_start.push_back(absent);
  const nlohmann::json left_out = nlohmann::json::parse(multiply::report_json(report))["left_out_at_start"];
  ASSERT_EQ(left_out.size(), 1u);
  EXPECT_EQ(left_out[0]["node"], "c");
  EXPECT_EQ(left_out[0]["reason"], absent.reason);
  EXPECT_EQ(cluster::left_out_warning(absent), "node 'c' left out: connect to 127.0.0.1:7203 failed: Connection refused");
  report.left_out_at_start.clear();

  report.prediction = model::Prediction{{0.45, 0.55}, 0.55, {1.0, 0.8}};
  const nlohmann::json predicted = nlohmann::json::parse(multiply::report_json(report));
  EXPECT_DOUBLE_EQ(predicted["nodes"][1]["predicted_host_share"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(predicted["predicted_makespan_s"].get<double>(), 0.55);
  EXPECT_NEAR(predicted["prediction_error"].get<double>(), 0.1, 1e-12);  // |0.55 - 0.5| / 0.5
  EXPECT_DOUBLE_EQ(predicted["nodes"][1]["predicted_finish_s"].get<double>(), 0.55);
  EXPECT_NE(multiply::format_report_table(report).find("prediction error 10.0%"), std::string::npos);
  EXPECT_NE(multiply::format_report_table(report).find("host's cores shared with the coordinator: b 80%"), std::string::npos)
      << multiply::format_report_table(report);

  report.verification.mode = multiply::VerifyMode::kNone;
  EXPECT_TRUE(nlohmann::json::parse(multiply::report_json(report))["verified"].is_null());

  const std::string table = multiply::format_report_table(report);
  EXPECT_NE(table.find("makespan 0.500 s"), std::string::npos) << table;
  EXPECT_NE(table.find("not checked"), std::string::npos) << table;
}

}  // namespace
}  // namespace tessera::balance
