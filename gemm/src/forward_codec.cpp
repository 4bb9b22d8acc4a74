#include "tessera/gemm/forward_codec.hpp"

#include <string>

#include "tessera/transport/payload_io.hpp"

namespace tessera::gemm {

using transport::is_forward_message;
using transport::kFirstForwardMessageType;
using transport::message_type_name;
using transport::PayloadReader;
using transport::PayloadWriter;

namespace {

Result<ForwardMessage> finish(PayloadReader& r, ForwardMessage message) {
  if (!r.finish()) return r.status();
  return message;
}

Result<ForwardMessage> decode_setup(std::span<const std::byte> payload, const Limits& limits) {
  ForwardSetup m;
  PayloadReader r("FORWARD_SETUP", payload);
  if (!(r.u64("run_token", m.run_token) && r.u32("first_tile_id", m.first_tile_id) &&
        r.u32("last_tile_id", m.last_tile_id) && r.u16("next_port", m.next_port) && r.zero_padding("pad", 2) &&
        r.string("next_host", limits.max_string_bytes, m.next_host))) {
    return r.status();
  }
  if (m.first_tile_id > m.last_tile_id) {
    r.fail("first_tile_id " + std::to_string(m.first_tile_id) + " is above last_tile_id " + std::to_string(m.last_tile_id));
    return r.status();
  }
  if (m.next_host.empty() != (m.next_port == 0)) {
    r.fail(m.next_host.empty() ? "next_port " + std::to_string(m.next_port) + " given without a next_host"
                               : std::string("next_host given with next_port 0"));
    return r.status();
  }
  return finish(r, std::move(m));
}

Result<ForwardMessage> decode_ready(std::span<const std::byte> payload, const Limits& limits) {
  ForwardReady m;
  PayloadReader r("FORWARD_READY", payload);
  if (!(r.u64("run_token", m.run_token) && r.boolean("linked", m.linked) && r.zero_padding("pad", 7) &&
        r.string("reason", limits.max_string_bytes, m.reason))) {
    return r.status();
  }
  if (m.linked && !m.reason.empty()) {
    r.fail("a linked node gives no reason");
    return r.status();
  }
  return finish(r, std::move(m));
}

Result<ForwardMessage> decode_stored(std::span<const std::byte> payload) {
  Stored m;
  PayloadReader r("STORED", payload);
  if (!(r.u64("run_token", m.run_token) && r.u32("tile_id", m.tile_id) && r.zero_padding("pad", 4))) {
    return r.status();
  }
  return finish(r, m);
}

Result<ForwardMessage> decode_send_tile(std::span<const std::byte> payload, const Limits& limits) {
  SendTile m;
  PayloadReader r("SEND_TILE", payload);
  if (!(r.u64("run_token", m.run_token) && r.u32("tile_id", m.tile_id) && r.u16("port", m.port) &&
        r.zero_padding("pad", 2) && r.string("host", limits.max_string_bytes, m.host))) {
    return r.status();
  }
  if (m.host.empty() || m.port == 0) {
    r.fail(m.host.empty() ? std::string("the host is empty") : std::string("port 0 given with the host"));
    return r.status();
  }
  return finish(r, std::move(m));
}

Result<ForwardMessage> decode_sent(std::span<const std::byte> payload, const Limits& limits) {
  Sent m;
  PayloadReader r("SENT", payload);
  if (!(r.u64("run_token", m.run_token) && r.u32("tile_id", m.tile_id) && r.boolean("delivered", m.delivered) &&
        r.zero_padding("pad", 3) && r.string("reason", limits.max_string_bytes, m.reason))) {
    return r.status();
  }
  if (m.delivered != m.reason.empty()) {
    r.fail(m.delivered ? std::string("a delivered tile gives no reason") : std::string("an undelivered tile gives its reason"));
    return r.status();
  }
  return finish(r, std::move(m));
}

}  // namespace

MessageType forward_message_type(const ForwardMessage& message) {
  return static_cast<MessageType>(kFirstForwardMessageType + message.index());
}

std::vector<std::byte> encode_forward_payload(const ForwardMessage& message) {
  return std::visit(
      [](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, ForwardSetup>) {
          PayloadWriter w(kForwardSetupFixedBytes + m.next_host.size());
          w.u64(m.run_token);
          w.u32(m.first_tile_id);
          w.u32(m.last_tile_id);
          w.u16(m.next_port);
          w.zeros(2);
          w.string(m.next_host);
          return w.take();
        } else if constexpr (std::is_same_v<T, ForwardReady>) {
          PayloadWriter w(kForwardReadyFixedBytes + m.reason.size());
          w.u64(m.run_token);
          w.u8(m.linked ? 1 : 0);
          w.zeros(7);
          w.string(m.reason);
          return w.take();
        } else if constexpr (std::is_same_v<T, Stored>) {
          PayloadWriter w(kStoredPayloadBytes);
          w.u64(m.run_token);
          w.u32(m.tile_id);
          w.zeros(4);
          return w.take();
        } else if constexpr (std::is_same_v<T, SendTile>) {
          PayloadWriter w(kSendTileFixedBytes + m.host.size());
          w.u64(m.run_token);
          w.u32(m.tile_id);
          w.u16(m.port);
          w.zeros(2);
          w.string(m.host);
          return w.take();
        } else {
          PayloadWriter w(kSentFixedBytes + m.reason.size());
          w.u64(m.run_token);
          w.u32(m.tile_id);
          w.u8(m.delivered ? 1 : 0);
          w.zeros(3);
          w.string(m.reason);
          return w.take();
        }
      },
      message);
}

Result<ForwardMessage> decode_forward_payload(uint16_t type, std::span<const std::byte> payload, const Limits& limits) {
  switch (type) {
    case static_cast<uint16_t>(MessageType::kForwardSetup): return decode_setup(payload, limits);
    case static_cast<uint16_t>(MessageType::kForwardReady): return decode_ready(payload, limits);
    case static_cast<uint16_t>(MessageType::kStored): return decode_stored(payload);
    case static_cast<uint16_t>(MessageType::kSendTile): return decode_send_tile(payload, limits);
    case static_cast<uint16_t>(MessageType::kSent): return decode_sent(payload, limits);
    default: return protocol_error(message_type_name(type) + " is not a forwarding message");
  }
}

Status check_forward_payload_length(uint16_t type, uint64_t length, const Limits& limits) {
  uint64_t min = 0;
  uint64_t max = 0;
  switch (type) {
    case static_cast<uint16_t>(MessageType::kForwardSetup):
      min = kForwardSetupFixedBytes;
      max = kForwardSetupFixedBytes + limits.max_string_bytes;
      break;
    case static_cast<uint16_t>(MessageType::kForwardReady):
      min = kForwardReadyFixedBytes;
      max = kForwardReadyFixedBytes + limits.max_string_bytes;
      break;
    case static_cast<uint16_t>(MessageType::kStored): min = max = kStoredPayloadBytes; break;
    case static_cast<uint16_t>(MessageType::kSendTile):
      min = kSendTileFixedBytes;
      max = kSendTileFixedBytes + limits.max_string_bytes;
      break;
    case static_cast<uint16_t>(MessageType::kSent):
      min = kSentFixedBytes;
      max = kSentFixedBytes + limits.max_string_bytes;
      break;
    default: return protocol_error(message_type_name(type) + " is not a forwarding message");
  }
  if (length >= min && length <= max) return Status::ok();
  return protocol_error(message_type_name(type) + ": payload_length " + std::to_string(length) + " out of range " +
                        std::to_string(min) + ".." + std::to_string(max));
}

}  // namespace tessera::gemm
