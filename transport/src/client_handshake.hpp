// client_handshake with one more fact for dial_worker: whether the worker refused the answer as
// THROTTLED (its address is slowed down for another program's failed authentications), which is
// worth trying again, unlike a wrong secret. Internal to transport.
#pragma once

#include <chrono>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::transport {

// client_handshake; `throttled` is set when the worker answered THROTTLED.
Result<Hello> client_handshake_noting_throttle(FrameConnection& connection, std::string_view secret,
                                               std::chrono::milliseconds timeout, SessionRole role, WireMode wire,
                                               bool& throttled);

}  // namespace tessera::transport
