// Valid sample messages of every session type and helpers to build whole frames from them, shared
// by the codec, fuzz and connection tests (the GEMM service's samples are tests/gemm/gemm_samples.hpp,
// which builds on the helpers here).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "tessera/transport/protocol.hpp"

namespace tessera::transport::testing {

inline std::array<uint8_t, 32> counting_bytes(uint8_t start) {
  std::array<uint8_t, 32> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(start + i);
  return bytes;
}

// One or more valid values of every session message type.
inline std::vector<Message> sample_messages() {
  Hello hello;
  hello.worker_version = "0.1.0";
  hello.arch = "aarch64";
  hello.hostname = "pi-\xcf\x80-3";  // UTF-8 survives unchanged
  hello.cores = 4;
  hello.threads = 3;
  hello.memory_bytes = 8ull << 30;
  hello.tile_memory_cap = 6ull << 30;
  hello.capabilities = kCapabilityGemm | (1ull << 40);  // a bit this build has no name for
  hello.challenge = counting_bytes(1);

  Hello loaded_hello = hello;
  loaded_hello.load_milli = 2750;  // 2.75

  Auth auth{counting_bytes(40), counting_bytes(80)};
  AuthOk auth_ok{counting_bytes(120)};

  Error error{ErrorCode::kNoSuchTile, "tile 77 is not in the store"};
  Error empty_error{ErrorCode::kBusy, ""};

  return {hello, auth, auth_ok, error, empty_error, Bye{}, loaded_hello};
}

// Every session message compares by value.
inline bool same_message(const Message& a, const Message& b) { return a == b; }

inline std::vector<std::byte> concat(std::initializer_list<std::span<const std::byte>> parts) {
  std::vector<std::byte> out;
  for (std::span<const std::byte> part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// A sample payload with its type.
struct SamplePayload {
  uint16_t type = 0;
  std::vector<std::byte> payload;
};

inline std::vector<SamplePayload> sample_payloads() {
  std::vector<SamplePayload> out;
  for (const Message& message : sample_messages()) {
    out.push_back({static_cast<uint16_t>(message_type(message)), encode_payload(message)});
  }
  return out;
}

inline std::vector<std::byte> whole_frame(uint16_t type, std::span<const std::byte> payload, uint64_t request_id = 0) {
  FrameHeader header;
  header.type = type;
  header.payload_length = payload.size();
  header.request_id = request_id;
  const auto header_bytes = encode_header(header);
  return concat({header_bytes, payload});
}

inline void put_le(std::vector<std::byte>& bytes, std::size_t offset, uint64_t value, int size) {
  for (int i = 0; i < size; ++i) bytes.at(offset + static_cast<std::size_t>(i)) = static_cast<std::byte>(value >> (8 * i));
}

}  // namespace tessera::transport::testing
