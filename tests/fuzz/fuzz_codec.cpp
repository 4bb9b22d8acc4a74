// libFuzzer harness for the pure wire codecs (transport/protocol.hpp, and the graph service's
// graph/wire_codec.hpp for the GRAPH_* payloads): the first line of defence against a hostile
// peer, since every frame a worker or coordinator reads goes through one of them.
//
// Input: 32 header bytes and a payload (a whole frame, as in tests/instances/frames/*.bin), or
// anything shorter. Checks, beyond "never crash" (ASan/UBSan) and "never allocate far more than
// the input" (libFuzzer's -malloc_limit_mb, set by scripts/fuzz.sh):
//   - a header that decodes re-encodes to the same 32 bytes;
//   - every type's decoder runs over the payload bytes, not only the header's type, so the
//     layouts are explored even when the header is broken;
//   - a decoded non-bulk message re-encodes to bytes that decode to an equal message, whose
//     encoding is byte-identical (encode o decode is the identity on accepted messages);
//   - the bulk prefix decoders accept exactly the prefixes decode_payload accepts, and an
//     accepted prefix re-encodes to the same bytes;
//   - every graph decoder runs over the payload too; an accepted graph payload lies within its
//     type's length bounds and re-encodes to exactly its own bytes (the graph layouts are
//     canonical: no field the decoder tolerates in two spellings), which decode again; the same for
//     the forwarding codec (transport/forward_codec.hpp).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <concepts>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "tessera/graph/wire_codec.hpp"
#include "tessera/transport/forward_codec.hpp"
#include "tessera/transport/protocol.hpp"

namespace {

using namespace tessera::transport;
using tessera::Result;

// Default limits are what a desktop worker runs with; the harness must hold under them, not under
// a friendlier set.
const Limits kLimits{};

[[noreturn]] void property_failed(const char* what, uint16_t type) {
  std::fprintf(stderr, "fuzz_codec: property violated for %s: %s\n", message_type_name(type).c_str(), what);
  std::abort();
}

bool is_bulk(uint16_t type) {
  return type == static_cast<uint16_t>(MessageType::kStore) || type == static_cast<uint16_t>(MessageType::kResult);
}

// Message has no operator== (STORE and RESULT hold spans); every non-bulk alternative has one.
bool same_message(const Message& a, const Message& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&b](const auto& left) {
        using T = std::decay_t<decltype(left)>;
        if constexpr (std::equality_comparable<T>) {
          return left == std::get<T>(b);
        } else {
          return false;
        }
      },
      a);
}

// decode(encode(m)) == m and encode is stable, for a message decode_payload accepted.
void check_round_trip(uint16_t type, const Message& decoded) {
  if (static_cast<uint16_t>(message_type(decoded)) != type) property_failed("decoded as another type", type);
  if (is_bulk(type)) return;  // bulk payloads are sent as prefix + caller memory; checked below
  const std::vector<std::byte> encoded = encode_payload(decoded);
  Result<Message> again = decode_payload(type, encoded, kLimits);
  if (!again) {
    std::fprintf(stderr, "re-decode error: %s\n", again.status().message().c_str());
    property_failed("re-encoded payload does not decode", type);
  }
  // Compared by encoding as well as by value: values alone would miss a field the encoder drops,
  // bytes alone would miss one the decoder mangles.
  if (!same_message(*again, decoded)) property_failed("re-decoded message differs", type);
  if (encode_payload(*again) != encoded) property_failed("encoding is not stable", type);
}

void check_bulk_prefixes(std::span<const std::byte> payload, uint64_t payload_length) {
  if (payload.size() >= kTilePrefixSize) {
    const auto prefix = payload.first<kTilePrefixSize>();
    Result<TilePrefix> tile = decode_store_prefix(prefix, payload_length, kLimits);
    if (tile) {
      const auto encoded = encode_store_prefix(*tile);
      if (std::memcmp(encoded.data(), prefix.data(), kTilePrefixSize) != 0) {
        property_failed("store prefix does not re-encode to its bytes", static_cast<uint16_t>(MessageType::kStore));
      }
      if (store_payload_bytes(*tile) != payload_length) {
        property_failed("store prefix accepted for another length", static_cast<uint16_t>(MessageType::kStore));
      }
    }
  }
  if (payload.size() >= kResultPrefixSize) {
    const auto prefix = payload.first<kResultPrefixSize>();
    Result<ResultPrefix> result = decode_result_prefix(prefix, payload_length, kLimits);
    if (result) {
      const auto encoded = encode_result_prefix(result->job_id, result->compute_seconds, result->tile);
      if (std::memcmp(encoded.data(), prefix.data(), kResultPrefixSize) != 0) {
        property_failed("result prefix does not re-encode to its bytes", static_cast<uint16_t>(MessageType::kResult));
      }
      if (result_payload_bytes(result->tile) != payload_length) {
        property_failed("result prefix accepted for another length", static_cast<uint16_t>(MessageType::kResult));
      }
    }
  }
}

// decode_graph_payload over every graph type (and its neighbours, which must be refused).
void check_graph_payloads(std::span<const std::byte> payload) {
  using tessera::graph::decode_graph_payload;
  using tessera::graph::GraphMessage;
  for (uint16_t type = kFirstGraphMessageType - 1; type <= kLastMessageType + 1; ++type) {
    Result<GraphMessage> message = decode_graph_payload(type, payload, kLimits);
    if (!message) continue;
    if (!is_graph_message(type)) property_failed("graph codec accepted another type", type);
    if (static_cast<uint16_t>(tessera::graph::graph_message_type(*message)) != type) {
      property_failed("graph payload decoded as another type", type);
    }
    if (!tessera::graph::check_graph_payload_length(type, payload.size(), kLimits).is_ok()) {
      property_failed("graph payload accepted outside its length bounds", type);
    }
    const std::vector<std::byte> encoded = tessera::graph::encode_graph_payload(*message);
    if (encoded.size() != payload.size() || !std::equal(encoded.begin(), encoded.end(), payload.begin())) {
      property_failed("graph payload does not re-encode to its own bytes", type);
    }
    if (!decode_graph_payload(type, encoded, kLimits)) property_failed("re-encoded graph payload does not decode", type);
  }
}

// decode_forward_payload over every forwarding type and its neighbours, with the graph codec's
// properties: only its types, within their length bounds, re-encoding to its own bytes.
void check_forward_payloads(std::span<const std::byte> payload) {
  for (uint16_t type = kFirstForwardMessageType - 1; type <= kLastMessageType + 1; ++type) {
    Result<ForwardMessage> message = decode_forward_payload(type, payload, kLimits);
    if (!message) continue;
    if (!is_forward_message(type)) property_failed("forward codec accepted another type", type);
    if (static_cast<uint16_t>(forward_message_type(*message)) != type) {
      property_failed("forward payload decoded as another type", type);
    }
    if (!check_forward_payload_length(type, payload.size(), kLimits).is_ok()) {
      property_failed("forward payload accepted outside its length bounds", type);
    }
    const std::vector<std::byte> encoded = encode_forward_payload(*message);
    if (encoded.size() != payload.size() || !std::equal(encoded.begin(), encoded.end(), payload.begin())) {
      property_failed("forward payload does not re-encode to its own bytes", type);
    }
  }
}

// HELD, read by the client's handshake alone: exactly its length, re-encoding to its own bytes.
void check_held(std::span<const std::byte> payload) {
  Result<Held> held = decode_held(payload);
  if (!held) return;
  if (payload.size() != kHeldPayloadBytes) property_failed("HELD accepted at another length", static_cast<uint16_t>(MessageType::kHeld));
  const std::vector<std::byte> encoded = encode_held(*held);
  if (!std::equal(encoded.begin(), encoded.end(), payload.begin(), payload.end())) {
    property_failed("HELD does not re-encode to its own bytes", static_cast<uint16_t>(MessageType::kHeld));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  std::span<const std::byte> payload(bytes, size);
  uint64_t claimed_length = size;
  if (size >= kHeaderSize) {
    const std::span<const std::byte, kHeaderSize> header_bytes(bytes, kHeaderSize);
    (void)foreign_protocol_version(header_bytes);
    Result<FrameHeader> header = decode_header(header_bytes, kLimits);
    if (header) {
      const auto encoded = encode_header(*header);
      if (std::memcmp(encoded.data(), bytes, kHeaderSize) != 0) property_failed("header does not re-encode", header->type);
      claimed_length = header->payload_length;
    }
    payload = payload.subspan(kHeaderSize);
  }

  // A copy in operator new's memory: decode_payload views bulk data in place and requires the
  // alignment FrameConnection's buffers have; libFuzzer's own buffer promises none.
  const std::vector<std::byte> aligned(payload.begin(), payload.end());
  for (uint16_t type = 0; type <= kLastMessageType + 1; ++type) {
    Result<Message> message = decode_payload(type, aligned, kLimits);
    if (message) {
      if (type < 1 || type > kLastMessageType) property_failed("unknown type accepted", type);
      check_round_trip(type, *message);
    }
  }
  check_bulk_prefixes(aligned, aligned.size());
  check_graph_payloads(aligned);
  check_forward_payloads(aligned);
  check_held(aligned);
  if (claimed_length != aligned.size()) check_bulk_prefixes(aligned, claimed_length);
  return 0;
}
