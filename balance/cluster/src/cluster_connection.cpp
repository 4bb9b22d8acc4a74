#include "tessera/balance/cluster/cluster_connection.hpp"

#include <atomic>
#include <optional>
#include <thread>

#include <fmt/format.h>

namespace tessera::balance::cluster {

Result<NodeLink> connect_node(const NodeSpec& node, const std::string& secret, std::chrono::milliseconds timeout,
                              uint64_t required_capabilities) {
  const std::string who = fmt::format("node '{}' ({})", node.name, node.endpoint());
  auto connection = transport::FrameConnection::connect(node.host, node.port, timeout);
  if (!connection) {
    return network_error(fmt::format("{} is unreachable: {}; is tessera-worker running there? "
                                     "(for a local cluster: tessera up CONFIG)",
                                     who, connection.status().message()));
  }
  Result<transport::Hello> hello =
      transport::client_handshake(**connection, secret, timeout, transport::SessionRole::kCoordinator, node.wire);
  if (!hello) {
    const Status& failure = hello.status();
    if (failure.code() == StatusCode::kAuthFailed) {
      return auth_failed(fmt::format("{} refused the shared secret ({}); the cluster file's secret must "
                                     "match the worker's --secret/--secret-file",
                                     who, failure.message()));
    }
    return Status(failure.code(), fmt::format("{}: handshake failed: {}", who, failure.message()));
  }
  NodeLink link{node, std::move(*hello), std::move(*connection)};
  const uint64_t missing = required_capabilities & ~link.hello.capabilities;
  if (missing != 0) {
    say_goodbye(link);
    const std::string missing_names = transport::capability_names(missing);
    return invalid_config(fmt::format("{} lacks what this run needs: missing {}, it offers {}; run a tessera-worker "
                                      "there that hosts {}",
                                      who, missing_names, transport::capability_names(link.hello.capabilities),
                                      missing_names));
  }
  return link;
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
      connectors.emplace_back([&, i] {
        outcomes[i] = connect_node(cluster.nodes[i], *secret, options.timeout, options.required_capabilities);
      });
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

void say_goodbye(NodeLink& link, std::chrono::milliseconds timeout) {
  if (!link.connection) return;
  transport::FrameConnection& connection = *link.connection;
  if (connection.write_message(transport::Bye{}).is_ok()) {
    // Reads have no deadline of their own; a watchdog ends the wait for a worker that never answers.
    std::atomic<bool> answered{false};
    std::jthread watchdog([&] {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!answered.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (!answered.load()) connection.shutdown();
    });
    // Credits of an abandoned run may still precede the worker's BYE.
    for (;;) {
      Result<transport::IncomingFrame> frame = connection.read_frame();
      if (!frame || std::holds_alternative<transport::Bye>(frame->message) ||
          std::holds_alternative<transport::Error>(frame->message)) {
        break;
      }
    }
    answered = true;
  }
  connection.shutdown();
  link.connection.reset();
}

void ClusterConnection::close() {
  for (NodeLink& link : links_) say_goodbye(link);
  links_.clear();
}

}  // namespace tessera::balance::cluster
