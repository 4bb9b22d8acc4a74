#include "tessera/gemm/client.hpp"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <asio.hpp>

#include "tessera/gemm/wire_io.hpp"
#include "tessera/transport/crc32c.hpp"
#include "tessera/transport/request.hpp"

namespace tessera::gemm {

uint64_t new_forward_token() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

EncodedStore encode_store(uint32_t tile_id, uint32_t rows, uint32_t cols, std::span<const double> data) {
  const TilePrefix tile{tile_id, rows, cols, tile_crc32c(data)};
  EncodedStore encoded;
  encoded.header = encode_store_header(tile);
  encoded.prefix = encode_store_prefix(tile);
  encoded.data = data;
  return encoded;
}

GemmClient::GemmClient(transport::FrameConnection& connection)
    : connection_(connection), limits_(limits_for(connection.limits())) {}

Status GemmClient::store(uint32_t tile_id, uint32_t rows, uint32_t cols, const double* data, std::optional<uint32_t> crc) {
  const std::span<const double> values(data, std::size_t{rows} * cols);
  // The CRC pass reads the memory the write sends right after (no copy).
  return write_store(connection_, {tile_id, rows, cols, crc ? *crc : tile_crc32c(values)}, values);
}

Status GemmClient::store_rows(uint32_t tile_id, uint32_t rows, uint32_t cols, const double* first_row,
                              std::size_t row_stride, uint32_t crc, bool keep) {
  const auto prefix = encode_store_prefix({tile_id, rows, cols, crc});
  std::vector<asio::const_buffer> parts;
  parts.reserve(std::size_t{rows} + 1);
  parts.push_back(asio::buffer(prefix));
  if (row_stride == cols) {
    parts.push_back(asio::buffer(first_row, std::size_t{rows} * cols * sizeof(double)));  // whole rows: one piece
  } else {
    for (uint32_t i = 0; i < rows; ++i) parts.push_back(asio::buffer(first_row + i * row_stride, cols * sizeof(double)));
  }
  transport::FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kStore);
  if (keep) header.flags = kStoreKeep;
  return connection_.write_frame(header, parts);
}

Status GemmClient::store(const EncodedStore& tile) {
  const std::array<asio::const_buffer, 3> parts{asio::buffer(tile.header), asio::buffer(tile.prefix),
                                                asio::buffer(tile.data.data(), tile.data.size_bytes())};
  return connection_.write_buffers(parts);
}

Status GemmClient::release(std::span<const uint32_t> tile_ids) {
  const std::size_t chunk = std::max<std::size_t>(limits_.max_release_tiles, 1);
  for (std::size_t from = 0; from < tile_ids.size(); from += chunk) {
    const std::span<const uint32_t> part = tile_ids.subspan(from, std::min(chunk, tile_ids.size() - from));
    TESSERA_RETURN_IF_ERROR(write_message(connection_, Release{{part.begin(), part.end()}}));
  }
  return Status::ok();
}

Status GemmClient::job(const Job& job) {
  // Counted before the write, so a CREDIT read on another thread never finds more credited than sent.
  jobs_sent_.fetch_add(1);
  if ((job.flags & kJobSendResult) != 0) results_asked_.fetch_add(1);
  return write_message(connection_, job, job.job_id);
}

Status GemmClient::request_stats() { return write_message(connection_, StatsRequest{}); }

Status GemmClient::forward(const ForwardMessage& message) { return write_forward_message(connection_, message); }

Result<ForwardReady> GemmClient::set_up_forwarding(const ForwardSetup& setup) {
  TESSERA_RETURN_IF_ERROR(forward(setup));
  for (;;) {
    Result<Reply> reply = next({MessageType::kForwardReady, MessageType::kStored, MessageType::kSent});
    if (!reply) return reply.status();
    const auto* forwarded = std::get_if<ForwardMessage>(&*reply);
    const auto* ready = forwarded != nullptr ? std::get_if<ForwardReady>(forwarded) : nullptr;
    if (ready != nullptr && ready->run_token == setup.run_token) return *ready;
  }
}

Status GemmClient::end_forwarding(uint64_t token) {
  uint64_t ended = new_forward_token();
  if (ended == token) ++ended;
  return set_up_forwarding(ForwardSetup{ended, 0, 0, "", 0}).status();
}

Status GemmClient::send_probe(const Probe& probe) { return write_message(connection_, probe); }

Result<ProbeResult> GemmClient::probe(const Probe& probe) { return request_reply<ProbeResult>(connection_, probe); }

namespace {

// A block answer of type `Answer` and its flags: exactly `asked` of them, or (`at_most`) 1..asked
// for one answer among several that together answer the blocks asked; otherwise refused.
template <typename Answer>
Result<std::vector<bool>> read_block_answer(transport::FrameConnection& connection, std::vector<bool> Answer::*flags,
                                            std::size_t asked, bool at_most = false) {
  constexpr MessageType expected = std::is_same_v<Answer, BlockHeld> ? MessageType::kBlockHeld : MessageType::kBlockLoaded;
  Result<transport::FrameHeader> header = transport::read_reply_header(connection, {expected});
  if (!header) return header.status();
  Result<BlockMessage> answer = read_block_payload(connection, *header);
  if (!answer) return answer.status();
  std::vector<bool> got = std::get<Answer>(std::move(*answer)).*flags;
  if (at_most ? got.size() > asked : got.size() != asked) {
    return protocol_error(connection.peer() + ": " + transport::message_type_name(header->type) + " answered " +
                          std::to_string(got.size()) + " blocks of " + std::to_string(asked) + " asked");
  }
  return got;
}

}  // namespace

Result<std::vector<bool>> GemmClient::query_blocks(std::span<const transport::BlockKey> keys) {
  std::vector<bool> held;
  for (std::size_t from = 0; from < keys.size(); from += kMaxBlocksPerMessage) {
    const std::span<const transport::BlockKey> part = keys.subspan(from, std::min<std::size_t>(kMaxBlocksPerMessage, keys.size() - from));
    TESSERA_RETURN_IF_ERROR(write_block_message(connection_, BlockQuery{{part.begin(), part.end()}}));
    Result<std::vector<bool>> got = read_block_answer(connection_, &BlockHeld::held, part.size());
    if (!got) return got.status();
    held.insert(held.end(), got->begin(), got->end());
  }
  return held;
}

Result<std::vector<bool>> GemmClient::load_blocks(std::span<const BlockToLoad> blocks) {
  TESSERA_RETURN_IF_ERROR(send_block_load(blocks));
  return read_blocks_loaded(blocks.size());
}

Status GemmClient::send_block_load(std::span<const BlockToLoad> blocks) {
  for (std::size_t from = 0; from < blocks.size(); from += kMaxBlocksPerMessage) {
    const std::span<const BlockToLoad> part = blocks.subspan(from, std::min<std::size_t>(kMaxBlocksPerMessage, blocks.size() - from));
    TESSERA_RETURN_IF_ERROR(write_block_message(connection_, BlockLoad{{part.begin(), part.end()}}));
  }
  return Status::ok();
}

Result<std::vector<bool>> GemmClient::read_blocks_loaded(std::size_t count) {
  // One BLOCK_LOADED per BLOCK_LOAD, in order, each answering that message's blocks.
  std::vector<bool> loaded;
  while (loaded.size() < count) {
    Result<std::vector<bool>> got = read_block_answer(connection_, &BlockLoaded::loaded, count - loaded.size(), true);
    if (!got) return got.status();
    loaded.insert(loaded.end(), got->begin(), got->end());
  }
  return loaded;
}

Result<Stats> GemmClient::stats() { return request_reply<Stats>(connection_, StatsRequest{}); }

Result<GemmClient::Reply> GemmClient::next(std::initializer_list<MessageType> expected) {
  Result<transport::FrameHeader> header = transport::read_reply_header(connection_, expected);
  if (!header) return header.status();
  if (transport::is_forward_message(header->type)) {
    Result<ForwardMessage> forwarded = read_forward_payload(connection_, *header);
    if (!forwarded) return forwarded.status();
    return Reply(std::move(*forwarded));
  }
  if (header->type == static_cast<uint16_t>(MessageType::kResult)) {
    TESSERA_RETURN_IF_ERROR(check_gemm_payload_length(header->type, header->payload_length, limits_)
                                .with_context(connection_.peer() + ": "));
    std::array<std::byte, kResultPrefixSize> prefix_bytes;
    TESSERA_RETURN_IF_ERROR(connection_.read_exact(prefix_bytes));
    Result<ResultPrefix> prefix = decode_result_prefix(prefix_bytes, header->payload_length, limits_);
    if (!prefix) return prefix.status().with_context(connection_.peer() + ": ");
    return Reply(ResultHeader{prefix->job_id, prefix->compute_seconds, prefix->tile});
  }
  Result<GemmFrame> frame = read_payload(connection_, *header, limits_);
  if (!frame) return frame.status();
  if (auto* credit = std::get_if<Credit>(&frame->message)) {
    jobs_credited_.fetch_add(credit->credits);
    return Reply(*credit);
  }
  if (auto* stats = std::get_if<Stats>(&frame->message)) return Reply(*stats);
  if (auto* probe = std::get_if<ProbeResult>(&frame->message)) return Reply(std::move(*probe));
  return protocol_error(connection_.peer() + " sent " + transport::message_type_name(header->type) +
                        ", which is not an answer of the GEMM service");
}

Status GemmClient::read_result(const ResultHeader& result, std::span<double> out) {
  if (out.size_bytes() != result.bytes()) {
    return internal_error("read_result: " + std::to_string(out.size()) + " doubles of room for a " +
                          std::to_string(result.tile.rows) + " x " + std::to_string(result.tile.cols) + " tile");
  }
  TESSERA_RETURN_IF_ERROR(read_tile_data(connection_, "RESULT", result.tile, std::as_writable_bytes(out)));
  results_received_.fetch_add(1);
  return Status::ok();
}

}  // namespace tessera::gemm
