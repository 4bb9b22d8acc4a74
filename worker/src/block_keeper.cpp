#include "tessera/worker/block_keeper.hpp"

#include <utility>

namespace tessera::worker {

BlockKeeper::BlockKeeper(std::unique_ptr<BlockStore> store, std::function<void(const std::string&)> log)
    : store_(std::move(store)), log_(std::move(log)), thread_([this] { run(); }) {}

BlockKeeper::~BlockKeeper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BlockKeeper::keep(std::shared_ptr<const Tile> tile) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(tile));
    ++queued_;
  }
  changed_.notify_all();
}

void BlockKeeper::wait_for_writes() {
  std::unique_lock lock(mutex_);
  const uint64_t target = queued_;
  changed_.wait(lock, [&] { return written_ >= target; });
}

bool BlockKeeper::holds(const transport::BlockKey& key) {
  wait_for_writes();
  return store_->holds(key);
}

bool BlockKeeper::load_into(const transport::BlockKey& key, uint32_t rows, uint32_t cols, std::span<double> out) {
  wait_for_writes();
  return store_->load_into(key, rows, cols, out);
}

void BlockKeeper::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every write done
    std::shared_ptr<const Tile> tile = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const std::span<const double> values(tile->data(), tile->size());
    std::string note;
    if (Result<transport::BlockKey> key = transport::block_key(tile->rows(), tile->cols(), values); key) {
      note = store_->keep_on_disk(*key, tile->rows(), tile->cols(), values);
    } else {
      note = key.status().message();
    }
    tile.reset();  // its memory back to the tile store before anyone hears it is written
    if (!note.empty() && log_) log_(note);
    lock.lock();
    ++written_;
    changed_.notify_all();
  }
}

}  // namespace tessera::worker
