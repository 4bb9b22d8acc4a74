// Request/reply over a FrameConnection: the one place where a reply that is not the expected one
// becomes a Status, whichever service's it is.
//
// Every reader of replies outside the handshake (the GEMM client's CREDIT/RESULT loop and probes
// through gemm/wire_io.hpp, the graph client through graph/wire.hpp) reads the next header
// through read_reply_header, so a peer's ERROR frame always reaches the user with a code that
// says what happened (a worker out of tile memory is kResourceExhausted, not a network failure)
// and a message naming the peer and its own reason; the payload is then its service's codec's.
// Replies are matched by order, one request outstanding at a time; request ids are not checked.
//
// The functions own nothing: they read from and write to the caller's connection. They are as
// thread-safe as FrameConnection itself: writes from any thread, reads from one thread at a time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::transport {

// The StatusCode a peer's ERROR code stands for: kOutOfMemory -> kResourceExhausted,
// kNoSuchTile -> kNotFound, kAuthFailed/kAuthRequired -> kAuthFailed, kBadFrame/kBadJob ->
// kProtocolError (the coordinator sent something the worker could not accept), kBusy -> kBusy,
// kCorrupt/kPeerFailed -> kNetworkError, kThrottled -> kBusy (the address is slowed down for
// failed authentications; a later try gets in), kInternal and values outside the enum -> kInternal.
StatusCode status_code_of(ErrorCode code);

// A peer's ERROR as a Status: code from status_code_of(), message
// "<peer> reported out of memory: <the peer's text>".
Status peer_error_status(const Error& error, std::string_view peer);

// Reads the next frame header and returns it when its type is one of `expected`; the caller then
// reads the payload with its service's codec (or streams a bulk payload straight into place).
// Failure: an ERROR frame (unless expected) is read whole and returned as peer_error_status();
// any other type is kProtocolError "<peer> sent STATS where CREDIT or RESULT was expected", its
// payload left unread, so the connection is out of step and must be given up; a transport
// failure comes back as the connection reported it (kNetworkError when the peer vanished).
// REQUIRES: expected is not empty.
Result<FrameHeader> read_reply_header(FrameConnection& connection, std::initializer_list<MessageType> expected);

// For a connection that failed with a network error: the ERROR the peer sent before it closed,
// if it sent one. A worker that refuses a STORE over its memory cap answers ERROR and closes
// without reading the data, so the coordinator's write usually fails before it reads the answer;
// this recovers the worker's reason. Shuts the connection down (it is being given up), then reads
// what had already arrived, skipping other frames' payloads without allocating them; after the
// shutdown nothing more can arrive, so this never blocks. Empty when no ERROR was there (or the
// stream was cut mid-frame and no longer parses).
std::optional<Status> read_parting_error(FrameConnection& connection);

}  // namespace tessera::transport
