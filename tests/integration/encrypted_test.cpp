// Encrypted clusters on real worker processes started with --wire encrypted: every policy and
// layout multiplies exactly over TLS (a profile measured on the way), graph runs whose
// worker-to-worker links must be encrypted too (the workers refuse plain ones), a plain cluster
// file refused by name, the worker's own log saying what the link was, and the CLI end to end.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "process_fixture.hpp"
#include "reference_product.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/graph/reference.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance {
namespace {

using testing::kSecret;

class EncryptedCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    cluster_ = new testing::LocalCluster(
        testing::start_local_cluster("sealed", kSecret, 3, *dir_, "", {}, {"--wire", "encrypted"}));
    cluster_->spec.wire = transport::WireMode::kEncrypted;
    for (cluster::NodeSpec& node : cluster_->spec.nodes) node.wire = transport::WireMode::kEncrypted;
  }
  static void TearDownTestSuite() {
    delete cluster_;  // stops the workers by pid
    delete dir_;
    cluster_ = nullptr;
    dir_ = nullptr;
  }

  static session::Session open(const cluster::ClusterSpec& spec, uint64_t capabilities = transport::kCapabilityGemm) {
    session::SessionOptions options;
    options.connect.required_capabilities = capabilities;
    Result<session::Session> session = session::Session::open(spec, options);
    EXPECT_TRUE(session.is_ok()) << session.status().to_string();
    if (!session.is_ok()) throw std::runtime_error(session.status().to_string());
    return std::move(*session);
  }

  static std::string worker_logs() {
    std::string logs;
    for (std::size_t i = 0; i < cluster_->processes.size(); ++i) {
      logs += testing::read_file(dir_->file("worker" + std::to_string(i) + ".log"));
    }
    return logs;
  }

  static testing::TempDir* dir_;
  static testing::LocalCluster* cluster_;
};
testing::TempDir* EncryptedCluster::dir_ = nullptr;
testing::LocalCluster* EncryptedCluster::cluster_ = nullptr;

TEST_F(EncryptedCluster, EveryPolicyAndLayoutMultipliesExactlyOverTls) {
  session::Session session = open(cluster_->spec);
  // Sizes divisible by nothing, so shares, panels and tiles all have ragged edges.
  const std::size_t m = 301, k = 187, n = 263;
  const linalg::Matrix a = linalg::random_matrix(m, k, 21, linalg::FillKind::kIntegers);
  const linalg::Matrix b = linalg::random_matrix(k, n, 22, linalg::FillKind::kIntegers);
  const linalg::Matrix expected = reference_product(a, b);
  struct PolicyCase {
    plan::PolicyChoice policy;
    partition::Layout layout;
  };
  const std::vector<PolicyCase> cases = {{plan::EvenPolicy{}, partition::Layout::kRows},
                                   {plan::ProportionalPolicy{{0.5, 0.3, 0.2}}, partition::Layout::kRecursive3d},
                                   {plan::ModelPolicy{}, partition::Layout::kRows},  // measures a quick profile first
                                   {plan::DynamicPolicy{}, partition::Layout::kRows}};
  for (const PolicyCase& c : cases) {
    session::MultiplyOptions options;
    options.policy = c.policy;
    options.layout = c.layout;
    options.panel_width = 48;
    options.verify = multiply::VerifyMode::kExact;
    linalg::Matrix product(m, n);
    Result<session::MultiplyOutcome> outcome = session.multiply(a, b, product, options);
    const std::string name(plan::policy_name(plan::policy_kind(c.policy)));
    ASSERT_TRUE(outcome.is_ok()) << name << ": " << outcome.status().to_string();
    EXPECT_TRUE(outcome->report.verification.passed) << name << ": " << outcome->report.verification.detail;
    EXPECT_EQ(product, expected) << name;
  }
  ASSERT_TRUE(session.profile().has_value()) << "the model policy measured a profile over the encrypted links";
  session.close();
  // Each worker says in its log that the coordinator's sessions were TLS 1.3, never plain.
  const std::string logs = worker_logs();
  EXPECT_NE(logs.find("started (TLSv1.3 TLS_"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("started (plain)"), std::string::npos) << logs;
}

TEST_F(EncryptedCluster, GraphRunsBetweenWorkersThatRefusePlainPeerLinks) {
  session::Session session = open(cluster_->spec, transport::kCapabilityGraph);
  const graphdata::DirectedGraph graph =
      graphdata::read_directed_graph_file(std::string(TESSERA_TEST_INSTANCES) + "/graphs/directed/components.edges").value();
  for (graphs::GraphMode mode : {graphs::GraphMode::kAsync, graphs::GraphMode::kSync}) {
    graphs::GraphRunOptions options;
    options.algorithm.kind = graph::AlgorithmKind::kPageRank;
    options.mode = mode;
    options.method = partition::PartitionMethod::kHash;  // the most cut edges: the most peer traffic
    options.weights.source = graphs::TargetWeights::Source::kEqual;
    options.verify = true;
    Result<graphs::GraphOutcome> outcome = session.graph(graph, options);
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    ASSERT_TRUE(outcome->verification.has_value());
    EXPECT_TRUE(outcome->verification->passed) << outcome->verification->detail;
    uint64_t batches = 0;
    for (const graphs::GraphNodeFigures& node : outcome->nodes) batches += node.batches_received;
    EXPECT_GT(batches, 0u) << "the run must have used its peer links";
  }
  session.close();
  const std::string logs = worker_logs();
  EXPECT_NE(logs.find("peer link from 127.0.0.1"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("opened (plain)"), std::string::npos) << logs;
}

TEST_F(EncryptedCluster, APlainClusterFileIsRefusedNamingTheNodeAndTheSetting) {
  cluster::ClusterSpec plain = cluster_->spec;
  plain.wire = transport::WireMode::kPlain;
  for (cluster::NodeSpec& node : plain.nodes) node.wire = transport::WireMode::kPlain;
  Result<session::Session> session = session::Session::open(plain);
  ASSERT_FALSE(session.is_ok());
  EXPECT_EQ(session.status().code(), StatusCode::kInvalidConfig) << session.status().to_string();
  EXPECT_NE(session.status().message().find("node 'a'"), std::string::npos) << session.status().to_string();
  EXPECT_NE(session.status().message().find("wire: encrypted"), std::string::npos) << session.status().to_string();
}

TEST_F(EncryptedCluster, TheCliMultipliesVerifiedFromAClusterFileThatSaysWireEncrypted) {
  std::string yaml = "cluster: sealed-cli\nwire: encrypted\nsecret: " + std::string(kSecret) + "\nnodes:\n";
  for (const cluster::NodeSpec& node : cluster_->spec.nodes) {
    yaml += "  - {name: " + node.name + ", host: " + node.host + ", port: " + std::to_string(node.port) + "}\n";
  }
  const std::string config = dir_->file("sealed-cli.yaml");
  testing::write_file(config, yaml);
  const testing::CommandResult run = testing::run_command(std::string(TESSERA_CLI_BINARY) + " multiply " + config +
                                                          " --n 320 --policy even --verify exact");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("verified: true"), std::string::npos) << run.output;
  // status checks each node over the same kind of link, and says so.
  const testing::CommandResult status = testing::run_command(std::string(TESSERA_CLI_BINARY) + " status " + config);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("encrypted (TLSv1.3 TLS_"), std::string::npos) << status.output;
  const testing::CommandResult json = testing::run_command(std::string(TESSERA_CLI_BINARY) + " status " + config + " --json");
  EXPECT_NE(json.output.find("\"wire\": \"TLSv1.3 TLS_"), std::string::npos) << json.output;
}

}  // namespace
}  // namespace tessera::balance
