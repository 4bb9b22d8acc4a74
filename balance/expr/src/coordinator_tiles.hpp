// The tiles the DAG runner's coordinator side sends (dag_run.cpp): input tiles packed from the
// caller's matrices once, however many nodes receive them, and tiles the nodes computed, kept for
// the nodes that fetch them later. Internal to the expr library. Thread-safe (see the class).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera::balance::expr {

// A tile as the coordinator sends it: its values, row-major, and their CRC32C, both computed once
// however many nodes receive it.
struct HeldTile {
  std::vector<double> values;
  uint32_t crc = 0;
  std::once_flag packed;  // input tiles: filled once, by whichever sender needs the tile first
};

// Tiles the coordinator sends: input tiles, packed from the caller's matrices the first time a node
// needs them, and tiles the nodes computed, kept for the nodes that fetch them later.
// Thread-safe; a tile's memory stays put once filed (the map holds it by pointer).
class CoordinatorTiles {
 public:
  void put(uint64_t key, std::vector<double> values, uint32_t crc) {
    {
      std::lock_guard lock(mutex_);
      auto tile = std::make_unique<HeldTile>();
      tile->values = std::move(values);
      tile->crc = crc;
      tiles_[key] = std::move(tile);
    }
    arrived_.notify_all();
  }
  // The input tile under `key`, made by `pack` if it is not held yet. The packing (a copy and a
  // CRC pass) runs outside the map's lock, so the nodes' senders pack different tiles at once;
  // one that needs the tile another is packing waits for it.
  template <typename Pack>
  const HeldTile* get_or_pack(uint64_t key, Pack&& pack) {
    HeldTile* tile = slot(key);
    std::call_once(tile->packed, [&] {
      tile->values = pack();
      tile->crc = gemm::tile_crc32c(tile->values);
    });
    return tile;
  }
  // The CRC32C of an input tile sent straight from the caller's matrix (no values held),
  // computed by `checksum` once however many nodes receive the tile.
  template <typename Checksum>
  uint32_t crc_of(uint64_t key, Checksum&& checksum) {
    HeldTile* tile = slot(key);
    std::call_once(tile->packed, [&] { tile->crc = checksum(); });
    return tile->crc;
  }
  // The tile under `key` once it is here; nullptr when `stop` is set first.
  const HeldTile* wait(uint64_t key, const std::atomic<bool>& stop) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (const auto found = tiles_.find(key); found != tiles_.end() && found->second) return found->second.get();
      if (stop.load()) return nullptr;
      arrived_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  void wake_all() { arrived_.notify_all(); }

 private:
  HeldTile* slot(uint64_t key) {
    std::lock_guard lock(mutex_);
    auto& slot = tiles_[key];
    if (!slot) slot = std::make_unique<HeldTile>();
    return slot.get();
  }

  std::mutex mutex_;
  std::condition_variable arrived_;
  std::unordered_map<uint64_t, std::unique_ptr<HeldTile>> tiles_;
};

}  // namespace tessera::balance::expr
