#include "tessera/worker/tile_store.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include <sys/mman.h>

namespace tessera::worker {

namespace {

// A cache line: keeps BLAS's packed loads aligned and strips of different threads off each
// other's lines at tile starts.
constexpr std::align_val_t kTileAlignment{64};

// A large tile is read from end to end by every product over it, and a stream over 4 KiB pages
// runs well below the memory's rate: a 16 MiB tile's vector product ran 25% slower than the same
// rows inside one big array, and as fast once the tile sat whole in 2 MiB pages (numpy's
// allocator asks for them too). With transparent huge pages on "madvise" (Debian's default) a
// buffer gets them only where it asks, before its pages are first touched; so a large tile starts
// on a huge page and asks for every whole one it covers. A refusal changes nothing but speed.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugePageTile = 2 * kHugePage;  // smaller tiles are not worth the alignment

std::align_val_t alignment_for(std::size_t bytes) {
  return bytes >= kHugePageTile ? std::align_val_t{kHugePage} : kTileAlignment;
}

void* allocate_tile(std::size_t bytes) {
  void* memory = ::operator new(bytes, alignment_for(bytes), std::nothrow);
  if (memory != nullptr && bytes >= kHugePageTile) (void)madvise(memory, bytes & ~(kHugePage - 1), MADV_HUGEPAGE);
  return memory;
}

std::string describe(uint32_t id, uint32_t rows, uint32_t cols) {
  return "tile " + std::to_string(id) + " (" + std::to_string(rows) + " x " + std::to_string(cols) + ")";
}

}  // namespace

namespace detail {

TileMemory::~TileMemory() { drop_idle(); }

void TileMemory::give_back(void* data, std::size_t bytes, bool keep) {
  if (keep) {
    std::lock_guard lock(mutex);
    if (idle_bytes + bytes <= idle_cap) {
      idle.emplace(bytes, data);
      idle_bytes += bytes;
      data = nullptr;
    }
  }
  if (data != nullptr) ::operator delete(data, alignment_for(bytes));
  charged.fetch_sub(bytes);
}

bool TileMemory::try_charge(uint64_t bytes, uint64_t limit) {
  uint64_t in_use = charged.load();
  do {
    if (bytes > limit || in_use > limit - bytes) return false;
  } while (!charged.compare_exchange_weak(in_use, in_use + bytes));
  return true;
}

void* TileMemory::take(std::size_t bytes) {
  std::lock_guard lock(mutex);
  auto it = idle.find(bytes);
  if (it == idle.end()) return nullptr;
  void* data = it->second;
  idle.erase(it);
  idle_bytes -= bytes;
  return data;
}

void TileMemory::drop_idle() {
  std::multimap<std::size_t, void*> dropped;
  {
    std::lock_guard lock(mutex);
    dropped.swap(idle);
    idle_bytes = 0;
  }
  for (auto& [bytes, data] : dropped) ::operator delete(data, alignment_for(bytes));
}

}  // namespace detail

Tile::Tile(uint32_t id, uint32_t rows, uint32_t cols, double* data, std::shared_ptr<detail::TileMemory> memory,
           AfterUse after_use)
    : id_(id), rows_(rows), cols_(cols), data_(data), after_use_(after_use), memory_(std::move(memory)) {}

Tile::~Tile() { memory_->give_back(data_, bytes(), after_use_ == AfterUse::kKeepForReuse); }

TileStore::TileStore(uint64_t cap_bytes)
    : cap_bytes_(cap_bytes), memory_(std::make_shared<detail::TileMemory>(cap_bytes / 4)) {}

uint64_t TileStore::idle_bytes() const {
  std::lock_guard lock(memory_->mutex);
  return memory_->idle_bytes;
}

TileStore::~TileStore() = default;

Result<std::shared_ptr<Tile>> TileStore::reserve(uint32_t id, uint32_t rows, uint32_t cols, bool zero_fill) {
  std::shared_ptr<Tile> replaced;  // freed after the lock is released
  std::lock_guard lock(mutex_);
  uint64_t freed = 0;
  if (auto it = tiles_.find(id); it != tiles_.end() && it->second.use_count() == 1) {
    freed = it->second->bytes();
  }
  auto tile = allocate_locked(id, rows, cols, zero_fill, freed);
  if (!tile.is_ok()) return tile;
  replaced = std::exchange(tiles_[id], *tile);
  return tile;
}

Result<std::shared_ptr<Tile>> TileStore::reserve_unlisted(uint32_t id, uint32_t rows, uint32_t cols) {
  std::lock_guard lock(mutex_);
  return allocate_locked(id, rows, cols, /*zero_fill=*/false, 0);
}

void TileStore::publish(const std::shared_ptr<Tile>& tile) {
  std::shared_ptr<Tile> replaced;  // freed after the lock is released
  std::lock_guard lock(mutex_);
  replaced = std::exchange(tiles_[tile->id()], tile);
}

Result<std::shared_ptr<Tile>> TileStore::allocate_scratch(uint32_t rows, uint32_t cols, bool zero_fill,
                                                         AfterUse after_use) {
  std::lock_guard lock(mutex_);
  return allocate_locked(0, rows, cols, zero_fill, 0, after_use);
}

Result<std::shared_ptr<Tile>> TileStore::allocate_locked(uint32_t id, uint32_t rows, uint32_t cols, bool zero_fill,
                                                         uint64_t bytes_freed_by_replace, AfterUse after_use) {
  if (rows == 0 || cols == 0) {
    return invalid_argument(describe(id, rows, cols) + " has a zero dimension");
  }
  const uint64_t elements = static_cast<uint64_t>(rows) * cols;  // < 2^64, cannot overflow
  if (elements > std::numeric_limits<uint64_t>::max() / sizeof(double) ||
      elements > std::numeric_limits<std::size_t>::max() / sizeof(double)) {
    return resource_exhausted(describe(id, rows, cols) + " is too large to address");
  }
  const uint64_t bytes = elements * sizeof(double);
  const uint64_t in_use = memory_->charged.load();
  // The tile being replaced gives its bytes back only once `replaced` is dropped, so until then
  // the charge may stand above the cap by that much.
  uint64_t limit = 0;
  if (__builtin_add_overflow(cap_bytes_, std::min(in_use, bytes_freed_by_replace), &limit)) {
    limit = std::numeric_limits<uint64_t>::max();
  }
  if (!memory_->try_charge(bytes, limit)) {
    return resource_exhausted(describe(id, rows, cols) + " needs " + std::to_string(bytes) +
                              " bytes; the tile store holds " + std::to_string(in_use) + " of its " +
                              std::to_string(cap_bytes_) + "-byte cap");
  }
  void* memory = memory_->take(static_cast<std::size_t>(bytes));
  if (memory == nullptr) {
    // Nothing of that size to reuse: idle buffers of other sizes go back first, so reuse never
    // holds more than the cap allows.
    if (in_use + bytes + idle_bytes() > cap_bytes_) memory_->drop_idle();
    memory = allocate_tile(static_cast<std::size_t>(bytes));
  }
  if (memory == nullptr) {
    memory_->charged.fetch_sub(bytes);
    return resource_exhausted(describe(id, rows, cols) + ": the system refused " + std::to_string(bytes) +
                              " bytes");
  }
  if (zero_fill) std::memset(memory, 0, static_cast<std::size_t>(bytes));
  // make_shared cannot reach the private constructor; the tile is small next to its data anyway.
  return std::shared_ptr<Tile>(new Tile(id, rows, cols, static_cast<double*>(memory), memory_, after_use));
}

Result<MemoryCharge> TileStore::charge(uint64_t bytes, std::string_view what) {
  MemoryCharge charge(memory_, cap_bytes_);
  TESSERA_RETURN_IF_ERROR(charge.resize(bytes, what));
  return charge;
}

MemoryCharge::MemoryCharge(MemoryCharge&& other) noexcept
    : memory_(std::move(other.memory_)), cap_bytes_(other.cap_bytes_), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryCharge& MemoryCharge::operator=(MemoryCharge&& other) noexcept {
  if (this != &other) {
    reset();
    memory_ = std::move(other.memory_);
    cap_bytes_ = other.cap_bytes_;
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryCharge::~MemoryCharge() { reset(); }

Status MemoryCharge::resize(uint64_t bytes, std::string_view what) {
  if (memory_ == nullptr) return internal_error("MemoryCharge::resize on a charge that belongs to no store");
  if (bytes <= bytes_) {
    memory_->charged.fetch_sub(bytes_ - bytes);
    bytes_ = bytes;
    return Status::ok();
  }
  const uint64_t growth = bytes - bytes_;
  if (!memory_->try_charge(growth, cap_bytes_)) {
    return resource_exhausted(std::string(what) + " needs " + std::to_string(bytes) + " bytes; the worker holds " +
                              std::to_string(memory_->charged.load() - bytes_) + " of its " +
                              std::to_string(cap_bytes_) + "-byte memory cap (tessera-worker --memory-cap-mb)");
  }
  bytes_ = bytes;
  // Freed tile buffers kept for reuse hold real memory too; they go once the cap is reached.
  bool over_cap = false;
  {
    std::lock_guard lock(memory_->mutex);
    over_cap = memory_->charged.load() + memory_->idle_bytes > cap_bytes_;
  }
  if (over_cap) memory_->drop_idle();
  return Status::ok();
}

void MemoryCharge::reset() {
  if (memory_ != nullptr && bytes_ > 0) memory_->charged.fetch_sub(bytes_);
  bytes_ = 0;
}

std::shared_ptr<Tile> TileStore::find(uint32_t id) const {
  std::lock_guard lock(mutex_);
  auto it = tiles_.find(id);
  return it == tiles_.end() ? nullptr : it->second;
}

bool TileStore::release(uint32_t id) {
  std::shared_ptr<Tile> dropped;  // destroyed after the lock is released
  std::lock_guard lock(mutex_);
  auto it = tiles_.find(id);
  if (it == tiles_.end()) return false;
  dropped = std::move(it->second);
  tiles_.erase(it);
  return true;
}

bool TileStore::release_if_same(uint32_t id, const Tile* expected) {
  std::shared_ptr<Tile> dropped;
  std::lock_guard lock(mutex_);
  auto it = tiles_.find(id);
  if (it == tiles_.end() || it->second.get() != expected) return false;
  dropped = std::move(it->second);
  tiles_.erase(it);
  return true;
}

void TileStore::clear() {
  std::unordered_map<uint32_t, std::shared_ptr<Tile>> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped.swap(tiles_);
  }
}

void TileStore::drop_idle_buffers() { memory_->drop_idle(); }

std::size_t TileStore::tile_count() const {
  std::lock_guard lock(mutex_);
  return tiles_.size();
}

}  // namespace tessera::worker
