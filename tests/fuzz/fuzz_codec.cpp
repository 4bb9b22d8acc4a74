// libFuzzer harness for the pure wire codecs: transport's session codec (transport/protocol.hpp),
// the GEMM service's (gemm/codec.hpp, and gemm/forward_codec.hpp for the forwarding messages) and
// the graph service's (graph/wire_codec.hpp): the first line of defence against a hostile peer,
// since every frame a worker or coordinator reads goes through one of them.
//
// Input: 32 header bytes and a payload (a whole frame, as in tests/instances/frames/*.bin), or
// anything shorter. Checks, beyond "never crash" (ASan/UBSan) and "never allocate far more than
// the input" (libFuzzer's -malloc_limit_mb, set by scripts/fuzz.sh):
//   - a header that decodes re-encodes to the same 32 bytes;
//   - every codec's decoder runs over the payload bytes for every type, not only the header's, so
//     the layouts are explored even when the header is broken; each accepts its own types only;
//   - a decoded session or non-bulk GEMM message re-encodes to bytes that decode to an equal
//     message, whose encoding is byte-identical (encode o decode is the identity on accepted
//     messages); an accepted GEMM payload lies within its type's length bounds
//     (check_gemm_payload_length), and an accepted STORE / RESULT is its prefix and data again;
//   - the bulk prefix decoders accept exactly the prefixes decode_gemm_payload accepts, and an
//     accepted prefix re-encodes to the same bytes;
//   - every graph decoder runs over the payload too; an accepted graph payload lies within its
//     type's length bounds and re-encodes to exactly its own bytes (the graph layouts are
//     canonical: no field the decoder tolerates in two spellings), which decode again; the same for
//     the forwarding codec (gemm/forward_codec.hpp) and the block store's (gemm/block_codec.hpp).
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "tessera/gemm/codec.hpp"
#include "tessera/gemm/block_codec.hpp"
#include "tessera/gemm/forward_codec.hpp"
#include "tessera/graph/wire_codec.hpp"
#include "tessera/transport/protocol.hpp"

namespace {

using namespace tessera::transport;
namespace gemm = tessera::gemm;
using tessera::Result;

// Default limits are what a desktop worker runs with; the harness must hold under them, not under
// a friendlier set.
const Limits kLimits{};
const gemm::Limits kGemmLimits = gemm::limits_for(kLimits);

[[noreturn]] void property_failed(const char* what, uint16_t type) {
  std::fprintf(stderr, "fuzz_codec: property violated for %s: %s\n", message_type_name(type).c_str(), what);
  std::abort();
}

// The session's messages: decode(encode(m)) == m and encode is stable, for a message
// decode_payload accepted.
void check_session_round_trip(uint16_t type, const Message& decoded) {
  if (!is_session_message(type)) property_failed("session codec accepted another type", type);
  if (static_cast<uint16_t>(message_type(decoded)) != type) property_failed("decoded as another type", type);
  const std::vector<std::byte> encoded = encode_payload(decoded);
  Result<Message> again = decode_payload(type, encoded, kLimits);
  if (!again) {
    std::fprintf(stderr, "re-decode error: %s\n", again.status().message().c_str());
    property_failed("re-encoded payload does not decode", type);
  }
  // Compared by encoding as well as by value: values alone would miss a field the encoder drops,
  // bytes alone would miss one the decoder mangles.
  if (!(*again == decoded)) property_failed("re-decoded message differs", type);
  if (encode_payload(*again) != encoded) property_failed("encoding is not stable", type);
}

// GemmMessage has no operator== (STORE and RESULT hold spans); every non-bulk alternative has one.
bool same_gemm_message(const gemm::GemmMessage& a, const gemm::GemmMessage& b) {
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

// The GEMM service's messages, for a payload decode_gemm_payload accepted: only its types, within
// their length bounds; a non-bulk one round trips as above, a bulk one is its prefix and data.
void check_gemm_round_trip(uint16_t type, const gemm::GemmMessage& decoded, std::span<const std::byte> payload) {
  if (!gemm::is_gemm_message(type)) property_failed("GEMM codec accepted another type", type);
  if (static_cast<uint16_t>(gemm::gemm_message_type(decoded)) != type) property_failed("decoded as another type", type);
  if (!gemm::check_gemm_payload_length(type, payload.size(), kGemmLimits).is_ok()) {
    property_failed("GEMM payload accepted outside its length bounds", type);
  }
  if (const auto* store = std::get_if<gemm::Store>(&decoded)) {
    const auto prefix = gemm::encode_store_prefix(store->tile);
    if (payload.size() != prefix.size() + store->data.size_bytes() ||
        std::memcmp(payload.data(), prefix.data(), prefix.size()) != 0 ||
        static_cast<const void*>(store->data.data()) != static_cast<const void*>(payload.data() + prefix.size())) {
      property_failed("STORE is not its prefix and its data in place", type);
    }
    return;
  }
  if (const auto* result = std::get_if<gemm::ResultTile>(&decoded)) {
    const auto prefix = gemm::encode_result_prefix(result->job_id, result->compute_seconds, result->tile);
    if (payload.size() != prefix.size() + result->data.size_bytes() ||
        std::memcmp(payload.data(), prefix.data(), prefix.size()) != 0 ||
        static_cast<const void*>(result->data.data()) != static_cast<const void*>(payload.data() + prefix.size())) {
      property_failed("RESULT is not its prefix and its data in place", type);
    }
    return;
  }
  const std::vector<std::byte> encoded = gemm::encode_gemm_payload(decoded);
  Result<gemm::GemmMessage> again = gemm::decode_gemm_payload(type, encoded, kGemmLimits);
  if (!again) {
    std::fprintf(stderr, "re-decode error: %s\n", again.status().message().c_str());
    property_failed("re-encoded payload does not decode", type);
  }
  if (!same_gemm_message(*again, decoded)) property_failed("re-decoded message differs", type);
  if (gemm::encode_gemm_payload(*again) != encoded) property_failed("encoding is not stable", type);
}

void check_bulk_prefixes(std::span<const std::byte> payload, uint64_t payload_length) {
  if (payload.size() >= gemm::kTilePrefixSize) {
    const auto prefix = payload.first<gemm::kTilePrefixSize>();
    Result<gemm::TilePrefix> tile = gemm::decode_store_prefix(prefix, payload_length, kGemmLimits);
    if (tile) {
      const auto encoded = gemm::encode_store_prefix(*tile);
      if (std::memcmp(encoded.data(), prefix.data(), gemm::kTilePrefixSize) != 0) {
        property_failed("store prefix does not re-encode to its bytes", static_cast<uint16_t>(MessageType::kStore));
      }
      if (gemm::store_payload_bytes(*tile) != payload_length) {
        property_failed("store prefix accepted for another length", static_cast<uint16_t>(MessageType::kStore));
      }
    }
  }
  if (payload.size() >= gemm::kResultPrefixSize) {
    const auto prefix = payload.first<gemm::kResultPrefixSize>();
    Result<gemm::ResultPrefix> result = gemm::decode_result_prefix(prefix, payload_length, kGemmLimits);
    if (result) {
      const auto encoded = gemm::encode_result_prefix(result->job_id, result->compute_seconds, result->tile);
      if (std::memcmp(encoded.data(), prefix.data(), gemm::kResultPrefixSize) != 0) {
        property_failed("result prefix does not re-encode to its bytes", static_cast<uint16_t>(MessageType::kResult));
      }
      if (gemm::result_payload_bytes(result->tile) != payload_length) {
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
    Result<gemm::ForwardMessage> message = gemm::decode_forward_payload(type, payload, kGemmLimits);
    if (!message) continue;
    if (!is_forward_message(type)) property_failed("forward codec accepted another type", type);
    if (static_cast<uint16_t>(gemm::forward_message_type(*message)) != type) {
      property_failed("forward payload decoded as another type", type);
    }
    if (!gemm::check_forward_payload_length(type, payload.size(), kGemmLimits).is_ok()) {
      property_failed("forward payload accepted outside its length bounds", type);
    }
    const std::vector<std::byte> encoded = gemm::encode_forward_payload(*message);
    if (encoded.size() != payload.size() || !std::equal(encoded.begin(), encoded.end(), payload.begin())) {
      property_failed("forward payload does not re-encode to its own bytes", type);
    }
  }
}

// decode_block_payload over every block store type and its neighbours, with the same properties.
void check_block_payloads(std::span<const std::byte> payload) {
  for (uint16_t type = tessera::transport::kFirstBlockMessageType - 1; type <= kLastMessageType + 1; ++type) {
    Result<gemm::BlockMessage> message = gemm::decode_block_payload(type, payload, kGemmLimits);
    if (!message) continue;
    if (!tessera::transport::is_block_message(type)) property_failed("block codec accepted another type", type);
    if (static_cast<uint16_t>(gemm::block_message_type(*message)) != type) {
      property_failed("block payload decoded as another type", type);
    }
    if (!gemm::check_block_payload_length(type, payload.size()).is_ok()) {
      property_failed("block payload accepted outside its length bounds", type);
    }
    const std::vector<std::byte> encoded = gemm::encode_block_payload(*message);
    if (encoded.size() != payload.size() || !std::equal(encoded.begin(), encoded.end(), payload.begin())) {
      property_failed("block payload does not re-encode to its own bytes", type);
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

  // A copy in operator new's memory: decode_gemm_payload views bulk data in place and requires the
  // alignment FrameConnection's buffers have; libFuzzer's own buffer promises none.
  const std::vector<std::byte> aligned(payload.begin(), payload.end());
  for (uint16_t type = 0; type <= kLastMessageType + 1; ++type) {
    Result<Message> message = decode_payload(type, aligned, kLimits);
    if (message) {
      if (type < 1 || type > kLastMessageType) property_failed("unknown type accepted", type);
      check_session_round_trip(type, *message);
    }
    Result<gemm::GemmMessage> gemm_message = gemm::decode_gemm_payload(type, aligned, kGemmLimits);
    if (gemm_message) {
      if (type < 1 || type > kLastMessageType) property_failed("unknown type accepted", type);
      check_gemm_round_trip(type, *gemm_message, aligned);
    }
  }
  check_bulk_prefixes(aligned, aligned.size());
  check_graph_payloads(aligned);
  check_forward_payloads(aligned);
  check_block_payloads(aligned);
  check_held(aligned);
  if (claimed_length != aligned.size()) check_bulk_prefixes(aligned, claimed_length);
  return 0;
}
