// The fuzz corpus's seed frames of one family (tests/fuzz/make_corpus.py writes them from the
// documented layouts with its own encoder): each file named PREFIX*.bin, its header decoded and
// its payload apart, for a codec test to decode and re-encode. Test-only; no state.
#pragma once

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/transport/protocol.hpp"

namespace tessera::gemm::testing {

struct CorpusSeed {
  std::string name;
  uint16_t type = 0;
  std::vector<std::byte> payload;
};

inline std::vector<CorpusSeed> corpus_seeds(const std::string& prefix) {
  const std::filesystem::path corpus =
      std::filesystem::path(TESSERA_TEST_INSTANCES) / ".." / "fuzz" / "corpus" / "fuzz_codec";
  std::vector<CorpusSeed> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::ifstream file(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (bytes.size() < transport::kHeaderSize) {
      ADD_FAILURE() << name << " is shorter than a frame header";
      continue;
    }
    std::array<std::byte, transport::kHeaderSize> header_bytes{};
    std::memcpy(header_bytes.data(), bytes.data(), transport::kHeaderSize);
    Result<transport::FrameHeader> header = transport::decode_header(header_bytes, transport::Limits{});
    if (!header) {
      ADD_FAILURE() << name << ": " << header.status().to_string();
      continue;
    }
    CorpusSeed seed{name, header->type, std::vector<std::byte>(bytes.size() - transport::kHeaderSize)};
    std::memcpy(seed.payload.data(), bytes.data() + transport::kHeaderSize, seed.payload.size());
    seeds.push_back(std::move(seed));
  }
  return seeds;
}

}  // namespace tessera::gemm::testing
