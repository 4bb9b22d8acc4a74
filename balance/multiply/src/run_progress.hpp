// The multiply's bookkeeping beside its streaming threads: where finished tiles go (Output: whole-k
// tiles written without a lock, partial sums of boxes that split k added under one), what each
// node owes the coordinator (NodeProgress), and the silent-node watchdog's settings made from it
// (progress_watch). Internal to the multiply library (multiply.cpp); thread-safety per class.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/cluster/silent_node_watchdog.hpp"
#include "tessera/balance/multiply/multiply.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/partition/block_tiling.hpp"

namespace tessera::balance::multiply {

// Where finished tiles go. Whole-k tiles own their cells of C and are written without a lock;
// partial sums of boxes that split k are added under one lock (the adds are memory-bound and
// short next to the network time that produced them).
class Output {
 public:
  explicit Output(linalg::MutableMatrixView c) : c_(c) {}
  // REQUIRES: data holds block.rows x block.cols values, row-major.
  void add_delta(const partition::Block& block, std::span<const double> data) {
    std::lock_guard lock(mutex_);
    for (uint64_t r = 0; r < block.rows; ++r) {
      double* row = c_.row(block.row_begin + r) + block.col_begin;
      const double* from = data.data() + r * block.cols;
      for (uint64_t j = 0; j < block.cols; ++j) row[j] += from[j];
    }
  }
  void place(const partition::Block& block, std::span<const double> data) {
    for (uint64_t r = 0; r < block.rows; ++r) {
      std::copy_n(data.data() + r * block.cols, block.cols, c_.row(block.row_begin + r) + block.col_begin);
    }
  }
  bool contiguous() const { return c_.contiguous(); }
  double* row(uint64_t r) const { return c_.row(r); }

 private:
  linalg::MutableMatrixView c_;
  std::mutex mutex_;
};

// What one node owes the coordinator, as the cluster's silent-node watchdog needs it: the jobs in
// flight and what they cost (bytes each way, multiply-adds), from which its deadline is computed.
// The node's streaming thread reports here; the watchdog's clock (when the node was last heard from,
// or began to owe) and its verdict live in the watchdog, which this forwards to. Thread-safe.
class NodeProgress {
 public:
  struct Owed {
    uint64_t jobs = 0;
    uint64_t results = 0;  // RESULTs owed, some of them perhaps for jobs already credited
    double to_node_bytes = 0.0;
    double from_node_bytes = 0.0;
    double flops = 0.0;
  };

  NodeProgress(cluster::SilentNodeWatchdog& watchdog, std::size_t index) : watchdog_(watchdog), index_(index) {}

  // A frame came from the node.
  void heard() { watchdog_.progress(index_); }
  // A job went out; it carried `to_node_bytes` (with the A and B data written for it) and will
  // cost `flops` and, when it finishes a tile, bring a RESULT of `result_bytes` back.
  void job_sent(double to_node_bytes, double result_bytes, double flops) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back({to_node_bytes, flops});
      if (result_bytes > 0.0) {
        ++results_owed_;
        result_bytes_owed_ += result_bytes;
      }
    }
    watchdog_.begin_owing(index_, result_bytes > 0.0 ? 2 : 1);
  }
  // `count` jobs were answered (jobs finish in the order they were queued on a worker). A job's
  // RESULT follows its CREDIT and stays owed until result_received: a node stopped between the two
  // still owes it.
  void jobs_answered(uint64_t count) {
    uint64_t answered = 0;
    {
      std::lock_guard lock(mutex_);
      for (; count > 0 && !jobs_.empty(); --count, ++answered) jobs_.pop_front();
    }
    watchdog_.end_owing(index_, answered);
  }
  // A RESULT of `bytes` is in whole.
  void result_received(double bytes) {
    uint64_t received = 0;
    {
      std::lock_guard lock(mutex_);
      if (results_owed_ > 0) {
        --results_owed_;
        received = 1;
      }
      result_bytes_owed_ = results_owed_ == 0 ? 0.0 : std::max(0.0, result_bytes_owed_ - bytes);
    }
    watchdog_.end_owing(index_, received);
  }
  // A write of `bytes` to the node, or a wait for its reply (0 bytes), began / ended. A large
  // write to a live node takes its time; the bytes count toward the deadline meanwhile.
  void begin_wait(double bytes) {
    {
      std::lock_guard lock(mutex_);
      writing_bytes_ += bytes;
    }
    watchdog_.begin_owing(index_);
  }
  void end_wait(double bytes) {
    {
      std::lock_guard lock(mutex_);
      writing_bytes_ -= bytes;
    }
    watchdog_.end_owing(index_);
  }
  // The node's thread waits on another node (for its half-read result of the same tile), not on
  // this one, which owes nothing meanwhile; its clock starts again when the wait ends.
  void begin_local_wait() { watchdog_.pause(index_); }
  void end_local_wait() { watchdog_.resume(index_); }
  // The node's thread is done; the watchdog leaves it alone.
  void finish() { watchdog_.retire(index_); }
  // Why the watchdog found the node unresponsive, if it did.
  std::optional<std::string> unresponsive() const { return watchdog_.silent_reason(index_); }
  Owed owed() const {
    std::lock_guard lock(mutex_);
    Owed owed;
    owed.jobs = jobs_.size();
    owed.results = results_owed_;
    owed.to_node_bytes = writing_bytes_;
    owed.from_node_bytes = result_bytes_owed_;
    for (const JobCost& job : jobs_) {
      owed.to_node_bytes += job.to_node_bytes;
      owed.flops += job.flops;
    }
    return owed;
  }

 private:
  struct JobCost {
    double to_node_bytes;
    double flops;
  };

  cluster::SilentNodeWatchdog& watchdog_;
  const std::size_t index_;
  mutable std::mutex mutex_;
  std::deque<JobCost> jobs_;
  uint64_t results_owed_ = 0;
  double result_bytes_owed_ = 0.0;
  double writing_bytes_ = 0.0;
};

// The deadline of a node owing `owed`: the time its link and its measured speed need for it,
// times the safety factor, and never under the floor (or the one --node-timeout for every node).
inline double progress_deadline_s(const ProgressDeadlines& deadlines, std::size_t index, const NodeProgress::Owed& owed) {
  if (deadlines.node_timeout_s > 0.0) return deadlines.node_timeout_s;
  double expected_s = 0.0;
  if (index < deadlines.nodes.size()) {
    const NodeExpectation& node = deadlines.nodes[index];
    if (node.to_node_bytes_per_s > 0.0) expected_s += owed.to_node_bytes / node.to_node_bytes_per_s;
    if (node.from_node_bytes_per_s > 0.0) expected_s += owed.from_node_bytes / node.from_node_bytes_per_s;
    if (node.flops_per_s > 0.0) expected_s += owed.flops / node.flops_per_s;
  }
  return std::max(deadlines.floor_s, deadlines.safety_factor * expected_s);
}

// The watchdog's settings for a multiply: deadlines from what each node owes, the reason worded
// from it, and a silent node's connection shut down, which fails whatever its streaming thread is
// blocked in (a read, or a write into a full socket) so the ordinary lost-node path takes over.
inline cluster::SilentNodeWatchdog::Options progress_watch(cluster::ClusterConnection& cluster, const ProgressDeadlines& deadlines,
                                                    const std::vector<std::unique_ptr<NodeProgress>>& progress) {
  cluster::SilentNodeWatchdog::Options options;
  // A tenth of the shortest possible deadline, at most a quarter second: a node is found within
  // a few percent of its deadline and the thread costs nothing measurable.
  const double shortest = deadlines.node_timeout_s > 0.0 ? deadlines.node_timeout_s : deadlines.floor_s;
  options.period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::clamp(shortest / 10.0, 0.01, 0.25)));
  options.deadline_s = [&deadlines, &progress](std::size_t i) {
    return progress_deadline_s(deadlines, i, progress[i]->owed());
  };
  options.describe = [&progress](const cluster::SilentNodeWatchdog::Silence& silence) {
    const NodeProgress::Owed owed = progress[silence.node]->owed();
    const bool jobs = owed.jobs > 0;
    const uint64_t count = jobs ? owed.jobs : owed.results;
    const std::string what = count == 0 ? "a write to it or its reply was pending"
                                        : fmt::format("{} {}{} in flight", count, jobs ? "job" : "result",
                                                      count == 1 ? " was" : "s were");
    return fmt::format("unresponsive: no frame for {:.3g} s while {}", silence.deadline_s, what);
  };
  options.on_silent = [&cluster](std::size_t i, const std::string&) { cluster.links()[i].connection->shutdown(); };
  return options;
}

}  // namespace tessera::balance::multiply
