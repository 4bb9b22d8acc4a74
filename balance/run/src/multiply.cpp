#include "tessera/balance/run/multiply.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "tessera/transport/request.hpp"

namespace tessera::balance {

namespace {

using Clock = std::chrono::steady_clock;
namespace tp = tessera::transport;
using partition::Block;

// Tile ids on the worker: B pieces from kFirstPieceId, then A of tile t and its C above
// kTileIdBase (kept apart from the profiler's ids).
constexpr uint32_t kFirstPieceId = 16;
constexpr uint32_t kTileIdBase = 0x100000;
constexpr std::size_t kTilesInFlight = 2;  // the next tile's A travels while the current one computes

uint32_t a_tile_id(uint64_t tile) { return static_cast<uint32_t>(kTileIdBase + 2 * tile); }
uint32_t c_tile_id(uint64_t tile) { return static_cast<uint32_t>(kTileIdBase + 2 * tile + 1); }

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A slab of B: rows [k_begin, k_begin + depth) of one panel, columns [col_begin, col_begin + cols).
// Encoded once and written to every node that needs it from the same bytes; full-width pieces
// point into B itself, narrower ones into one packed copy made up front.
struct BPiece {
  uint64_t k_begin = 0, depth = 0, col_begin = 0, cols = 0;
  std::array<std::byte, tp::kHeaderSize> header{};
  std::array<std::byte, tp::kTilePrefixSize> prefix{};
  std::vector<double> packed;
  const double* data = nullptr;
  std::size_t bytes() const { return depth * cols * sizeof(double); }
};

// One unit of work: a box of the m x n x k space, C[box rows, box cols] += A[rows, ks] * B[ks, cols].
struct WorkTile {
  Block block;
  int assigned = -1;                // static plans: the node it belongs to; -1: whoever asks
  bool delta = false;               // covers part of k: the result is a partial sum added into C
  std::vector<double> a_packed;     // A[rows, ks] when the box covers part of k; else sent from A
  std::vector<std::size_t> pieces;  // the B pieces it reads, in k order (one job each)
  // Static plans: a spare row piece of that tile, dormant unless the tile's node is lost.
  std::optional<std::size_t> parent;
};

struct Work {
  std::vector<WorkTile> tiles;
  std::vector<BPiece> pieces;
  bool keep_pieces = false;  // dynamic: a node keeps B's pieces for the tiles it pulls later
  bool speculate = false;    // dynamic: idle nodes copy running tiles near the end
};

// Small tiles first (every node starts at once) and last (a short tail), full tiles between.
std::vector<Block> cut_row_tiles(const Plan& plan, std::size_t nodes) {
  const uint64_t m = plan.m;
  const uint64_t small = std::max<uint64_t>(1, plan.tile_rows / 4);
  std::vector<Block> tiles;
  uint64_t row = 0;
  auto add = [&](uint64_t size) {
    size = std::min(size, m - row);
    if (size > 0) tiles.push_back(Block{row, size, 0, plan.n, 0, plan.k});
    row += size;
  };
  for (std::size_t i = 0; i < nodes; ++i) add(small);
  const uint64_t tail = std::min<uint64_t>(nodes * small, m - row);
  while (m - row > tail) add(std::min(plan.tile_rows, m - row - tail));
  while (row < m) add(small);
  return tiles;
}

// The tiles of a plan and the B pieces they read. k is cut at the plan's panel boundaries, so
// boxes that split k anywhere still share whole pieces with their neighbours where they can.
Result<Work> build_work(const Plan& plan, const linalg::Matrix& a, const linalg::Matrix& b) {
  Work work;
  const std::size_t nodes = plan.shares.size();
  if (plan.policy == Policy::kDynamic) {
    work.keep_pieces = true;
    work.speculate = true;
    for (const Block& block : cut_row_tiles(plan, nodes)) work.tiles.push_back({block, -1, false, {}, {}, {}});
  } else {
    for (std::size_t i = 0; i < nodes; ++i) {
      for (const Block& block : plan.blocks_of(i)) {
        work.tiles.push_back({block, static_cast<int>(i), block.depth != plan.k, {}, {}, {}});
      }
    }
    partition::NodeBlocks boxes(nodes);
    for (std::size_t i = 0; i < nodes; ++i) boxes[i] = plan.blocks_of(i);
    if (Status cover = partition::check_cover(boxes, plan.m, plan.n, plan.k); !cover.is_ok()) {
      return cover.with_context("the plan does not cover C exactly once: ");
    }
    // Spare row pieces of every tile, one per other node: if the tile's node is lost, the
    // survivors share its work instead of one of them taking it whole.
    const std::size_t planned = work.tiles.size();
    for (std::size_t t = 0; t < planned; ++t) {
      const Block block = work.tiles[t].block;
      const uint64_t count = std::min<uint64_t>(nodes - 1, block.rows);
      for (uint64_t p = 0; count >= 2 && p < count; ++p) {
        Block piece = block;
        piece.row_begin = block.row_begin + block.rows * p / count;
        piece.rows = block.row_begin + block.rows * (p + 1) / count - piece.row_begin;
        work.tiles.push_back({piece, -1, work.tiles[t].delta, {}, {}, t});
      }
    }
  }

  std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>, std::size_t> piece_index;
  for (WorkTile& tile : work.tiles) {
    const Block& box = tile.block;
    if (tile.delta && !tile.parent) {  // spare pieces send rows of their parent's packed A
      tile.a_packed.resize(box.rows * box.depth);
      for (uint64_t r = 0; r < box.rows; ++r) {
        std::copy_n(a.row(box.row_begin + r) + box.k_begin, box.depth, tile.a_packed.data() + r * box.depth);
      }
    }
    for (uint64_t k = box.k_begin; k < box.k_begin + box.depth;) {
      const uint64_t panel_end = (k / plan.panel_width + 1) * plan.panel_width;
      const uint64_t end = std::min(panel_end, box.k_begin + box.depth);
      const auto key = std::make_tuple(k, end - k, box.col_begin, box.cols);
      auto [it, inserted] = piece_index.emplace(key, work.pieces.size());
      if (inserted) work.pieces.push_back(BPiece{k, end - k, box.col_begin, box.cols, {}, {}, {}, nullptr});
      tile.pieces.push_back(it->second);
      k = end;
    }
  }
  if (work.pieces.size() >= kTileIdBase - kFirstPieceId || work.tiles.size() >= (UINT32_MAX - kTileIdBase) / 2) {
    return invalid_argument(fmt::format("the plan needs {} pieces of B and {} tiles; use wider panels or fewer tiles",
                                        work.pieces.size(), work.tiles.size()));
  }
  for (std::size_t p = 0; p < work.pieces.size(); ++p) {
    BPiece& piece = work.pieces[p];
    if (piece.cols == plan.n) {
      piece.data = b.row(piece.k_begin);
    } else {
      piece.packed.resize(piece.depth * piece.cols);
      for (uint64_t r = 0; r < piece.depth; ++r) {
        std::copy_n(b.row(piece.k_begin + r) + piece.col_begin, piece.cols, piece.packed.data() + r * piece.cols);
      }
      piece.data = piece.packed.data();
    }
    const tp::TilePrefix prefix{static_cast<uint32_t>(kFirstPieceId + p), static_cast<uint32_t>(piece.depth),
                                static_cast<uint32_t>(piece.cols)};
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kStore);
    header.payload_length = tp::store_payload_bytes(prefix);
    piece.header = tp::encode_header(header);
    piece.prefix = tp::encode_store_prefix(prefix);
  }
  return work;
}

// Who holds which tile. Thread-safe. Node threads block in take() while there is nothing to do
// but tiles still run elsewhere (one may come back if its node dies).
class TileBoard {
 public:
  TileBoard(const Work& work) : speculate_(work.speculate), entries_(work.tiles.size()) {
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

  // The node's own pending tile, else an unassigned one (dynamic tiles, or a lost node's), else
  // (dynamic only) a copy of the running tile handed out longest ago: one copy per tile, never
  // to its owner. Empty when every tile is done or the run is aborted. With wait, blocks while
  // there is nothing to take but tiles still run.
  std::optional<uint64_t> take(int node, bool wait, bool& is_copy) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (remaining_ == 0 || aborted_) return std::nullopt;
      if (std::optional<uint64_t> tile = pick_locked(node, is_copy)) return tile;
      if (!wait) return std::nullopt;
      changed_.wait(lock);
    }
  }

  // True when this result is the first for the tile (it goes into C).
  bool finish(uint64_t tile, int node) {
    std::lock_guard lock(mutex_);
    Entry& entry = entries_[tile];
    if (entry.state != State::kRunning) return false;  // a copy's original won, or the tile was split
    entry.state = State::kDone;
    if (entry.copy_owner == node) ++copy_wins_;
    --remaining_;
    changed_.notify_all();
    return true;
  }

  bool all_done() const {
    std::lock_guard lock(mutex_);
    return remaining_ == 0 || aborted_;
  }

  // A node failed: each of its running tiles passes to the node holding a copy, if any; the rest
  // of its tiles, running or not yet started, go to whoever asks next (listed in `reissued`),
  // as their spare row pieces where they have them, so the survivors share them.
  void node_lost(int node, std::vector<uint64_t>& reissued) {
    std::lock_guard lock(mutex_);
    for (uint64_t t = 0; t < entries_.size(); ++t) {
      Entry& entry = entries_[t];
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
        for (std::size_t spare : entry.spares) entries_[spare].state = State::kPending;
        remaining_ += entry.spares.size() - 1;
        continue;
      }
      entry.state = State::kPending;
      entry.owner = -1;
      entry.assigned = -1;
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
    is_copy = false;
    for (int wanted : {node, -1}) {
      for (uint64_t t = 0; t < entries_.size(); ++t) {
        Entry& entry = entries_[t];
        if (entry.state != State::kPending || entry.assigned != wanted) continue;
        entry.state = State::kRunning;
        entry.owner = node;
        entry.handed_out = Clock::now();
        return t;
      }
    }
    if (!speculate_) return std::nullopt;
    std::optional<uint64_t> oldest;
    for (uint64_t t = 0; t < entries_.size(); ++t) {
      const Entry& entry = entries_[t];
      if (entry.state == State::kRunning && entry.copy_owner < 0 && entry.owner != node &&
          (!oldest || entry.handed_out < entries_[*oldest].handed_out)) {
        oldest = t;
      }
    }
    if (!oldest) return std::nullopt;
    entries_[*oldest].copy_owner = node;
    ++copies_;
    is_copy = true;
    return oldest;
  }

  // kSpare: a spare row piece not (yet) needed; kSplit: a lost node's tile replaced by its spares.
  enum class State { kPending, kRunning, kDone, kSpare, kSplit };
  struct Entry {
    State state = State::kPending;
    std::vector<std::size_t> spares;
    int assigned = -1;
    int owner = -1;
    int copy_owner = -1;
    Clock::time_point handed_out;
  };
  const bool speculate_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
  std::size_t remaining_ = 0;  // tiles whose result is still needed
  bool aborted_ = false;
  uint64_t copies_ = 0;
  uint64_t copy_wins_ = 0;
};

// Where finished tiles go. Whole-k tiles own their cells of C and are written without a lock;
// partial sums of boxes that split k are added under one lock (the adds are memory-bound and
// short next to the network time that produced them).
class Output {
 public:
  Output(linalg::Matrix& c) : c_(c) {}
  // REQUIRES: data holds block.rows x block.cols values, row-major.
  void add_delta(const Block& block, std::span<const double> data) {
    std::lock_guard lock(mutex_);
    for (uint64_t r = 0; r < block.rows; ++r) {
      double* row = c_.row(block.row_begin + r) + block.col_begin;
      const double* from = data.data() + r * block.cols;
      for (uint64_t j = 0; j < block.cols; ++j) row[j] += from[j];
    }
  }
  void place(const Block& block, std::span<const double> data) {
    for (uint64_t r = 0; r < block.rows; ++r) {
      std::copy_n(data.data() + r * block.cols, block.cols, c_.row(block.row_begin + r) + block.col_begin);
    }
  }
  linalg::Matrix& c() { return c_; }

 private:
  linalg::Matrix& c_;
  std::mutex mutex_;
};

// One node's side of the run, on its own thread: takes tiles from the board, sends each tile's
// A, the B pieces the node lacks and one JOB per piece within the credit window, and reads
// CREDITs and RESULTs as they come.
class TileStreamer {
 public:
  TileStreamer(int index, NodeLink& link, const Plan& plan, const Work& work, TileBoard& board, const linalg::Matrix& a,
               Output& output, Clock::time_point start, const MultiplyHooks& hooks)
      : index_(index), connection_(*link.connection), plan_(plan), work_(work), board_(board), a_(a),
        output_(output), start_(start), hooks_(hooks), credits_(plan.panels_in_flight) {}

  Status run(NodeRunStats& stats) {
    const uint64_t sent_before = connection_.bytes_sent();
    const uint64_t received_before = connection_.bytes_received();
    Result<tp::Stats> worker_before = request_stats();
    Status status = worker_before.is_ok() ? stream(stats) : worker_before.status();
    if (status.is_ok()) status = wind_down();
    if (status.is_ok()) {
      // A failure here still goes through the byte counts and the progress context below.
      Result<tp::Stats> worker_after = request_stats();
      if (worker_after) {
        stats.worker_io_cpu_s = worker_after->io_cpu_seconds - worker_before->io_cpu_seconds;
        stats.worker_compute_cpu_s = worker_after->compute_cpu_seconds - worker_before->compute_cpu_seconds;
      } else {
        status = worker_after.status().with_context("asking for the worker's CPU figures: ");
      }
    }
    stats.bytes_to_node = connection_.bytes_sent() - sent_before;
    stats.bytes_from_node = connection_.bytes_received() - received_before;
    stats.comm_s = comm_seconds_;
    stats.panels = pieces_sent_;
    if (status.code() == StatusCode::kNetworkError) {
      // A worker that refuses a STORE (out of tile memory) answers ERROR and closes without
      // reading the data, so our write fails before we read its answer; the answer says why.
      if (std::optional<Status> parting = tp::read_parting_error(connection_)) status = *parting;
    }
    if (!status.is_ok()) {
      status = status.with_context(fmt::format("after {} of the {} jobs sent to it were done: ", credits_received_, jobs_sent_));
    }
    return status;
  }

 private:
  struct Current {
    uint64_t tile = 0;
    std::size_t next_piece = 0;
  };

  template <typename Write>
  Status timed(Write&& write) {
    const auto before = Clock::now();
    Status status = write();
    comm_seconds_ += seconds_between(before, Clock::now());
    return status;
  }

  Status send_a(uint64_t tile_index) {
    const WorkTile& tile = work_.tiles[tile_index];
    const Block& box = tile.block;
    const tp::TilePrefix prefix_tile{a_tile_id(tile_index), static_cast<uint32_t>(box.rows),
                                     static_cast<uint32_t>(box.depth)};
    const auto prefix = tp::encode_store_prefix(prefix_tile);
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kStore);
    const WorkTile& holder = tile.parent ? work_.tiles[*tile.parent] : tile;
    const double* data = holder.a_packed.empty()
                             ? a_.row(box.row_begin)
                             : holder.a_packed.data() + (box.row_begin - holder.block.row_begin) * box.depth;
    const std::array<asio::const_buffer, 2> parts{asio::buffer(prefix),
                                                  asio::buffer(data, box.rows * box.depth * sizeof(double))};
    return timed([&] { return connection_.write_frame(header, parts); });
  }

  Status send_job(const Current& current) {
    const WorkTile& tile = work_.tiles[current.tile];
    const std::size_t piece_index = tile.pieces[current.next_piece];
    const BPiece& piece = work_.pieces[piece_index];
    const bool last = current.next_piece + 1 == tile.pieces.size();
    if (!pieces_held_.contains(piece_index)) {
      const std::array<asio::const_buffer, 3> parts{asio::buffer(piece.header), asio::buffer(piece.prefix),
                                                    asio::buffer(piece.data, piece.bytes())};
      TESSERA_RETURN_IF_ERROR(timed([&] { return connection_.write_buffers(parts); }));
      ++pieces_sent_;
      // A dynamic node keeps its pieces for the tiles it pulls later; a static one has them
      // released by the job that used them, so it never holds more than its queue depth of them.
      if (work_.keep_pieces) pieces_held_.insert(piece_index);
    }
    tp::Job job;
    job.job_id = next_job_id_++;
    if (!work_.keep_pieces) job.flags |= tp::kJobReleaseB;
    if (current.next_piece == 0) job.flags |= tp::kJobCreateOutput;
    if (last) job.flags |= tp::kJobSendResult | tp::kJobReleaseA;
    job.a_tile = a_tile_id(current.tile);
    job.b_tile = static_cast<uint32_t>(kFirstPieceId + piece_index);
    job.c_tile = c_tile_id(current.tile);
    job.a_col = static_cast<uint32_t>(piece.k_begin - tile.block.k_begin);
    job.m = static_cast<uint32_t>(tile.block.rows);
    job.n = static_cast<uint32_t>(tile.block.cols);
    job.k = static_cast<uint32_t>(piece.depth);
    job.c_rows = job.m;
    job.c_cols = job.n;
    TESSERA_RETURN_IF_ERROR(timed([&] { return connection_.write_message(job, job.job_id); }));
    ++jobs_sent_;
    --credits_;
    if (last) ++results_expected_;
    return Status::ok();
  }

  Status receive(NodeRunStats& stats) {
    Result<tp::FrameHeader> header =
        tp::read_reply_header(connection_, {tp::MessageType::kCredit, tp::MessageType::kResult});
    if (!header) return header.status();
    if (header->type == static_cast<uint16_t>(tp::MessageType::kResult)) return receive_result(*header, stats);
    Result<tp::IncomingFrame> frame = connection_.read_payload(*header);
    if (!frame) return frame.status();
    credits_ += std::get<tp::Credit>(frame->message).credits;
    ++credits_received_;
    if (hooks_.on_credit) hooks_.on_credit(static_cast<std::size_t>(index_), credits_received_);
    return Status::ok();
  }

  Status receive_result(const tp::FrameHeader& header, NodeRunStats& stats) {
    const auto before = Clock::now();
    std::array<std::byte, tp::kResultPrefixSize> prefix_bytes;
    TESSERA_RETURN_IF_ERROR(connection_.read_exact(prefix_bytes));
    Result<tp::ResultPrefix> prefix = tp::decode_result_prefix(prefix_bytes, header.payload_length, connection_.limits());
    if (!prefix) return prefix.status();
    const uint32_t id = prefix->tile.tile_id;
    const uint64_t tile_index = (id - kTileIdBase - 1) / 2;
    if (id < kTileIdBase || (id - kTileIdBase) % 2 != 1 || tile_index >= work_.tiles.size() ||
        !in_flight_.contains(tile_index) || prefix->tile.rows != work_.tiles[tile_index].block.rows ||
        prefix->tile.cols != work_.tiles[tile_index].block.cols) {
      return protocol_error(fmt::format("RESULT for unexpected tile {} ({}x{})", id, prefix->tile.rows, prefix->tile.cols));
    }
    const WorkTile& tile = work_.tiles[tile_index];
    const Block& box = tile.block;
    const bool first = board_.finish(tile_index, index_);
    const std::size_t values = box.rows * box.cols;
    if (first && !tile.delta && box.cols == plan_.n) {
      // Whole rows of C: read straight into place.
      TESSERA_RETURN_IF_ERROR(connection_.read_exact(std::span<std::byte>(
          reinterpret_cast<std::byte*>(output_.c().row(box.row_begin)), values * sizeof(double))));
    } else {
      scratch_.resize(values);
      TESSERA_RETURN_IF_ERROR(
          connection_.read_exact(std::span<std::byte>(reinterpret_cast<std::byte*>(scratch_.data()), values * sizeof(double))));
      // A copy whose original already won is only read off the wire.
      if (first && tile.delta) output_.add_delta(box, scratch_);
      if (first && !tile.delta) output_.place(box, scratch_);
    }
    if (first) {
      stats.volume += box.volume();
      stats.tiles += 1;
      stats.finish_s = seconds_between(start_, Clock::now());
    }
    comm_seconds_ += seconds_between(before, Clock::now());
    stats.compute_s += prefix->compute_seconds;
    --results_expected_;
    in_flight_.erase(tile_index);
    return connection_.write_message(tp::Release{{c_tile_id(tile_index)}});
  }

  // The worker's cumulative session figures. Asked only when nothing of this run is on the wire,
  // so the next frame must be the answer.
  Result<tp::Stats> request_stats() { return tp::request_reply<tp::Stats>(connection_, tp::StatsRequest{}); }

  bool outstanding() const { return jobs_sent_ > credits_received_ || results_expected_ > 0; }

  // The Pi thesis' refill rule: with jobs still queued at the node, wait until `refill_threshold`
  // credits are back before sending again, so jobs go out in bursts rather than one per credit.
  bool may_send() const {
    return credits_ > 0 && (credits_ >= plan_.refill_threshold || jobs_sent_ == credits_received_);
  }

  Status stream(NodeRunStats& stats) {
    std::optional<Current> current;
    for (;;) {
      if (may_send()) {
        while (credits_ > 0 && !board_.all_done()) {
          if (!current) {
            if (in_flight_.size() >= kTilesInFlight) break;
            bool is_copy = false;
            // With results of our own still to read we must not wait for work, only take what is there.
            const std::optional<uint64_t> tile = board_.take(index_, !outstanding(), is_copy);
            if (!tile) break;
            current = Current{*tile, 0};
            in_flight_.insert(*tile);
            started_.push_back(*tile);
            TESSERA_RETURN_IF_ERROR(send_a(*tile));
          }
          TESSERA_RETURN_IF_ERROR(send_job(*current));
          if (++current->next_piece == work_.tiles[current->tile].pieces.size()) current.reset();
        }
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
    for (std::size_t piece : pieces_held_) release.tile_ids.push_back(static_cast<uint32_t>(kFirstPieceId + piece));
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
  const Work& work_;
  TileBoard& board_;
  const linalg::Matrix& a_;
  Output& output_;
  Clock::time_point start_;
  const MultiplyHooks& hooks_;
  uint32_t credits_;
  uint64_t next_job_id_ = 1;
  uint64_t jobs_sent_ = 0;
  uint64_t credits_received_ = 0;
  uint64_t results_expected_ = 0;
  uint64_t pieces_sent_ = 0;
  std::set<std::size_t> pieces_held_;
  std::set<uint64_t> in_flight_;
  std::vector<uint64_t> started_;
  std::vector<double> scratch_;
  double comm_seconds_ = 0.0;
};

Status check_inputs(const ClusterConnection& cluster, const Plan& plan, const linalg::Matrix& a, const linalg::Matrix& b) {
  if (a.rows != plan.m || a.cols != plan.k) {
    return invalid_argument(fmt::format("A is {}x{} but the plan needs {}x{}", a.rows, a.cols, plan.m, plan.k));
  }
  if (b.rows != plan.k || b.cols != plan.n) {
    return invalid_argument(fmt::format("B is {}x{} but the plan needs {}x{} (A's columns must equal B's rows)",
                                        b.rows, b.cols, plan.k, plan.n));
  }
  if (plan.shares.size() != cluster.links().size()) {
    return invalid_argument(fmt::format("the plan has {} nodes, the cluster {}", plan.shares.size(),
                                        cluster.links().size()));
  }
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    if (plan.shares[i].node_name != cluster.links()[i].spec.name) {
      return invalid_argument(fmt::format("plan node {} is '{}' but cluster node {} is '{}'", i,
                                          plan.shares[i].node_name, i, cluster.links()[i].spec.name));
    }
  }
  if (plan.panel_width == 0) return invalid_argument("plan has no panels");
  TESSERA_RETURN_IF_ERROR(check_credit_window(plan.panels_in_flight, plan.refill_threshold));
  if (plan.policy == Policy::kDynamic && plan.tile_rows == 0) return invalid_argument("a dynamic plan needs tile rows");
  return Status::ok();
}

// A static share must fit the worker's tile memory: its largest tile's A and C plus a queue of
// B pieces. Checked for every node before anything is sent, so a plan that cannot run fails
// with advice instead of part-way.
Status check_memory(const ClusterConnection& cluster, const Plan& plan, const Work& work) {
  if (work.keep_pieces) return Status::ok();
  for (const WorkTile& tile : work.tiles) {
    if (tile.assigned < 0) continue;  // spare pieces are smaller than the tile they stand in for
    const NodeLink& link = cluster.links()[static_cast<std::size_t>(tile.assigned)];
    const Block& box = tile.block;
    const uint64_t piece_depth = std::min<uint64_t>(plan.panel_width, box.depth);
    const uint64_t bytes = 8 * (box.rows * box.depth + box.rows * box.cols +
                                uint64_t{plan.panels_in_flight} * piece_depth * box.cols);
    if (link.hello.tile_memory_cap != 0 && bytes > link.hello.tile_memory_cap) {
      return resource_exhausted(fmt::format(
          "node '{}' ({}): its share needs {:.1f} MiB of tile memory but the worker allows {:.1f} MiB; give it "
          "more (tessera-worker --memory-cap-mb), lower --panels-in-flight / --panel-width, or use --layout 2d",
          link.spec.name, link.spec.endpoint(), bytes / 1048576.0, link.hello.tile_memory_cap / 1048576.0));
    }
  }
  return Status::ok();
}

// Makespan (slowest finish among nodes that delivered work), each node's idle time, GFLOP/s and
// imbalance (slowest / mean finish over those nodes).
void complete_run_statistics(const Plan& plan, MultiplyRun& run) {
  const double row_work = static_cast<double>(plan.n) * static_cast<double>(plan.k);
  const double total_work = static_cast<double>(plan.m) * row_work;
  double finish_sum = 0.0;
  std::size_t busy = 0;
  for (NodeRunStats& stats : run.nodes) {
    stats.weight = static_cast<double>(stats.volume) / total_work;
    stats.rows = static_cast<uint64_t>(static_cast<double>(stats.volume) / row_work + 0.5);
    if (stats.volume == 0) continue;
    run.makespan_s = std::max(run.makespan_s, stats.finish_s);
    finish_sum += stats.finish_s;
    ++busy;
  }
  for (NodeRunStats& stats : run.nodes) stats.idle_s = std::max(0.0, run.makespan_s - stats.compute_s);
  run.gflops = run.makespan_s > 0.0 ? 2.0 * total_work / run.makespan_s / 1e9 : 0.0;
  run.imbalance = busy > 0 && finish_sum > 0.0 ? run.makespan_s / (finish_sum / static_cast<double>(busy)) : 1.0;
}

}  // namespace

double MultiplyRun::worker_io_cpu_s() const {
  double seconds = 0.0;
  for (const NodeRunStats& node : nodes) seconds += node.worker_io_cpu_s;
  return seconds;
}

double MultiplyRun::worker_compute_cpu_s() const {
  double seconds = 0.0;
  for (const NodeRunStats& node : nodes) seconds += node.worker_compute_cpu_s;
  return seconds;
}

std::optional<double> MultiplyRun::worker_comm_share() const {
  const double io = worker_io_cpu_s();
  const double total = io + worker_compute_cpu_s();
  if (total <= 0.0) return std::nullopt;
  return io / total;
}

Result<MultiplyRun> run_multiply(ClusterConnection& cluster, const Plan& plan, const linalg::Matrix& a, const linalg::Matrix& b,
                                 linalg::Matrix& c, const MultiplyHooks& hooks) {
  TESSERA_RETURN_IF_ERROR(check_inputs(cluster, plan, a, b));
  Result<Work> work = build_work(plan, a, b);
  if (!work) return work.status();
  TESSERA_RETURN_IF_ERROR(check_memory(cluster, plan, *work));
  const bool has_deltas = std::any_of(work->tiles.begin(), work->tiles.end(), [](const WorkTile& t) { return t.delta; });
  if (c.rows != plan.m || c.cols != plan.n || has_deltas) c = linalg::Matrix(plan.m, plan.n);

  TileBoard board(*work);
  Output output(c);
  MultiplyRun run;
  run.tiles = static_cast<uint64_t>(
      std::count_if(work->tiles.begin(), work->tiles.end(), [](const WorkTile& t) { return !t.parent; }));
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
        TileStreamer streamer(static_cast<int>(i), link, plan, *work, board, a, output, start, hooks);
        Status status = streamer.run(run.nodes[i]);
        if (status.is_ok()) return;
        link.connection->shutdown();
        const Status failure = status.with_context(fmt::format("node '{}' ({}) ", link.spec.name, link.spec.endpoint()));
        std::lock_guard lock(failures_mutex);
        failures.push_back(failure);
        run.lost_nodes.push_back(link.spec.name);
        run.lost_reasons.push_back(failure.message());
        board.node_lost(static_cast<int>(i), run.reissued_tiles);
        if (--alive == 0) board.abort();
      });
    }
  }
  if (alive == 0) {
    std::string message = "every node failed:";
    for (const Status& failure : failures) message += "\n  " + failure.message();
    // Failures of one kind keep their code (every worker out of memory is not a network fault).
    const bool one_kind = std::all_of(failures.begin(), failures.end(),
                                      [&](const Status& failure) { return failure.code() == failures.front().code(); });
    return Status(one_kind ? failures.front().code() : StatusCode::kNetworkError, message);
  }
  run.speculative_copies = board.copies();
  run.speculative_wins = board.copy_wins();
  complete_run_statistics(plan, run);
  return run;
}

}  // namespace tessera::balance
