#include "tessera/transport/request.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>

namespace tessera::transport {

namespace {

// How the user reads each code after "<peer> reported ".
std::string error_code_phrase(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadFrame: return "a bad frame";
    case ErrorCode::kAuthRequired: return "authentication required";
    case ErrorCode::kAuthFailed: return "authentication failed";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kNoSuchTile: return "no such tile";
    case ErrorCode::kBadJob: return "a bad job";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kInternal: return "an internal error";
    case ErrorCode::kCorrupt: return "a checksum mismatch";
    case ErrorCode::kPeerFailed: return "a failed peer link";
    case ErrorCode::kThrottled: return "throttling after failed authentications";
  }
  return "error code " + std::to_string(static_cast<uint32_t>(code));
}

// "CREDIT", "CREDIT or RESULT", "HELLO, AUTH or BYE".
std::string one_of(std::initializer_list<MessageType> types) {
  std::string text;
  std::size_t written = 0;
  for (MessageType type : types) {
    if (written > 0) text += written + 1 == types.size() ? " or " : ", ";
    text += message_type_name(static_cast<uint16_t>(type));
    ++written;
  }
  return text;
}

// Reads and drops `length` payload bytes through a fixed buffer, so a peer's claimed length never
// becomes an allocation.
Status skip_payload(FrameConnection& connection, uint64_t length) {
  std::array<std::byte, 64 * 1024> scratch;
  while (length > 0) {
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(length, scratch.size()));
    TESSERA_RETURN_IF_ERROR(connection.read_exact(std::span(scratch.data(), chunk)));
    length -= chunk;
  }
  return Status::ok();
}

}  // namespace

StatusCode status_code_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOutOfMemory: return StatusCode::kResourceExhausted;
    case ErrorCode::kNoSuchTile: return StatusCode::kNotFound;
    case ErrorCode::kAuthRequired:
    case ErrorCode::kAuthFailed: return StatusCode::kAuthFailed;
    case ErrorCode::kBadFrame:
    case ErrorCode::kBadJob: return StatusCode::kProtocolError;
    case ErrorCode::kBusy: return StatusCode::kBusy;
    case ErrorCode::kInternal: return StatusCode::kInternal;
    // Damaged in transit: a lost transfer, like a broken connection, so the run reissues the tiles.
    case ErrorCode::kCorrupt: return StatusCode::kNetworkError;
    // A link between two workers failed; which worker is to blame the message says.
    case ErrorCode::kPeerFailed: return StatusCode::kNetworkError;
    // Not a wrong secret: the address is slowed down for someone else's; a later try gets in.
    case ErrorCode::kThrottled: return StatusCode::kBusy;
  }
  return StatusCode::kInternal;
}

Status peer_error_status(const Error& error, std::string_view peer) {
  std::string message = std::string(peer) + " reported " + error_code_phrase(error.code);
  if (!error.message.empty()) message += ": " + error.message;
  return Status(status_code_of(error.code), std::move(message));
}

Result<FrameHeader> read_reply_header(FrameConnection& connection, std::initializer_list<MessageType> expected) {
  Result<FrameHeader> header = connection.read_header();
  if (!header) return header.status();
  const auto type = static_cast<MessageType>(header->type);
  if (std::find(expected.begin(), expected.end(), type) != expected.end()) return header;
  if (type == MessageType::kError) {
    Result<IncomingFrame> frame = connection.read_payload(*header);
    if (!frame) return frame.status();
    return peer_error_status(std::get<Error>(frame->message), connection.peer());
  }
  return protocol_error(connection.peer() + " sent " + message_type_name(header->type) + " where " + one_of(expected) +
                        " was expected");
}

std::optional<Status> read_parting_error(FrameConnection& connection) {
  connection.shutdown();
  for (;;) {
    Result<FrameHeader> header = connection.read_header();
    if (!header) return std::nullopt;
    if (header->type == static_cast<uint16_t>(MessageType::kError)) {
      Result<IncomingFrame> frame = connection.read_payload(*header);
      if (!frame) return std::nullopt;
      return peer_error_status(std::get<Error>(frame->message), connection.peer());
    }
    if (!skip_payload(connection, header->payload_length).is_ok()) return std::nullopt;
  }
}

}  // namespace tessera::transport
