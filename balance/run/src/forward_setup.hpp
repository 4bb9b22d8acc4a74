// The coordinator's side of a forwarding run on one worker (transport/forward_codec.hpp), shared by
// the multiply's chain (chain_feed.hpp) and the DAG runner's worker-to-worker tiles (dag_run.cpp):
// a fresh run token, FORWARD_SETUP with its answer, and ending a run. Internal to the run library.
// Pure functions on one connection; the caller owns the connection and reads nothing else meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/forward_codec.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::balance::run {

// How worker `from` reaches worker `to` (indices in cluster.links()): hosts[from][to] when given
// (local::load_peer_hosts for emulated clusters), else `to`'s own host (`fallback`).
std::string peer_host(const std::vector<std::vector<std::string>>& hosts, std::size_t from, std::size_t to,
                      const std::string& fallback);

// A random token naming one run on the workers.
uint64_t fresh_forward_token();

// FORWARD_SETUP and its FORWARD_READY, skipping what the worker may still send of a run before it
// (STORED, SENT, an unsolicited FORWARD_READY of another token).
Result<transport::ForwardReady> request_forward_setup(transport::FrameConnection& connection,
                                                      const transport::ForwardSetup& setup);

// Ends the worker's run `token` (a FORWARD_SETUP with a fresh token and nothing to forward): its
// forwarding and sends stop, its peer links close, late pieces are refused, and what it still sent
// of the run is read and dropped.
Status end_forward_run(transport::FrameConnection& connection, uint64_t token);

}  // namespace tessera::balance::run
