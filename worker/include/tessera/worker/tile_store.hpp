// TileStore: the worker's memory-capped map from tile id to a row-major matrix of doubles.
//
// Ownership: tiles are shared. The store holds one reference per id; a queued job holds its own
// references, so replacing or releasing an id never frees memory a job is still using. A tile's
// bytes stay charged to the store until its last reference is gone, so the cap bounds what the
// worker really holds. reserve() checks the cap BEFORE allocating, so a peer's claim alone never
// allocates. Thread-safe: every member may be called from any thread.
//
// Freed tile memory is kept for reuse (up to a quarter of the cap, as exact-size buffers), also
// across sessions: a multiply stores and releases same-sized panels over and over, the next run
// of the same size needs the same tiles again, and fresh memory from the system costs a page
// fault and a kernel zero-fill per 4 KiB, paid mostly by the thread reading tiles off the socket, as
// communication CPU. Idle buffers do not count against the cap; they are dropped first when an
// allocation would not fit otherwise, and by drop_idle_buffers(). Scratch that is not worth
// keeping (a GEMM probe's matrices, which no run reuses) is allocated with
// AfterUse::kReturnToSystem and freed at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <map>
#include <string_view>
#include <unordered_map>

#include "tessera/core/status.hpp"

namespace tessera::worker {

// One tile: rows x cols doubles, row-major, leading dimension == cols, 64-byte aligned.
// The data pointer is stable for the tile's lifetime. Whoever runs jobs on it synchronises access
// (the compute pool runs one job at a time).
namespace detail {
// What a tile still needs from its store after the store may be gone: the charge counter and the
// pool its memory goes back to.
struct TileMemory {
  explicit TileMemory(uint64_t idle_cap_bytes) : idle_cap(idle_cap_bytes) {}
  ~TileMemory();
  std::atomic<uint64_t> charged{0};
  const uint64_t idle_cap;
  std::mutex mutex;
  std::multimap<std::size_t, void*> idle;  // bytes -> buffer
  uint64_t idle_bytes = 0;
  // Un-charges `bytes` and keeps the buffer for reuse (within idle_cap) if `keep`, else frees it.
  void give_back(void* data, std::size_t bytes, bool keep);
  // Raises `charged` by `bytes` if the result stays within `limit`; false, nothing changed,
  // otherwise. Atomic against every other charge and release.
  bool try_charge(uint64_t bytes, uint64_t limit);
  void* take(std::size_t bytes);
  void drop_idle();
};
}  // namespace detail

// What happens to a tile's memory once its last reference is gone.
enum class AfterUse {
  kKeepForReuse,    // kept as an idle buffer for the next tile of that size (within a quarter of the cap)
  kReturnToSystem,  // freed at once: one-off scratch that would only sit in resident memory
};

class Tile {
 public:
  ~Tile();
  Tile(const Tile&) = delete;
  Tile& operator=(const Tile&) = delete;

  uint32_t id() const { return id_; }
  uint32_t rows() const { return rows_; }
  uint32_t cols() const { return cols_; }
  std::size_t size() const { return static_cast<std::size_t>(rows_) * cols_; }
  std::size_t bytes() const { return size() * sizeof(double); }
  double* data() { return data_; }
  const double* data() const { return data_; }
  std::span<double> values() { return {data_, size()}; }
  std::span<std::byte> raw_bytes() { return {reinterpret_cast<std::byte*>(data_), bytes()}; }

  // Wall time the compute pool has spent on jobs writing this tile (reported in RESULT). Only
  // job completions touch it, and the compute pool runs them one at a time.
  double compute_seconds() const { return compute_seconds_; }
  void add_compute_seconds(double seconds) { compute_seconds_ += seconds; }

 private:
  friend class TileStore;
  Tile(uint32_t id, uint32_t rows, uint32_t cols, double* data, std::shared_ptr<detail::TileMemory> memory,
       AfterUse after_use);

  uint32_t id_;
  uint32_t rows_;
  uint32_t cols_;
  double* data_;
  AfterUse after_use_;
  double compute_seconds_ = 0.0;
  // Shared with the store so a tile outliving the store (held by a job) still un-charges safely.
  std::shared_ptr<detail::TileMemory> memory_;
};

// Bytes charged to a TileStore's cap that are held in another form than a tile: a graph part
// and its engine's state, which the graph service keeps for a run. The charge is given back when
// the object is destroyed or reset; like a tile it may outlive the store. Movable;
// thread-compatible (one owner).
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(MemoryCharge&& other) noexcept;
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;
  ~MemoryCharge();

  uint64_t bytes() const { return bytes_; }
  // Changes the charge to `bytes`. Growing past the cap fails with kResourceExhausted naming
  // `what`, the charge left as it was; shrinking always succeeds.
  Status resize(uint64_t bytes, std::string_view what);
  // Gives the whole charge back.
  void reset();

 private:
  friend class TileStore;
  MemoryCharge(std::shared_ptr<detail::TileMemory> memory, uint64_t cap_bytes)
      : memory_(std::move(memory)), cap_bytes_(cap_bytes) {}

  std::shared_ptr<detail::TileMemory> memory_;
  uint64_t cap_bytes_ = 0;
  uint64_t bytes_ = 0;
};

class TileStore {
 public:
  // cap_bytes: the most tile memory that may be held at once (tiles in the map, tiles still held
  // by jobs, and scratch matrices).
  explicit TileStore(uint64_t cap_bytes);
  ~TileStore();
  TileStore(const TileStore&) = delete;
  TileStore& operator=(const TileStore&) = delete;

  // Allocates a rows x cols tile under `id`, replacing any tile with that id (the old tile's
  // memory counts as freed if no job still holds it). The data is zero-filled iff `zero_fill`;
  // otherwise the caller must write every element (STORE reads the payload straight into it).
  // Failure: kResourceExhausted when the cap would be exceeded (nothing allocated, any old tile
  // kept), kInvalidArgument for a zero dimension.
  Result<std::shared_ptr<Tile>> reserve(uint32_t id, uint32_t rows, uint32_t cols, bool zero_fill);

  // A rows x cols tile for `id` charged to the cap but not yet in the map: it is filled first
  // and put under its id by publish(), so nothing that looks `id` up meanwhile (a JOB arriving on
  // another connection) can see it half-written. The data is not zero-filled. Failures as
  // reserve(); an old tile under `id` stays listed (and charged) until publish().
  Result<std::shared_ptr<Tile>> reserve_unlisted(uint32_t id, uint32_t rows, uint32_t cols);
  // Puts a tile from reserve_unlisted() under its id, replacing any tile listed there.
  void publish(const std::shared_ptr<Tile>& tile);

  // A tile charged to the cap but not in the map (probe matrices, echo bytes). Zero-filled iff
  // `zero_fill`; otherwise the caller writes it before reading it (an echo is read into it).
  // `after_use`: whether its memory is kept for reuse once freed (see AfterUse).
  Result<std::shared_ptr<Tile>> allocate_scratch(uint32_t rows, uint32_t cols, bool zero_fill = true,
                                                 AfterUse after_use = AfterUse::kKeepForReuse);

  // `bytes` charged to the cap without allocating anything, for memory the caller is about to
  // allocate in its own form (see MemoryCharge). Failure: kResourceExhausted naming `what` when
  // the cap would be exceeded.
  Result<MemoryCharge> charge(uint64_t bytes, std::string_view what);

  // The tile under `id`, or nullptr.
  std::shared_ptr<Tile> find(uint32_t id) const;

  // Drops `id` from the map; its memory is freed once no job holds it. Returns false if absent.
  bool release(uint32_t id);
  // Drops `id` only if it still names `expected` (a job releasing its input must not drop a
  // newer tile stored under the same id meanwhile).
  bool release_if_same(uint32_t id, const Tile* expected);

  // Drops every tile from the map (their memory stays for reuse, within the idle bound).
  void clear();
  // Frees the buffers kept for reuse.
  void drop_idle_buffers();

  uint64_t cap_bytes() const { return cap_bytes_; }
  // Bytes of all live tiles, including those only jobs still hold.
  uint64_t bytes_in_use() const { return memory_->charged.load(); }
  // Bytes of freed tiles kept for reuse.
  uint64_t idle_bytes() const;
  std::size_t tile_count() const;

 private:
  Result<std::shared_ptr<Tile>> allocate_locked(uint32_t id, uint32_t rows, uint32_t cols, bool zero_fill,
                                                uint64_t bytes_freed_by_replace,
                                                AfterUse after_use = AfterUse::kKeepForReuse);

  const uint64_t cap_bytes_;
  std::shared_ptr<detail::TileMemory> memory_;
  mutable std::mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<Tile>> tiles_;
};

}  // namespace tessera::worker
