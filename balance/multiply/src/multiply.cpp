// The tile driver: one TileStreamer per node, each the state machine of one node's side of a run
// (tiles taken from the board, A and the B pieces it lacks sent within the credit window, CREDITs
// and RESULTs read as they come, speculative copies and losses), plus the checks made before
// anything is sent and the run's figures after. One file because the streamer is one state
// machine; its collaborators live apart (plan_work, tile_board, chain_feed, verify, report).
#include "tessera/balance/multiply/multiply.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "tessera/balance/cluster/silent_node_watchdog.hpp"
#include "tessera/gemm/forward_codec.hpp"
#include "chain_feed.hpp"
#include "run_progress.hpp"
#include "tessera/balance/multiply/tile_board.hpp"
#include "tessera/balance/multiply/plan_work.hpp"
#include "tessera/core/time.hpp"
#include "tessera/transport/request.hpp"

namespace tessera::balance::multiply {

namespace {

using Clock = std::chrono::steady_clock;
namespace tp = tessera::transport;
using partition::Block;

constexpr std::size_t kTilesInFlight = 2;  // the next tile's A travels while the current one computes

// One node's side of the run, on its own thread: takes tiles from the board, sends each tile's
// A, the B pieces the node lacks and one JOB per piece within the credit window, and reads
// CREDITs and RESULTs as they come.
class TileStreamer {
 public:
  TileStreamer(int index, cluster::NodeLink& link, const plan::Plan& plan, const Work& work, TileBoard& board, linalg::MatrixView a,
               Output& output, Clock::time_point start, const MultiplyHooks& hooks, NodeProgress& progress,
               ChainFeed* chain)
      : index_(index), connection_(*link.connection), client_(*link.connection), plan_(plan), work_(work), board_(board), a_(a),
        output_(output), start_(start), hooks_(hooks), progress_(progress), credits_(plan.panels_in_flight),
        chain_(chain),
        chain_position_(chain != nullptr ? chain->position_of(static_cast<std::size_t>(index)) : std::nullopt) {}

  Status run(NodeRunStats& stats) {
    stats_ = &stats;
    const uint64_t sent_before = connection_.bytes_sent();
    const uint64_t received_before = connection_.bytes_received();
    Result<gemm::Stats> worker_before = request_stats();
    bytes_sent_at_last_job_ = connection_.bytes_sent();
    Status status = worker_before.is_ok() ? stream(stats) : worker_before.status();
    if (status.is_ok()) status = wind_down();
    if (status.is_ok()) {
      // A failure here still goes through the byte counts and the progress context below.
      Result<gemm::Stats> worker_after = request_stats();
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
    stats.pieces_by_chain = chain_arrived_.size();
    stats.abandoned = abandoned_;
    if (status.code() == StatusCode::kNetworkError) {
      // A worker that refuses a STORE (out of tile memory) answers ERROR and closes without
      // reading the data, so our write fails before we read its answer; the answer says why.
      if (std::optional<Status> parting = tp::read_parting_error(connection_)) status = *parting;
    }
    if (!status.is_ok()) {
      status = status.with_context(
          fmt::format("after {} of the {} jobs sent to it were done: ", client_.jobs_credited(), client_.jobs_sent()));
    }
    return status;
  }

 private:
  struct Current {
    uint64_t tile = 0;
    std::size_t next_piece = 0;
  };

  // Runs `wait` (a write, or a request and its reply) as something the node owes us: the watchdog
  // counts a silent node as lost while we are blocked in it.
  template <typename Wait>
  auto owed(double bytes, Wait&& wait) {
    progress_.begin_wait(bytes);
    auto result = wait();
    progress_.end_wait(bytes);
    return result;
  }

  template <typename Write>
  Status timed(double bytes, Write&& write) {
    const auto before = Clock::now();
    Status status = owed(bytes, write);
    comm_seconds_ += seconds_between(before, Clock::now());
    return status;
  }

  Status send_a(uint64_t tile_index) {
    const WorkTile& tile = work_.tiles[tile_index];
    const Block& box = tile.block;
    const WorkTile& holder = tile.parent ? work_.tiles[*tile.parent] : tile;
    const double* data = holder.a_packed.empty()
                             ? a_.row(box.row_begin)
                             : holder.a_packed.data() + (box.row_begin - holder.block.row_begin) * box.depth;
    const std::span<const double> values(data, box.rows * box.depth);
    return timed(static_cast<double>(values.size_bytes()), [&] {
      // The CRC pass reads the memory the write sends right after (no copy), and counts as
      // communication time.
      return client_.store(a_tile_id(tile_index), static_cast<uint32_t>(box.rows), static_cast<uint32_t>(box.depth),
                           values.data());
    });
  }

  Status send_job(const Current& current) {
    const WorkTile& tile = work_.tiles[current.tile];
    const std::size_t piece_index = tile.pieces[current.next_piece];
    const BPiece& piece = work_.pieces[piece_index];
    const bool last = current.next_piece + 1 == tile.pieces.size();
    if (!pieces_held_.contains(piece_index)) {
      bool send = true;
      if (chain_member_tile(tile)) {
        if (chain_->is_head(*chain_position_)) {
          TESSERA_RETURN_IF_ERROR(await_admission(current.next_piece));  // its place in its chain's k order
        } else {
          TESSERA_RETURN_IF_ERROR(await_piece(piece_index));
          send = !chain_arrived_.contains(piece_index);
        }
      }
      if (send) {
        TESSERA_RETURN_IF_ERROR(timed(static_cast<double>(piece.bytes()), [&] { return client_.store(piece.store); }));
        ++pieces_sent_;
      }
      // A dynamic node keeps its pieces for the tiles it pulls later; a static one has them
      // released by the job that used them, so it never holds more than its queue depth of them.
      if (work_.keep_pieces) pieces_held_.insert(piece_index);
    }
    gemm::Job job;
    job.job_id = next_job_id_++;
    if (!work_.keep_pieces) job.flags |= gemm::kJobReleaseB;
    if (current.next_piece == 0) job.flags |= gemm::kJobCreateOutput;
    if (last) job.flags |= gemm::kJobSendResult | gemm::kJobReleaseA;
    job.a_tile = a_tile_id(current.tile);
    job.b_tile = static_cast<uint32_t>(kFirstPieceId + piece_index);
    job.c_tile = c_tile_id(current.tile);
    job.a_col = static_cast<uint32_t>(piece.k_begin - tile.block.k_begin);
    job.m = static_cast<uint32_t>(tile.block.rows);
    job.n = static_cast<uint32_t>(tile.block.cols);
    job.k = static_cast<uint32_t>(piece.depth);
    job.c_rows = job.m;
    job.c_cols = job.n;
    TESSERA_RETURN_IF_ERROR(timed(0.0, [&] { return client_.job(job); }));
    const uint64_t sent_now = connection_.bytes_sent();
    progress_.job_sent(static_cast<double>(sent_now - bytes_sent_at_last_job_),
                       last ? static_cast<double>(tile.block.rows * tile.block.cols * sizeof(double)) : 0.0,
                       2.0 * static_cast<double>(job.m) * static_cast<double>(job.n) * static_cast<double>(job.k));
    bytes_sent_at_last_job_ = sent_now;
    --credits_;
    return Status::ok();
  }

  Status receive(NodeRunStats& stats) {
    Result<gemm::GemmClient::Reply> reply = client_.next(
        {tp::MessageType::kCredit, tp::MessageType::kResult, tp::MessageType::kStored, tp::MessageType::kForwardReady});
    if (!reply) return reply.status();
    progress_.heard();
    if (const auto* result = std::get_if<gemm::GemmClient::ResultHeader>(&*reply)) return receive_result(*result, stats);
    if (const auto* forwarded = std::get_if<gemm::ForwardMessage>(&*reply)) return receive_forwarding(*forwarded);
    const uint32_t credits = std::get<gemm::Credit>(*reply).credits;
    credits_ += credits;
    progress_.jobs_answered(credits);
    if (chain_position_) chain_->jobs_done(*chain_position_, credits);
    if (hooks_.on_credit) hooks_.on_credit(static_cast<std::size_t>(index_), client_.jobs_credited());
    return Status::ok();
  }

  Status receive_result(const gemm::GemmClient::ResultHeader& result, NodeRunStats& stats) {
    const auto before = Clock::now();
    const gemm::GemmClient::ResultHeader* prefix = &result;
    const uint32_t id = prefix->tile.tile_id;
    const uint64_t tile_index = (id - kTileIdBase - 1) / 2;
    if (id < kTileIdBase || (id - kTileIdBase) % 2 != 1 || tile_index >= work_.tiles.size() ||
        !in_flight_.contains(tile_index) || prefix->tile.rows != work_.tiles[tile_index].block.rows ||
        prefix->tile.cols != work_.tiles[tile_index].block.cols) {
      return protocol_error(fmt::format("RESULT for unexpected tile {} ({}x{})", id, prefix->tile.rows, prefix->tile.cols));
    }
    const WorkTile& tile = work_.tiles[tile_index];
    const Block& box = tile.block;
    const std::size_t values = box.rows * box.cols;
    // A tile counts as done only after its whole RESULT is in and matches its CRC: every return
    // before board_.finish() fails this node, and the board then hands the tile out again.
    const bool in_place =
        !tile.delta && box.cols == plan_.n && output_.contiguous() && board_.begin_receive(tile_index, index_);
    if (in_place) {
      // Whole rows of C: read straight into place. If this read fails half-way those rows hold
      // garbage, but the tile is not done, so the result that does finish it (the reissue or a
      // speculative copy) overwrites every one of its cells.
      TESSERA_RETURN_IF_ERROR(client_.read_result(result, std::span<double>(output_.row(box.row_begin), values)));
    } else {
      // Partial sums are added, so they must be whole and checked before they touch C: added
      // twice or half would be wrong for good.
      scratch_.resize(values);
      TESSERA_RETURN_IF_ERROR(client_.read_result(result, scratch_));
    }
    progress_.result_received(static_cast<double>(values * sizeof(double)));
    // finish() may wait for another node still reading its copy of this tile into C: a wait on
    // that node, not on this one.
    progress_.begin_local_wait();
    // As the tile's receiver, an in-place reader is always first; a copy whose original already
    // won is only read off the wire.
    const bool first = board_.finish(tile_index, index_);
    progress_.end_local_wait();
    if (first && !in_place) {
      if (tile.delta) {
        output_.add_delta(box, scratch_);
      } else {
        output_.place(box, scratch_);
      }
    }
    if (first) {
      stats.volume += box.volume();
      stats.tiles += 1;
      stats.finish_s = seconds_between(start_, Clock::now());
    }
    comm_seconds_ += seconds_between(before, Clock::now());
    stats.compute_s += prefix->compute_seconds;
    in_flight_.erase(tile_index);
    // Even a small write blocks once a stopped node has let its socket buffer fill: it counts as owed.
    const uint32_t released[] = {c_tile_id(tile_index)};
    return owed(0.0, [&] { return client_.release(released); });
  }

  // The worker's cumulative session figures. Asked only when no job of this run is on the wire,
  // so the next frame is the answer, or a chain's STORED / FORWARD_READY before it.
  Result<gemm::Stats> request_stats() {
    return owed(0.0, [&]() -> Result<gemm::Stats> {
      TESSERA_RETURN_IF_ERROR(client_.request_stats());
      for (;;) {
        // A chain member may announce a piece before the answer.
        Result<gemm::GemmClient::Reply> reply =
            client_.next({tp::MessageType::kStats, tp::MessageType::kStored, tp::MessageType::kForwardReady});
        if (!reply) return reply.status();
        progress_.heard();
        if (const auto* forwarded = std::get_if<gemm::ForwardMessage>(&*reply)) {
          TESSERA_RETURN_IF_ERROR(receive_forwarding(*forwarded));
          continue;
        }
        return std::get<gemm::Stats>(*reply);
      }
    });
  }

  // --- The chain (plan::Distribution::kChain; chain_feed.hpp) ---

  // The node's own planned tile reads every piece of its chain's B (all of B in the rows layout,
  // its columns' in the 2d layout) in k order, as every member of its chain does: those pieces
  // come through the chain. Spare pieces of a lost node's tile come directly.
  bool chain_member_tile(const WorkTile& tile) const {
    return chain_position_ && !tile.parent && tile.assigned == index_ && tile.block.depth == plan_.k;
  }

  // STORED (a piece arrived from the member before this node) or FORWARD_READY (this node's link
  // to its successor failed, or the answer to the run's end).
  Status receive_forwarding(const gemm::ForwardMessage& message) {
    if (!chain_position_) {
      return protocol_error(fmt::format("unexpected {}: this node is not in a forwarding chain",
                                        tp::message_type_name(static_cast<uint16_t>(gemm::forward_message_type(message)))));
    }
    if (const auto* stored = std::get_if<gemm::Stored>(&message)) {
      if (stored->run_token != chain_->run_token()) return Status::ok();  // a late one of an earlier run
      if (stored->tile_id < chain_->first_tile_id() || stored->tile_id >= chain_->last_tile_id()) {
        return protocol_error(fmt::format("STORED for tile {}, outside the run's pieces", stored->tile_id));
      }
      const std::size_t piece = stored->tile_id - kFirstPieceId;
      if (chain_arrived_.insert(piece).second) chain_->forwarded_to(*chain_position_, work_.pieces[piece].bytes());
      return Status::ok();
    }
    const auto& ready = std::get<gemm::ForwardReady>(message);
    if (ready.run_token == chain_->run_token() && !ready.linked) {
      chain_->link_failed(*chain_position_, fmt::format("{}: {}", connection_.peer(), ready.reason));
    }
    return Status::ok();
  }

  // A head sends a piece once every live member after it has room for it; meanwhile it reads
  // its own node's frames, so that node never looks silent to the watchdog.
  Status await_admission(std::size_t piece) {
    while (!chain_->admitted(*chain_position_, piece, plan_.panels_in_flight) && !board_.all_done()) {
      if (outstanding() && connection_.wait_readable(std::chrono::milliseconds(0))) {
        TESSERA_RETURN_IF_ERROR(receive(*stats_));
      } else {
        chain_->wait_for_change(std::chrono::milliseconds(20));
      }
    }
    return Status::ok();
  }

  // A member after the head waits for STORED of the piece, reading its node's frames meanwhile.
  // It gives up on the chain (and takes the rest of B directly) when its feed broke, or when
  // neither the piece nor any progress along the chain came for the patience below.
  Status await_piece(std::size_t piece) {
    auto last_change = Clock::now();
    uint64_t seen = chain_->progress();
    while (!chain_arrived_.contains(piece)) {
      if (!chain_->fed(*chain_position_) || board_.all_done()) return Status::ok();
      if (const uint64_t now = chain_->progress(); now != seen) {
        seen = now;
        last_change = Clock::now();
      }
      if (seconds_between(last_change, Clock::now()) > chain_patience_s()) {
        chain_->feed_broken(*chain_position_,
                            fmt::format("{}: piece {} of B did not come along the chain within {:.0f} s; the "
                                        "coordinator sent it and the rest",
                                        connection_.peer(), piece, chain_patience_s()));
        return Status::ok();
      }
      if (connection_.wait_readable(std::chrono::milliseconds(20))) TESSERA_RETURN_IF_ERROR(receive(*stats_));
    }
    return Status::ok();
  }

  // As long as the watchdog would wait for a silent node: the chain stands still only when some
  // member is stalled, and the watchdog drops that one within its deadline.
  double chain_patience_s() const {
    return std::max(hooks_.deadlines.floor_s, hooks_.deadlines.node_timeout_s);
  }

  bool outstanding() const { return client_.owes(); }

  // The Pi thesis' refill rule: with jobs still queued at the node, wait until `refill_threshold`
  // credits are back before sending again, so jobs go out in bursts rather than one per credit.
  bool may_send() const {
    return credits_ > 0 && (credits_ >= plan_.refill_threshold || client_.jobs_owed() == 0);
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
            const std::optional<uint64_t> tile =
                board_.take(index_, !outstanding(), is_copy, copy_filter_, start_filter_);
            if (!tile) break;
            current = Current{*tile, 0};
            in_flight_.insert(*tile);
            started_.push_back(*tile);
            TESSERA_RETURN_IF_ERROR(send_a(*tile));
          }
          if (current->next_piece > 0 && board_.settled(current->tile)) {
            // Its result came from elsewhere (a copy's original, or the other way round): the
            // rest of its pieces would cost this link for nothing. The jobs already sent finish
            // without a result; wind_down releases the tile's memory on the worker.
            in_flight_.erase(current->tile);
            current.reset();
            ++abandoned_;
            continue;
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
    std::vector<uint32_t> release;
    if (chain_position_) {
      // Forwarding stops first; then every piece id goes, also one that came after its job ran.
      TESSERA_RETURN_IF_ERROR(owed(0.0, [&] { return chain_->end_for(client_); }));
      for (std::size_t piece = 0; piece < work_.pieces.size(); ++piece) {
        release.push_back(static_cast<uint32_t>(kFirstPieceId + piece));
      }
    } else {
      for (std::size_t piece : pieces_held_) release.push_back(static_cast<uint32_t>(kFirstPieceId + piece));
    }
    for (uint64_t tile : started_) {
      release.push_back(a_tile_id(tile));
      release.push_back(c_tile_id(tile));
    }
    if (release.empty()) return Status::ok();
    return owed(0.0, [&] { return client_.release(release); });
  }

  // Seconds `node` needs for `tile` from now, by its expected link and GEMM rates: A, the B pieces
  // it lacks (those not in `held`; none when `held` is null), the multiply and C's way back.
  // Nullopt when a rate is unknown (no profile).
  std::optional<double> tile_seconds(uint64_t tile_index, int node, const std::set<std::size_t>* held) const {
    const std::vector<NodeExpectation>& expected = hooks_.deadlines.nodes;
    if (node < 0 || static_cast<std::size_t>(node) >= expected.size()) return std::nullopt;
    const NodeExpectation& rates = expected[static_cast<std::size_t>(node)];
    if (rates.to_node_bytes_per_s <= 0.0 || rates.from_node_bytes_per_s <= 0.0 || rates.flops_per_s <= 0.0) {
      return std::nullopt;
    }
    const WorkTile& tile = work_.tiles[tile_index];
    const Block& box = tile.block;
    double to_node = 8.0 * static_cast<double>(box.rows * box.depth);
    for (std::size_t piece : tile.pieces) {
      if (held != nullptr && !held->contains(piece)) to_node += static_cast<double>(work_.pieces[piece].bytes());
    }
    const double from_node = 8.0 * static_cast<double>(box.rows * box.cols);
    return to_node / rates.to_node_bytes_per_s + from_node / rates.from_node_bytes_per_s +
           2.0 * static_cast<double>(box.volume()) / rates.flops_per_s;
  }

  // A speculative copy is started only when this node would finish it before its owner is
  // expected to: a Pi behind a slow link that must first receive all of B never is. The owner is
  // assumed to hold its B pieces (it has been running the tile), which errs towards fewer copies.
  // An owner already at twice its expected time may be stalled, so then any node that can do the
  // tile within that expected time may try. Without rates (no profile) every copy is allowed.
  bool copy_pays(uint64_t tile, int owner, double running_s) const {
    const std::optional<double> mine = tile_seconds(tile, index_, &pieces_held_);
    const std::optional<double> theirs = tile_seconds(tile, owner, nullptr);
    if (!mine || !theirs) return true;
    if (running_s > 2.0 * *theirs) return *mine < *theirs;
    return *mine < *theirs - running_s;
  }

  // A node's first tile brings all of B over its link, so it is started only where it pays.
  // While no live node has started, the node that would deliver a first tile soonest starts (all
  // of them on a tie), so someone always does. Once some have, a node starts only when it would
  // deliver its first tile before those, at their expected speeds, could finish every tile still
  // needed: a Pi behind a slow link sits the run out instead of receiving B for nothing, and joins
  // in when the started nodes are lost. Later tiles need only A and always pay. Without rates (no
  // profile) every tile is started.
  bool start_pays(uint64_t tile, const TileBoard::BoardView& board) const {
    if (!pieces_held_.empty()) return true;
    const std::set<std::size_t> none;
    const std::optional<double> mine = tile_seconds(tile, index_, &none);
    if (!mine) return true;
    const auto flag = [](const std::vector<bool>& flags, std::size_t i) { return i < flags.size() && flags[i]; };
    const std::vector<NodeExpectation>& expected = hooks_.deadlines.nodes;
    double started_rate = 0.0;
    double best_other_start = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (static_cast<int>(i) == index_ || flag(board.lost, i)) continue;
      if (flag(board.started, i)) {
        started_rate += expected[i].flops_per_s;
      } else if (const std::optional<double> theirs = tile_seconds(tile, static_cast<int>(i), &none)) {
        best_other_start = std::min(best_other_start, *theirs);
      }
    }
    if (started_rate <= 0.0) return *mine <= best_other_start;
    const double remaining_flops =
        2.0 * static_cast<double>(work_.tiles[tile].block.volume()) * static_cast<double>(board.remaining);
    return *mine < remaining_flops / started_rate;
  }

  int index_;
  tp::FrameConnection& connection_;
  gemm::GemmClient client_;  // over connection_: every frame of the run, and what the node owes
  const plan::Plan& plan_;
  const Work& work_;
  TileBoard& board_;
  linalg::MatrixView a_;
  Output& output_;
  Clock::time_point start_;
  const MultiplyHooks& hooks_;
  NodeProgress& progress_;
  uint64_t bytes_sent_at_last_job_ = 0;  // what went out since is charged to the next job
  uint32_t credits_;
  uint64_t next_job_id_ = 1;
  uint64_t pieces_sent_ = 0;
  std::set<std::size_t> pieces_held_;
  std::set<uint64_t> in_flight_;
  std::vector<uint64_t> started_;
  std::vector<double> scratch_;
  ChainFeed* chain_;
  std::optional<std::size_t> chain_position_;
  std::set<std::size_t> chain_arrived_;  // pieces announced with STORED
  NodeRunStats* stats_ = nullptr;        // run()'s, for results read while waiting on the chain
  double comm_seconds_ = 0.0;
  uint64_t abandoned_ = 0;  // tiles whose sending stopped because their result came from elsewhere
  const TileBoard::CopyFilter copy_filter_ = [this](uint64_t tile, int owner, double running_s) {
    return copy_pays(tile, owner, running_s);
  };
  const TileBoard::StartFilter start_filter_ = [this](uint64_t tile, const TileBoard::BoardView& board) {
    return start_pays(tile, board);
  };
};

Status check_inputs(const cluster::ClusterConnection& cluster, const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                    linalg::MutableMatrixView c) {
  if (a.rows != plan.m || a.cols != plan.k) {
    return invalid_argument(fmt::format("A is {}x{} but the plan needs {}x{}", a.rows, a.cols, plan.m, plan.k));
  }
  if (b.rows != plan.k || b.cols != plan.n) {
    return invalid_argument(fmt::format("B is {}x{} but the plan needs {}x{} (A's columns must equal B's rows)",
                                        b.rows, b.cols, plan.k, plan.n));
  }
  if (c.rows != plan.m || c.cols != plan.n) {
    return invalid_argument(fmt::format("C is {}x{} but the product is {}x{}", c.rows, c.cols, plan.m, plan.n));
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
  TESSERA_RETURN_IF_ERROR(plan::check_credit_window(plan.panels_in_flight, plan.refill_threshold));
  if (plan.policy == plan::Policy::kDynamic && plan.tile_rows == 0) return invalid_argument("a dynamic plan needs tile rows");
  return plan::check_distribution(plan);
}

// A static share must fit the worker's tile memory: its largest tile's A and C plus a queue of
// B pieces. Checked for every node before anything is sent, so a plan that cannot run fails
// with advice instead of part-way.
Status check_memory(const cluster::ClusterConnection& cluster, const plan::Plan& plan, const Work& work) {
  if (work.keep_pieces) return Status::ok();
  for (const WorkTile& tile : work.tiles) {
    // Spare pieces run only for a lost node, and are smaller than the tile they stand in for.
    if (tile.assigned < 0 || tile.parent) continue;
    const cluster::NodeLink& link = cluster.links()[static_cast<std::size_t>(tile.assigned)];
    const Block& box = tile.block;
    const uint64_t piece_depth = std::min<uint64_t>(plan.panel_width, box.depth);
    const uint64_t bytes = 8 * (box.rows * box.depth + box.rows * box.cols +
                                uint64_t{plan.panels_in_flight} * piece_depth * box.cols);
    if (link.hello.tile_memory_cap != 0 && bytes > link.hello.tile_memory_cap) {
      return resource_exhausted(fmt::format(
          "node '{}' ({}): its share needs {:.1f} MiB of tile memory but the worker allows {:.1f} MiB; give it "
          "more (tessera-worker --memory-cap-mb), lower --panels-in-flight / --panel-width, or use --layout 2d",
          link.spec.name, link.spec.endpoint(), static_cast<double>(bytes) / 1048576.0,
          static_cast<double>(link.hello.tile_memory_cap) / 1048576.0));
    }
  }
  return Status::ok();
}

// The last result's time (slowest finish among nodes that delivered work), makespan (`released_s`,
// when every node thread was done), each node's idle time, GFLOP/s and imbalance (slowest / mean
// finish over the nodes that delivered work).
void complete_run_statistics(const plan::Plan& plan, double released_s, MultiplyRun& run) {
  const double row_work = static_cast<double>(plan.n) * static_cast<double>(plan.k);
  const double total_work = static_cast<double>(plan.m) * row_work;
  double finish_sum = 0.0;
  std::size_t busy = 0;
  for (NodeRunStats& stats : run.nodes) {
    stats.weight = static_cast<double>(stats.volume) / total_work;
    stats.rows = static_cast<uint64_t>(static_cast<double>(stats.volume) / row_work + 0.5);
    if (stats.volume == 0) continue;
    run.last_result_s = std::max(run.last_result_s, stats.finish_s);
    finish_sum += stats.finish_s;
    ++busy;
  }
  run.makespan_s = std::max(released_s, run.last_result_s);
  for (NodeRunStats& stats : run.nodes) stats.idle_s = std::max(0.0, run.makespan_s - stats.compute_s);
  run.gflops = run.makespan_s > 0.0 ? 2.0 * total_work / run.makespan_s / 1e9 : 0.0;
  run.imbalance = busy > 0 && finish_sum > 0.0 ? run.last_result_s / (finish_sum / static_cast<double>(busy)) : 1.0;
}

}  // namespace

Result<MultiplyRun> run_multiply(cluster::ClusterConnection& cluster, const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                                 linalg::Matrix& c, const MultiplyHooks& hooks) {
  if (c.rows != plan.m || c.cols != plan.n) c = linalg::Matrix(plan.m, plan.n);
  return run_multiply(cluster, plan, a, b, linalg::MutableMatrixView(c), hooks);
}

Result<MultiplyRun> run_multiply(cluster::ClusterConnection& cluster, const plan::Plan& plan, linalg::MatrixView a, linalg::MatrixView b,
                                 linalg::MutableMatrixView c, const MultiplyHooks& hooks) {
  TESSERA_RETURN_IF_ERROR(check_inputs(cluster, plan, a, b, c));
  // The driver writes A's and B's rows straight from memory, which needs them contiguous.
  linalg::Matrix packed_a, packed_b;
  if (!a.contiguous()) {
    packed_a = linalg::to_matrix(a);
    a = packed_a;
  }
  if (!b.contiguous()) {
    packed_b = linalg::to_matrix(b);
    b = packed_b;
  }
  Result<Work> work = build_work(plan, a, b);
  if (!work) return work.status();
  TESSERA_RETURN_IF_ERROR(check_memory(cluster, plan, *work));
  if (hooks.on_start) hooks.on_start(count_jobs(*work, cluster.links().size()));
  const bool has_deltas = std::any_of(work->tiles.begin(), work->tiles.end(), [](const WorkTile& t) { return t.delta; });
  if (has_deltas) c.fill(0.0);  // partial sums are added into C

  MultiplyRun run;
  std::unique_ptr<ChainFeed> chain;
  if (plan.distribution == plan::Distribution::kChain) {
    // The chain's setup is bounded like a frame's round trip: the silent-node floor.
    const auto setup_timeout = std::chrono::milliseconds(static_cast<int64_t>(1000 * hooks.deadlines.floor_s));
    chain = ChainFeed::set_up(cluster, plan, hooks.peer_hosts, kFirstPieceId,
                              static_cast<uint32_t>(kFirstPieceId + work->pieces.size()), setup_timeout,
                              run.chain_notes);
  }
  TileBoard board(*work);
  Output output(c);
  run.tiles = static_cast<uint64_t>(
      std::count_if(work->tiles.begin(), work->tiles.end(), [](const WorkTile& t) { return !t.parent; }));
  run.nodes.resize(cluster.links().size());
  std::mutex failures_mutex;
  std::vector<Status> failures;
  std::atomic<std::size_t> alive{cluster.links().size()};
  const auto start = Clock::now();
  const double cpu_at_start = process_cpu_seconds();
  {
    // The watchdog reads `progress` until it stops; it is declared before the streamers, so it
    // stops only after every one of them has been joined.
    std::vector<std::unique_ptr<NodeProgress>> progress;
    cluster::SilentNodeWatchdog watchdog(cluster.links().size(), progress_watch(cluster, hooks.deadlines, progress));
    for (std::size_t i = 0; i < cluster.links().size(); ++i) progress.push_back(std::make_unique<NodeProgress>(watchdog, i));
    std::vector<std::jthread> streamers;
    for (std::size_t i = 0; i < cluster.links().size(); ++i) {
      run.nodes[i].name = plan.shares[i].node_name;
      streamers.emplace_back([&, i] {
        cluster::NodeLink& link = cluster.links()[i];
        TileStreamer streamer(static_cast<int>(i), link, plan, *work, board, a, output, start, hooks, *progress[i],
                              chain.get());
        Status status = streamer.run(run.nodes[i]);
        progress[i]->finish();
        if (status.is_ok()) return;
        link.connection->shutdown();
        if (chain) {
          if (const std::optional<std::size_t> position = chain->position_of(i)) chain->member_lost(*position);
        }
        // The watchdog's reason beats what the shut-down connection said ("closed the connection").
        const std::optional<std::string> unresponsive = progress[i]->unresponsive();
        const Status failure =
            unresponsive ? network_error(fmt::format("node '{}' ({}) {}", link.spec.name, link.spec.endpoint(), *unresponsive))
                         : status.with_context(fmt::format("node '{}' ({}) ", link.spec.name, link.spec.endpoint()));
        std::lock_guard lock(failures_mutex);
        failures.push_back(failure);
        run.lost_nodes.push_back(link.spec.name);
        run.lost_reasons.push_back(failure.message());
        board.node_lost(static_cast<int>(i), run.reissued_tiles);
        if (--alive == 0) board.abort();
      });
    }
  }
  const double released_s = seconds_between(start, Clock::now());
  run.coordinator_cpu_s = process_cpu_seconds() - cpu_at_start;
  if (alive == 0) {
    std::string message = "every node failed:";
    for (const Status& failure : failures) message += "\n  " + failure.message();
    // Failures of one kind keep their code (every worker out of memory is not a network fault).
    const bool one_kind = std::all_of(failures.begin(), failures.end(),
                                      [&](const Status& failure) { return failure.code() == failures.front().code(); });
    return Status(one_kind ? failures.front().code() : StatusCode::kNetworkError, message);
  }
  if (chain) {
    run.chain = chain->describe();
    const std::vector<std::string> notes = chain->notes();
    run.chain_notes.insert(run.chain_notes.end(), notes.begin(), notes.end());
    const std::vector<uint64_t> forwarded = chain->forwarded_bytes(run.nodes.size());
    for (std::size_t i = 0; i < run.nodes.size(); ++i) run.nodes[i].forwarded_bytes = forwarded[i];
  }
  run.speculative_copies = board.copies();
  run.speculative_wins = board.copy_wins();
  complete_run_statistics(plan, released_s, run);
  return run;
}

}  // namespace tessera::balance::multiply
