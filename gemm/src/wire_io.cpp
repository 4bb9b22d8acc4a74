#include "tessera/gemm/wire_io.hpp"

#include <array>
#include <exception>
#include <variant>

#include <asio.hpp>

namespace tessera::gemm {

Status write_message(FrameConnection& connection, const GemmMessage& message, uint64_t request_id, uint32_t flags) {
  if (std::holds_alternative<Store>(message) || std::holds_alternative<ResultTile>(message)) {
    return internal_error("write_message: " + transport::message_type_name(static_cast<uint16_t>(gemm_message_type(message))) +
                          " carries matrix data; send it with write_store (prefix + data)");
  }
  const std::vector<std::byte> payload = encode_gemm_payload(message);
  transport::FrameHeader header;
  header.type = static_cast<uint16_t>(gemm_message_type(message));
  header.request_id = request_id;
  header.flags = flags;
  const std::array<asio::const_buffer, 1> parts{asio::buffer(payload)};
  return connection.write_frame(header, parts);
}

Status write_store(FrameConnection& connection, const TilePrefix& tile, std::span<const double> data) {
  const auto prefix = encode_store_prefix(tile);
  transport::FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix), asio::buffer(data.data(), data.size_bytes())};
  return connection.write_frame(header, parts);
}

Status read_tile_data(FrameConnection& connection, std::string_view message, const TilePrefix& tile,
                      std::span<std::byte> out) {
  Result<uint32_t> crc = connection.read_checksummed(out);
  if (!crc) return crc.status();
  if (*crc != tile.data_crc32c) return tile_crc_mismatch(message, tile, *crc).with_context(connection.peer() + ": ");
  return Status::ok();
}

Result<GemmFrame> read_payload(FrameConnection& connection, const transport::FrameHeader& header) {
  return read_payload(connection, header, limits_for(connection.limits()));
}

Result<GemmFrame> read_payload(FrameConnection& connection, const transport::FrameHeader& header, const Limits& limits) {
  const std::string where = connection.peer() + ": ";
  TESSERA_RETURN_IF_ERROR(check_gemm_payload_length(header.type, header.payload_length, limits).with_context(where));
  const uint64_t length = header.payload_length;
  const auto type = static_cast<MessageType>(header.type);
  try {
    std::vector<std::byte> payload;
    if (type == MessageType::kStore || type == MessageType::kResult) {
      // Bulk frames are the only ones whose size is not bounded by small per-type limits, so the
      // prefix must agree with payload_length before the data buffer exists.
      std::array<std::byte, kResultPrefixSize> prefix{};
      const std::size_t prefix_size = type == MessageType::kStore ? kTilePrefixSize : kResultPrefixSize;
      TESSERA_RETURN_IF_ERROR(connection.read_exact(std::span(prefix.data(), prefix_size)));
      const Status prefix_status =
          type == MessageType::kStore
              ? decode_store_prefix(std::span<const std::byte, kTilePrefixSize>(prefix.data(), kTilePrefixSize), length,
                                    limits)
                    .status()
              : decode_result_prefix(prefix, length, limits).status();
      if (!prefix_status.is_ok()) return prefix_status.with_context(where);
      payload.assign(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(prefix_size));
      TESSERA_RETURN_IF_ERROR(connection.read_growing(payload, length - prefix_size));
    } else {
      TESSERA_RETURN_IF_ERROR(connection.read_growing(payload, length));
    }
    Result<GemmMessage> message = decode_gemm_payload(header.type, payload, limits);
    if (!message) return message.status().with_context(where);
    // Moving the vector keeps its heap buffer, so STORE/RESULT spans stay valid.
    return GemmFrame{header, std::move(payload), std::move(*message)};
  } catch (const std::bad_alloc&) {
    return resource_exhausted(where + "cannot allocate " + std::to_string(length) + " bytes for a " +
                              transport::message_type_name(header.type) + " payload");
  }
}

Result<GemmFrame> read_reply(FrameConnection& connection, std::initializer_list<MessageType> expected) {
  Result<transport::FrameHeader> header = transport::read_reply_header(connection, expected);
  if (!header) return header.status();
  return read_payload(connection, *header);
}

namespace {

// A small control payload (forwarding, block store): its length checked by `length_check` before
// anything is read, then read and decoded by `decode`; failures name the peer.
template <typename Message, typename Decode>
Result<Message> read_small_payload(FrameConnection& connection, const transport::FrameHeader& header,
                                   const Status& length_check, Decode decode) {
  const std::string where = connection.peer() + ": ";
  TESSERA_RETURN_IF_ERROR(length_check.with_context(where));
  std::vector<std::byte> payload;
  TESSERA_RETURN_IF_ERROR(connection.read_growing(payload, header.payload_length));
  Result<Message> message = decode(header.type, payload, limits_for(connection.limits()));
  if (!message) return message.status().with_context(where);
  return message;
}

Status write_small_payload(FrameConnection& connection, uint16_t type, const std::vector<std::byte>& payload,
                           uint64_t request_id) {
  transport::FrameHeader header;
  header.type = type;
  header.request_id = request_id;
  const std::array<asio::const_buffer, 1> parts{asio::buffer(payload.data(), payload.size())};
  return connection.write_frame(header, parts);
}

}  // namespace

Result<ForwardMessage> read_forward_payload(FrameConnection& connection, const transport::FrameHeader& header) {
  return read_small_payload<ForwardMessage>(
      connection, header, check_forward_payload_length(header.type, header.payload_length, limits_for(connection.limits())),
      decode_forward_payload);
}

Status write_forward_message(FrameConnection& connection, const ForwardMessage& message, uint64_t request_id) {
  return write_small_payload(connection, static_cast<uint16_t>(forward_message_type(message)),
                             encode_forward_payload(message), request_id);
}

Result<BlockMessage> read_block_payload(FrameConnection& connection, const transport::FrameHeader& header) {
  return read_small_payload<BlockMessage>(connection, header, check_block_payload_length(header.type, header.payload_length),
                                          decode_block_payload);
}

Status write_block_message(FrameConnection& connection, const BlockMessage& message, uint64_t request_id) {
  return write_small_payload(connection, static_cast<uint16_t>(block_message_type(message)),
                             encode_block_payload(message), request_id);
}

}  // namespace tessera::gemm
