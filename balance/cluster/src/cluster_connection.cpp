#include "tessera/balance/cluster/cluster_connection.hpp"

#include <atomic>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "tessera/transport/dial.hpp"

namespace tessera::balance::cluster {

namespace {

// connect_node's work. A failure's message names the node; `reason` receives the same account
// without the name, for the line that says the node was left out.
Result<NodeLink> attempt_node(const NodeSpec& node, const std::string& secret, std::chrono::milliseconds timeout,
                              uint64_t required_capabilities, std::string& reason) {
  const std::string who = fmt::format("node '{}' ({})", node.name, node.endpoint());
  transport::Dial dial;
  dial.host = node.host;
  dial.port = node.port;
  dial.secret = secret;
  dial.wire = node.wire;
  dial.timeout = timeout;
  transport::DialStage failed_at{};
  Result<transport::DialedWorker> dialed = transport::dial_worker(dial, &failed_at);
  if (!dialed) {
    const Status& failure = dialed.status();
    if (failed_at == transport::DialStage::kConnect) {
      reason = fmt::format("{}; is tessera-worker running there? (for a local cluster: tessera up CONFIG)",
                           failure.message());
      return network_error(fmt::format("{} is unreachable: {}", who, reason));
    }
    if (failure.code() == StatusCode::kAuthFailed) {
      reason = fmt::format("refused the shared secret ({}); the cluster file's secret must match the worker's "
                           "--secret/--secret-file",
                           failure.message());
      return auth_failed(fmt::format("{} {}", who, reason));
    }
    reason = fmt::format("handshake failed: {}", failure.message());
    return Status(failure.code(), fmt::format("{}: {}", who, reason));
  }
  NodeLink link{node, std::move(dialed->hello), std::move(dialed->connection)};
  const uint64_t missing = required_capabilities & ~link.hello.capabilities;
  if (missing != 0) {
    say_goodbye(link);
    const std::string missing_names = transport::capability_names(missing);
    reason = fmt::format("lacks what this run needs: missing {}, it offers {}; run a tessera-worker there that hosts {}",
                         missing_names, transport::capability_names(link.hello.capabilities), missing_names);
    return invalid_config(fmt::format("{} {}", who, reason));
  }
  return link;
}

// Every failure on its own line under a count, or the one failure as it is.
Status all_failures(const std::vector<Status>& failures, std::size_t count) {
  if (failures.size() == 1) return failures.front();
  std::string message = fmt::format("{} of {} nodes failed:", failures.size(), count);
  for (const Status& failure : failures) message += "\n  " + failure.message();
  return Status(failures.front().code(), message);
}

}  // namespace

std::string left_out_warning(const LeftOutNode& node) {
  return fmt::format("node '{}' left out: {}", node.node, node.reason);
}

std::string peer_host(const std::vector<std::vector<std::string>>& hosts, std::size_t from, std::size_t to,
                      const std::string& fallback) {
  if (from < hosts.size() && to < hosts[from].size() && !hosts[from][to].empty()) return hosts[from][to];
  return fallback;
}

Result<NodeLink> connect_node(const NodeSpec& node, const std::string& secret, std::chrono::milliseconds timeout,
                              uint64_t required_capabilities) {
  std::string reason;
  return attempt_node(node, secret, timeout, required_capabilities, reason);
}

Result<ClusterConnection> ClusterConnection::connect(const ClusterSpec& cluster, const ConnectOptions& options) {
  Result<std::string> secret = cluster.resolve_secret();
  if (!secret) return secret.status();

  const std::size_t count = cluster.nodes.size();
  std::vector<std::optional<Result<NodeLink>>> outcomes(count);
  std::vector<std::string> reasons(count);
  {
    // One thread per node: a node that never answers holds up the start by one timeout in all.
    std::vector<std::jthread> connectors;
    connectors.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      connectors.emplace_back([&, i] {
        outcomes[i] =
            attempt_node(cluster.nodes[i], *secret, options.timeout, options.required_capabilities, reasons[i]);
      });
    }
  }

  ClusterConnection result;
  std::vector<Status> failures, misdeployed;
  for (std::size_t i = 0; i < count; ++i) {
    Result<NodeLink>& outcome = *outcomes[i];
    if (outcome.is_ok()) {
      result.links_.push_back(std::move(outcome).value());
      continue;
    }
    failures.push_back(outcome.status());
    // A worker that answers but cannot serve this cluster file (a service missing, encryption the
    // file does not ask for) is a deployment to fix, not an outage: leaving it out would hide it.
    if (outcome.status().code() == StatusCode::kInvalidConfig) misdeployed.push_back(outcome.status());
    result.left_out_.push_back({cluster.nodes[i].name, reasons[i], outcome.status().code()});
  }
  if (failures.empty()) return result;
  if (!options.leave_out_failed) return all_failures(failures, count);
  if (!misdeployed.empty()) return all_failures(misdeployed, count);
  if (result.links_.empty()) {
    Status none = all_failures(failures, count);
    return Status(none.code(), "no node answered: " + none.message());
  }
  return result;
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
