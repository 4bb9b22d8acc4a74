// ClusterConnection: the coordinator's authenticated sessions with every node of a cluster.
//
// connect() opens one FrameConnection per node in parallel and runs the challenge-response
// handshake on each, so a dead node costs the start at most one connect timeout, not one per node.
// Failures name the node and its address and say what to check; when several nodes fail, every
// one is listed. With ConnectOptions::leave_out_failed the nodes that fail are left out instead
// (left_out() says which and why) and only a cluster where none answers fails. The object owns the
// connections; close() says BYE and closes them (also done by the destructor). Each NodeLink's connection may be driven by its own thread;
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

// A node that did not answer when the cluster was connected, and why: connect_node's message
// without the node's name in front ("connect to 127.0.0.1:7203 failed: Connection refused; is
// tessera-worker running there? ..."). `code` is that failure's (kBusy: another coordinator holds
// the worker).
struct LeftOutNode {
  std::string node;
  std::string reason;
  StatusCode code = StatusCode::kNetworkError;
  bool operator==(const LeftOutNode&) const = default;
};

// "node 'pi2' left out: REASON", the line front ends print after "warning: ".
std::string left_out_warning(const LeftOutNode& node);

struct ConnectOptions {
  std::chrono::milliseconds timeout{5000};  // per node, connect + handshake
  // transport::kCapability* bits every node must offer in its HELLO; default: GEMM.
  uint64_t required_capabilities = transport::kCapabilityGemm;
  // false (default): any node that fails fails connect(). true: a node that is unreachable or
  // refuses the session (wrong secret, BUSY with another coordinator, another protocol version,
  // silent past the timeout) is left out and recorded in left_out(); connect() then fails only
  // when no node answers, naming each. A node that answers but cannot serve this cluster file
  // (lacking required_capabilities, or wanting encryption the file does not ask for: kInvalidConfig)
  // is a deployment mistake, not an outage, and fails connect() either way.
  bool leave_out_failed = false;
};

class ClusterConnection {
 public:
  static Result<ClusterConnection> connect(const ClusterSpec& cluster, const ConnectOptions& options = {});
  ClusterConnection() = default;
  ClusterConnection(ClusterConnection&&) = default;
  ClusterConnection& operator=(ClusterConnection&&) = default;
  ~ClusterConnection();

  // The connected nodes, in cluster order (without the nodes left out).
  std::vector<NodeLink>& links() { return links_; }
  const std::vector<NodeLink>& links() const { return links_; }
  // The nodes connect() left out (ConnectOptions::leave_out_failed), cluster order; empty otherwise.
  const std::vector<LeftOutNode>& left_out() const { return left_out_; }
  // Unblocks every connection's pending read or write (any thread).
  void shutdown_all();
  void close();

 private:
  std::vector<NodeLink> links_;
  std::vector<LeftOutNode> left_out_;
};

// How worker `from` reaches worker `to` (indices in cluster.links()): hosts[from][to] when given
// (emulation::load_peer_hosts for emulated clusters, whose nodes reach each other through their
// namespaces' links), else `to`'s own host (`fallback`).
std::string peer_host(const std::vector<std::vector<std::string>>& hosts, std::size_t from, std::size_t to,
                      const std::string& fallback);

// One node: connect + handshake. Used by connect() and by `tessera status` / `tessera up`.
// A node whose HELLO lacks one of `required_capabilities` is said goodbye to and refused with
// kInvalidConfig naming the node, its address, what it offers and what is missing.
Result<NodeLink> connect_node(const NodeSpec& node, const std::string& secret, std::chrono::milliseconds timeout,
                              uint64_t required_capabilities = transport::kCapabilityGemm);

// Ends a session in order: BYE, then waits (at most `timeout`) for the worker's BYE, so that the
// worker has let the session go before the caller connects again. Closes the connection.
void say_goodbye(NodeLink& link, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

}  // namespace tessera::balance::cluster
