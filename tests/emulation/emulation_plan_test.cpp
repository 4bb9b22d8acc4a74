// What `tessera up` would create for emulated nodes, planned without root: names, addresses and
// the state file that lets `down` undo exactly that.
#include "tessera/emulation/emulation.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

namespace tessera::balance {
namespace {

namespace fs = std::filesystem;

cluster::ClusterSpec cluster_with(const std::string& name, std::size_t nodes, bool link, double cpu) {
  cluster::ClusterSpec cluster;
  cluster.name = name;
  for (std::size_t i = 0; i < nodes; ++i) {
    cluster::NodeSpec node;
    node.name = "node" + std::to_string(i);
    node.host = "127.0.0.1";
    node.port = static_cast<uint16_t>(7000 + i);
    if (link || cpu > 0.0) {
      cluster::EmulationSpec emulate;
      emulate.cpu = cpu;
      emulate.has_link = link;
      if (link) emulate.link_rate = "100mbit";
      node.emulate = emulate;
    }
    cluster.nodes.push_back(node);
  }
  return cluster;
}

uint32_t address_of(const std::string& text) {
  in_addr address{};
  EXPECT_EQ(::inet_pton(AF_INET, text.c_str(), &address), 1) << text;
  return ntohl(address.s_addr);
}

emulation::EmulationSupport v1_support() {
  emulation::EmulationSupport support;
  support.cgroup = emulation::CgroupVersion::kV1;
  support.cgroup_root = "/sys/fs/cgroup/cpu";
  return support;
}

TEST(EmulationPlan, APlainNodeGetsNothing) {
  const emulation::NodeEmulation plan = emulation::plan_node_emulation(cluster_with("plain", 1, false, 0.0), 0, v1_support());
  emulation::NodeEmulation nothing;
  nothing.node = "node0";
  EXPECT_EQ(plan, nothing);
}

TEST(EmulationPlan, ACpuQuotaGetsItsOwnCgroupAndNoNamespace) {
  const emulation::NodeEmulation plan = emulation::plan_node_emulation(cluster_with("lab", 2, false, 0.25), 1, v1_support());
  EXPECT_EQ(plan.cpu, 0.25);
  EXPECT_EQ(plan.cgroup_path, "/sys/fs/cgroup/cpu/tessera/lab/node1");
  EXPECT_TRUE(plan.netns.empty());
  EXPECT_TRUE(plan.node_address.empty());
}

// A node's weight follows its quota, so a desktop beside quarter-core boards keeps its core when
// they all want to run (equal weights cost the desktop 10-15% of its sweeps in the mixed lab).
TEST(EmulationPlan, CpuWeightIsInProportionToTheQuota) {
  EXPECT_EQ(emulation::cgroup_weight(1.0), (emulation::CgroupWeight{1024, 100}));
  EXPECT_EQ(emulation::cgroup_weight(0.25), (emulation::CgroupWeight{256, 25}));
  EXPECT_EQ(emulation::cgroup_weight(2.0), (emulation::CgroupWeight{2048, 200}));
  // Within the kernel's ranges at both ends.
  EXPECT_EQ(emulation::cgroup_weight(0.0001), (emulation::CgroupWeight{2, 1}));
  EXPECT_EQ(emulation::cgroup_weight(1000.0), (emulation::CgroupWeight{262144, 10000}));
  EXPECT_GT(emulation::cgroup_weight(1.0).v1_shares, emulation::cgroup_weight(0.5).v1_shares);
}

TEST(EmulationPlan, LinksGetDistinctSlash30sInTheBenchmarkRangeAndShortInterfaceNames) {
  const cluster::ClusterSpec cluster = cluster_with("a-cluster-with-a-long-name", 16, true, 0.25);
  std::set<uint32_t> subnets;
  std::set<std::string> names;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    const emulation::NodeEmulation plan = emulation::plan_node_emulation(cluster, i, v1_support());
    const uint32_t host = address_of(plan.host_address), node = address_of(plan.node_address);
    EXPECT_EQ(host & ~3u, node & ~3u) << "both ends in one /30";
    EXPECT_EQ(host & 3u, 1u);
    EXPECT_EQ(node & 3u, 2u);
    EXPECT_EQ(host & 0xfffe0000u, 0xc6120000u) << plan.host_address << " outside 198.18.0.0/15";
    EXPECT_TRUE(subnets.insert(host & ~3u).second) << "two nodes share " << plan.host_address;
    for (const std::string& veth : {plan.host_veth, plan.node_veth}) {
      EXPECT_LE(veth.size(), 15u) << veth << " exceeds the kernel's interface name limit";
      EXPECT_TRUE(names.insert(veth).second) << veth;
    }
    EXPECT_EQ(plan.rate, "100mbit");
    EXPECT_TRUE(plan.host_forwarding) << "peers behind the host need the host end to forward";
    EXPECT_EQ(plan, emulation::plan_node_emulation(cluster, i, v1_support())) << "planning is deterministic";
  }
}

TEST(EmulationPlan, NodesBehindTheSwitchShareOneUplinkPairAndTheOthersHaveNone) {
  cluster::ClusterSpec cluster = cluster_with("switched", 3, true, 0.25);
  cluster.network_switch = cluster::SwitchSpec{"200mbit", 2.5e7, {cluster.nodes[1].name, cluster.nodes[2].name}, 1};
  const emulation::NodeEmulation off = emulation::plan_node_emulation(cluster, 0, v1_support());
  EXPECT_TRUE(off.uplink_rate.empty());
  EXPECT_TRUE(off.uplink_to_nodes_ifb.empty());
  const emulation::NodeEmulation one = emulation::plan_node_emulation(cluster, 1, v1_support());
  const emulation::NodeEmulation two = emulation::plan_node_emulation(cluster, 2, v1_support());
  EXPECT_EQ(one.uplink_rate, "200mbit");
  EXPECT_EQ(one.uplink_to_nodes_ifb, two.uplink_to_nodes_ifb);
  EXPECT_EQ(one.uplink_from_nodes_ifb, two.uplink_from_nodes_ifb);
  EXPECT_NE(one.uplink_to_nodes_ifb, one.uplink_from_nodes_ifb);
  EXPECT_LE(one.uplink_to_nodes_ifb.size(), 15u);
}

TEST(EmulationPlan, StateFileRoundTripsAndAMissingOneMeansNothingWasCreated) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-emulation-plan-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = emulation::emulation_state_path(dir.string());
  Result<std::vector<emulation::NodeEmulation>> none = emulation::load_emulation_state(path);
  ASSERT_TRUE(none.is_ok()) << none.status().to_string();
  EXPECT_TRUE(none->empty());

  cluster::ClusterSpec cluster = cluster_with("roundtrip", 3, true, 0.5);
  cluster.network_switch = cluster::SwitchSpec{"1gbit", 1.25e8, {cluster.nodes[2].name}, 1};
  std::vector<emulation::NodeEmulation> plans;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) plans.push_back(emulation::plan_node_emulation(cluster, i, v1_support()));
  ASSERT_TRUE(emulation::save_emulation_state(path, plans).is_ok());
  Result<std::vector<emulation::NodeEmulation>> loaded = emulation::load_emulation_state(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(*loaded, plans);
  fs::remove_all(dir);
}

// A mixed cluster: node0 in the root namespace, node1 and node2 behind shaped veths.
TEST(EmulationPeers, EachWorkerReachesEachPeerByItsOwnRoad) {
  cluster::ClusterSpec cluster = cluster_with("peers", 3, true, 0.0);
  cluster.nodes[0].emulate.reset();
  std::vector<emulation::NodeEmulation> state;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) state.push_back(emulation::plan_node_emulation(cluster, i, v1_support()));
  ASSERT_TRUE(state[0].netns.empty());
  ASSERT_TRUE(emulation::has_namespaced_nodes(state));
  const std::vector<std::vector<std::string>> hosts = emulation::peer_hosts(cluster, state);
  ASSERT_EQ(hosts.size(), 3u);
  // The root-namespace worker reaches namespaced peers at their node addresses, itself at its host.
  EXPECT_EQ(hosts[0], (std::vector<std::string>{"127.0.0.1", state[1].node_address, state[2].node_address}));
  // A namespaced worker reaches the root-namespace one through its OWN veth's host end.
  EXPECT_EQ(hosts[1][0], state[1].host_address);
  EXPECT_EQ(hosts[2][0], state[2].host_address);
  // ... and other namespaces (and itself) at their node addresses, routed by the host.
  EXPECT_EQ(hosts[1][2], state[2].node_address);
  EXPECT_EQ(hosts[2][1], state[1].node_address);
  EXPECT_EQ(hosts[1][1], state[1].node_address);
}

TEST(EmulationPeers, WithoutNamespacesEveryoneUsesTheSpecHosts) {
  cluster::ClusterSpec cluster = cluster_with("plain-peers", 2, false, 0.5);
  cluster.nodes[1].host = "localhost";
  std::vector<emulation::NodeEmulation> state;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) state.push_back(emulation::plan_node_emulation(cluster, i, v1_support()));
  EXPECT_FALSE(emulation::has_namespaced_nodes(state));
  const std::vector<std::vector<std::string>> expected = {{"127.0.0.1", "localhost"}, {"127.0.0.1", "localhost"}};
  EXPECT_EQ(emulation::peer_hosts(cluster, state), expected);
  EXPECT_EQ(emulation::peer_hosts(cluster, {}), expected) << "no state file: nothing was emulated";
}

}  // namespace
}  // namespace tessera::balance
