// Engine (engine.hpp): the composition of the engine's parts, and its checks of what it is made
// from. How the engine is laid out (why it is fast and race-free), and where each job lives:
//  - SliceSet (slice_set.hpp) cuts the part's vertices into contiguous slices, one per update
//    thread, and renumbers each slice's edge targets in place: own vertices first, then "outside"
//    slots for every vertex another slice or another part owns. One accumulator array per slice
//    (Slice, slice.hpp) holds both, so the inner loop is `acc[target] (+)= c` whatever the target
//    is; with one thread and one part the numbering is the part's own and there are no outside
//    slots at all.
//  - SliceKernels (slice_kernels.hpp) update a slice: relax, scans, the min/max counts and queue
//    (BucketQueue, bucket_queue.hpp), per accumulate operator (accumulate_ops.hpp).
//  - Outside slots are remembered in a dirty list per destination (another slice's mailbox,
//    DeltaMailbox, or a remote part through the Outbound) and flushed by count, by age, at the end
//    of every sweep, and when the slice idles (DeltaRouter, delta_router.hpp).
//  - Two async schedules, chosen by the accumulate operator (AsyncRounds, async_rounds.hpp):
//    Gauss-Seidel sweeps for + (pagerank, katz), under the levels of PriorityLevels
//    (priority_levels.hpp); a bucket queue per slice for min / max (sssp, cc). Sync steps are
//    SyncStep's (sync_step.hpp); the update threads' lifecycle is UpdateThreads'
//    (update_threads.hpp); batches from other parts enter through the Inbox (inbox.hpp).
//  - Everything a slice's thread touches in a round is its own; other threads reach it only
//    through its mailbox (a mutex and a swap) and its value mutex (held per chunk of work, so
//    snapshot_values waits at most one chunk and never for a network send).
//  - Residual accounting never loses a delta (ProgressLedger, progress_ledger.hpp): a delta moved
//    elsewhere is counted at the destination (mailbox or held counter, or as a batch on the wire)
//    before the source publishes a figure without it, and a destination stops counting it as
//    pending only when it publishes a figure that includes it. progress() reads all figures
//    under one mutex.
#include "tessera/graph/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "async_rounds.hpp"
#include "delta_router.hpp"
#include "inbox.hpp"
#include "priority_levels.hpp"
#include "progress_ledger.hpp"
#include "slice_kernels.hpp"
#include "slice_set.hpp"
#include "sync_step.hpp"
#include "update_threads.hpp"

namespace tessera::graph {

// Members in the order they depend on each other: each refers only to those above it, and the
// threads go (joined) before what they work on.
struct Engine::Impl {
  Impl(GraphPart graph_part, const AlgorithmSpec& spec, const EngineOptions& engine_options, Outbound& outbound)
      : part(std::move(graph_part)),
        options(engine_options),
        kernels(part, spec),
        slices(detail::SliceSet::cut(part, options.threads, kernels.op())),
        ledger(slices.count()),
        levels(part.part_count, part.edge_count(), options.peer_level_share, ledger),
        threads([this] { wake_every_slice(); }),
        router(slices, kernels, options, outbound, ledger, threads),
        inbox(slices, kernels, router, ledger, levels, spec.kind),
        rounds(kernels, router, levels, ledger, threads, options),
        sync(slices, kernels, router, inbox) {
    const double width = kernels.bucket_width();
    std::vector<detail::Scan> scans;
    for (const auto& slice : slices) {
      kernels.start_queue(*slice, width);
      scans.push_back(kernels.scan(*slice));
    }
    ledger.publish_scans(scans, 0.0, 0);
  }

  void wake_every_slice() {
    for (const auto& slice : slices) slice->mailbox.wake_all();
  }

  void start() {
    if (threads.started()) return;
    for (const auto& slice : slices) kernels.use_frontier(*slice, false);
    inbox.fold_held(inbox.route_to_mailboxes());
    threads.start(slices.count(), [this](uint32_t index) { rounds.run(slices[index]); });
  }

  void stop() {
    if (!threads.started()) return;
    inbox.hold();
    threads.request_stop();
    threads.join();
  }

  Result<StepReport> step(uint64_t step_index) {
    if (threads.started()) return internal_error("Engine::step called while the async engine runs; stop() it first");
    Result<StepReport> report = sync.run(step_index);
    if (report) report->progress = progress();
    return report;
  }

  void set_priority_level(PriorityLevel wanted) {
    levels.set(wanted);
    wake_every_slice();  // a slice between its check and its wait sees the new generation
  }

  EngineProgress progress() const {
    EngineProgress figures = ledger.totals();
    figures.running = threads.running();
    return figures;
  }

  std::vector<double> snapshot_values() const {
    std::vector<double> copy(part.local_count);
    for (const auto& slice : slices) {
      std::lock_guard lock(slice->value_mutex);
      std::copy(part.value.begin() + slice->lo, part.value.begin() + slice->hi, copy.begin() + slice->lo);
    }
    return copy;
  }

  uint64_t memory_bytes() const {
    uint64_t bytes = part.memory_bytes() + sizeof(Impl);
    for (const auto& slice : slices) bytes += slice->memory_bytes();
    return bytes;
  }

  GraphPart part;  // targets renumbered per slice; delta moved into the slices' accumulators
  EngineOptions options;
  detail::SliceKernels kernels;
  detail::SliceSet slices;
  detail::ProgressLedger ledger;
  detail::PriorityLevels levels;
  detail::UpdateThreads threads;
  detail::DeltaRouter router;
  detail::Inbox inbox;
  detail::AsyncRounds rounds;
  detail::SyncStep sync;
};

Result<std::unique_ptr<Engine>> Engine::create(GraphPart part, const AlgorithmSpec& spec, const EngineOptions& options,
                                               Outbound& outbound) {
  TESSERA_RETURN_IF_ERROR(part.validate());
  TESSERA_RETURN_IF_ERROR(check_spec(spec));
  if (options.threads < 1) return invalid_argument("engine threads is 0; use at least 1 update thread");
  if (!(options.combine_share >= 0.0 && std::isfinite(options.combine_share)) ||
      !(options.peer_level_share >= 0.0 && std::isfinite(options.peer_level_share))) {
    return invalid_argument("combine_share and peer_level_share must be finite and >= 0 (0: off)");
  }
  if (!(options.priority_fraction > 0.0 && options.priority_fraction <= 1.0)) {
    return invalid_argument(fmt::format("priority fraction {} is out of range; use a value in (0, 1], e.g. 0.25",
                                        options.priority_fraction));
  }
  if (!(options.idle_residual >= 0.0) || !std::isfinite(options.idle_residual)) {
    return invalid_argument(fmt::format("idle residual {} is out of range; use a finite value >= 0 (tolerance / "
                                        "(parts * threads))",
                                        options.idle_residual));
  }
  if (options.batch_max_entries < 1) return invalid_argument("batch max entries is 0; use at least 1");
  if (options.batch_max_age.count() < 0) return invalid_argument("batch max age is negative; use 0 or more");
  if (spec.kind == AlgorithmKind::kShortestPaths) {
    for (std::size_t e = 0; e < part.weights.size(); ++e) {
      if (part.weights[e] < 0.0) {
        return invalid_argument(fmt::format("graph part {}: edge {} has weight {}; sssp needs non-negative weights",
                                            part.part_index, e, part.weights[e]));
      }
    }
  }
  return std::unique_ptr<Engine>(new Engine(std::make_unique<Impl>(std::move(part), spec, options, outbound)));
}

EngineProgress& EngineProgress::operator+=(const EngineProgress& other) {
  value_sum += other.value_sum;
  residual += other.residual;
  updates += other.updates;
  edge_updates += other.edge_updates;
  batches_sent += other.batches_sent;
  batches_received += other.batches_received;
  deltas_sent += other.deltas_sent;
  deltas_received += other.deltas_received;
  sweeps += other.sweeps;
  busy_seconds += other.busy_seconds;
  idle_seconds += other.idle_seconds;
  running = running || other.running;
  return *this;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { impl_->stop(); }

Status Engine::deliver(DeltaBatch&& batch) { return impl_->inbox.deliver(std::move(batch)); }
void Engine::start() { impl_->start(); }
void Engine::stop() { impl_->stop(); }
void Engine::set_priority_level(PriorityLevel level) { impl_->set_priority_level(level); }
Result<StepReport> Engine::step(uint64_t step) { return impl_->step(step); }
EngineProgress Engine::progress() const { return impl_->progress(); }
std::vector<double> Engine::snapshot_values() const { return impl_->snapshot_values(); }
const std::vector<double>& Engine::values() const { return impl_->part.value; }
Status Engine::failure() const { return impl_->router.failure(); }
uint64_t Engine::memory_bytes() const { return impl_->memory_bytes(); }

}  // namespace tessera::graph
