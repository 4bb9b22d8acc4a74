#include "tessera/balance/expr/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <list>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace tessera::balance::expr {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

uint32_t tiles_along(uint64_t length, uint64_t tile) { return static_cast<uint32_t>((length + tile - 1) / tile); }
uint64_t extent(uint64_t length, uint64_t tile, uint32_t index) { return std::min(tile, length - index * tile); }

TileRef tile_of(uint64_t key) {
  return {static_cast<std::size_t>(key >> 40), static_cast<uint32_t>((key >> 20) & 0xFFFFF),
          static_cast<uint32_t>(key & 0xFFFFF)};
}

double usable(double value) { return value > 0.0 && std::isfinite(value) ? value : 0.0; }

// A rate for moving data: NaN or <= 0 cannot move anything (0); +inf is an unlimited link.
double link_rate(double bytes_per_s) { return bytes_per_s > 0.0 ? bytes_per_s : 0.0; }

// Moving `bytes` to node `to` from node `from` (kNone: the coordinator), at the slower of the two
// links' rates: `busy_s` occupies the receiving link; the tile arrives `latency_s` later (both
// links' latencies for a tile from another node, which the coordinator reads and writes again).
// Transfers queued on one link each pay the latency but overlap it, as frames written back to
// back do.
struct Transfer {
  double busy_s = 0.0;
  double latency_s = 0.0;
  double total() const { return busy_s + latency_s; }
};

Transfer transfer(const model::ClusterModel& model, std::size_t from, std::size_t to, double bytes) {
  const model::LinkModel& in = model.nodes[to].link;
  double rate = link_rate(in.to_node_bytes_per_s);
  double latency = in.loaded_latency();
  if (from != kNone) {
    const model::LinkModel& out = model.nodes[from].link;
    rate = std::min(rate, link_rate(out.from_node_bytes_per_s));
    latency += out.loaded_latency();
  }
  if (!(rate > 0.0)) return {kInfinity, kInfinity};
  return {bytes / rate, latency};  // bytes / inf is 0
}

// One node's tile cache: least recently used first out, but never a tile the task being placed
// reads, nor the last copy of an intermediate some task still needs (those are pinned).
class TileCache {
 public:
  bool holds(uint64_t key) const { return where_.count(key) != 0; }
  double ready(uint64_t key) const { return where_.at(key)->ready; }
  void touch(uint64_t key) {
    auto entry = where_.at(key);
    order_.splice(order_.end(), order_, entry);
  }
  void insert(uint64_t key, double bytes, double ready) {
    order_.push_back({key, bytes, ready});
    where_[key] = std::prev(order_.end());
    used_ += bytes;
  }
  // Evicts until `room` bytes fit in `capacity`; returns the keys evicted.
  template <typename Pinned>
  std::vector<uint64_t> make_room(double room, double capacity, const Pinned& pinned) {
    std::vector<uint64_t> evicted;
    for (auto entry = order_.begin(); used_ + room > capacity && entry != order_.end();) {
      if (pinned(entry->key)) {
        ++entry;
        continue;
      }
      used_ -= entry->bytes;
      evicted.push_back(entry->key);
      where_.erase(entry->key);
      entry = order_.erase(entry);
    }
    return evicted;
  }

 private:
  struct Entry {
    uint64_t key;
    double bytes;
    double ready;
  };
  std::list<Entry> order_;
  std::unordered_map<uint64_t, std::list<Entry>::iterator> where_;
  double used_ = 0.0;
};

}  // namespace

uint64_t tile_key(const TileRef& tile) {
  return (static_cast<uint64_t>(tile.matrix) << 40) | (static_cast<uint64_t>(tile.row) << 20) | tile.col;
}

uint64_t TaskDag::rows_of(const TileRef& ref) const { return extent(matrices[ref.matrix].rows, tile, ref.row); }
uint64_t TaskDag::cols_of(const TileRef& ref) const { return extent(matrices[ref.matrix].cols, tile, ref.col); }

double TaskDag::tile_bytes(const TileRef& ref) const {
  return 8.0 * static_cast<double>(rows_of(ref)) * static_cast<double>(cols_of(ref));
}

TaskDag lower_to_tasks(const Expr& e, uint64_t tile) {
  TaskDag dag;
  const std::vector<Expr> nodes = nodes_in_order(e);
  // Large enough that no matrix has 2^20 tiles along a side (key_of).
  uint64_t longest = 1;
  for (const Expr& node : nodes) longest = std::max({longest, node->rows, node->cols});
  constexpr uint64_t kMaxTilesAlong = (uint64_t{1} << 20) - 1;
  dag.tile = std::max<uint64_t>({tile, 1, (longest + kMaxTilesAlong - 1) / kMaxTilesAlong});
  const uint64_t t = dag.tile;
  std::unordered_map<const Node*, std::size_t> index_of;
  std::vector<std::vector<std::size_t>> producer;  // per matrix, per tile: the task computing it
  for (const Expr& node : nodes) {
    TiledMatrix m;
    m.node = node;
    m.rows = node->rows;
    m.cols = node->cols;
    m.tile_rows = tiles_along(m.rows, t);
    m.tile_cols = tiles_along(m.cols, t);
    m.input = node->op == Op::kInput;
    m.identity = node->op == Op::kIdentity;
    // A transpose that something reads is only a way of reading its operand's tiles; the result's
    // own transpose is computed (a transposed copy per tile).
    if (node->op == Op::kTranspose && node != e) m.transpose_of = index_of.at(node->operands[0].get());
    const std::size_t id = dag.matrices.size();
    index_of[node.get()] = id;
    dag.matrices.push_back(m);
    producer.emplace_back(std::size_t{m.tile_rows} * m.tile_cols, kNone);
    if (m.input || m.identity || m.transpose_of) continue;
    const std::size_t a = index_of.at(node->operands[0].get());
    const std::size_t b = node->operands.size() > 1 ? index_of.at(node->operands[1].get()) : kNone;
    // Tile (r, c) of matrix `x` as stored: through transposes, the mirrored tile of what they read.
    const auto ref = [&](std::size_t x, uint32_t r, uint32_t c) {
      TileRef stored{x, r, c};
      while (dag.matrices[stored.matrix].transpose_of) {
        stored = {*dag.matrices[stored.matrix].transpose_of, stored.col, stored.row, !stored.transposed};
      }
      return stored;
    };
    for (uint32_t i = 0; i < m.tile_rows; ++i) {
      for (uint32_t j = 0; j < m.tile_cols; ++j) {
        TileTask task;
        task.op = node->op;
        task.output = {id, i, j};
        const double rows = static_cast<double>(extent(m.rows, t, i));
        const double cols = static_cast<double>(extent(m.cols, t, j));
        task.output_bytes = 8.0 * rows * cols;
        switch (node->op) {
          case Op::kProduct: {
            const uint32_t depth = dag.matrices[a].tile_cols;
            for (uint32_t k = 0; k < depth; ++k) task.reads.push_back(ref(a, i, k));
            for (uint32_t k = 0; k < depth; ++k) task.reads.push_back(ref(b, k, j));
            task.flops = 2.0 * rows * cols * static_cast<double>(dag.matrices[a].cols);
            break;
          }
          case Op::kSum:
          case Op::kDifference:
            task.reads = {ref(a, i, j), ref(b, i, j)};
            task.flops = rows * cols;
            break;
          case Op::kScale:
            task.reads = {ref(a, i, j)};
            task.flops = rows * cols;
            break;
          case Op::kTranspose:
            task.reads = {ref(a, j, i)};
            task.reads[0].transposed = !task.reads[0].transposed;
            task.flops = rows * cols;
            break;
          default: break;  // kPower never reaches here (REQUIRES)
        }
        producer[id][std::size_t{i} * m.tile_cols + j] = dag.tasks.size();
        dag.tasks.push_back(std::move(task));
      }
    }
  }
  dag.result = index_of.at(e.get());
  dag.successors.assign(dag.tasks.size(), {});
  for (std::size_t task = 0; task < dag.tasks.size(); ++task) {
    for (const TileRef& read : dag.tasks[task].reads) {
      const std::size_t from = producer[read.matrix][std::size_t{read.row} * dag.matrices[read.matrix].tile_cols + read.col];
      if (from != kNone) dag.successors[from].push_back(task);
    }
  }
  for (auto& next : dag.successors) {
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
  }
  return dag;
}

namespace {

// Seconds node `p` computes `task`, not counting the receive charge of what it fetches. A product
// tile runs as one GEMM per tile of its inner dimension, so its speed is the speed curve's at
// that GEMM's square-equivalent size, not the whole task's.
double compute_seconds(const TaskDag& dag, const TileTask& task, const model::NodeModel& node) {
  if (task.flops <= 0.0) return 0.0;
  const double jobs = std::max<double>(1.0, static_cast<double>(task.reads.size() / 2));
  double size = std::sqrt(task.flops);
  if (task.op == Op::kProduct) {
    // The job's own shape: rows x cols of the output, inner depth = flops / (2 rows cols jobs).
    const double rows = static_cast<double>(dag.rows_of(task.output));
    const double cols = static_cast<double>(dag.cols_of(task.output));
    size = model::square_equivalent_size(rows, cols, task.flops / (2.0 * rows * cols * jobs));
  }
  const double rate = usable(node.speed.gflops_at(size)) * 1e9;
  if (rate <= 0.0) return kInfinity;
  const double availability = node.cpu.effective_availability();
  // One job per tile of the inner dimension for a product, one per operand for a sum.
  const double overhead = std::max(node.cpu.job_overhead_s, 0.0) *
                          (task.op == Op::kProduct ? jobs : static_cast<double>(task.reads.size()));
  return (task.flops / rate + overhead) / availability;
}

}  // namespace

namespace {

Schedule heft_once(const TaskDag& dag, const model::ClusterModel& model, const ScheduleOptions& options) {
  const std::size_t nodes = model.nodes.size();
  const std::size_t tasks = dag.tasks.size();
  Schedule schedule;
  schedule.tasks.assign(tasks, {});
  schedule.busy_s.assign(nodes, 0.0);
  const auto move = [&](std::size_t from, std::size_t to, double bytes) {
    return options.zero_communication ? Transfer{} : transfer(model, from, to, bytes);
  };

  // Upward ranks: mean compute time plus the costliest path to the end, transfers at their mean.
  std::vector<double> mean_compute(tasks, 0.0), rank(tasks, 0.0);
  for (std::size_t task = 0; task < tasks; ++task) {
    double sum = 0.0;
    std::size_t usable_nodes = 0;
    for (const model::NodeModel& node : model.nodes) {
      const double seconds = compute_seconds(dag, dag.tasks[task], node);
      if (std::isfinite(seconds)) {
        sum += seconds;
        ++usable_nodes;
      }
    }
    mean_compute[task] = usable_nodes > 0 ? sum / static_cast<double>(usable_nodes) : kInfinity;
  }
  for (std::size_t task = tasks; task-- > 0;) {
    double longest = 0.0;
    if (!dag.successors[task].empty()) {
      double mean_move = 0.0;
      for (std::size_t p = 0; p < nodes; ++p) mean_move += move(kNone, p, dag.tasks[task].output_bytes).total();
      mean_move /= static_cast<double>(nodes);
      for (std::size_t next : dag.successors[task]) longest = std::max(longest, mean_move + rank[next]);
    }
    rank[task] = mean_compute[task] + longest;
  }
  std::vector<std::size_t> order(tasks);
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Decreasing rank is a topological order when every compute time is > 0; ties keep DAG order.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rank[a] > rank[b]; });

  std::vector<double> node_free(nodes, 0.0), link_free(nodes, 0.0);
  // The switch's uplink toward its nodes: every tile a node behind it receives through the
  // coordinator flows through it too, one tile after another as on each node's own link; a tile
  // sent worker to worker from another node behind the switch does not.
  const std::vector<bool> behind = model::behind_switch_of(model);
  const double uplink_rate = model.switch_uplink_bytes_per_s;
  double uplink_free = 0.0;
  std::vector<TileCache> caches(nodes);
  std::unordered_map<uint64_t, std::vector<std::size_t>> holders;  // computed tile -> nodes holding it
  std::unordered_map<uint64_t, std::size_t> pending_reads;          // computed tile -> reads not yet placed
  std::unordered_set<uint64_t> returned;                           // computed tiles sent back to the coordinator
  for (const TileTask& task : dag.tasks) {
    for (const TileRef& read : task.reads) {
      if (!dag.matrices[read.matrix].input && !dag.matrices[read.matrix].identity) ++pending_reads[tile_key(read)];
    }
  }

  for (std::size_t task_index : order) {
    const TileTask& task = dag.tasks[task_index];
    struct Trial {
      double finish = kInfinity, start = 0.0, link = 0.0, receive = 0.0, uplink = 0.0;
      bool through_uplink = false;
      std::vector<bool> cached;
      std::vector<std::pair<uint64_t, double>> fetched;  // key, ready time on the node
      std::vector<std::size_t> sources;                   // per fetched tile: the node it came from (kNone: inputs)
    };
    Trial best;
    std::size_t best_node = 0;
    for (std::size_t p = 0; p < nodes; ++p) {
      const double compute = compute_seconds(dag, task, model.nodes[p]);
      if (!std::isfinite(compute)) continue;
      Trial trial;
      trial.link = link_free[p];
      trial.uplink = uplink_free;
      const bool uplink_binds = behind[p] && uplink_rate > 0.0 && !options.zero_communication;
      bool through_uplink = false;  // the fetch that arrives first crossed the uplink
      double ready = 0.0;
      std::unordered_set<uint64_t> fetched_here;
      for (const TileRef& read : task.reads) {
        const TiledMatrix& m = dag.matrices[read.matrix];
        const uint64_t key = tile_key(read);
        if (m.identity) {
          trial.cached.push_back(true);
          continue;
        }
        if (caches[p].holds(key)) {
          trial.cached.push_back(true);
          ready = std::max(ready, caches[p].ready(key));
          continue;
        }
        if (fetched_here.count(key) != 0) {  // read twice by this task (A's tile in A * A): fetched once
          trial.cached.push_back(false);
          continue;
        }
        const double bytes = dag.tile_bytes(read);
        // The link is busy while the bytes flow; the tile arrives a latency after they are sent.
        double arrival = kInfinity, link_done = kInfinity;
        bool uplink_used = false;
        std::size_t source = kNone;
        const auto consider = [&](double available, const Transfer& t, bool via_uplink, std::size_t from) {
          const double begin = std::max(trial.link, via_uplink ? std::max(available, trial.uplink) : available);
          const double sent = begin + (via_uplink ? std::max(t.busy_s, bytes / uplink_rate) : t.busy_s);
          if (sent + t.latency_s < arrival) {
            arrival = sent + t.latency_s;
            link_done = sent;
            uplink_used = via_uplink;
            source = from;
          }
        };
        if (m.input) {
          consider(0.0, move(kNone, p, bytes), uplink_binds, kNone);
        } else {
          for (std::size_t q : holders[key]) {
            consider(caches[q].ready(key), move(q, p, bytes), uplink_binds && !(options.peer_transfers && behind[q]), q);
          }
        }
        trial.link = link_done;
        if (uplink_used) {
          trial.uplink = link_done;
          through_uplink = true;
        }
        ready = std::max(ready, arrival);
        trial.receive += options.zero_communication ? 0.0 : bytes * std::max(model.nodes[p].cpu.receive_s_per_byte, 0.0);
        trial.cached.push_back(false);
        trial.fetched.emplace_back(key, arrival);
        trial.sources.push_back(source);
        fetched_here.insert(key);
      }
      trial.through_uplink = through_uplink;
      trial.start = std::max(node_free[p], ready);
      // A tile of the result goes back to the coordinator from the job that finishes it, written by
      // the worker's compute thread before its next job starts: the node pays the send.
      double send_back = 0.0;
      if (task.output.matrix == dag.result && !options.zero_communication) {
        const model::LinkModel& link = model.nodes[p].link;
        const double rate = link_rate(link.from_node_bytes_per_s);
        send_back = rate > 0.0 ? link.latency_s + task.output_bytes / rate : kInfinity;
      }
      trial.finish = trial.start + compute + trial.receive + send_back;
      if (trial.finish < best.finish) {
        best = std::move(trial);
        best_node = p;
      }
    }
    const std::size_t p = best_node;
    schedule.order.push_back(task_index);
    TaskPlacement& placement = schedule.tasks[task_index];
    placement.node = p;
    placement.start_s = best.start;
    placement.finish_s = best.finish;
    placement.cached = best.cached;
    node_free[p] = best.finish;
    link_free[p] = best.link;
    if (best.through_uplink) uplink_free = std::max(uplink_free, best.uplink);
    schedule.busy_s[p] += best.finish - best.start;
    // The cache: what this task reads stays, the fetched tiles and the output come in.
    std::unordered_set<uint64_t> reading;
    for (const TileRef& read : task.reads) reading.insert(tile_key(read));
    for (const TileRef& read : task.reads) {
      const uint64_t key = tile_key(read);
      if (caches[p].holds(key)) caches[p].touch(key);
      if (const auto pending = pending_reads.find(key); pending != pending_reads.end() && pending->second > 0) {
        --pending->second;
      }
    }
    const auto pinned = [&](uint64_t key) {
      if (reading.count(key) != 0) return true;
      const auto pending = pending_reads.find(key);
      // The last copy of an intermediate that some task still reads is never dropped.
      return pending != pending_reads.end() && pending->second > 0 && holders[key].size() <= 1;
    };
    double incoming = task.output_bytes;
    for (const auto& [key, arrival] : best.fetched) incoming += dag.tile_bytes(tile_of(key));
    for (uint64_t evicted : caches[p].make_room(incoming, options.cache_bytes, pinned)) {
      auto& who = holders[evicted];
      who.erase(std::remove(who.begin(), who.end(), p), who.end());
      placement.evicted.push_back(tile_of(evicted));
    }
    for (std::size_t f = 0; f < best.fetched.size(); ++f) {
      const auto& [key, arrival] = best.fetched[f];
      const double bytes = dag.tile_bytes(tile_of(key));
      // The node a computed tile came from spends the CPU of sending it: once per copy worker to
      // worker, once for its return to the coordinator otherwise (which then sends every copy).
      // Charged after its tasks placed so far (the send runs beside its next ones).
      const std::size_t source = best.sources[f];
      if (source != kNone && !options.zero_communication && (options.peer_transfers || returned.insert(key).second)) {
        const double send_s = bytes * std::max(model.nodes[source].cpu.receive_s_per_byte, 0.0);
        node_free[source] += send_s;
        schedule.busy_s[source] += send_s;
      }
      schedule.bytes_moved += bytes;
      // A tile from another node goes through the coordinator, in and then out, or worker to worker.
      const bool input = dag.matrices[tile_of(key).matrix].input;
      schedule.coordinator_bytes += input ? bytes : options.peer_transfers ? 0.0 : 2.0 * bytes;
      caches[p].insert(key, bytes, arrival);
      if (!dag.matrices[tile_of(key).matrix].input) holders[key].push_back(p);
    }
    const uint64_t output = tile_key(task.output);
    caches[p].insert(output, task.output_bytes, best.finish);
    holders[output].push_back(p);
  }

  // The result's tiles go back to the coordinator: each task that finishes one already paid its
  // send (send_back above), so here they are only counted.
  const TiledMatrix& result = dag.matrices[dag.result];
  for (uint32_t i = 0; i < result.tile_rows; ++i) {
    for (uint32_t j = 0; j < result.tile_cols; ++j) {
      const TileRef tile{dag.result, i, j};
      if (result.input || result.identity || holders[tile_key(tile)].empty()) continue;
      const double bytes = dag.tile_bytes(tile);
      schedule.bytes_moved += bytes;
      schedule.coordinator_bytes += bytes;
    }
  }
  for (const TaskPlacement& placement : schedule.tasks) schedule.makespan_s = std::max(schedule.makespan_s, placement.finish_s);
  return schedule;
}

}  // namespace

Schedule heft(const TaskDag& dag, const model::ClusterModel& model, const ScheduleOptions& options) {
  Schedule schedule = heft_once(dag, model, options);
  if (options.zero_communication || !(model.coordinator_cpu_s_per_byte > 0.0)) return schedule;
  // Nodes on the coordinator's host share its cores with the coordinator moving the schedule's
  // bytes: each pass gives them the share of their speed the last schedule leaves them
  // (host_availability), and is scheduled again; two passes settle it in practice.
  for (int pass = 0; pass < 2; ++pass) {
    if (!(schedule.makespan_s > 0.0) || !std::isfinite(schedule.makespan_s)) break;
    std::vector<double> busy(model.nodes.size(), 0.0);
    for (std::size_t p = 0; p < model.nodes.size(); ++p) busy[p] = schedule.busy_s[p] / schedule.makespan_s;
    const std::vector<double> availability = model::host_availability(
        model, busy, schedule.coordinator_bytes * model.coordinator_cpu_s_per_byte, schedule.makespan_s);
    if (std::all_of(availability.begin(), availability.end(), [](double a) { return a >= 1.0; })) break;
    Schedule next = heft_once(dag, model::with_host_shares(model, availability), options);
    next.host_availability = availability;
    schedule = std::move(next);
  }
  return schedule;
}

NodeSetSchedule heft_on_best_nodes(const TaskDag& dag, const model::ClusterModel& model, const ScheduleOptions& options,
                                   double margin, double ranking_size) {
  std::vector<std::size_t> every(model.nodes.size());
  std::iota(every.begin(), every.end(), std::size_t{0});
  NodeSetSchedule best{heft(dag, model, options), every};
  const double every_node_forecast = best.schedule.makespan_s;
  std::vector<std::size_t> fastest_first = every;
  std::stable_sort(fastest_first.begin(), fastest_first.end(), [&](std::size_t a, std::size_t b) {
    return model.nodes[a].speed.gflops_at(ranking_size) > model.nodes[b].speed.gflops_at(ranking_size);
  });
  for (std::size_t count = 1; count < fastest_first.size(); ++count) {
    std::vector<std::size_t> nodes(fastest_first.begin(), fastest_first.begin() + static_cast<std::ptrdiff_t>(count));
    std::sort(nodes.begin(), nodes.end());
    Schedule fewer = heft(dag, model::model_of_nodes(model, nodes), options);
    if (fewer.makespan_s < std::min(best.schedule.makespan_s, every_node_forecast * (1.0 - std::max(margin, 0.0)))) {
      best = {std::move(fewer), std::move(nodes)};
    }
  }
  return best;
}

std::size_t pick_tile_candidate(const std::vector<double>& makespans_largest_first, double margin) {
  double fastest = kInfinity;
  for (double makespan : makespans_largest_first) fastest = std::min(fastest, makespan);
  for (std::size_t i = 0; i < makespans_largest_first.size(); ++i) {
    if (makespans_largest_first[i] <= fastest * (1.0 + std::max(margin, 0.0))) return i;
  }
  return 0;  // every forecast infinite or NaN: the largest tile
}

double naive_bytes(const TaskDag& dag) {
  double bytes = 0.0;
  for (const TileTask& task : dag.tasks) {
    for (const TileRef& read : task.reads) {
      if (!dag.matrices[read.matrix].identity) bytes += dag.tile_bytes(read);
    }
    bytes += task.output_bytes;
  }
  return bytes;
}

std::string check_schedule(const TaskDag& dag, const Schedule& schedule) {
  if (schedule.tasks.size() != dag.tasks.size() || schedule.order.size() != dag.tasks.size()) {
    return "the schedule does not place every task of the DAG exactly once";
  }
  std::unordered_map<uint64_t, std::size_t> producer;
  for (std::size_t task = 0; task < dag.tasks.size(); ++task) producer[tile_key(dag.tasks[task].output)] = task;
  std::map<std::size_t, std::unordered_set<uint64_t>> held;  // per node: what its cache holds now
  for (std::size_t task : schedule.order) {
    const TaskPlacement& placement = schedule.tasks[task];
    const TileTask& work = dag.tasks[task];
    std::unordered_set<uint64_t>& cache = held[placement.node];
    if (placement.cached.size() != work.reads.size()) {
      return fmt::format("task {} marks {} reads but has {}", task, placement.cached.size(), work.reads.size());
    }
    std::unordered_set<uint64_t> reading;
    for (std::size_t r = 0; r < work.reads.size(); ++r) {
      const TileRef& read = work.reads[r];
      const uint64_t key = tile_key(read);
      reading.insert(key);
      if (const auto from = producer.find(key);
          from != producer.end() && schedule.tasks[from->second].finish_s > placement.start_s + 1e-12) {
        return fmt::format("task {} starts at {} before task {} computed what it reads (at {})", task,
                           placement.start_s, from->second, schedule.tasks[from->second].finish_s);
      }
      if (placement.cached[r] && !dag.matrices[read.matrix].identity && cache.count(key) == 0) {
        return fmt::format("task {} on node {} uses tile ({}, {}, {}) from its cache, which did not hold it then",
                           task, placement.node, read.matrix, read.row, read.col);
      }
    }
    for (const TileRef& evicted : placement.evicted) {
      const uint64_t key = tile_key(evicted);
      if (reading.count(key) != 0) return fmt::format("task {} evicts a tile it reads", task);
      if (cache.erase(key) == 0) return fmt::format("task {} evicts a tile node {} did not hold", task, placement.node);
    }
    for (const TileRef& read : work.reads) {
      if (!dag.matrices[read.matrix].identity) cache.insert(tile_key(read));
    }
    cache.insert(tile_key(work.output));
  }
  return {};
}

}  // namespace tessera::balance::expr
