// The worker's store of resident blocks: blocks of doubles named by their content
// (transport/block_key.hpp), kept in memory within a byte bound and, when the worker has a store
// folder, on disk within another, so that a block sent once is not sent again in this session or,
// from disk, in the next one. Both bounds evict the least recently used blocks first.
//
// On disk a block is one file, written to a temporary name and renamed into place, under a
// folder named from the cluster's secret (so a worker started with another secret neither finds
// nor lists them): magic, shape, key, HMAC-SHA256(secret, key | shape), then the values. A block
// read back is used only when every part checks: its size, magic, shape, the key it is filed
// under, the MAC, and the key recomputed from its values. A bad, partial or foreign file is
// deleted and counted, and the block is a miss (the coordinator sends it again); it is never
// used. A write that fails (a full disk, a read-only folder) leaves the block in memory only and
// is reported to the caller, who logs it: the run goes on by sending.
//
// The store allocates only for blocks put into it (their size is the caller's, checked against
// the memory bound first); a file claims nothing the store believes before it has checked the
// file's size against the shape. Thread-safe: one mutex; reads of disk files happen under it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/block_key.hpp"

namespace tessera::worker {

struct Block {
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<double> values;  // rows x cols, row-major
  uint64_t bytes() const { return uint64_t{rows} * cols * sizeof(double); }
};

struct BlockStoreOptions {
  // The in-memory bound; a block larger than it is refused. 0 with a folder: disk only (the page
  // cache is the memory tier; a worker's blocks live in its tile store while a session uses them).
  uint64_t memory_bytes = 0;
  std::filesystem::path dir;  // empty: memory only
  uint64_t disk_bytes = 0;    // the on-disk bound (with `dir`)
  std::string secret;         // the cluster's secret: names the folder and keys the files' MACs
};

struct BlockStoreStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t dropped = 0;        // disk files found bad, partial or foreign, and deleted
  uint64_t write_failures = 0;
  uint64_t evicted = 0;        // blocks evicted from memory or disk to make room
  uint64_t memory_bytes = 0;   // held now
  uint64_t disk_bytes = 0;
};

class BlockStore {
 public:
  // Opens (creating) the store's folder under options.dir and indexes the block files there
  // (names and sizes only; each is checked when read). Fails naming the folder when it cannot be
  // made or read.
  static Result<std::unique_ptr<BlockStore>> open(BlockStoreOptions options);

  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  // Files `block` under `key` (the caller computed key = block_key(block)); kept in memory,
  // evicting others, and written to disk when there is a folder. kResourceExhausted when the
  // block alone exceeds the memory bound. A failed disk write is not a failure of put: the block
  // is held in memory and the returned note (empty when none) says what went wrong.
  Result<std::string> put(const transport::BlockKey& key, Block block);

  // The block, from memory or else from disk (checked as above, then held in memory too); null
  // when the store does not hold it. A hit makes it the most recently used.
  std::shared_ptr<const Block> get(const transport::BlockKey& key);

  // Writes rows x cols `values` to disk under `key` only (not to the memory tier): what a worker
  // does with a STORE it was asked to keep, from the tile's own memory. Empty when kept or already
  // there; else what went wrong (no folder, larger than the bound, the disk full), for the log.
  std::string keep_on_disk(const transport::BlockKey& key, uint32_t rows, uint32_t cols,
                           std::span<const double> values);

  // Reads the block under `key` into `out` (from memory, or from disk and checked as above) and
  // says whether it did: false when it is not held, is not rows x cols, or its file is bad (then
  // deleted). `out` is the caller's (a tile charged to its cap): nothing is allocated here.
  bool load_into(const transport::BlockKey& key, uint32_t rows, uint32_t cols, std::span<double> out);

  // Whether get would find it: in memory, or a file of the right size is on disk (checked only
  // when read). What a coordinator asking "which do you hold?" is told.
  bool holds(const transport::BlockKey& key) const;

  BlockStoreStats stats() const;
  // The folder the files are in (options.dir / the secret's name); empty without one.
  const std::filesystem::path& folder() const { return folder_; }

 private:
  explicit BlockStore(BlockStoreOptions options);
  struct MemoryEntry {
    std::shared_ptr<const Block> block;
    std::list<transport::BlockKey>::iterator use;
  };
  struct DiskEntry {
    uint64_t bytes = 0;
    std::list<transport::BlockKey>::iterator use;
  };
  std::filesystem::path file_of(const transport::BlockKey& key) const;
  void hold_in_memory(const transport::BlockKey& key, std::shared_ptr<const Block> block);
  std::optional<std::string> write_file(const transport::BlockKey& key, uint32_t rows, uint32_t cols,
                                        std::span<const double> values);
  struct FileShape {
    uint32_t rows = 0;
    uint32_t cols = 0;
  };
  // The file's header checked (size, magic, key, MAC), `in` left at its values; nullopt (and the
  // file deleted when it exists but is bad) otherwise.
  std::optional<FileShape> open_file(const transport::BlockKey& key, std::ifstream& in);
  // The values read into `out` and checked against the key; false (the file deleted) otherwise.
  bool read_values(const transport::BlockKey& key, const FileShape& shape, std::ifstream& in, std::span<double> out);
  std::nullopt_t drop_bad(const transport::BlockKey& key);
  std::shared_ptr<const Block> read_file(const transport::BlockKey& key);
  void drop_file(const transport::BlockKey& key);

  const BlockStoreOptions options_;
  std::filesystem::path folder_;
  mutable std::mutex mutex_;
  std::map<transport::BlockKey, MemoryEntry> memory_;
  std::list<transport::BlockKey> memory_use_;  // most recent first
  std::map<transport::BlockKey, DiskEntry> disk_;
  std::list<transport::BlockKey> disk_use_;
  BlockStoreStats stats_;
};

}  // namespace tessera::worker
