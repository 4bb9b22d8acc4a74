#include "tessera/balance/expr/dag_run.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "tessera/balance/cluster/silent_node_watchdog.hpp"
#include "tessera/core/time.hpp"

#include "tessera/transport/crc32c.hpp"
#include "tessera/gemm/client.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/transport/request.hpp"


#include "coordinator_tiles.hpp"

namespace tessera::balance::expr {

namespace {

using Clock = std::chrono::steady_clock;
namespace tp = tessera::transport;

// Input tiles with rows at least this wide are sent from the caller's matrix a row per buffer;
// narrower ones (a vector's tiles) are packed into one buffer first, which costs little.
constexpr uint64_t kLeastGatheredColumns = 256;
using expr::Op;
using expr::TileRef;

// One node's side of the run: what its sender has sent, what its reader has had back.
struct NodeState {
  std::size_t index = 0;
  tp::FrameConnection* connection = nullptr;
  std::unique_ptr<gemm::GemmClient> client;  // over `connection`; what it owes of jobs and results
  std::string name;
  std::size_t link = 0;  // index in cluster.links()
  std::string host;
  uint16_t port = 0;
  uint64_t capabilities = 0;
  std::mutex mutex;
  std::condition_variable changed;
  bool sender_done = false;
  bool failed = false;
  std::unordered_map<uint64_t, std::size_t> job_task;  // job id -> task
  uint64_t next_job_id = 1;
  std::unordered_set<uint32_t> stored;  // ids on the worker (sender thread only)
  uint64_t bytes_sent_at_start = 0, bytes_received_at_start = 0;
  DagNodeStats stats;
  // Tiles from other workers (peer transfers). peer_pending is the sender thread's alone; the
  // rest are guarded by `mutex`.
  std::unordered_set<uint32_t> peer_pending;   // ids it gets from a peer, not used yet
  std::unordered_set<uint32_t> peer_expected;  // every id it gets from a peer in this run
  std::unordered_set<uint32_t> peer_arrived;   // announced with STORED
  std::unordered_set<uint32_t> peer_owed;      // sent to it (SENT delivered), STORED still due
  struct Send {
    uint32_t id = 0;
    std::size_t to = 0;  // node index
    uint64_t bytes = 0;
    bool abandoned = false;  // its receiver was lost: its SENT is no longer owed (read if it comes)
  };
  std::deque<Send> sends_in_flight;  // SEND_TILEs written, SENT not yet read, in order
  uint64_t sends_owed = 0;           // those not abandoned

  // REQUIRES: mutex held (the client's own counters change under it too, so a wait on `changed`
  // sees them move).
  uint64_t owed() const { return client->jobs_owed() + client->results_owed() + sends_owed + peer_owed.size(); }
};

class DagRunner {
 public:
  DagRunner(cluster::ClusterConnection& cluster, const std::vector<std::size_t>& links, const expr::TaskDag& dag,
            const expr::Schedule& schedule, const std::vector<linalg::MatrixView>& inputs,
            linalg::MutableMatrixView result, const DagRunOptions& options)
      : dag_(dag), schedule_(schedule), inputs_(inputs), result_(result), options_(options) {
    for (std::size_t p = 0; p < links.size(); ++p) {
      auto node = std::make_unique<NodeState>();
      node->index = p;
      cluster::NodeLink& link = cluster.links()[links[p]];
      node->connection = link.connection.get();
      node->client = std::make_unique<gemm::GemmClient>(*link.connection);
      node->name = link.spec.name;
      node->link = links[p];
      node->host = link.spec.host;
      node->port = link.spec.port;
      node->capabilities = link.hello.capabilities;
      nodes_.push_back(std::move(node));
    }
    node_tasks_.assign(links.size(), {});
    for (std::size_t task : schedule.order) node_tasks_[schedule.tasks[task].node].push_back(task);
    for (std::size_t task = 0; task < dag.tasks.size(); ++task) producer_[expr::tile_key(dag.tasks[task].output)] = task;
    // Ids on the workers: one per tile of the DAG, then the scalars and identity blocks.
    uint32_t next = options.first_tile_id;
    for (std::size_t m = 0; m < dag.matrices.size(); ++m) {
      const expr::TiledMatrix& matrix = dag.matrices[m];
      first_id_.push_back(next);
      next += matrix.tile_rows * matrix.tile_cols;
    }
    dag_ids_end_ = next;
    next_special_id_ = next;
    plan_moves(/*peers=*/false);
    result_tiles_left_ = dag.matrices[dag.result].tile_rows * dag.matrices[dag.result].tile_cols;
    task_compute_.assign(dag.tasks.size(), 0.0);
    task_sent_.assign(dag.tasks.size(), -1.0);
    task_done_.assign(dag.tasks.size(), -1.0);
  }

  DagRun run() {
    start_ = Clock::now();
    watchdog_ = std::make_unique<cluster::SilentNodeWatchdog>(nodes_.size(), silence_watch());
    const double cpu_at_start = process_cpu_seconds();
    for (auto& node : nodes_) {
      node->bytes_sent_at_start = node->connection->bytes_sent();
      node->bytes_received_at_start = node->connection->bytes_received();
    }
    peers_ = options_.peer_transfers && set_up_peers();
    {
      std::vector<std::jthread> threads;
      for (auto& node : nodes_) {
        threads.emplace_back([this, &node] { send_all(*node); });
        threads.emplace_back([this, &node] { read_all(*node); });
      }
    }
    // Every reader is done: nothing is owed any more, so nothing can go silent.
    watchdog_->stop();
    DagRun run;
    run.coordinator_cpu_s = process_cpu_seconds() - cpu_at_start;
    run.makespan_s = seconds_between(start_, last_result_.value_or(Clock::now()));
    run.complete = lost_.empty() && peer_failure_.empty() && result_tiles_left_.load() == 0;
    for (auto& node : nodes_) {
      // The tiles stay usable for nothing else: every node gives them back, lost or not (a lost
      // node's connection is closed and ignores the write).
      if (!node->failed) release_everything(*node);
      if (peers_ && !node->failed) {
        // The workers' run ends: their sends stop, their peer links close, and any STORED or
        // SENT a stopped run left on the wire is read here, not by the next command.
        node->connection->set_read_deadline(deadline());
        (void)node->client->end_forwarding(token_);
        node->connection->clear_read_deadline();
      }
      node->stats.bytes_to_node = node->connection->bytes_sent() - node->bytes_sent_at_start;
      node->stats.bytes_from_node = node->connection->bytes_received() - node->bytes_received_at_start;
      run.nodes.push_back(node->stats);
    }
    run.task_compute_s = task_compute_;
    run.task_sent_s = task_sent_;
    run.task_done_s = task_done_;
    run.lost = lost_;
    run.peer_transfers = peers_;
    run.peer_failure = peer_failure_;
    run.notes = notes_;
    return run;
  }

 private:
  // A task's output comes back to the coordinator when it is part of the result or some node fetches it.
  bool returns(std::size_t task) const { return dag_.tasks[task].output.matrix == dag_.result || fetched_[task] != 0; }

  uint32_t id_of(const TileRef& tile) const {
    return first_id_[tile.matrix] + tile.row * dag_.matrices[tile.matrix].tile_cols + tile.col;
  }

  // Which moved tiles travel how. A node's first copy of a tile another node computed comes from
  // that node over a peer link (`peers`): its producer sends it right after the task's jobs. Every
  // other fetch of a computed tile (a node that evicted it and needs it again, the producer
  // included, or any fetch without peers) comes from the coordinator's copy, so its producer
  // returns it.
  void plan_moves(bool peers) {
    fetched_.assign(dag_.tasks.size(), 0);
    peer_targets_.assign(dag_.tasks.size(), {});
    for (auto& node : nodes_) {
      node->peer_pending.clear();
      node->peer_expected.clear();
      std::unordered_set<uint64_t> had_from_peer;
      for (std::size_t task : node_tasks_[node->index]) {
        const auto& reads = dag_.tasks[task].reads;
        std::unordered_set<uint64_t> this_task;  // a tile read twice by one task is fetched once
        for (std::size_t r = 0; r < reads.size(); ++r) {
          if (schedule_.tasks[task].cached[r]) continue;
          const uint64_t key = expr::tile_key(reads[r]);
          const auto from = producer_.find(key);
          if (from == producer_.end() || !this_task.insert(key).second) continue;
          const std::size_t made_on = schedule_.tasks[from->second].node;
          if (peers && made_on != node->index && had_from_peer.insert(key).second) {
            peer_targets_[from->second].push_back(node->index);
            node->peer_pending.insert(id_of(reads[r]));
          } else {
            fetched_[from->second] = 1;
          }
        }
      }
      node->peer_expected = node->peer_pending;
    }
  }

  // Sets every node up for one forwarding run so that tiles can go worker to worker; false (and
  // the moves planned through the coordinator) when a node cannot, nothing moves between nodes,
  // or a setup fails (that node's trouble then shows in the run itself).
  bool set_up_peers() {
    if (nodes_.size() < 2) return false;
    constexpr uint64_t kNeeded = tp::kCapabilityForward | tp::kCapabilityTileSend;
    for (const auto& node : nodes_) {
      if ((node->capabilities & kNeeded) != kNeeded) {
        notes_.push_back(fmt::format("tiles between nodes go through the coordinator: {} does not send tiles to other "
                                     "workers (it offers {})",
                                     node->name, tp::capability_names(node->capabilities)));
        return false;
      }
    }
    plan_moves(/*peers=*/true);
    if (std::all_of(peer_targets_.begin(), peer_targets_.end(), [](const auto& targets) { return targets.empty(); })) {
      plan_moves(/*peers=*/false);
      return false;
    }
    token_ = gemm::new_forward_token();
    for (auto& node : nodes_) {
      node->connection->set_read_deadline(deadline());
      Result<gemm::ForwardReady> ready =
          node->client->set_up_forwarding(gemm::ForwardSetup{token_, options_.first_tile_id, dag_ids_end_, "", 0});
      node->connection->clear_read_deadline();
      if (!ready || !ready->linked) {
        notes_.push_back(fmt::format("tiles between nodes go through the coordinator: setting up {} failed: {}", node->name,
                                     ready ? ready->reason : ready.status().message()));
        plan_moves(/*peers=*/false);
        return false;
      }
    }
    return true;
  }

  // A tile send between two workers failed: the run stops, no node is lost.
  void fail_peer_transfer(const std::string& reason) {
    {
      std::lock_guard lock(lost_mutex_);
      if (peer_failure_.empty()) peer_failure_ = reason;
    }
    stop_ = true;
    tiles_.wake_all();
    for (auto& other : nodes_) other->changed.notify_all();
  }

  // After the task's jobs: SEND_TILE its output to every node whose first copy it is.
  Status send_to_peers(NodeState& node, std::size_t task_index) {
    const TileRef& output = dag_.tasks[task_index].output;
    for (std::size_t to : peer_targets_[task_index]) {
      const NodeState& target = *nodes_[to];
      const gemm::SendTile send{token_, id_of(output), cluster::peer_host(options_.peer_hosts, node.link, target.link, target.host),
                              target.port};
      {
        std::lock_guard lock(node.mutex);
        node.sends_in_flight.push_back({send.tile_id, to, static_cast<uint64_t>(dag_.tile_bytes(output))});
        ++node.sends_owed;
      }
      watchdog_->begin_owing(node.index);  // its SENT
      node.changed.notify_all();
      TESSERA_RETURN_IF_ERROR(writing(node, [&] { return node.client->forward(send); }));
    }
    return Status::ok();
  }

  // A tile this node gets from a peer: waits for its STORED.
  Status await_peer_tile(NodeState& node, uint32_t id) {
    {
      std::unique_lock lock(node.mutex);
      node.changed.wait(lock, [&] { return stop_.load() || node.peer_arrived.contains(id); });
      if (!node.peer_arrived.contains(id)) return cancelled("stopped while waiting for a tile from another node");
    }
    node.stored.insert(id);
    return Status::ok();
  }

  // STORED (a peer's tile arrived) or SENT (a tile this node sent arrived, or why not).
  Status receive_forward(NodeState& node, const gemm::ForwardMessage& message) {
    if (const auto* stored = std::get_if<gemm::Stored>(&message)) {
      bool owed = false;
      {
        std::lock_guard lock(node.mutex);
        if (!peers_ || stored->run_token != token_ || !node.peer_expected.contains(stored->tile_id) ||
            !node.peer_arrived.insert(stored->tile_id).second) {
          return protocol_error(fmt::format("{} announced tile {}, which no node was asked to send it", node.name,
                                            stored->tile_id));
        }
        owed = node.peer_owed.erase(stored->tile_id) != 0;
      }
      if (owed) watchdog_->end_owing(node.index);
      node.changed.notify_all();
      return Status::ok();
    }
    const auto* sent = std::get_if<gemm::Sent>(&message);
    if (sent == nullptr) return protocol_error(fmt::format("{} sent {} mid-run", node.name, tp::message_type_name(static_cast<uint16_t>(gemm::forward_message_type(message)))));
    NodeState::Send send;
    {
      std::lock_guard lock(node.mutex);
      if (!peers_ || sent->run_token != token_ || node.sends_in_flight.empty() ||
          node.sends_in_flight.front().id != sent->tile_id) {
        return protocol_error(fmt::format("{} answered SENT for tile {}, which it was not asked to send next", node.name,
                                          sent->tile_id));
      }
      send = node.sends_in_flight.front();
      node.sends_in_flight.pop_front();
      if (!send.abandoned) --node.sends_owed;
    }
    if (send.abandoned) return Status::ok();  // its receiver was lost; nothing waits for it
    watchdog_->end_owing(node.index);
    NodeState& target = *nodes_[send.to];
    if (!sent->delivered) {
      fail_peer_transfer(fmt::format("{} could not send tile {} to {}: {}", node.name, send.id, target.name, sent->reason));
      node.changed.notify_all();
      return Status::ok();
    }
    node.stats.peer_tiles_sent += 1;
    node.stats.peer_bytes_sent += send.bytes;
    // The receiver owes its STORED now, unless it came first or the run stopped (its sender then
    // no longer waits for the tile, and its reader may be done).
    bool owes = false;
    {
      std::lock_guard lock(target.mutex);
      if (!stop_.load() && !target.peer_arrived.contains(send.id)) owes = target.peer_owed.insert(send.id).second;
    }
    if (owes) watchdog_->begin_owing(target.index);
    target.changed.notify_all();
    node.changed.notify_all();
    return Status::ok();
  }

  // A node failed: it is dropped, everyone else stops sending.
  void lose(NodeState& node, const std::string& reason) {
    {
      std::lock_guard lock(node.mutex);
      if (node.failed) return;
      node.failed = true;
    }
    {
      std::lock_guard lock(lost_mutex_);
      lost_.push_back({node.index, reason});
    }
    watchdog_->retire(node.index);
    // Sends toward it may never finish (a frozen receiver holds its sender's write): their SENT is
    // no longer owed, so the sender is not taken for silent while it waits on the lost one.
    for (auto& other : nodes_) {
      if (other.get() == &node) continue;
      uint32_t abandoned = 0;
      {
        std::lock_guard lock(other->mutex);
        for (NodeState::Send& send : other->sends_in_flight) {
          if (send.to != node.index || send.abandoned) continue;
          send.abandoned = true;
          --other->sends_owed;
          ++abandoned;
        }
      }
      for (uint32_t i = 0; i < abandoned; ++i) watchdog_->end_owing(other->index);
    }
    stop_ = true;
    node.connection->shutdown();
    tiles_.wake_all();
    for (auto& other : nodes_) other->changed.notify_all();
  }

  // Writes with the node's watchdog aware of them: a write into a stopped node's full socket owes.
  template <typename Write>
  Status writing(NodeState& node, Write&& write) {
    watchdog_->begin_owing(node.index);
    Status status = write();
    watchdog_->end_owing(node.index);
    return status;
  }

  // `crc`: the data's CRC32C when already known (a held tile's), else computed here.
  Status store(NodeState& node, uint32_t id, uint64_t rows, uint64_t cols, const double* data,
               std::optional<uint32_t> crc = std::nullopt) {
    Status status = writing(node, [&] {
      return node.client->store(id, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), data, crc);
    });
    if (status) {
      node.stored.insert(id);
      node.stats.tile_bytes_to_node += rows * cols * sizeof(double);
    }
    return status;
  }

  // A STORE of rows x cols straight from `source` (row `row0`, column `col0` on), one buffer per
  // row gathered into the write: nothing is copied on the coordinator.
  Status store_rows(NodeState& node, uint32_t id, const linalg::MatrixView& source, uint64_t row0, uint64_t col0,
                    uint64_t rows, uint64_t cols, uint32_t crc) {
    Status status = writing(node, [&] {
      return node.client->store_rows(id, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols),
                                     source.row(row0) + col0, source.ld, crc);
    });
    if (status) {
      node.stored.insert(id);
      node.stats.tile_bytes_to_node += rows * cols * sizeof(double);
    }
    return status;
  }

  Status release(NodeState& node, std::vector<uint32_t> ids) {
    for (uint32_t id : ids) node.stored.erase(id);
    return writing(node, [&] { return node.client->release(ids); });
  }

  void release_everything(NodeState& node) {
    std::unordered_set<uint32_t> held = node.stored;
    {
      std::lock_guard lock(node.mutex);
      held.insert(node.peer_arrived.begin(), node.peer_arrived.end());  // also those a stopped run left unused
    }
    (void)release(node, std::vector<uint32_t>(held.begin(), held.end()));
  }

  // The id of the special tile `key` names in `ids` (a scalar, an identity block), the same on every node.
  template <typename Key>
  uint32_t special_id(std::map<Key, uint32_t>& ids, Key key) {
    std::lock_guard lock(special_mutex_);
    auto [entry, added] = ids.try_emplace(key, next_special_id_);
    if (added) ++next_special_id_;
    return entry->second;
  }

  // A scalar as a 1x1 tile on the node, stored the first time it is needed there.
  Result<uint32_t> scalar_tile(NodeState& node, double value) {
    const uint32_t id = special_id(scalar_ids_, value);
    if (!node.stored.contains(id)) TESSERA_RETURN_IF_ERROR(store(node, id, 1, 1, &value));
    return id;
  }

  // An identity block of `size`, stored on the node the first time it is needed there.
  Result<uint32_t> identity_tile(NodeState& node, uint64_t size) {
    const uint32_t id = special_id(identity_ids_, size);
    if (!node.stored.contains(id)) {
      std::vector<double> values(size * size, 0.0);
      for (uint64_t i = 0; i < size; ++i) values[i * size + i] = 1.0;
      TESSERA_RETURN_IF_ERROR(store(node, id, size, size, values.data()));
    }
    return id;
  }

  // Whether the job must transpose what it reads (an identity block is its own transpose).
  bool reads_transposed(const TileRef& read) const { return read.transposed && !dag_.matrices[read.matrix].identity; }

  // Where a read comes from on the node: its id there, or none for a zero (off-diagonal identity) tile.
  Result<std::optional<uint32_t>> operand(NodeState& node, const TileRef& read) {
    const expr::TiledMatrix& matrix = dag_.matrices[read.matrix];
    if (!matrix.identity) return std::optional<uint32_t>(id_of(read));
    if (read.row != read.col) return std::optional<uint32_t>();
    Result<uint32_t> id = identity_tile(node, dag_.rows_of(read));
    if (!id) return id.status();
    return std::optional<uint32_t>(*id);
  }

  // Drops what the schedule evicts from the node's cache to make room for `task`.
  Status evict_for(NodeState& node, std::size_t task_index) {
    std::vector<uint32_t> evicted;
    for (const TileRef& tile : schedule_.tasks[task_index].evicted) {
      if (node.stored.contains(id_of(tile))) evicted.push_back(id_of(tile));
    }
    if (evicted.empty()) return Status::ok();
    return release(node, std::move(evicted));
  }

  // Sends the task's read `r` when the schedule fetches it: an input tile from the caller's
  // matrices, a computed one from the coordinator's copy (waiting for it to arrive).
  Status fetch(NodeState& node, std::size_t task_index, std::size_t r) {
    const expr::TileTask& task = dag_.tasks[task_index];
    const expr::TaskPlacement& placement = schedule_.tasks[task_index];
    const TileRef& read = task.reads[r];
    const expr::TiledMatrix& matrix = dag_.matrices[read.matrix];
    if (matrix.identity || placement.cached[r] || node.stored.contains(id_of(read))) return Status::ok();
    const uint64_t rows = dag_.rows_of(read), cols = dag_.cols_of(read);
    if (!matrix.input) {
      if (node.peer_pending.erase(id_of(read)) != 0) return await_peer_tile(node, id_of(read));
      const HeldTile* held = tiles_.wait(expr::tile_key(read), stop_);
      if (held == nullptr) return cancelled("stopped while waiting for a tile");
      return store(node, id_of(read), rows, cols, held->values.data(), held->crc);
    }
    const linalg::MatrixView& source = inputs_[read.matrix];
    const uint64_t row0 = uint64_t{read.row} * dag_.tile, col0 = uint64_t{read.col} * dag_.tile;
    if (cols >= kLeastGatheredColumns) {
      // Rows of 2 KB and up go out from where they lie: cutting a 256-square tile out of a 4096-wide
      // matrix would copy every byte on the sender thread before every send, where a gathered
      // write sends the rows in place.
      const uint32_t crc = tiles_.crc_of(expr::tile_key(read), [&] {
        tp::Crc32c checksum;
        for (uint64_t i = 0; i < rows; ++i) checksum.update(source.row(row0 + i) + col0, cols * sizeof(double));
        return checksum.value();
      });
      return store_rows(node, id_of(read), source, row0, col0, rows, cols, crc);
    }
    const HeldTile* held = tiles_.get_or_pack(expr::tile_key(read), [&] {
      std::vector<double> packed(rows * cols);
      for (uint64_t i = 0; i < rows; ++i) std::copy_n(source.row(row0 + i) + col0, cols, packed.data() + i * cols);
      return packed;
    });
    return store(node, id_of(read), rows, cols, held->values.data(), held->crc);
  }

  // Waits for room in the node's job window; false when the run stops first.
  bool wait_for_room(NodeState& node) {
    std::unique_lock lock(node.mutex);
    node.changed.wait(lock, [&] { return stop_.load() || node.client->jobs_owed() < options_.jobs_in_flight; });
    return !stop_.load();
  }

  Status send_job(NodeState& node, std::size_t task_index, gemm::Job job) {
    if (!wait_for_room(node)) return cancelled("stopped");
    {
      std::lock_guard lock(node.mutex);
      job.job_id = node.next_job_id++;
      node.job_task[job.job_id] = task_index;
    }
    watchdog_->begin_owing(node.index, (job.flags & gemm::kJobSendResult) != 0 ? 2 : 1);
    ++node.stats.jobs;
    // The client counts the job as owed before it writes it, so its CREDIT is never early.
    Status written = writing(node, [&] { return node.client->job(job); });
    {
      std::lock_guard lock(node.mutex);  // the reader may wait on what the job made owed
    }
    node.changed.notify_all();
    return written;
  }

  // The task's output as zeros, stored from here (every operand was a zero tile).
  Status store_zero_output(NodeState& node, std::size_t task_index) {
    const TileRef& output = dag_.tasks[task_index].output;
    std::vector<double> zeros(dag_.rows_of(output) * dag_.cols_of(output), 0.0);
    TESSERA_RETURN_IF_ERROR(store(node, id_of(output), dag_.rows_of(output), dag_.cols_of(output), zeros.data()));
    if (returns(task_index)) deliver(task_index, std::move(zeros));
    return Status::ok();
  }

  Status compute(NodeState& node, std::size_t task_index) {
    const expr::TileTask& task = dag_.tasks[task_index];
    const uint64_t rows = dag_.rows_of(task.output), cols = dag_.cols_of(task.output);
    const uint32_t send_result = returns(task_index) ? gemm::kJobSendResult : 0u;
    std::vector<gemm::Job> jobs;
    // Per job, the reads it needs: k and depth + k for a product's step k, r (twice) for a sum's operand r.
    std::vector<std::array<std::size_t, 2>> job_reads;
    switch (task.op) {
      case Op::kProduct: {
        const std::size_t depth = task.reads.size() / 2;
        for (std::size_t k = 0; k < depth; ++k) {
          const TileRef& left = task.reads[k];
          const TileRef& right = task.reads[depth + k];
          Result<std::optional<uint32_t>> a = operand(node, left);
          if (!a) return a.status();
          Result<std::optional<uint32_t>> b = operand(node, right);
          if (!b) return b.status();
          if (!*a || !*b) continue;
          gemm::Job job;
          job.op = gemm::JobOp::kGemmAccumulate;
          job.a_tile = **a;
          job.b_tile = **b;
          job.m = static_cast<uint32_t>(rows);
          job.n = static_cast<uint32_t>(cols);
          // A transposed operand is read from the tile as stored, its rows and columns swapped.
          job.k = static_cast<uint32_t>(reads_transposed(left) ? dag_.rows_of(left) : dag_.cols_of(left));
          if (reads_transposed(left)) job.flags |= gemm::kJobTransposeA;
          if (reads_transposed(right)) job.flags |= gemm::kJobTransposeB;
          jobs.push_back(job);
          job_reads.push_back({k, depth + k});
        }
        break;
      }
      case Op::kSum:
      case Op::kDifference:
      case Op::kScale:
      case Op::kTranspose: {  // a transpose that is the result: a transposed copy of each tile
        const expr::Node& node_expr = *dag_.matrices[task.output.matrix].node;
        for (std::size_t r = 0; r < task.reads.size(); ++r) {
          Result<std::optional<uint32_t>> a = operand(node, task.reads[r]);
          if (!a) return a.status();
          if (!*a) continue;
          const double scalar = task.op == Op::kScale ? node_expr.scalar : (task.op == Op::kDifference && r == 1 ? -1.0 : 1.0);
          Result<uint32_t> s = scalar_tile(node, scalar);
          if (!s) return s.status();
          gemm::Job job;
          job.op = gemm::JobOp::kAddScaled;
          job.a_tile = **a;
          job.b_tile = *s;
          job.m = static_cast<uint32_t>(rows);
          job.n = static_cast<uint32_t>(cols);
          job.k = 0;
          if (reads_transposed(task.reads[r])) job.flags |= gemm::kJobTransposeA;
          jobs.push_back(job);
          job_reads.push_back({r, r});
        }
        break;
      }
      default:
        return internal_error(fmt::format("task {} is a power, which the DAG never holds", task_index));
    }
    // Each job goes out right after its own tiles, so the node starts on the first step while the
    // rest of the task's tiles travel; the reads no job used (beside an identity's zero tile) go
    // last, so the node ends up holding what the schedule's cache holds.
    std::vector<bool> fetched(task.reads.size(), false);
    const auto fetch_read = [&](std::size_t r) -> Status {
      if (fetched[r]) return Status::ok();
      fetched[r] = true;
      return fetch(node, task_index, r);
    };
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      TESSERA_RETURN_IF_ERROR(fetch_read(job_reads[j][0]));
      TESSERA_RETURN_IF_ERROR(fetch_read(job_reads[j][1]));
      gemm::Job& job = jobs[j];
      job.c_tile = id_of(task.output);
      if (j == 0) {
        job.flags |= gemm::kJobCreateOutput;
        job.c_rows = static_cast<uint32_t>(rows);
        job.c_cols = static_cast<uint32_t>(cols);
      }
      if (j + 1 == jobs.size()) job.flags |= send_result;
      if (j == 0) task_sent_[task_index] = seconds_between(start_, Clock::now());
      TESSERA_RETURN_IF_ERROR(send_job(node, task_index, job));
    }
    for (std::size_t r = 0; r < task.reads.size(); ++r) TESSERA_RETURN_IF_ERROR(fetch_read(r));
    if (jobs.empty()) {
      TESSERA_RETURN_IF_ERROR(store_zero_output(node, task_index));
    } else {
      node.stored.insert(id_of(task.output));
    }
    return send_to_peers(node, task_index);
  }

  void send_all(NodeState& node) {
    for (std::size_t task : node_tasks_[node.index]) {
      if (stop_.load()) break;
      Status status = evict_for(node, task);
      if (status) status = compute(node, task);
      if (!status) {
        if (!stop_.load() || status.code() != StatusCode::kCancelled) lose(node, status.message());
        break;
      }
      ++node.stats.tasks;
    }
    {
      std::lock_guard lock(node.mutex);
      node.sender_done = true;
    }
    node.changed.notify_all();
  }

  // A task's output the coordinator now holds: into the result when it is part of it, and kept
  // when some node fetches it.
  void deliver(std::size_t task, std::vector<double> values, std::optional<uint32_t> crc = std::nullopt) {
    const TileRef& tile = dag_.tasks[task].output;
    if (tile.matrix == dag_.result) {
      const uint64_t cols = dag_.cols_of(tile);
      for (uint64_t i = 0; i < dag_.rows_of(tile); ++i) {
        std::copy_n(values.data() + i * cols, cols, result_.row(tile.row * dag_.tile + i) + tile.col * dag_.tile);
      }
      std::lock_guard lock(lost_mutex_);
      last_result_ = Clock::now();
      --result_tiles_left_;
    }
    if (fetched_[task] == 0) return;
    const uint32_t checksum = crc ? *crc : gemm::tile_crc32c(values);
    tiles_.put(expr::tile_key(tile), std::move(values), checksum);
  }

  Status receive(NodeState& node) {
    Result<gemm::GemmClient::Reply> reply = node.client->next(
        {tp::MessageType::kCredit, tp::MessageType::kResult, tp::MessageType::kStored, tp::MessageType::kSent});
    if (!reply) return reply.status();
    watchdog_->progress(node.index);
    if (auto* forwarded = std::get_if<gemm::ForwardMessage>(&*reply)) return receive_forward(node, *forwarded);
    if (const auto* credited = std::get_if<gemm::Credit>(&*reply)) {
      const gemm::Credit credit = *credited;
      std::size_t task = 0;
      {
        std::lock_guard lock(node.mutex);
        const auto found = node.job_task.find(credit.job_id);
        if (found == node.job_task.end() || credit.credits != 1) {
          return protocol_error(fmt::format("{} sent a CREDIT for job {} it was not given", node.name, credit.job_id));
        }
        task = found->second;
      }
      watchdog_->end_owing(node.index);
      task_compute_[task] += credit.compute_seconds;
      task_done_[task] = seconds_between(start_, Clock::now());  // the task's jobs are credited in order
      node.stats.compute_s += credit.compute_seconds;
      node.stats.finish_s = seconds_between(start_, Clock::now());
      if (node.stats.start_s < 0.0) node.stats.start_s = std::max(0.0, node.stats.finish_s - credit.compute_seconds);
      node.changed.notify_all();
      return Status::ok();
    }
    const auto& prefix = std::get<gemm::GemmClient::ResultHeader>(*reply);
    std::size_t task = 0;
    {
      std::lock_guard lock(node.mutex);
      const auto found = node.job_task.find(prefix.job_id);
      if (found == node.job_task.end() || node.client->results_owed() == 0) {
        return protocol_error(fmt::format("{} sent a RESULT for job {} that asked for none", node.name, prefix.job_id));
      }
      task = found->second;
    }
    const TileRef& output = dag_.tasks[task].output;
    if (prefix.tile.tile_id != id_of(output) || prefix.tile.rows != dag_.rows_of(output) || prefix.tile.cols != dag_.cols_of(output)) {
      return protocol_error(fmt::format("{} sent tile {} ({}x{}) where tile {} ({}x{}) was due", node.name,
                                        prefix.tile.tile_id, prefix.tile.rows, prefix.tile.cols, id_of(output),
                                        dag_.rows_of(output), dag_.cols_of(output)));
    }
    std::vector<double> values(dag_.rows_of(output) * dag_.cols_of(output));
    TESSERA_RETURN_IF_ERROR(node.client->read_result(prefix, values));
    node.stats.tile_bytes_from_node += values.size() * sizeof(double);
    // read_result checked the data against the prefix's CRC, so it is the data's.
    deliver(task, std::move(values), prefix.tile.data_crc32c);
    {
      std::lock_guard lock(node.mutex);  // the sender may wait on what this result made no longer owed
    }
    watchdog_->end_owing(node.index);
    node.stats.finish_s = seconds_between(start_, Clock::now());
    node.changed.notify_all();
    return Status::ok();
  }

  void read_all(NodeState& node) {
    for (;;) {
      {
        std::unique_lock lock(node.mutex);
        node.changed.wait(lock, [&] { return node.failed || node.owed() > 0 || node.sender_done; });
        if (node.failed || (node.owed() == 0 && node.sender_done)) break;
      }
      if (Status status = receive(node); !status) {
        lose(node, status.message());
        break;
      }
    }
  }

  std::chrono::milliseconds deadline() const {
    return std::chrono::milliseconds(static_cast<int64_t>(1000.0 * deadline_s()));
  }

  double deadline_s() const {
    if (options_.node_timeout_s > 0.0) return options_.node_timeout_s;
    return std::max(options_.floor_s, 4.0 * schedule_.makespan_s);
  }

  // The watchdog's settings: a node that owes frames (an unanswered job, a RESULT still due, a write
  // in progress) and has been silent past the deadline is lost.
  cluster::SilentNodeWatchdog::Options silence_watch() {
    cluster::SilentNodeWatchdog::Options options;
    options.period = std::chrono::milliseconds(50);
    options.deadline_s = [deadline = deadline_s()](std::size_t) { return deadline; };
    options.describe = [this](const cluster::SilentNodeWatchdog::Silence& silence) {
      NodeState& node = *nodes_[silence.node];
      std::lock_guard lock(node.mutex);
      return fmt::format("{} is unresponsive: no frame for {:.1f} s while {} jobs were in flight", node.name,
                         silence.quiet_s, node.client->jobs_owed());
    };
    options.on_silent = [this](std::size_t index, const std::string& reason) { lose(*nodes_[index], reason); };
    return options;
  }

  const expr::TaskDag& dag_;
  const expr::Schedule& schedule_;
  const std::vector<linalg::MatrixView>& inputs_;
  linalg::MutableMatrixView result_;
  const DagRunOptions& options_;
  std::vector<std::unique_ptr<NodeState>> nodes_;
  std::vector<std::vector<std::size_t>> node_tasks_;
  std::vector<char> fetched_;  // per task: some node fetches its output (the coordinator keeps a copy)
  std::unordered_map<uint64_t, std::size_t> producer_;       // computed tile -> its task
  std::vector<std::vector<std::size_t>> peer_targets_;        // per task: nodes its output is sent to
  bool peers_ = false;                                        // tiles go worker to worker this run
  uint64_t token_ = 0;                                        // the workers' forwarding run
  std::string peer_failure_;                                  // guarded by lost_mutex_
  std::vector<std::string> notes_;
  uint32_t dag_ids_end_ = 0;                                  // the DAG's tile ids end here
  std::vector<uint32_t> first_id_;
  std::mutex special_mutex_;
  uint32_t next_special_id_ = 0;
  std::map<double, uint32_t> scalar_ids_;
  std::map<uint64_t, uint32_t> identity_ids_;
  CoordinatorTiles tiles_;
  std::atomic<bool> stop_{false};
  std::mutex lost_mutex_;
  std::vector<LostNode> lost_;
  std::optional<Clock::time_point> last_result_;
  std::atomic<uint64_t> result_tiles_left_{0};
  std::vector<double> task_compute_;
  std::vector<double> task_sent_;  // per task: first JOB written (its node's sender thread)
  std::vector<double> task_done_;  // per task: last CREDIT in (its node's reader thread)
  Clock::time_point start_;
  // Made when the run starts (its thread runs from then); stopped once every reader is done.
  std::unique_ptr<cluster::SilentNodeWatchdog> watchdog_;
};

}  // namespace

uint64_t DagRun::tile_bytes() const {
  uint64_t bytes = 0;
  for (const DagNodeStats& node : nodes) bytes += node.tile_bytes_to_node + node.tile_bytes_from_node + node.peer_bytes_sent;
  return bytes;
}

uint64_t DagRun::coordinator_bytes_sent() const {
  uint64_t bytes = 0;
  for (const DagNodeStats& node : nodes) bytes += node.bytes_to_node;
  return bytes;
}

Result<DagRun> run_dag(cluster::ClusterConnection& cluster, const std::vector<std::size_t>& links, const expr::TaskDag& dag,
                       const expr::Schedule& schedule, const std::vector<linalg::MatrixView>& inputs,
                       linalg::MutableMatrixView result, const DagRunOptions& options) {
  if (schedule.tasks.size() != dag.tasks.size() || schedule.order.size() != dag.tasks.size()) {
    return invalid_argument("the schedule does not place every task of the DAG");
  }
  for (const expr::TaskPlacement& placement : schedule.tasks) {
    if (placement.node >= links.size()) return invalid_argument("the schedule names a node the run was not given");
  }
  for (std::size_t link : links) {
    if (link >= cluster.links().size()) return invalid_argument("a node index outside the cluster");
  }
  if (inputs.size() != dag.matrices.size()) return invalid_argument("one input view per DAG matrix is required");
  for (std::size_t m = 0; m < dag.matrices.size(); ++m) {
    const expr::TiledMatrix& matrix = dag.matrices[m];
    if (matrix.input && (inputs[m].rows != matrix.rows || inputs[m].cols != matrix.cols)) {
      return invalid_argument(fmt::format("input {} is {}x{}, the DAG needs {}x{}", matrix.node->name, inputs[m].rows,
                                          inputs[m].cols, matrix.rows, matrix.cols));
    }
  }
  const expr::TiledMatrix& out = dag.matrices[dag.result];
  if (result.rows != out.rows || result.cols != out.cols) return invalid_argument("the result view has the wrong shape");
  if (out.input || out.identity) return invalid_argument("the expression computes nothing");
  DagRunner runner(cluster, links, dag, schedule, inputs, result, options);
  return runner.run();
}

}  // namespace tessera::balance::expr
