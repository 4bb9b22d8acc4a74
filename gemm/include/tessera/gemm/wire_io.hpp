// The GEMM service's messages over a connection: writing them (bulk tiles straight from the
// caller's memory, scatter-gather), reading a frame's payload bounded by the codec before anything
// is allocated (a STORE's or RESULT's prefix checked before its data buffer exists, the data's
// CRC32C checked as it arrives), and replies matched by type (an ERROR frame becomes the peer's
// Status, as transport/request.hpp does for every service). Used by the coordinator's GEMM client
// (client.hpp) and by the worker's GEMM service; the codec itself (codec.hpp, forward_codec.hpp)
// stays pure.
// Owns nothing: the functions read from and write to the caller's connection, and are as
// thread-safe as FrameConnection itself (writes from any thread, reads from one thread at a time).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/gemm/block_codec.hpp"
#include "tessera/gemm/codec.hpp"
#include "tessera/gemm/forward_codec.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/request.hpp"

namespace tessera::gemm {

using transport::FrameConnection;

// Encodes and writes a non-bulk GEMM message with the header `flags`.
// REQUIRES: not Store / ResultTile (write_store; a RESULT is written by the worker from its tile).
Status write_message(FrameConnection& connection, const GemmMessage& message, uint64_t request_id = 0,
                     uint32_t flags = 0);
// A STORE of `data` (tile.rows x tile.cols doubles, row-major) under `tile`, written straight
// from `data`'s memory. REQUIRES: tile.data_crc32c is tile_crc32c(data).
Status write_store(FrameConnection& connection, const TilePrefix& tile, std::span<const double> data);

// Reads exactly out.size() bytes of STORE / RESULT data (`message` names which) in chunks,
// computing their CRC32C on the way; fails with tile_crc_mismatch when it is not
// tile.data_crc32c. On any failure `out` holds an unknown part of the data: the caller must not
// use it.
Status read_tile_data(FrameConnection& connection, std::string_view message, const TilePrefix& tile,
                      std::span<std::byte> out);

// A GEMM frame read whole and decoded. STORE / RESULT data views `payload`, so keep the frame.
struct GemmFrame {
  transport::FrameHeader header;
  std::vector<std::byte> payload;
  GemmMessage message;
};

// Reads and decodes the payload of `header`, a GEMM message, under `limits` (the connection's by
// default): the length checked first (check_gemm_payload_length), a bulk prefix before its data
// buffer exists, the buffer grown as bytes arrive. kProtocolError for what the codec refuses.
Result<GemmFrame> read_payload(FrameConnection& connection, const transport::FrameHeader& header);
Result<GemmFrame> read_payload(FrameConnection& connection, const transport::FrameHeader& header, const Limits& limits);

// The next frame, which must be one of `expected` (GEMM types), read whole. Failures as
// transport::read_reply_header (a peer's ERROR as its Status, another type named), plus the
// payload's own.
Result<GemmFrame> read_reply(FrameConnection& connection, std::initializer_list<MessageType> expected);

// Reads the next frame, which must be a `Reply` (non-bulk), and returns its message.
template <typename Reply>
Result<Reply> read_reply(FrameConnection& connection) {
  static_assert(!std::is_same_v<Reply, Store> && !std::is_same_v<Reply, ResultTile>,
                "a bulk message views its frame's payload; read it with read_reply(connection, types)");
  Result<GemmFrame> frame = read_reply(connection, {message_type_of<Reply>()});
  if (!frame) return frame.status();
  return std::get<Reply>(std::move(frame->message));
}

// Writes `request` (non-bulk) and waits for its `Reply`.
template <typename Reply>
Result<Reply> request_reply(FrameConnection& connection, const GemmMessage& request) {
  TESSERA_RETURN_IF_ERROR(write_message(connection, request));
  return read_reply<Reply>(connection);
}

// Forwarding messages (forward_codec.hpp): the payload of a frame whose header says it is one,
// read and decoded; and one written.
Result<ForwardMessage> read_forward_payload(FrameConnection& connection, const transport::FrameHeader& header);
Status write_forward_message(FrameConnection& connection, const ForwardMessage& message, uint64_t request_id = 0);

// Block store messages (block_codec.hpp), likewise.
Result<BlockMessage> read_block_payload(FrameConnection& connection, const transport::FrameHeader& header);
Status write_block_message(FrameConnection& connection, const BlockMessage& message, uint64_t request_id = 0);

}  // namespace tessera::gemm
