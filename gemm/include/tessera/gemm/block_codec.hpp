// The block store's messages (kCapabilityBlockStore): how a coordinator finds which resident
// blocks a worker already holds from an earlier session, has them filed as tiles without sending
// them, and asks for a STORE to be kept. Like the forwarding frames, their payloads are the GEMM
// service's (this codec, beside codec.hpp); reading and writing them over a connection is
// wire_io.hpp's. Keys are transport/block_key.hpp's: the content address of a block's shape and
// values, computed alike by coordinator and worker.
//
//   BLOCK_QUERY   coordinator -> worker: the keys it is about to need.
//   BLOCK_HELD    worker -> coordinator: for each key asked, in order, whether its store holds it
//                 (a file of the right size; checked only when read, so a held block may still
//                 fail to load).
//   BLOCK_LOAD    coordinator -> worker: blocks to file as tiles, each its key, the tile id and
//                 the shape the coordinator expects. The worker charges each tile to its tile
//                 memory cap before reading anything (ERROR OUT_OF_MEMORY past it, as a STORE),
//                 reads the block from its store, checks it against the key, and files it under
//                 the id; a block it does not hold, of another shape, or whose file is bad (then
//                 deleted) is not filed, and the id holds nothing afterwards.
//   BLOCK_LOADED  worker -> coordinator: for each block asked, in order, whether it is filed. The
//                 coordinator sends the others as STOREs.
//   A STORE whose frame header has kStoreKeep set is filed as any STORE and, once in, written to
//   the worker's store under the key of its content (the worker computes it; nothing the
//   coordinator claims is believed). Keeping is best-effort: a full disk is the worker's log line,
//   and the block is sent again next time. A later BLOCK_QUERY or BLOCK_LOAD is answered only
//   after every STORE kept before it is on disk, so a coordinator never misses its own blocks.
//
// Layouts (little-endian, no gaps):
//   BLOCK_QUERY   u32 count (1..kMaxBlocksPerMessage) | count x key[32]
//   BLOCK_HELD    u32 count (1..kMaxBlocksPerMessage) | count x u8 held (0/1)
//   BLOCK_LOAD    u32 count (1..kMaxBlocksPerMessage) | count x (key[32] | u32 tile_id | u32 rows | u32 cols)
//   BLOCK_LOADED  u32 count (1..kMaxBlocksPerMessage) | count x u8 loaded (0/1)
// rows and cols of a load are 1..max_tile_dim. Every accepted payload re-encodes to exactly its
// own bytes. Pure values; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/gemm/codec.hpp"
#include "tessera/transport/block_key.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::gemm {

// Header flag of a STORE: keep this tile in the worker's block store (kCapabilityBlockStore).
// Bit 0 is AUTH's start-TLS bit; a STORE uses bit 1 so that no flag means two things.
inline constexpr uint32_t kStoreKeep = 1u << 1;

// Keys or blocks in one message: a coordinator with more sends several. 1024 loads are 45 KiB,
// within the worker's bound on control payloads.
inline constexpr uint32_t kMaxBlocksPerMessage = 1024;
inline constexpr std::size_t kBlockCountBytes = 4;
inline constexpr std::size_t kBlockQueryEntryBytes = 32;
inline constexpr std::size_t kBlockLoadEntryBytes = 32 + 3 * 4;

struct BlockQuery {
  std::vector<transport::BlockKey> keys;
  bool operator==(const BlockQuery&) const = default;
};

struct BlockHeld {
  std::vector<bool> held;  // one per key asked
  bool operator==(const BlockHeld&) const = default;
};

struct BlockToLoad {
  transport::BlockKey key;
  uint32_t tile_id = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  bool operator==(const BlockToLoad&) const = default;
};

struct BlockLoad {
  std::vector<BlockToLoad> blocks;
  bool operator==(const BlockLoad&) const = default;
};

struct BlockLoaded {
  std::vector<bool> loaded;  // one per block asked
  bool operator==(const BlockLoaded&) const = default;
};

// Alternatives in wire-type order: index + kFirstBlockMessageType == the message type.
using BlockMessage = std::variant<BlockQuery, BlockHeld, BlockLoad, BlockLoaded>;

MessageType block_message_type(const BlockMessage& message);
// REQUIRES: 1..kMaxBlocksPerMessage entries.
std::vector<std::byte> encode_block_payload(const BlockMessage& message);
// Refuses (kProtocolError, naming the message and field) a type that is not a block message, a
// count of 0 or above kMaxBlocksPerMessage, a payload whose length is not its count's, a flag
// neither 0 nor 1, and a load's rows or cols outside 1..limits.max_tile_dim.
Result<BlockMessage> decode_block_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits);
// The payload lengths a block type may have, checked against the header before reading.
Status check_block_payload_length(uint16_t type, uint64_t length);

}  // namespace tessera::gemm
