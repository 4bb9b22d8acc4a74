// The forwarding messages: how tiles travel from one worker to another instead of through the
// coordinator: B's pieces along a chain of workers (plan::Distribution::kChain), and expression
// tiles from the worker that computed them to the workers that read them (SEND_TILE). Like the
// graph service's GRAPH_* frames, their payloads are the GEMM service's (this codec, beside
// codec.hpp); reading and writing them over a connection is wire_io.hpp's.
//
//   FORWARD_SETUP  coordinator -> worker: the run's token, the tile ids to forward [first, last),
//                  and the next node of the chain (empty host: this node is the chain's tail).
//                  The worker connects to the next node as a peer, sends it FORWARD_SETUP with the
//                  same token and no next node (the peer link's first frame: "the STOREs that
//                  follow belong to run TOKEN"; the next node answers FORWARD_READY or ERROR), and
//                  answers the coordinator FORWARD_READY.
//   FORWARD_READY  worker -> coordinator (and next node -> previous on a peer link): the token,
//                  whether the link to the next node is up, and why not (the coordinator then
//                  feeds the nodes after it itself). Also sent unasked when that link fails later.
//   STORED         worker -> coordinator, unsolicited: a tile of the run arrived from a peer (the
//                  previous node of the chain, or a SEND_TILE's sender) and is in the store (the
//                  coordinator sends jobs on it only then).
//   SEND_TILE      coordinator -> worker (kCapabilityTileSend): once the jobs sent before it are done,
//                  send the stored tile `tile_id` to the worker at host:port over a peer link of
//                  run `run_token` (both workers set up by FORWARD_SETUP with that token; the
//                  link is opened on first use and kept for the run). The receiver files it and
//                  tells its coordinator STORED.
//   SENT           worker -> coordinator: answer to SEND_TILE once the tile is written to the peer
//                  (delivered 1), or why it could not be (delivered 0, the reason).
//
// Layouts (little-endian, no gaps; strings are u16 length + bytes):
//   FORWARD_SETUP  u64 run_token, u32 first_tile_id, u32 last_tile_id (first <= last), u16 port,
//                  u16 pad (0), string next_host (port 0 exactly when the host is empty)
//   FORWARD_READY  u64 run_token, u8 linked (0/1), 7 pad (0), string reason (empty when linked)
//   STORED         u64 run_token, u32 tile_id, u32 pad (0)
//   SEND_TILE      u64 run_token, u32 tile_id, u16 port (>= 1), u16 pad (0), string host (not empty)
//   SENT           u64 run_token, u32 tile_id, u8 delivered (0/1), 3 pad (0), string reason (empty
//                  exactly when delivered)
// Every accepted payload re-encodes to exactly its own bytes. Pure values; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/gemm/codec.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::gemm {

struct ForwardSetup {
  uint64_t run_token = 0;
  uint32_t first_tile_id = 0;  // STOREs of ids in [first, last) are forwarded to the next node
  uint32_t last_tile_id = 0;
  std::string next_host;       // empty: no next node
  uint16_t next_port = 0;
  bool operator==(const ForwardSetup&) const = default;
};
struct ForwardReady {
  uint64_t run_token = 0;
  bool linked = false;
  std::string reason;
  bool operator==(const ForwardReady&) const = default;
};
struct Stored {
  uint64_t run_token = 0;
  uint32_t tile_id = 0;
  bool operator==(const Stored&) const = default;
};
struct SendTile {
  uint64_t run_token = 0;
  uint32_t tile_id = 0;
  std::string host;
  uint16_t port = 0;
  bool operator==(const SendTile&) const = default;
};
struct Sent {
  uint64_t run_token = 0;
  uint32_t tile_id = 0;
  bool delivered = false;
  std::string reason;
  bool operator==(const Sent&) const = default;
};
// Alternatives in wire-type order: index + kFirstForwardMessageType == the message type.
using ForwardMessage = std::variant<ForwardSetup, ForwardReady, Stored, SendTile, Sent>;

inline constexpr std::size_t kForwardSetupFixedBytes = 22;  // + the host's bytes
inline constexpr std::size_t kForwardReadyFixedBytes = 18;  // + the reason's bytes
inline constexpr std::size_t kStoredPayloadBytes = 16;
inline constexpr std::size_t kSendTileFixedBytes = 18;  // + the host's bytes
inline constexpr std::size_t kSentFixedBytes = 18;      // + the reason's bytes

MessageType forward_message_type(const ForwardMessage& message);
std::vector<std::byte> encode_forward_payload(const ForwardMessage& message);
// Refuses (kProtocolError, naming the message and field) a type that is not a forwarding one, a
// payload of the wrong length, non-zero padding, first > last, a port without host or a host
// without port, a linked READY with a reason, a SEND_TILE without host or port, a delivered SENT
// with a reason (or an undelivered one without), and strings over limits.max_string_bytes.
Result<ForwardMessage> decode_forward_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits);
// The payload lengths a forwarding type may have, checked against the header before reading.
Status check_forward_payload_length(uint16_t type, uint64_t length, const Limits& limits);

}  // namespace tessera::gemm
