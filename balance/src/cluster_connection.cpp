#include "tessera/balance/cluster_connection.hpp"

#include <optional>
#include <thread>

#include <fmt/format.h>

namespace tessera::balance {

Result<NodeLink> connect_node(const NodeSpec& node, const std::string& secret,
                              std::chrono::milliseconds timeout) {
  const std::string who = fmt::format("node '{}' ({})", node.name, node.endpoint());
  auto connection = transport::FrameConnection::connect(node.host, node.port, timeout);
  if (!connection) {
    return network_error(fmt::format("{} is unreachable: {}; is tessera-worker running there? "
                                     "(for a local cluster: tessera up CONFIG)",
                                     who, connection.status().message()));
  }
  Result<transport::Hello> hello = transport::client_handshake(**connection, secret);
  if (!hello) {
    const Status& failure = hello.status();
    if (failure.code() == StatusCode::kAuthFailed) {
      return auth_failed(fmt::format("{} refused the shared secret ({}); the cluster file's secret must "
                                     "match the worker's --secret/--secret-file",
                                     who, failure.message()));
    }
    return Status(failure.code(), fmt::format("{}: handshake failed: {}", who, failure.message()));
  }
  return NodeLink{node, std::move(*hello), std::move(*connection)};
}

Result<ClusterConnection> ClusterConnection::connect(const ClusterSpec& cluster, const ConnectOptions& options) {
  Result<std::string> secret = cluster.resolve_secret();
  if (!secret) return secret.status();

  const std::size_t count = cluster.nodes.size();
  std::vector<std::optional<Result<NodeLink>>> outcomes(count);
  {
    std::vector<std::jthread> connectors;
    connectors.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      connectors.emplace_back([&, i] { outcomes[i] = connect_node(cluster.nodes[i], *secret, options.timeout); });
    }
  }

  ClusterConnection result;
  std::vector<Status> failures;
  for (auto& outcome : outcomes) {
    if (outcome->is_ok()) {
      result.links_.push_back(std::move(*outcome).value());
    } else {
      failures.push_back(outcome->status());
    }
  }
  if (failures.empty()) return result;
  if (failures.size() == 1) return failures.front();
  std::string message = fmt::format("{} of {} nodes failed:", failures.size(), count);
  for (const Status& failure : failures) message += "\n  " + failure.message();
  return Status(failures.front().code(), message);
}

ClusterConnection::~ClusterConnection() { close(); }

void ClusterConnection::shutdown_all() {
  for (NodeLink& link : links_) {
    if (link.connection) link.connection->shutdown();
  }
}

void ClusterConnection::close() {
  for (NodeLink& link : links_) {
    if (!link.connection) continue;
    (void)link.connection->write_message(transport::Bye{});
    link.connection->shutdown();
    link.connection.reset();
  }
  links_.clear();
}

}  // namespace tessera::balance
