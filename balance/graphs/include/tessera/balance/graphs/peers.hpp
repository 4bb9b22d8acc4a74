// Peer endpoints of a graph run: how each worker reaches each other worker for its deltas.
//
// The coordinator knows where IT reaches every node (NodeSpec host:port), but a worker may have
// to take another road: in an emulated local cluster (emulation/emulation.hpp) a worker in a
// network namespace reaches a root-namespace worker through its own veth, not at 127.0.0.1. A
// PeerHosts matrix says, per receiving node, which host it uses for each peer; the port is always
// the peer's own. An empty matrix means "the peer's NodeSpec host for everyone", right for any
// cluster whose workers sit on real machines. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/core/status.hpp"
#include "tessera/graph/wire.hpp"

namespace tessera::balance::graphs {

// hosts[receiver][peer], both cluster node indices; empty, or nodes x nodes.
using PeerHosts = std::vector<std::vector<std::string>>;

// RunSetup::peers of every part of a placement that puts part p on cluster node part_nodes[p]:
// result[p][q] is how the node of part p reaches the node of part q (its own entry included, as
// the wire wants one per part). Fails (kInvalidArgument) when `hosts` is neither empty nor
// nodes x nodes, or a part names a node out of range.
Result<std::vector<std::vector<graph::PeerEndpoint>>> peer_endpoints(std::span<const cluster::NodeSpec> nodes,
                                                                      const PeerHosts& hosts,
                                                                      std::span<const std::size_t> part_nodes);

}  // namespace tessera::balance::graphs
