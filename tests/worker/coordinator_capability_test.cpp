#include "tessera/balance/cluster/cluster_connection.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "in_process_worker.hpp"
#include "tessera/worker/gemm_service.hpp"

namespace tessera::balance {
namespace {

namespace tp = tessera::transport;
using namespace std::chrono_literals;
using worker::testing::InProcessWorker;
using worker::testing::kInProcessSecret;

constexpr uint64_t kTestCapability = uint64_t{1} << 20;

// A worker hosting one service that is not GEMM.
std::vector<worker::Service> non_gemm_services() {
  worker::MessageHandler credit;
  credit.type = tp::MessageType::kCredit;
  credit.on_message = [](worker::ServiceContext&, const tp::FrameHeader&, std::span<const std::byte>) {
    return worker::HandlerStep::kContinue;
  };
  return {worker::Service{"test", kTestCapability, {credit}}};
}

cluster::NodeSpec local_node(const std::string& name, uint16_t port) {
  cluster::NodeSpec node;
  node.name = name;
  node.host = "127.0.0.1";
  node.port = port;
  return node;
}

TEST(CoordinatorCapabilities, NodeLackingGemmIsRefusedWithWhatItOffersAndLacks) {
  InProcessWorker no_gemm(non_gemm_services());
  ASSERT_TRUE(no_gemm.running());
  const cluster::NodeSpec node = local_node("pi-test", no_gemm.port());

  Result<cluster::NodeLink> link = cluster::connect_node(node, kInProcessSecret, 5000ms);
  ASSERT_FALSE(link);
  EXPECT_EQ(link.status().code(), StatusCode::kInvalidConfig);
  const std::string expected = "node 'pi-test' (127.0.0.1:" + std::to_string(no_gemm.port()) +
                               ") lacks what this run needs: missing gemm, it offers tls, bit 20";
  EXPECT_NE(link.status().message().find(expected), std::string::npos) << link.status().message();

  // The refused session was ended in order: the worker takes the next coordinator at once.
  EXPECT_NE(no_gemm.open_session(), nullptr);
}

TEST(CoordinatorCapabilities, NodeOfferingWhatIsRequiredIsAccepted) {
  InProcessWorker no_gemm(non_gemm_services());
  ASSERT_TRUE(no_gemm.running());
  Result<cluster::NodeLink> link = cluster::connect_node(local_node("pi-test", no_gemm.port()), kInProcessSecret, 5000ms, kTestCapability);
  ASSERT_TRUE(link) << link.status().to_string();
  EXPECT_EQ(link->hello.capabilities, kTestCapability | tp::kCapabilityTls);
  cluster::say_goodbye(*link);
}

TEST(CoordinatorCapabilities, ClusterConnectNamesOnlyTheNodeThatLacksACapability) {
  InProcessWorker gemm({worker::gemm_service()});
  InProcessWorker no_gemm(non_gemm_services());
  ASSERT_TRUE(gemm.running());
  ASSERT_TRUE(no_gemm.running());
  cluster::ClusterSpec cluster;
  cluster.name = "mixed-services";
  cluster.secret = kInProcessSecret;
  cluster.nodes = {local_node("desktop", gemm.port()), local_node("pi-test", no_gemm.port())};

  Result<cluster::ClusterConnection> refused = cluster::ClusterConnection::connect(cluster);  // requires GEMM by default
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidConfig);
  EXPECT_NE(refused.status().message().find("node 'pi-test'"), std::string::npos) << refused.status().message();
  EXPECT_EQ(refused.status().message().find("desktop"), std::string::npos) << refused.status().message();

  cluster::ConnectOptions nothing_required;
  nothing_required.required_capabilities = 0;
  Result<cluster::ClusterConnection> connected = cluster::ClusterConnection::connect(cluster, nothing_required);
  ASSERT_TRUE(connected) << connected.status().to_string();
  ASSERT_EQ(connected->links().size(), 2u);
  EXPECT_EQ(connected->links()[0].hello.capabilities,
            tp::kCapabilityGemm | tp::kCapabilityExpression | tp::kCapabilityTransposedJobs | tp::kCapabilityForward |
                tp::kCapabilityTileSend | tp::kCapabilityTls);
  EXPECT_EQ(connected->links()[1].hello.capabilities, kTestCapability | tp::kCapabilityTls);
}

}  // namespace
}  // namespace tessera::balance
