// Dialling another worker as its peer: connect, then the handshake with the peer label. Used by
// the graph service (a part's links to the parts it sends deltas to) and by chain forwarding
// (the link to the next node of a chain, and SEND_TILE's links).
//
// A worker that many peers dial at once (every part of a graph run dials every other part, and
// on one emulation host they all come from one address) evicts its oldest unauthenticated
// connections once WorkerOptions::max_handshaking are in flight; the evicted dialler only sees
// the connection close. So a handshake the far worker closed is tried again, with growing,
// jittered pauses, until the deadline: the crowd authenticates within milliseconds and the
// latecomer gets in. A refused connect or any other failure is reported at once (a dead peer must
// be named without waiting out the deadline). Stateless and thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::worker {

struct PeerDial {
  std::string host;
  uint16_t port = 0;
  std::string_view secret;
  transport::Limits limits;
  transport::WireMode wire = transport::WireMode::kPlain;
  std::chrono::milliseconds timeout{5000};  // the whole dial, tries and pauses together
};

struct PeerLink {
  std::unique_ptr<transport::FrameConnection> connection;
  transport::Hello hello;  // what the far worker offers (its capabilities)
};

// The connection authenticated as a peer, or the last try's failure (with how many were made when
// more than one).
Result<PeerLink> dial_peer(const PeerDial& dial);

}  // namespace tessera::worker
