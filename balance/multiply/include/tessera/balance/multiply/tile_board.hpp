// TileBoard: who holds which tile of a run. The driver's node threads take tiles from it and
// report results and losses; it decides what a node does next (its own tile, an unassigned or a
// lost node's one, or near the end of a dynamic run a copy of the tile running longest elsewhere)
// and when the product is complete. No sockets: unit tests drive it directly.
// Thread-safe: every member may be called from any node thread. Node threads block in take()
// while there is nothing to do but tiles still run elsewhere (one may come back if its node dies).
//
// A tile is done only once a whole result for it has been read and checked (finish()); a node
// that fails before that leaves the tile to be handed out again, so a run never keeps part of a
// result. At most one node at a time reads a tile's result straight into C (begin_receive()), so
// a speculative copy arriving meanwhile cannot write the same cells.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "tessera/balance/multiply/plan_work.hpp"

namespace tessera::balance::multiply {

class TileBoard {
 public:
  explicit TileBoard(const Work& work);

  // Whether a speculative copy of `tile`, run by its `owner` for `running_s` seconds so far,
  // would pay for its transfer on the asking node (called under the board's lock; keep it cheap).
  using CopyFilter = std::function<bool(uint64_t tile, int owner, double running_s)>;
  // What a start filter sees of the board (under its lock): tiles still needing a result, and per
  // node index whether it was lost and whether it has taken any tile yet (so it holds B, or is
  // receiving it). Vectors may be shorter than the node count: missing entries are false.
  struct BoardView {
    std::size_t remaining = 0;
    const std::vector<bool>& lost;
    const std::vector<bool>& started;
  };
  // Whether starting the unassigned `tile` on the asking node pays (called under the board's lock).
  using StartFilter = std::function<bool(uint64_t tile, const BoardView& board)>;

  // The node's own pending tile, else an unassigned one (dynamic tiles, or a lost node's) that
  // `worth_starting` accepts (all, when it is empty), else (dynamic only) a copy of a running
  // tile, the one handed out longest ago among those `worth_copying` accepts (all, when it is
  // empty): one copy per tile, never to its owner. Empty when every tile is done or the run is
  // aborted. With wait, blocks while there is nothing to take but tiles still run (looking again
  // every 50 ms when a filter refused something, since it may accept later).
  std::optional<uint64_t> take(int node, bool wait, bool& is_copy, const CopyFilter& worth_copying = {},
                               const StartFilter& worth_starting = {});

  // True once the tile's result is in C (or the tile was split among survivors): a node still
  // sending it pieces may stop.
  bool settled(uint64_t tile) const;

  // The node is about to read a result for `tile`. True when it may read it straight into C: the
  // tile still needs a result and no other node is reading one into C; the node then is the
  // tile's receiver until its finish() or its node_lost(). False: read it elsewhere first.
  bool begin_receive(uint64_t tile, int node);

  // The node has read a whole result for the tile and checked it. True when it is the first (it
  // goes into C); false for a copy whose original already won or a tile that was split among the
  // survivors. While another node is reading this tile's result into C this waits until that
  // node finishes (then this result is a loser) or is lost (then this one wins).
  bool finish(uint64_t tile, int node);

  bool all_done() const;

  // A node failed: each of its running tiles passes to the node holding a copy, if any; the rest
  // of its tiles, running or not yet started, are handed out again (listed in `reissued`): as
  // their spare row pieces where they have them, each to the node it was cut for (whoever asks,
  // if that node was lost too), else whole to whoever asks. Its own spare pieces of other nodes'
  // tiles that it had not finished go to whoever asks.
  void node_lost(int node, std::vector<uint64_t>& reissued);

  // Every node failed: take() returns nothing from now on.
  void abort();

  uint64_t copies() const;     // speculative copies handed out
  uint64_t copy_wins() const;  // copies whose result arrived first

 private:
  // kSpare: a spare row piece not (yet) needed; kSplit: a lost node's tile replaced by its spares.
  enum class State { kPending, kRunning, kDone, kSpare, kSplit };
  struct Entry {
    State state = State::kPending;
    std::vector<std::size_t> spares;
    int assigned = -1;
    int owner = -1;
    int copy_owner = -1;
    int receiver = -1;  // the node reading a result straight into C, if any
    std::chrono::steady_clock::time_point handed_out;
  };

  std::optional<uint64_t> pick_locked(int node, bool& is_copy, const CopyFilter& worth_copying,
                                      const StartFilter& worth_starting);
  void mark_started(int node);  // under the lock

  const bool speculate_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
  std::size_t remaining_ = 0;  // tiles whose result is still needed
  std::vector<bool> lost_;     // per node index, true once node_lost()
  std::vector<bool> started_;  // per node index, true once it took a tile (own, fresh or a copy)
  bool aborted_ = false;
  uint64_t copies_ = 0;
  uint64_t copy_wins_ = 0;
};

}  // namespace tessera::balance::multiply
