#include "tessera/balance/multiply/tile_board.hpp"

namespace tessera::balance::multiply {

TileBoard::TileBoard(const Work& work) : speculate_(work.speculate), entries_(work.tiles.size()) {
  for (std::size_t t = 0; t < entries_.size(); ++t) {
    entries_[t].assigned = work.tiles[t].assigned;
    if (const std::optional<std::size_t> parent = work.tiles[t].parent) {
      entries_[t].state = State::kSpare;
      entries_[*parent].spares.push_back(t);
    } else {
      ++remaining_;
    }
  }
}

std::optional<uint64_t> TileBoard::take(int node, bool wait, bool& is_copy, const CopyFilter& worth_copying,
                                        const StartFilter& worth_starting) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (remaining_ == 0 || aborted_) return std::nullopt;
    if (std::optional<uint64_t> tile = pick_locked(node, is_copy, worth_copying, worth_starting)) return tile;
    if (!wait) return std::nullopt;
    // A tile or copy a filter refused may pay later (its owner falls behind, a node is lost), so
    // look again now and then even when nothing on the board changes.
    if (worth_copying || worth_starting) {
      changed_.wait_for(lock, std::chrono::milliseconds(50));
    } else {
      changed_.wait(lock);
    }
  }
}

bool TileBoard::begin_receive(uint64_t tile, int node) {
  std::lock_guard lock(mutex_);
  Entry& entry = entries_[tile];
  if (entry.state != State::kRunning || (entry.receiver >= 0 && entry.receiver != node)) return false;
  entry.receiver = node;
  return true;
}

bool TileBoard::finish(uint64_t tile, int node) {
  std::unique_lock lock(mutex_);
  Entry& entry = entries_[tile];
  // Deciding now would let this result and the one still landing in C both count, or neither.
  changed_.wait(lock, [&] { return entry.receiver < 0 || entry.receiver == node || aborted_; });
  if (entry.receiver == node) entry.receiver = -1;
  if (entry.state != State::kRunning) return false;  // a copy's original won, or the tile was split
  entry.state = State::kDone;
  if (entry.copy_owner == node) ++copy_wins_;
  --remaining_;
  changed_.notify_all();
  return true;
}

bool TileBoard::settled(uint64_t tile) const {
  std::lock_guard lock(mutex_);
  return entries_[tile].state == State::kDone || entries_[tile].state == State::kSplit;
}

bool TileBoard::all_done() const {
  std::lock_guard lock(mutex_);
  return remaining_ == 0 || aborted_;
}

namespace {

// Sets `flags[node]`, growing `flags` as needed; false when it was set already (or node < 0).
bool set_flag(std::vector<bool>& flags, int node) {
  if (node < 0) return false;
  const auto index = static_cast<std::size_t>(node);
  if (index >= flags.size()) flags.resize(index + 1, false);
  if (flags[index]) return false;
  flags[index] = true;
  return true;
}

}  // namespace

void TileBoard::mark_started(int node) {
  // A node waiting for someone to start may now compare itself with this one.
  if (set_flag(started_, node)) changed_.notify_all();
}

void TileBoard::node_lost(int node, std::vector<uint64_t>& reissued) {
  std::lock_guard lock(mutex_);
  set_flag(lost_, node);
  for (uint64_t t = 0; t < entries_.size(); ++t) {
    Entry& entry = entries_[t];
    // Its half-read result in C is overwritten by whoever finishes the tile now.
    if (entry.receiver == node) entry.receiver = -1;
    if (entry.state != State::kPending && entry.state != State::kRunning) continue;
    if (entry.copy_owner == node) entry.copy_owner = -1;
    if (entry.state == State::kRunning && entry.owner == node && entry.copy_owner >= 0) {
      entry.owner = entry.copy_owner;
      entry.copy_owner = -1;
      continue;
    }
    const bool ours = entry.state == State::kRunning ? entry.owner == node : entry.assigned == node;
    if (!ours) continue;
    reissued.push_back(t);
    if (!entry.spares.empty()) {
      entry.state = State::kSplit;
      for (std::size_t spare : entry.spares) {
        Entry& piece = entries_[spare];
        piece.state = State::kPending;
        // A piece meant for a node lost before: whoever asks.
        if (piece.assigned >= 0 && static_cast<std::size_t>(piece.assigned) < lost_.size() && lost_[piece.assigned]) {
          piece.assigned = -1;
        }
      }
      remaining_ += entry.spares.size() - 1;
      continue;
    }
    entry.state = State::kPending;
    entry.owner = -1;
    entry.assigned = -1;
  }
  changed_.notify_all();
}

void TileBoard::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  changed_.notify_all();
}

uint64_t TileBoard::copies() const {
  std::lock_guard lock(mutex_);
  return copies_;
}

uint64_t TileBoard::copy_wins() const {
  std::lock_guard lock(mutex_);
  return copy_wins_;
}

std::optional<uint64_t> TileBoard::pick_locked(int node, bool& is_copy, const CopyFilter& worth_copying,
                                               const StartFilter& worth_starting) {
  is_copy = false;
  for (int wanted : {node, -1}) {
    for (uint64_t t = 0; t < entries_.size(); ++t) {
      Entry& entry = entries_[t];
      if (entry.state != State::kPending || entry.assigned != wanted) continue;
      // Unassigned tiles are alike for the filter but for their size: one refused, all are.
      if (wanted == -1 && worth_starting && !worth_starting(t, BoardView{remaining_, lost_, started_})) break;
      mark_started(node);
      entry.state = State::kRunning;
      entry.owner = node;
      entry.handed_out = std::chrono::steady_clock::now();
      return t;
    }
  }
  if (!speculate_) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  std::optional<uint64_t> oldest;
  for (uint64_t t = 0; t < entries_.size(); ++t) {
    const Entry& entry = entries_[t];
    if (entry.state != State::kRunning || entry.copy_owner >= 0 || entry.owner == node) continue;
    if (oldest && entry.handed_out >= entries_[*oldest].handed_out) continue;
    if (worth_copying && !worth_copying(t, entry.owner, std::chrono::duration<double>(now - entry.handed_out).count())) {
      continue;
    }
    oldest = t;
  }
  if (!oldest) return std::nullopt;
  entries_[*oldest].copy_owner = node;
  mark_started(node);
  ++copies_;
  is_copy = true;
  return oldest;
}

}  // namespace tessera::balance::multiply
