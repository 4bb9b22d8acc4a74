// ClusterConnection: the coordinator's authenticated sessions with every node of a cluster.
//
// connect() opens one FrameConnection per node in parallel and runs the challenge-response
// handshake on each. Failures name the node and its address and say what to check; when several
// nodes fail, every one is listed. The object owns the connections; close() says BYE and closes
// them (also done by the destructor). Each NodeLink's connection may be driven by its own thread;
// the ClusterConnection itself is not synchronised.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/core/status.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::balance::cluster {

struct NodeLink {
  NodeSpec spec;
  transport::Hello hello;  // what the worker said about itself
  std::unique_ptr<transport::FrameConnection> connection;
};

struct ConnectOptions {
  std::chrono::milliseconds timeout{5000};  // per node, connect + handshake
  // transport::kCapability* bits every node must offer in its HELLO; default: GEMM.
  uint64_t required_capabilities = transport::kCapabilityGemm;
};

class ClusterConnection {
 public:
  static Result<ClusterConnection> connect(const ClusterSpec& cluster, const ConnectOptions& options = {});
  ClusterConnection() = default;
  ClusterConnection(ClusterConnection&&) = default;
  ClusterConnection& operator=(ClusterConnection&&) = default;
  ~ClusterConnection();

  std::vector<NodeLink>& links() { return links_; }
  const std::vector<NodeLink>& links() const { return links_; }
  // Unblocks every connection's pending read or write (any thread).
  void shutdown_all();
  void close();

 private:
  std::vector<NodeLink> links_;
};

// One node: connect + handshake. Used by connect() and by `tessera status` / `tessera up`.
// A node whose HELLO lacks one of `required_capabilities` is said goodbye to and refused with
// kInvalidConfig naming the node, its address, what it offers and what is missing.
Result<NodeLink> connect_node(const NodeSpec& node, const std::string& secret, std::chrono::milliseconds timeout,
                              uint64_t required_capabilities = transport::kCapabilityGemm);

// Ends a session in order: BYE, then waits (at most `timeout`) for the worker's BYE, so that the
// worker has let the session go before the caller connects again. Closes the connection.
void say_goodbye(NodeLink& link, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace tessera::balance::cluster
