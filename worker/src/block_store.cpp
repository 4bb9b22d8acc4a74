#include "tessera/worker/block_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <span>
#include <array>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>

#include <fmt/core.h>

#include "tessera/transport/auth.hpp"

namespace tessera::worker {

namespace fs = std::filesystem;
namespace tp = tessera::transport;

namespace {

constexpr std::array<char, 8> kMagic = {'T', 'S', 'B', 'L', 'K', '0', '0', '1'};
// magic | rows u32 | cols u32 | key (32) | MAC (32), then the values.
constexpr std::size_t kFileHeaderBytes = kMagic.size() + 4 + 4 + 32 + tp::kMacSize;
constexpr std::string_view kSuffix = ".blk";

// What proves a file was written by a holder of the secret, for this key and shape.
tp::Mac file_mac(const std::string& secret, const tp::BlockKey& key, uint32_t rows, uint32_t cols) {
  std::string data = "tessera-block-file-v1";
  data.append(reinterpret_cast<const char*>(key.digest.data()), key.digest.size());
  data.append(reinterpret_cast<const char*>(&rows), 4);
  data.append(reinterpret_cast<const char*>(&cols), 4);
  return tp::hmac_sha256(secret, data);
}

// The folder of one secret's blocks: a name another secret cannot guess, and that says nothing
// of this one.
std::string secret_folder_name(const std::string& secret) {
  const tp::Mac mac = tp::hmac_sha256(secret, "tessera-block-store-v1");
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string name = "blocks-";
  for (std::size_t i = 0; i < 8; ++i) {
    name += kDigits[mac[i] >> 4];
    name += kDigits[mac[i] & 0xF];
  }
  return name;
}

uint64_t file_bytes_for(uint64_t block_bytes) { return kFileHeaderBytes + block_bytes; }

}  // namespace

BlockStore::BlockStore(BlockStoreOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<BlockStore>> BlockStore::open(BlockStoreOptions options) {
  std::unique_ptr<BlockStore> store(new BlockStore(std::move(options)));
  if (store->options_.dir.empty()) return store;
  store->folder_ = store->options_.dir / secret_folder_name(store->options_.secret);
  std::error_code error;
  fs::create_directories(store->folder_, error);
  if (error) {
    return io_error(fmt::format("cannot create the block store {}: {}", store->folder_.string(), error.message()));
  }
  fs::permissions(store->folder_, fs::perms::owner_all, fs::perm_options::replace, error);
  // Index what is there, oldest first by modification time, so eviction starts with it.
  std::vector<std::pair<fs::file_time_type, std::pair<tp::BlockKey, uint64_t>>> found;
  for (fs::directory_iterator it(store->folder_, error), end; !error && it != end; it.increment(error)) {
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    std::error_code entry_error;
    if (name.size() != 64 + kSuffix.size() || !name.ends_with(kSuffix) || !it->is_regular_file(entry_error)) {
      // A temporary file left by a write that never finished, or something that is not ours.
      if (name.starts_with(".tmp-")) fs::remove(path, entry_error);
      continue;
    }
    Result<tp::BlockKey> key = tp::block_key_from_hex(name.substr(0, 64));
    if (!key) continue;
    const uint64_t size = it->file_size(entry_error);
    if (entry_error) continue;
    found.push_back({it->last_write_time(entry_error), {*key, size}});
  }
  if (error) return io_error(fmt::format("cannot read the block store {}: {}", store->folder_.string(), error.message()));
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [time, entry] : found) {
    const auto& [key, size] = entry;
    store->disk_use_.push_back(key);
    store->disk_.emplace(key, DiskEntry{size, std::prev(store->disk_use_.end())});
    store->stats_.disk_bytes += size;
  }
  return store;
}

fs::path BlockStore::file_of(const tp::BlockKey& key) const {
  return folder_ / (tp::to_hex(key) + std::string(kSuffix));
}

Result<std::string> BlockStore::put(const tp::BlockKey& key, Block block) {
  if (block.values.size() != uint64_t{block.rows} * block.cols) {
    return invalid_argument(fmt::format("a {}x{} block holds {} values", block.rows, block.cols, block.values.size()));
  }
  if (block.bytes() > options_.memory_bytes && (folder_.empty() || options_.memory_bytes > 0)) {
    return resource_exhausted(fmt::format("a {}x{} block ({} bytes) exceeds the block store's memory bound of {} bytes",
                                          block.rows, block.cols, block.bytes(), options_.memory_bytes));
  }
  auto shared = std::make_shared<const Block>(std::move(block));
  std::lock_guard lock(mutex_);
  if (options_.memory_bytes > 0) hold_in_memory(key, shared);
  if (folder_.empty() || disk_.count(key) != 0) return std::string();
  std::optional<std::string> failed = write_file(key, shared->rows, shared->cols, shared->values);
  if (failed) {
    ++stats_.write_failures;
    return *failed;
  }
  return std::string();
}

void BlockStore::hold_in_memory(const tp::BlockKey& key, std::shared_ptr<const Block> block) {
  if (auto found = memory_.find(key); found != memory_.end()) {
    memory_use_.splice(memory_use_.begin(), memory_use_, found->second.use);
    return;
  }
  const uint64_t bytes = block->bytes();
  while (stats_.memory_bytes + bytes > options_.memory_bytes && !memory_use_.empty()) {
    const tp::BlockKey oldest = memory_use_.back();
    memory_use_.pop_back();
    stats_.memory_bytes -= memory_.at(oldest).block->bytes();
    memory_.erase(oldest);
    ++stats_.evicted;
  }
  memory_use_.push_front(key);
  memory_.emplace(key, MemoryEntry{std::move(block), memory_use_.begin()});
  stats_.memory_bytes += bytes;
}

std::optional<std::string> BlockStore::write_file(const tp::BlockKey& key, uint32_t rows, uint32_t cols,
                                                  std::span<const double> values) {
  const uint64_t bytes = file_bytes_for(values.size_bytes());
  if (bytes > options_.disk_bytes) {
    return fmt::format("block {} ({} bytes) not kept on disk: larger than the store's bound of {} bytes",
                       tp::to_hex(key).substr(0, 12), bytes, options_.disk_bytes);
  }
  while (stats_.disk_bytes + bytes > options_.disk_bytes && !disk_use_.empty()) {
    drop_file(disk_use_.back());
    ++stats_.evicted;
  }
  std::array<char, kFileHeaderBytes> header{};
  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  std::memcpy(header.data() + 8, &rows, 4);
  std::memcpy(header.data() + 12, &cols, 4);
  std::memcpy(header.data() + 16, key.digest.data(), 32);
  const tp::Mac mac = file_mac(options_.secret, key, rows, cols);
  std::memcpy(header.data() + 48, mac.data(), mac.size());
  const fs::path final_path = file_of(key);
  const fs::path temporary = folder_ / fmt::format(".tmp-{}-{}", ::getpid(), tp::to_hex(key).substr(0, 16));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size_bytes()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      return fmt::format("block {} not kept on disk: writing {} failed (disk full or not writable?)",
                         tp::to_hex(key).substr(0, 12), folder_.string());
    }
  }
  std::error_code error;
  fs::rename(temporary, final_path, error);
  if (error) {
    fs::remove(temporary, error);
    return fmt::format("block {} not kept on disk: {}", tp::to_hex(key).substr(0, 12), error.message());
  }
  disk_use_.push_front(key);
  disk_.emplace(key, DiskEntry{bytes, disk_use_.begin()});
  stats_.disk_bytes += bytes;
  return std::nullopt;
}

void BlockStore::drop_file(const tp::BlockKey& key) {
  auto found = disk_.find(key);
  if (found == disk_.end()) return;
  std::error_code ignored;
  fs::remove(file_of(key), ignored);
  stats_.disk_bytes -= found->second.bytes;
  disk_use_.erase(found->second.use);
  disk_.erase(found);
}

std::optional<BlockStore::FileShape> BlockStore::open_file(const tp::BlockKey& key, std::ifstream& in) {
  const auto found = disk_.find(key);
  if (found == disk_.end()) return std::nullopt;
  const uint64_t size = found->second.bytes;
  if (size < kFileHeaderBytes) return drop_bad(key);
  in.open(file_of(key), std::ios::binary);
  std::array<char, kFileHeaderBytes> header{};
  if (!in.read(header.data(), static_cast<std::streamsize>(header.size()))) return drop_bad(key);
  FileShape shape;
  std::memcpy(&shape.rows, header.data() + 8, 4);
  std::memcpy(&shape.cols, header.data() + 12, 4);
  tp::BlockKey filed;
  std::memcpy(filed.digest.data(), header.data() + 16, 32);
  tp::Mac mac{};
  std::memcpy(mac.data(), header.data() + 48, mac.size());
  // The size must match the shape before a byte of values is allocated.
  const uint64_t values = uint64_t{shape.rows} * shape.cols;
  if (std::memcmp(header.data(), kMagic.data(), kMagic.size()) != 0 || filed != key ||
      values > (UINT64_MAX - kFileHeaderBytes) / sizeof(double) || size != file_bytes_for(values * sizeof(double)) ||
      !tp::mac_equal(mac, file_mac(options_.secret, key, shape.rows, shape.cols))) {
    return drop_bad(key);
  }
  return shape;
}

std::nullopt_t BlockStore::drop_bad(const tp::BlockKey& key) {
  ++stats_.dropped;
  drop_file(key);
  return std::nullopt;
}

bool BlockStore::read_values(const tp::BlockKey& key, const FileShape& shape, std::ifstream& in, std::span<double> out) {
  // In chunks, each hashed while it is still in cache: one pass over the block's memory, not two.
  constexpr std::size_t kChunkValues = std::size_t{1} << 17;  // 1 MiB
  tp::BlockKeyStream stream(shape.rows, shape.cols);
  for (std::size_t from = 0; from < out.size(); from += kChunkValues) {
    const std::span<double> chunk = out.subspan(from, std::min(kChunkValues, out.size() - from));
    if (!in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size_bytes()))) {
      drop_bad(key);
      return false;
    }
    stream.update(chunk);
  }
  Result<tp::BlockKey> recomputed = stream.finish();
  if (!recomputed || *recomputed != key) {
    drop_bad(key);
    return false;
  }
  const auto found = disk_.find(key);
  disk_use_.splice(disk_use_.begin(), disk_use_, found->second.use);
  return true;
}

std::shared_ptr<const Block> BlockStore::read_file(const tp::BlockKey& key) {
  std::ifstream in;
  const std::optional<FileShape> shape = open_file(key, in);
  if (!shape) return nullptr;
  const uint64_t values = uint64_t{shape->rows} * shape->cols;
  // A sound file of a block larger than memory may hold now (the bound was lowered): not used,
  // and kept for a worker that can.
  if (values * sizeof(double) > options_.memory_bytes) return nullptr;
  auto block = std::make_shared<Block>();
  block->rows = shape->rows;
  block->cols = shape->cols;
  block->values.resize(values);
  if (!read_values(key, *shape, in, block->values)) return nullptr;
  return block;
}

std::string BlockStore::keep_on_disk(const tp::BlockKey& key, uint32_t rows, uint32_t cols,
                                     std::span<const double> values) {
  if (values.size() != uint64_t{rows} * cols) {
    return fmt::format("a {}x{} block holds {} values: not kept", rows, cols, values.size());
  }
  std::lock_guard lock(mutex_);
  if (folder_.empty()) return "the worker has no store folder (--store): block not kept";
  if (auto found = disk_.find(key); found != disk_.end()) {
    disk_use_.splice(disk_use_.begin(), disk_use_, found->second.use);
    return std::string();
  }
  std::optional<std::string> failed = write_file(key, rows, cols, values);
  if (failed) {
    ++stats_.write_failures;
    return *failed;
  }
  return std::string();
}

bool BlockStore::load_into(const tp::BlockKey& key, uint32_t rows, uint32_t cols, std::span<double> out) {
  std::lock_guard lock(mutex_);
  if (auto found = memory_.find(key); found != memory_.end()) {
    const Block& block = *found->second.block;
    if (block.rows != rows || block.cols != cols || out.size() != block.values.size()) {
      ++stats_.misses;
      return false;
    }
    std::copy(block.values.begin(), block.values.end(), out.begin());
    memory_use_.splice(memory_use_.begin(), memory_use_, found->second.use);
    ++stats_.memory_hits;
    return true;
  }
  std::ifstream in;
  const std::optional<FileShape> shape = open_file(key, in);
  // The key names the shape, so a sound file of another shape cannot be; the caller's claim is
  // still checked before a byte is read into its memory.
  if (!shape || shape->rows != rows || shape->cols != cols || out.size() != uint64_t{rows} * cols ||
      !read_values(key, *shape, in, out)) {
    ++stats_.misses;
    return false;
  }
  ++stats_.disk_hits;
  return true;
}

std::shared_ptr<const Block> BlockStore::get(const tp::BlockKey& key) {
  std::lock_guard lock(mutex_);
  if (auto found = memory_.find(key); found != memory_.end()) {
    memory_use_.splice(memory_use_.begin(), memory_use_, found->second.use);
    // A use is a use: the file of a block read from memory is not the next to be evicted either.
    if (auto file = disk_.find(key); file != disk_.end()) disk_use_.splice(disk_use_.begin(), disk_use_, file->second.use);
    ++stats_.memory_hits;
    return found->second.block;
  }
  std::shared_ptr<const Block> block = read_file(key);
  if (!block) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.disk_hits;
  hold_in_memory(key, block);
  return block;
}

bool BlockStore::holds(const tp::BlockKey& key) const {
  std::lock_guard lock(mutex_);
  return memory_.count(key) != 0 || disk_.count(key) != 0;
}

BlockStoreStats BlockStore::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace tessera::worker
