#include "resident_memory.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/files.hpp"

namespace tessera::balance::session {

namespace {

using json = nlohmann::json;
constexpr int kVersion = 1;
constexpr uint64_t kMaxMemoryBytes = uint64_t{64} << 20;  // a layout of a million pieces is far beyond any matrix's

// A short, stable name for the node set: the block key of its names, joined.
std::string node_set_digest(const std::vector<std::string>& nodes) {
  std::string joined;
  for (const std::string& node : nodes) joined += node + '\n';
  std::vector<double> packed((joined.size() + sizeof(double) - 1) / sizeof(double), 0.0);
  std::memcpy(packed.data(), joined.data(), joined.size());
  const auto key = transport::block_key(1, static_cast<uint32_t>(packed.size()), packed);
  return key ? transport::to_hex(*key).substr(0, 16) : "nodes";
}

}  // namespace

transport::BlockKey matrix_fingerprint(linalg::MatrixView a) {
  // Every 64th row read in place (the rows 64 apart are a block of stride 64 ld); the shape is
  // in the key through the sampled block's and the matrix's own sizes.
  constexpr uint64_t kEvery = 64;
  const uint64_t sampled_rows = (a.rows + kEvery - 1) / kEvery;
  if (a.rows == 0 || a.cols == 0 || sampled_rows > UINT32_MAX || a.cols > UINT32_MAX) return transport::BlockKey{};
  const auto sampled = transport::block_key(static_cast<uint32_t>(sampled_rows), static_cast<uint32_t>(a.cols), a.data,
                                            kEvery * a.ld);
  if (!sampled) return transport::BlockKey{};
  std::array<double, 6> named{static_cast<double>(a.rows), static_cast<double>(a.cols)};
  std::memcpy(named.data() + 2, sampled->digest.data(), sampled->digest.size());
  const auto key = transport::block_key(1, static_cast<uint32_t>(named.size()), named);
  return key ? *key : transport::BlockKey{};
}

std::string resident_memory_path(const std::string& dir, const std::string& cluster, const transport::BlockKey& matrix,
                                 uint64_t columns, const std::vector<std::string>& nodes) {
  if (dir.empty()) return "";
  std::string safe_cluster = cluster.empty() ? std::string("cluster") : cluster;
  for (char& c : safe_cluster) {
    if (c == '/' || c == '\\' || c == '\0') c = '_';
  }
  return fmt::format("{}/{}/{}-c{}-{}.json", dir, safe_cluster, transport::to_hex(matrix).substr(0, 32), columns,
                     node_set_digest(nodes));
}

std::optional<ResidentMemory> read_resident_memory(const std::string& path, uint64_t rows, uint64_t cols,
                                                   uint64_t columns, const std::vector<std::string>& nodes) {
  if (path.empty()) return std::nullopt;
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error || size > kMaxMemoryBytes) return std::nullopt;
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const json document = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!document.is_object()) return std::nullopt;
  try {
    ResidentMemory memory;
    if (document.at("version").get<int>() != kVersion) return std::nullopt;
    memory.nodes = document.at("nodes").get<std::vector<std::string>>();
    memory.rows = document.at("rows").get<uint64_t>();
    memory.cols = document.at("cols").get<uint64_t>();
    memory.columns = document.at("columns").get<uint64_t>();
    memory.block_rows = document.at("block_rows").get<uint64_t>();
    memory.measured_product_s = document.at("measured_product_s").get<double>();
    for (const json& piece : document.at("pieces")) {
      memory.pieces.push_back({piece.at(0).get<std::string>(), piece.at(1).get<uint64_t>(), piece.at(2).get<uint32_t>()});
    }
    if (memory.nodes != nodes || memory.rows != rows || memory.cols != cols || memory.columns != columns ||
        memory.block_rows == 0) {
      return std::nullopt;
    }
    uint64_t next = 0;
    for (const RememberedPiece& piece : memory.pieces) {
      if (piece.row_begin != next || piece.rows == 0 ||
          std::find(nodes.begin(), nodes.end(), piece.node) == nodes.end()) {
        return std::nullopt;
      }
      next += piece.rows;
    }
    if (next != rows) return std::nullopt;
    return memory;
  } catch (const json::exception&) {
    return std::nullopt;  // a field missing or of the wrong type: no memory
  }
}

Status write_resident_memory(const std::string& path, const ResidentMemory& memory) {
  if (path.empty()) return Status::ok();
  json pieces = json::array();
  for (const RememberedPiece& piece : memory.pieces) pieces.push_back({piece.node, piece.row_begin, piece.rows});
  const json document = {{"version", kVersion},          {"nodes", memory.nodes},
                         {"rows", memory.rows},          {"cols", memory.cols},
                         {"columns", memory.columns},    {"block_rows", memory.block_rows},
                         {"measured_product_s", memory.measured_product_s}, {"pieces", std::move(pieces)}};
  TESSERA_RETURN_IF_ERROR(
      create_private_folder(std::filesystem::path(path).parent_path().string(), "resident placement cache"));
  return write_private_file(path, document.dump() + "\n", PrivateWrite::kReplace, "resident placement memory");
}

}  // namespace tessera::balance::session
