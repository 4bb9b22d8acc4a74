// Dialling a worker: connect, then the handshake (client_handshake), tried again while the worker
// turns the connection away only for the moment. The one dialler of the coordinator (a session's
// link to each node) and of the workers (a graph part's links to the parts it sends deltas to, a
// chain's next node, SEND_TILE's links).
//
// Two refusals are worth trying again, with growing, jittered pauses (10 ms doubling to 320 ms,
// plus up to half again, so diallers turned away together do not come back together) until the
// deadline: a handshake the far worker closed (it evicts its oldest unanswered connections when
// too many handshake at once: every part of a graph run dials every other part, and on one
// emulation host they all come from one address; the crowd authenticates within milliseconds and
// the latecomer gets in), and THROTTLED (the worker has as many answers from this address waiting
// as it will, after another program there failed to authenticate; the line moves within one
// hold), for which the dial goes on up to 60 s whatever its timeout, the worker being alive. A
// refused connect, a wrong secret or any other answer is reported at once: a dead node must be
// named without waiting out the deadline. Stateless and thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::transport {

struct Dial {
  std::string host;
  uint16_t port = 0;
  std::string_view secret;  // must outlive the call
  SessionRole role = SessionRole::kCoordinator;
  WireMode wire = WireMode::kPlain;
  Limits limits;
  std::chrono::milliseconds timeout{5000};  // the whole dial, tries and pauses together
};

struct DialedWorker {
  std::unique_ptr<FrameConnection> connection;
  Hello hello;  // what the far worker said of itself (services, cores, memory)
};

// Where a dial failed: the connect (nobody listens, no route) or the handshake after it.
enum class DialStage { kConnect, kHandshake };

// The authenticated connection, or the last try's failure (with how many tries were made, and
// for how long, when more than one), and in `failed_at` (when given) the stage it failed in.
Result<DialedWorker> dial_worker(const Dial& dial, DialStage* failed_at = nullptr);

}  // namespace tessera::transport
