#include "tessera/gemm/block_codec.hpp"

#include <string>

#include "tessera/transport/payload_io.hpp"

namespace tessera::gemm {

using transport::kFirstBlockMessageType;
using transport::message_type_name;
using transport::PayloadReader;
using transport::PayloadWriter;

namespace {

std::size_t entry_bytes(uint16_t type) {
  switch (type) {
    case static_cast<uint16_t>(MessageType::kBlockQuery): return kBlockQueryEntryBytes;
    case static_cast<uint16_t>(MessageType::kBlockLoad): return kBlockLoadEntryBytes;
    default: return 1;  // HELD, LOADED: a flag each
  }
}

// The count, checked against the bound and the payload's length before anything is reserved.
bool read_count(PayloadReader& r, uint16_t type, std::size_t payload_bytes, uint32_t& count) {
  if (!r.u32("count", count)) return false;
  if (count == 0 || count > kMaxBlocksPerMessage) {
    return r.fail("count " + std::to_string(count) + " out of range 1.." + std::to_string(kMaxBlocksPerMessage));
  }
  if (payload_bytes != kBlockCountBytes + uint64_t{count} * entry_bytes(type)) {
    return r.fail("payload of " + std::to_string(payload_bytes) + " bytes does not hold " + std::to_string(count) +
                  " entries");
  }
  return true;
}

bool read_key(PayloadReader& r, transport::BlockKey& key) {
  std::span<const std::byte> digest;
  if (!r.bytes("key", key.digest.size(), digest)) return false;
  std::copy(digest.begin(), digest.end(), key.digest.begin());
  return true;
}

// HELD and LOADED: a count, then one flag per entry, kept in `Answer::*flags`. `name` is a literal:
// the reader keeps a view of it.
template <typename Answer, std::vector<bool> Answer::*flags>
Result<BlockMessage> decode_flags(const char* name, const char* flag_name, uint16_t type, std::span<const std::byte> payload) {
  PayloadReader r(name, payload);
  uint32_t count = 0;
  if (!read_count(r, type, payload.size(), count)) return r.status();
  Answer answer;
  (answer.*flags).reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    bool flag = false;
    if (!r.boolean(flag_name, flag)) return r.status();
    (answer.*flags).push_back(flag);
  }
  if (!r.finish()) return r.status();
  return BlockMessage(std::move(answer));
}

std::vector<std::byte> encode_flags(const std::vector<bool>& flags) {
  PayloadWriter w(kBlockCountBytes + flags.size());
  w.u32(static_cast<uint32_t>(flags.size()));
  for (bool flag : flags) w.u8(flag ? 1 : 0);
  return w.take();
}

}  // namespace

MessageType block_message_type(const BlockMessage& message) {
  return static_cast<MessageType>(kFirstBlockMessageType + message.index());
}

std::vector<std::byte> encode_block_payload(const BlockMessage& message) {
  return std::visit(
      [](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, BlockQuery>) {
          PayloadWriter w(kBlockCountBytes + m.keys.size() * kBlockQueryEntryBytes);
          w.u32(static_cast<uint32_t>(m.keys.size()));
          for (const transport::BlockKey& key : m.keys) w.raw(key.digest);
          return w.take();
        } else if constexpr (std::is_same_v<T, BlockLoad>) {
          PayloadWriter w(kBlockCountBytes + m.blocks.size() * kBlockLoadEntryBytes);
          w.u32(static_cast<uint32_t>(m.blocks.size()));
          for (const BlockToLoad& block : m.blocks) {
            w.raw(block.key.digest);
            w.u32(block.tile_id);
            w.u32(block.rows);
            w.u32(block.cols);
          }
          return w.take();
        } else if constexpr (std::is_same_v<T, BlockHeld>) {
          return encode_flags(m.held);
        } else {
          return encode_flags(m.loaded);
        }
      },
      message);
}

Result<BlockMessage> decode_block_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits) {
  switch (type) {
    case static_cast<uint16_t>(MessageType::kBlockQuery): {
      PayloadReader r("BLOCK_QUERY", payload);
      uint32_t count = 0;
      if (!read_count(r, type, payload.size(), count)) return r.status();
      BlockQuery m;
      m.keys.resize(count);
      for (transport::BlockKey& key : m.keys) {
        if (!read_key(r, key)) return r.status();
      }
      if (!r.finish()) return r.status();
      return BlockMessage(std::move(m));
    }
    case static_cast<uint16_t>(MessageType::kBlockLoad): {
      PayloadReader r("BLOCK_LOAD", payload);
      uint32_t count = 0;
      if (!read_count(r, type, payload.size(), count)) return r.status();
      BlockLoad m;
      m.blocks.resize(count);
      for (BlockToLoad& block : m.blocks) {
        if (!(read_key(r, block.key) && r.u32("tile_id", block.tile_id) && r.u32("rows", block.rows) &&
              r.u32("cols", block.cols))) {
          return r.status();
        }
        if (block.rows == 0 || block.cols == 0 || block.rows > limits.max_tile_dim || block.cols > limits.max_tile_dim) {
          r.fail("a block of " + std::to_string(block.rows) + " x " + std::to_string(block.cols) +
                 " (dimensions must be 1.." + std::to_string(limits.max_tile_dim) + ")");
          return r.status();
        }
      }
      if (!r.finish()) return r.status();
      return BlockMessage(std::move(m));
    }
    case static_cast<uint16_t>(MessageType::kBlockHeld):
      return decode_flags<BlockHeld, &BlockHeld::held>("BLOCK_HELD", "held", type, payload);
    case static_cast<uint16_t>(MessageType::kBlockLoaded):
      return decode_flags<BlockLoaded, &BlockLoaded::loaded>("BLOCK_LOADED", "loaded", type, payload);
    default: return protocol_error(message_type_name(type) + " is not a block store message");
  }
}

Status check_block_payload_length(uint16_t type, uint64_t length) {
  if (!transport::is_block_message(type)) return protocol_error(message_type_name(type) + " is not a block store message");
  const uint64_t min = kBlockCountBytes + entry_bytes(type);
  const uint64_t max = kBlockCountBytes + uint64_t{kMaxBlocksPerMessage} * entry_bytes(type);
  if (length >= min && length <= max) return Status::ok();
  return protocol_error(message_type_name(type) + ": payload_length " + std::to_string(length) + " out of range " +
                        std::to_string(min) + ".." + std::to_string(max));
}

}  // namespace tessera::gemm
