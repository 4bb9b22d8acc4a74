// The graph probe against real tessera-worker processes on loopback: `tessera profile`'s graph
// rates come back positive and finite, a saved node without them gets only them measured, --quick
// leaves them out, and a worker refuses a GRAPH_PROBE that is out of range or over its memory cap
// with ERROR. Times are never asserted: these run on a loaded two-core machine.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "process_fixture.hpp"
#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/graph/wire.hpp"
#include "tessera/graph/wire_codec.hpp"
#include "tessera/transport/request.hpp"

namespace tessera::balance {
namespace {

using testing::TempDir;

void expect_plausible(const model::GraphRates& rates) {
  EXPECT_GT(rates.edge_updates_per_s, 0.0);
  EXPECT_TRUE(std::isfinite(rates.edge_updates_per_s));
  // A delta entry costs something on either side; a batch may fit to ~0 beside its entries.
  EXPECT_GT(rates.send_s_per_delta, 0.0);
  EXPECT_GT(rates.receive_s_per_delta, 0.0);
  for (double seconds : {rates.send_s_per_delta, rates.send_s_per_batch, rates.receive_s_per_delta,
                         rates.receive_s_per_batch}) {
    EXPECT_GE(seconds, 0.0);
    EXPECT_TRUE(std::isfinite(seconds));
    EXPECT_LT(seconds, 1.0) << "no delta or batch takes a second";
  }
}

class GraphProbe : public ::testing::Test {
 protected:
  void start_workers(std::size_t count, const std::vector<std::string>& worker_flags = {}) {
    testing::LocalCluster started = testing::start_local_cluster("probe", testing::kSecret, count, dir_, "", {}, worker_flags);
    cluster_ = std::move(started.spec);
    workers_ = std::move(started.processes);
  }

  TempDir dir_;
  cluster::ClusterSpec cluster_;
  std::vector<std::unique_ptr<testing::ChildProcess>> workers_;
};

TEST_F(GraphProbe, ProfileMeasuresGraphRatesSavesThemAndMeasuresOnlyThemWhenMissing) {
  start_workers(1);
  Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
  ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
  ASSERT_NE(connection->links()[0].hello.capabilities & transport::kCapabilityGraphProbe, 0u);
  profile::ProfileOptions options;
  options.window_seconds = 0.05;
  options.reference_window_seconds = 0.1;
  options.graph_probe_scale = 14;  // small: the test checks the plumbing, not the figures
  Result<profile::ClusterProfile> measured = profile::run_profile(*connection, cluster_, std::nullopt, options);
  ASSERT_TRUE(measured.is_ok()) << measured.status().to_string();
  ASSERT_TRUE(measured->nodes[0].graph.has_value());
  expect_plausible(*measured->nodes[0].graph);

  const std::string path = dir_.file("cluster.profile.yaml");
  ASSERT_TRUE(profile::save_profile(path, *measured).is_ok());
  Result<profile::ClusterProfile> loaded = profile::load_profile(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(*loaded, *measured);

  // A profile saved before graph rates existed: only those are measured, the rest is kept.
  profile::ClusterProfile older = *measured;
  older.nodes[0].graph.reset();
  std::vector<std::string> remeasured;
  Result<profile::ClusterProfile> completed =
      profile::run_profile(*connection, cluster_, older, options, {}, &remeasured);
  ASSERT_TRUE(completed.is_ok()) << completed.status().to_string();
  ASSERT_TRUE(completed->nodes[0].graph.has_value());
  expect_plausible(*completed->nodes[0].graph);
  EXPECT_EQ(remeasured, std::vector<std::string>{"a"});
  profile::NodeProfile kept = completed->nodes[0];
  kept.graph.reset();
  EXPECT_EQ(kept, older.nodes[0]) << "the GEMM and link figures were reused as they were";

  // Reused whole when it has them; --quick measures none.
  remeasured.clear();
  Result<profile::ClusterProfile> reused = profile::run_profile(*connection, cluster_, *completed, options, {}, &remeasured);
  ASSERT_TRUE(reused.is_ok()) << reused.status().to_string();
  EXPECT_TRUE(remeasured.empty());
  EXPECT_EQ(reused->nodes[0], completed->nodes[0]);
  profile::ProfileOptions quick = options;
  quick.quick = true;
  quick.refresh = true;
  Result<profile::ClusterProfile> quickly = profile::run_profile(*connection, cluster_, std::nullopt, quick);
  ASSERT_TRUE(quickly.is_ok()) << quickly.status().to_string();
  EXPECT_FALSE(quickly->nodes[0].graph.has_value());
}

// Writes a GRAPH_PROBE as given (the encoder does not check ranges) and returns what the worker
// answered, as a Status.
Status raw_probe(transport::FrameConnection& connection, const graph::GraphProbe& probe) {
  TESSERA_RETURN_IF_ERROR(graph::write_graph_frame(connection, transport::MessageType::kGraphProbe,
                                                   graph::encode_graph_parts(graph::GraphMessage(probe))));
  Result<transport::FrameHeader> header =
      transport::read_reply_header(connection, {transport::MessageType::kGraphProbeResult});
  if (!header) return header.status();
  return Status::ok();
}

TEST_F(GraphProbe, AWorkerRefusesAProbeOutOfRangeOrOverItsMemoryCap) {
  start_workers(1, {"--memory-cap-mb", "128"});
  {
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
    ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
    graph::GraphProbe huge;
    huge.scale = 30;
    const Status refused = raw_probe(*connection->links()[0].connection, huge);
    EXPECT_EQ(refused.code(), StatusCode::kProtocolError) << refused.to_string();
    EXPECT_NE(refused.message().find("scale 30 out of range"), std::string::npos) << refused.to_string();
  }
  {
    // In range, but rmat:19:16 needs some 600 MB: charged to the cap before anything is generated.
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
    ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
    graph::GraphProbe big;
    big.scale = 19;
    const Status refused = raw_probe(*connection->links()[0].connection, big);
    EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.to_string();
    EXPECT_NE(refused.message().find("GRAPH_PROBE of rmat:19:16"), std::string::npos) << refused.to_string();
  }
  {
    // The profiler shrinks its probe to what the cap holds instead of being refused. (A node saved
    // without graph rates, so that only those are measured: a full profile's other probes do
    // not all fit a cap this small.)
    Result<cluster::ClusterConnection> connection = cluster::ClusterConnection::connect(cluster_);
    ASSERT_TRUE(connection.is_ok()) << connection.status().to_string();
    const cluster::NodeLink& link = connection->links()[0];
    profile::ClusterProfile saved;
    saved.cluster = cluster_.name;
    saved.coordinator_send_bytes_per_s = 1e9;
    profile::NodeProfile node;
    node.name = link.spec.name;
    node.gflops = 10.0;
    node.has_link = true;
    node.link = {1e-4, 1e8, 1e8, 1e-3};
    node.fingerprint = profile::node_fingerprint(link.spec, link.hello);
    saved.nodes.push_back(node);
    std::vector<std::string> remeasured;
    Result<profile::ClusterProfile> completed =
        profile::run_profile(*connection, cluster_, saved, profile::ProfileOptions{}, {}, &remeasured);
    ASSERT_TRUE(completed.is_ok()) << completed.status().to_string();
    ASSERT_TRUE(completed->nodes[0].graph.has_value());
    expect_plausible(*completed->nodes[0].graph);
    EXPECT_EQ(completed->nodes[0].gflops, 10.0) << "reused";
  }
}

}  // namespace
}  // namespace tessera::balance
