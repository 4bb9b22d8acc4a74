// Request/reply over a FrameConnection: the one place where a reply that is not the expected one
// becomes a Status.
//
// Every reader of replies outside the handshake (the profiler's probes, the multiply driver's
// CREDIT/RESULT loop and STATS requests) goes through these functions, so a peer's ERROR frame
// always reaches the user with a code that says what happened (a worker out of tile memory is
// kResourceExhausted, not a network failure) and a message naming the peer and its own reason.
// Replies are matched by order, one request outstanding at a time; request ids are not checked.
//
// The functions own nothing: they read from and write to the caller's connection. They are as
// thread-safe as FrameConnection itself: writes from any thread, reads from one thread at a time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

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
// reads the payload (read_payload, or streams a bulk payload straight into place).
// Failure: an ERROR frame (unless expected) is read whole and returned as peer_error_status();
// any other type is kProtocolError "<peer> sent STATS where CREDIT or RESULT was expected", its
// payload left unread, so the connection is out of step and must be given up; a transport
// failure comes back as the connection reported it (kNetworkError when the peer vanished).
// REQUIRES: expected is not empty.
Result<FrameHeader> read_reply_header(FrameConnection& connection, std::initializer_list<MessageType> expected);

// read_reply_header() + read_payload(): the whole frame, decoded. Same failures, plus the
// payload's own (kProtocolError for a payload that does not decode).
Result<IncomingFrame> read_reply(FrameConnection& connection, std::initializer_list<MessageType> expected);

// The alternative of Message that travels as `type` on the wire (index + 1 == MessageType).
template <typename T>
constexpr MessageType message_type_of() {
  constexpr uint16_t wire_type = []<typename... Alternatives>(std::type_identity<std::variant<Alternatives...>>) {
    uint16_t position = 0;
    bool found = false;
    ((found = found || std::is_same_v<T, Alternatives>, position = static_cast<uint16_t>(position + (found ? 0 : 1))), ...);
    return found ? static_cast<uint16_t>(position + 1) : uint16_t{0};
  }(std::type_identity<Message>{});
  static_assert(wire_type != 0, "not an alternative of Message");
  return static_cast<MessageType>(wire_type);
}

// Reads the next frame, which must be a `Reply`, and returns its message. Failures as read_reply().
// Bulk replies (STORE, RESULT) view their frame's buffer and cannot be returned alone.
template <typename Reply>
Result<Reply> read_reply(FrameConnection& connection) {
  static_assert(!std::is_same_v<Reply, Store> && !std::is_same_v<Reply, ResultTile>,
                "a bulk message views its frame's payload; use read_reply_header and read the data in place");
  Result<IncomingFrame> frame = read_reply(connection, {message_type_of<Reply>()});
  if (!frame) return frame.status();
  return std::get<Reply>(std::move(frame->message));
}

// Writes `request` (non-bulk) and waits for its `Reply`. A failed write comes back as the
// connection reported it; the reply's failures are read_reply()'s.
template <typename Reply>
Result<Reply> request_reply(FrameConnection& connection, const Message& request) {
  TESSERA_RETURN_IF_ERROR(connection.write_message(request));
  return read_reply<Reply>(connection);
}

// For a connection that failed with a network error: the ERROR the peer sent before it closed,
// if it sent one. A worker that refuses a STORE over its memory cap answers ERROR and closes
// without reading the data, so the coordinator's write usually fails before it reads the answer;
// this recovers the worker's reason. Shuts the connection down (it is being given up), then reads
// what had already arrived, skipping other frames' payloads without allocating them; after the
// shutdown nothing more can arrive, so this never blocks. Empty when no ERROR was there (or the
// stream was cut mid-frame and no longer parses).
std::optional<Status> read_parting_error(FrameConnection& connection);

}  // namespace tessera::transport
