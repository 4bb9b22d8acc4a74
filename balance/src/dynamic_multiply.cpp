#include "tessera/balance/dynamic_multiply.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "driver_common.hpp"

namespace tessera::balance {

namespace {

using Clock = std::chrono::steady_clock;
namespace tp = tessera::transport;
using detail::kFirstPanelTile;
using detail::PanelFrame;
using detail::seconds_between;

// Tile ids above the static driver's and the profiler's ranges: A of tile t, then its C.
constexpr uint32_t kTileIdBase = 0x100000;
constexpr std::size_t kTilesInFlight = 2;  // the next tile's A travels while the current one computes

uint32_t a_tile_id(uint64_t tile) { return static_cast<uint32_t>(kTileIdBase + 2 * tile); }
uint32_t c_tile_id(uint64_t tile) { return static_cast<uint32_t>(kTileIdBase + 2 * tile + 1); }

struct TileSpan {
  uint64_t begin = 0;
  uint64_t rows = 0;
};

// Small tiles first (every node starts at once) and last (a short tail), full tiles between.
std::vector<TileSpan> cut_tiles(uint64_t m, uint64_t tile_rows, std::size_t nodes) {
  const uint64_t small = std::max<uint64_t>(1, tile_rows / 4);
  std::vector<TileSpan> tiles;
  uint64_t row = 0;
  auto add = [&](uint64_t size) {
    size = std::min(size, m - row);
    if (size > 0) tiles.push_back({row, size});
    row += size;
  };
  for (std::size_t i = 0; i < nodes; ++i) add(small);
  const uint64_t tail = std::min<uint64_t>(nodes * small, m - row);
  while (m - row > tail) add(std::min(tile_rows, m - row - tail));
  while (row < m) add(small);
  return tiles;
}

// Who holds which tile. Thread-safe; node threads block in take() while there is nothing to do
// but tiles are still running elsewhere (one may come back if its node dies).
class TileBoard {
 public:
  TileBoard(std::size_t tile_count) : tiles_(tile_count) {}

  // A pending tile, else a copy of the running tile handed out longest ago (one copy per tile,
  // never to its owner). Waits while neither exists but tiles still run elsewhere (one may come
  // back if its node dies). Empty when every tile is done or the run is aborted.
  std::optional<uint64_t> take(int node, bool& is_copy) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (done_ == tiles_.size() || aborted_) return std::nullopt;
      if (std::optional<uint64_t> tile = pick_locked(node, is_copy)) return tile;
      changed_.wait(lock);
    }
  }

  // As take(), but never waits: for a node that still has results of its own to read.
  std::optional<uint64_t> take_if_available(int node, bool& is_copy) {
    std::lock_guard lock(mutex_);
    if (done_ == tiles_.size() || aborted_) return std::nullopt;
    return pick_locked(node, is_copy);
  }

  // True when this result is the first for the tile (it goes into C).
  bool finish(uint64_t tile, int node) {
    std::lock_guard lock(mutex_);
    Entry& entry = tiles_[tile];
    if (entry.state == State::kDone) return false;
    entry.state = State::kDone;
    if (entry.copy_owner == node) ++copy_wins_;
    ++done_;
    changed_.notify_all();
    return true;
  }

  bool all_done() const {
    std::lock_guard lock(mutex_);
    return done_ == tiles_.size() || aborted_;
  }

  // A node failed: its running tiles pass to the node holding a copy, or back to the pending pool.
  void node_lost(int node, std::vector<uint64_t>& reissued) {
    std::lock_guard lock(mutex_);
    for (uint64_t t = 0; t < tiles_.size(); ++t) {
      Entry& entry = tiles_[t];
      if (entry.state != State::kRunning) continue;
      if (entry.copy_owner == node) entry.copy_owner = -1;
      if (entry.owner != node) continue;
      if (entry.copy_owner >= 0) {
        entry.owner = entry.copy_owner;
        entry.copy_owner = -1;
      } else {
        entry.state = State::kPending;
        entry.owner = -1;
        reissued.push_back(t);
      }
    }
    changed_.notify_all();
  }

  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }

  uint64_t copies() const {
    std::lock_guard lock(mutex_);
    return copies_;
  }
  uint64_t copy_wins() const {
    std::lock_guard lock(mutex_);
    return copy_wins_;
  }

 private:
  std::optional<uint64_t> pick_locked(int node, bool& is_copy) {
    for (uint64_t t = 0; t < tiles_.size(); ++t) {
      if (tiles_[t].state == State::kPending) {
        tiles_[t].state = State::kRunning;
        tiles_[t].owner = node;
        tiles_[t].handed_out = Clock::now();
        is_copy = false;
        return t;
      }
    }
    std::optional<uint64_t> oldest;
    for (uint64_t t = 0; t < tiles_.size(); ++t) {
      const Entry& entry = tiles_[t];
      if (entry.state == State::kRunning && entry.copy_owner < 0 && entry.owner != node &&
          (!oldest || entry.handed_out < tiles_[*oldest].handed_out)) {
        oldest = t;
      }
    }
    if (!oldest) return std::nullopt;
    tiles_[*oldest].copy_owner = node;
    ++copies_;
    is_copy = true;
    return oldest;
  }

  enum class State { kPending, kRunning, kDone };
  struct Entry {
    State state = State::kPending;
    int owner = -1;
    int copy_owner = -1;
    Clock::time_point handed_out;
  };
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> tiles_;
  std::size_t done_ = 0;
  bool aborted_ = false;
  uint64_t copies_ = 0;
  uint64_t copy_wins_ = 0;
};

class TileStreamer {
 public:
  TileStreamer(int index, NodeLink& link, const Plan& plan, const std::vector<PanelFrame>& panels,
               const std::vector<TileSpan>& tiles, TileBoard& board, const Matrix& a, Matrix& c,
               Clock::time_point start, const MultiplyHooks& hooks)
      : index_(index), connection_(*link.connection), plan_(plan), panels_(panels), tiles_(tiles),
        board_(board), a_(a), c_(c), start_(start), hooks_(hooks), credits_(plan.panels_in_flight) {}

  Status run(NodeRunStats& stats) {
    const uint64_t sent_before = connection_.bytes_sent();
    const uint64_t received_before = connection_.bytes_received();
    Status status = stream(stats);
    if (status.is_ok()) status = wind_down();
    stats.bytes_to_node = connection_.bytes_sent() - sent_before;
    stats.bytes_from_node = connection_.bytes_received() - received_before;
    stats.comm_s = comm_seconds_;
    stats.panels = panels_stored_;
    if (stats.finish_s == 0.0) stats.finish_s = seconds_between(start_, Clock::now());
    return status;
  }

 private:
  struct Current {
    uint64_t tile = 0;
    std::size_t next_panel = 0;
  };

  template <typename Write>
  Status timed(Write&& write) {
    const auto before = Clock::now();
    Status status = write();
    comm_seconds_ += seconds_between(before, Clock::now());
    return status;
  }

  Status send_a(uint64_t tile) {
    const TileSpan& span = tiles_[tile];
    const tp::TilePrefix prefix_tile{a_tile_id(tile), static_cast<uint32_t>(span.rows), static_cast<uint32_t>(plan_.k)};
    const auto prefix = tp::encode_store_prefix(prefix_tile);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kStore);
    const std::array<asio::const_buffer, 2> parts{
        asio::buffer(prefix), asio::buffer(a_.row(span.begin), span.rows * plan_.k * sizeof(double))};
    return timed([&] { return connection_.write_frame(header, parts); });
  }

  Status send_job(const Current& current) {
    const std::size_t p = current.next_panel;
    if (p >= panels_stored_) {
      // B's panels go to a node once, as its first tile needs them, and stay for later tiles.
      const PanelFrame& panel = panels_[p];
      const std::array<asio::const_buffer, 3> parts{asio::buffer(panel.header), asio::buffer(panel.prefix),
                                                    asio::buffer(panel.data, panel.data_bytes)};
      TESSERA_RETURN_IF_ERROR(timed([&] { return connection_.write_buffers(parts); }));
      ++panels_stored_;
    }
    const TileSpan& span = tiles_[current.tile];
    tp::Job job;
    job.job_id = next_job_id_++;
    if (p == 0) job.flags |= tp::kJobCreateOutput;
    if (p + 1 == panels_.size()) job.flags |= tp::kJobSendResult | tp::kJobReleaseA;
    job.a_tile = a_tile_id(current.tile);
    job.b_tile = static_cast<uint32_t>(kFirstPanelTile + p);
    job.c_tile = c_tile_id(current.tile);
    job.a_col = static_cast<uint32_t>(panels_[p].row_begin);
    job.m = static_cast<uint32_t>(span.rows);
    job.n = static_cast<uint32_t>(plan_.n);
    job.k = panels_[p].rows;
    job.c_rows = job.m;
    job.c_cols = job.n;
    TESSERA_RETURN_IF_ERROR(timed([&] { return connection_.write_message(job, job.job_id); }));
    ++jobs_sent_;
    --credits_;
    if (p + 1 == panels_.size()) ++results_expected_;
    return Status::ok();
  }

  Status receive(NodeRunStats& stats) {
    Result<tp::FrameHeader> header = connection_.read_header();
    if (!header) return header.status();
    switch (static_cast<tp::MessageType>(header->type)) {
      case tp::MessageType::kCredit: {
        Result<tp::IncomingFrame> frame = connection_.read_payload(*header);
        if (!frame) return frame.status();
        credits_ += std::get<tp::Credit>(frame->message).credits;
        ++credits_received_;
        if (hooks_.on_credit) hooks_.on_credit(static_cast<std::size_t>(index_), credits_received_);
        return Status::ok();
      }
      case tp::MessageType::kResult:
        return receive_result(*header, stats);
      case tp::MessageType::kError: {
        Result<tp::IncomingFrame> frame = connection_.read_payload(*header);
        if (!frame) return frame.status();
        return network_error("the worker reported: " + std::get<tp::Error>(frame->message).message);
      }
      default:
        return protocol_error(fmt::format("unexpected {} during a multiply", tp::message_type_name(header->type)));
    }
  }

  Status receive_result(const tp::FrameHeader& header, NodeRunStats& stats) {
    const auto before = Clock::now();
    std::array<std::byte, tp::kResultPrefixSize> prefix_bytes;
    TESSERA_RETURN_IF_ERROR(connection_.read_exact(prefix_bytes));
    Result<tp::ResultPrefix> prefix = tp::decode_result_prefix(prefix_bytes, header.payload_length, connection_.limits());
    if (!prefix) return prefix.status();
    const uint32_t id = prefix->tile.tile_id;
    const uint64_t tile = (id - kTileIdBase - 1) / 2;
    if (id < kTileIdBase || (id - kTileIdBase) % 2 != 1 || tile >= tiles_.size() ||
        !in_flight_.contains(tile) || prefix->tile.rows != tiles_[tile].rows || prefix->tile.cols != plan_.n) {
      return protocol_error(fmt::format("RESULT for unexpected tile {} ({}x{})", id, prefix->tile.rows, prefix->tile.cols));
    }
    const bool first = board_.finish(tile, index_);
    const std::size_t bytes = tiles_[tile].rows * plan_.n * sizeof(double);
    if (first) {
      TESSERA_RETURN_IF_ERROR(connection_.read_exact(
          std::span<std::byte>(reinterpret_cast<std::byte*>(c_.row(tiles_[tile].begin)), bytes)));
      stats.rows += tiles_[tile].rows;
      stats.finish_s = seconds_between(start_, Clock::now());
    } else {
      // Another node's copy won; this one only has to be read off the wire.
      scratch_.resize(bytes);
      TESSERA_RETURN_IF_ERROR(connection_.read_exact(scratch_));
    }
    comm_seconds_ += seconds_between(before, Clock::now());
    stats.compute_s += prefix->compute_seconds;
    --results_expected_;
    in_flight_.erase(tile);
    return connection_.write_message(tp::Release{{c_tile_id(tile)}});
  }

  bool outstanding() const { return jobs_sent_ > credits_received_ || results_expected_ > 0; }

  Status stream(NodeRunStats& stats) {
    std::optional<Current> current;
    for (;;) {
      // Send while the credit window allows and there is work.
      while (credits_ > 0 && !board_.all_done()) {
        if (!current) {
          if (in_flight_.size() >= kTilesInFlight) break;
          bool is_copy = false;
          // With results of our own still to read we must not wait for work, only take what is there.
          const std::optional<uint64_t> tile =
              outstanding() ? board_.take_if_available(index_, is_copy) : board_.take(index_, is_copy);
          if (!tile) break;
          current = Current{*tile, 0};
          in_flight_.insert(*tile);
          started_.push_back(*tile);
          TESSERA_RETURN_IF_ERROR(send_a(*tile));
        }
        TESSERA_RETURN_IF_ERROR(send_job(*current));
        if (++current->next_panel == panels_.size()) current.reset();
      }
      if (!outstanding()) {
        // Nothing of ours on the wire: either the run is over, or the loop above waits for work.
        if (board_.all_done()) return Status::ok();
        continue;
      }
      TESSERA_RETURN_IF_ERROR(receive(stats));
    }
  }

  // The last tile is in: let the worker finish what it was sent, then drop every tile this run
  // gave it, so the session can serve the next multiply.
  Status wind_down() {
    NodeRunStats ignored;
    while (outstanding()) TESSERA_RETURN_IF_ERROR(receive(ignored));
    tp::Release release;
    for (std::size_t p = 0; p < panels_stored_; ++p) release.tile_ids.push_back(static_cast<uint32_t>(kFirstPanelTile + p));
    for (uint64_t tile : started_) {
      release.tile_ids.push_back(a_tile_id(tile));
      release.tile_ids.push_back(c_tile_id(tile));
    }
    if (release.tile_ids.empty()) return Status::ok();
    return connection_.write_message(release);
  }

  int index_;
  tp::FrameConnection& connection_;
  const Plan& plan_;
  const std::vector<PanelFrame>& panels_;
  const std::vector<TileSpan>& tiles_;
  TileBoard& board_;
  const Matrix& a_;
  Matrix& c_;
  Clock::time_point start_;
  const MultiplyHooks& hooks_;
  uint32_t credits_;
  std::size_t panels_stored_ = 0;
  uint64_t next_job_id_ = 1;
  uint64_t jobs_sent_ = 0;
  uint64_t credits_received_ = 0;
  uint64_t results_expected_ = 0;
  std::set<uint64_t> in_flight_;
  std::vector<uint64_t> started_;
  std::vector<std::byte> scratch_;
  double comm_seconds_ = 0.0;
};

}  // namespace

Result<MultiplyRun> run_dynamic_multiply(ClusterConnection& cluster, const Plan& plan, const Matrix& a,
                                         const Matrix& b, Matrix& c, const MultiplyHooks& hooks) {
  if (plan.policy != Policy::kDynamic || plan.tile_rows == 0) return invalid_argument("not a dynamic plan");
  if (a.rows != plan.m || a.cols != plan.k || b.rows != plan.k || b.cols != plan.n) {
    return invalid_argument(fmt::format("A is {}x{} and B {}x{}, the plan needs {}x{} and {}x{}", a.rows, a.cols,
                                        b.rows, b.cols, plan.m, plan.k, plan.k, plan.n));
  }
  if (plan.shares.size() != cluster.links().size()) return invalid_argument("the plan and the cluster differ in nodes");
  if (c.rows != plan.m || c.cols != plan.n) c = Matrix(plan.m, plan.n);

  const std::vector<PanelFrame> panels = detail::encode_panels(plan, b);
  const std::vector<TileSpan> tiles = cut_tiles(plan.m, plan.tile_rows, cluster.links().size());
  TileBoard board(tiles.size());
  MultiplyRun run;
  run.tiles = tiles.size();
  run.nodes.resize(cluster.links().size());
  std::mutex failures_mutex;
  std::vector<Status> failures;
  std::atomic<std::size_t> alive{cluster.links().size()};
  const auto start = Clock::now();
  {
    std::vector<std::jthread> streamers;
    for (std::size_t i = 0; i < cluster.links().size(); ++i) {
      run.nodes[i].name = plan.shares[i].node_name;
      streamers.emplace_back([&, i] {
        NodeLink& link = cluster.links()[i];
        TileStreamer streamer(static_cast<int>(i), link, plan, panels, tiles, board, a, c, start, hooks);
        Status status = streamer.run(run.nodes[i]);
        if (status.is_ok()) return;
        link.connection->shutdown();
        std::lock_guard lock(failures_mutex);
        failures.push_back(status.with_context(fmt::format("node '{}' ({}): ", link.spec.name, link.spec.endpoint())));
        run.lost_nodes.push_back(link.spec.name);
        board.node_lost(static_cast<int>(i), run.reissued_tiles);
        if (--alive == 0) board.abort();
      });
    }
  }
  if (alive == 0) {
    std::string message = "every node failed:";
    for (const Status& failure : failures) message += "\n  " + failure.message();
    return network_error(message);
  }
  run.speculative_copies = board.copies();
  run.speculative_wins = board.copy_wins();

  for (NodeRunStats& stats : run.nodes) stats.weight = static_cast<double>(stats.rows) / static_cast<double>(plan.m);
  detail::complete_run_statistics(plan, run);
  return run;
}

}  // namespace tessera::balance
