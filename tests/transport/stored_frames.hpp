// Frames stored on disk for the codec tests: the broken and valid instances under
// tests/instances/frames/, and the fuzz corpus's seeds (tests/fuzz/corpus/fuzz_codec/, made by
// tests/fuzz/make_corpus.py). Shared by transport's and the GEMM service's codec tests.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace tessera::testing {

inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing " << path;
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// tests/instances/frames/<name>.
inline std::vector<std::byte> read_instance(const std::string& name) {
  return read_bytes(std::filesystem::path(TESSERA_TEST_INSTANCES) / "frames" / name);
}

// The fuzz corpus's seeds made by a codec's own encoder, by file name: frame_* seeds (the
// instances above), graph_* (the graph codec's) and forward_* (the forwarding codec's) left out.
inline std::vector<std::pair<std::string, std::vector<std::byte>>> encoder_corpus_seeds() {
  const std::filesystem::path corpus =
      std::filesystem::path(TESSERA_TEST_INSTANCES) / ".." / "fuzz" / "corpus" / "fuzz_codec";
  std::vector<std::pair<std::string, std::vector<std::byte>>> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("frame_", 0) == 0 || name.rfind("graph_", 0) == 0 || name.rfind("forward_", 0) == 0) continue;
    seeds.emplace_back(name, read_bytes(entry.path()));
  }
  return seeds;
}

}  // namespace tessera::testing
