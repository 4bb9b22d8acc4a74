// BlockKeeper: the worker's block store (block_store.hpp) with the thread that writes to it. A
// STORE the coordinator asked to keep is filed in the tile store as any other and handed here; the
// keeper's thread computes the key of the tile's content and writes it to disk, so the session's
// connection thread goes on reading the next STORE. The tile's memory stays charged to the tile
// store's cap until it is written (the keeper holds a reference), so keeping costs no memory
// beyond the cap. Questions about what is held (holds, load_into) first wait for the writes
// queued before them, so a coordinator asking right after its STOREs finds them.
//
// Ownership: owns the store and the thread; the worker server owns the keeper for its lifetime
// (shared by its sessions: blocks outlive them). Thread-safe: every member from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "tessera/transport/block_key.hpp"
#include "tessera/worker/block_store.hpp"
#include "tessera/worker/tile_store.hpp"

namespace tessera::worker {

class BlockKeeper {
 public:
  // `log` hears a line for each write that failed (a full disk, a read-only folder).
  BlockKeeper(std::unique_ptr<BlockStore> store, std::function<void(const std::string&)> log);
  // Finishes the writes queued, then stops the thread.
  ~BlockKeeper();
  BlockKeeper(const BlockKeeper&) = delete;
  BlockKeeper& operator=(const BlockKeeper&) = delete;

  // Queues `tile` to be kept under the key of its rows, cols and values at the time it is written.
  void keep(std::shared_ptr<const Tile> tile);
  // Whether the store holds `key`, after the writes queued before the call.
  bool holds(const transport::BlockKey& key);
  // The block under `key` read into `out` (BlockStore::load_into), after the writes queued before.
  bool load_into(const transport::BlockKey& key, uint32_t rows, uint32_t cols, std::span<double> out);
  // Returns once every write queued before the call is done (kept or failed).
  void wait_for_writes();

  BlockStoreStats stats() const { return store_->stats(); }
  const BlockStore& store() const { return *store_; }

 private:
  void run();

  const std::unique_ptr<BlockStore> store_;
  const std::function<void(const std::string&)> log_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<const Tile>> queue_;
  uint64_t queued_ = 0;   // keeps ever queued
  uint64_t written_ = 0;  // ... and done
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera::worker
