// Sixteen real workers on loopback, driven the way a user drives a lab: the cluster file, a quick
// profile, a multiply under every policy (and the even policy in every layout that takes 16 nodes,
// and with B forwarded along all sixteen), a graph run on
// every node and an expression, each verified, then the workers stopped by pid. Tiny sizes and no
// quotas: the test is about a cluster of that many nodes working at all (connections, plans of 16
// shares, peer links between 16 graph parts), not about speed. Every command runs under `timeout`,
// so a hang fails the test instead of stalling it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process_fixture.hpp"

namespace tessera::balance {
namespace {

using testing::run_command;

constexpr std::size_t kWorkers = 16;

class SixteenWorkers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    cluster_ = new testing::LocalCluster(testing::start_local_cluster("sixteen", testing::kSecret, kWorkers, *dir_));
    config_ = new std::string(testing::write_cluster_file(*dir_, cluster_->spec));
  }
  static void TearDownTestSuite() {
    delete config_;
    delete cluster_;  // stops every worker by pid
    delete dir_;
  }

  static testing::CommandResult tessera(const std::string& arguments) {
    return run_command("timeout 240 " + std::string(TESSERA_CLI_BINARY) + " " + arguments);
  }

  static testing::TempDir* dir_;
  static testing::LocalCluster* cluster_;
  static std::string* config_;
};
testing::TempDir* SixteenWorkers::dir_ = nullptr;
testing::LocalCluster* SixteenWorkers::cluster_ = nullptr;
std::string* SixteenWorkers::config_ = nullptr;

// One test: each step needs the one before (the profile feeds the model policy and the graph's
// node choice), and the suite's workers are shared.
TEST_F(SixteenWorkers, ProfileMultiplyUnderEveryPolicyGraphAndExpressionAllVerified) {
  const testing::CommandResult profile = tessera("profile " + *config_ + " --quick");
  ASSERT_EQ(profile.exit_code, 0) << profile.output;
  EXPECT_NE(profile.output.find("measured 16 of 16 nodes"), std::string::npos) << profile.output;

  for (const std::string policy : {"even", "proportional", "model", "dynamic"}) {
    SCOPED_TRACE(policy);
    const std::string report = dir_->file("multiply-" + policy + ".json");
    const testing::CommandResult multiply =
        tessera("multiply " + *config_ + " --n 192 --policy " + policy + " --verify exact --report " + report);
    ASSERT_EQ(multiply.exit_code, 0) << multiply.output;
    const nlohmann::json document = nlohmann::json::parse(testing::read_file(report));
    EXPECT_EQ(document["verified"], true) << multiply.output;
    EXPECT_EQ(document["nodes"].size(), kWorkers) << "every node has its place in the report";
  }
  // B forwarded along all sixteen: the coordinator sends it once.
  const std::string chain_report = dir_->file("multiply-chain.json");
  const testing::CommandResult chain = tessera("multiply " + *config_ +
                                               " --n 192 --policy even --distribution chain --panel-width 32"
                                               " --verify exact --report " + chain_report);
  ASSERT_EQ(chain.exit_code, 0) << chain.output;
  const nlohmann::json chain_document = nlohmann::json::parse(testing::read_file(chain_report));
  EXPECT_EQ(chain_document["verified"], true) << chain.output;
  EXPECT_EQ(chain_document["distribution"], "chain");
  EXPECT_TRUE(chain_document["chain_notes"].empty()) << chain.output;
  uint64_t pieces_from_coordinator = 0;
  for (const nlohmann::json& node : chain_document["nodes"]) pieces_from_coordinator += node["panels"].get<uint64_t>();
  EXPECT_EQ(pieces_from_coordinator, 192u / 32u) << "each piece of B left the coordinator once";
  for (const std::string layout : {"2d", "3d"}) {
    SCOPED_TRACE(layout);
    const testing::CommandResult multiply =
        tessera("multiply " + *config_ + " --n 192 --policy even --layout " + layout + " --verify exact");
    ASSERT_EQ(multiply.exit_code, 0) << multiply.output;
  }
  // Square-corner is a layout for one fast node and at most three slow ones: sixteen are refused,
  // saying which layouts serve them.
  const testing::CommandResult corner =
      tessera("multiply " + *config_ + " --n 192 --policy even --layout square-corner --verify exact");
  EXPECT_EQ(corner.exit_code, 2) << corner.output;
  EXPECT_NE(corner.output.find("use layout 2d or 3d"), std::string::npos) << corner.output;

  const std::string graph_report = dir_->file("graph.json");
  const testing::CommandResult graph =
      tessera("graph " + *config_ + " --algorithm pagerank --generate rmat:11 --nodes all --verify --progress never --placement-cache none"
              " --report " + graph_report);
  ASSERT_EQ(graph.exit_code, 0) << graph.output;
  // Fifteen parts dial each part at once from one address, beyond a worker's handshake slots per
  // address: the evicted ones dial again, and none is told it is in on a link being closed, so no
  // part restarts.
  EXPECT_EQ(graph.output.find("failed peer link"), std::string::npos) << graph.output;
  const nlohmann::json graph_document = nlohmann::json::parse(testing::read_file(graph_report));
  EXPECT_TRUE(graph_document["verification"]["passed"].get<bool>()) << graph.output;
  std::size_t taking_part = 0;
  for (const nlohmann::json& node : graph_document["nodes"]) taking_part += node["left_out"].get<bool>() ? 0 : 1;
  EXPECT_EQ(taking_part, kWorkers) << "sixteen parts, each with peer links to the others";

  const testing::CommandResult expression =
      tessera("eval " + *config_ + " \"A * B + A\" --input A=integers:160x160 --input B=integers:160x160");
  ASSERT_EQ(expression.exit_code, 0) << expression.output;
  EXPECT_NE(expression.output.find("verified"), std::string::npos) << expression.output;
}

}  // namespace
}  // namespace tessera::balance
