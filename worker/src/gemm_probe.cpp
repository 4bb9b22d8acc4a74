#include "gemm_probe.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include <asio.hpp>
#include <fmt/core.h>

#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim
#endif

#include "tessera/gemm/wire_io.hpp"
#include "tessera/worker/gemm_service.hpp"
#include "tessera/worker/thread_cpu.hpp"

#ifdef TESSERA_FAULT_HOOKS
#include <optional>
#include <thread>

#include "tessera/worker/fault_hooks.hpp"
#endif

namespace tessera::worker {

namespace tp = tessera::transport;

namespace {

// How long a probe block should take, and the shape rules that keep blocks as fast as one call:
// OpenBLAS packs B in 256-deep panels itself, so cutting there costs nothing, while shallower
// panels, or bands of fewer rows of C, pack B again for too few flops and run below one call's
// rate. Once the rate is known, bands are at least kProbeMinRowsPerThread rows a thread, even
// when that makes a block longer than kProbeBlockSeconds on a slow node.
constexpr double kProbeBlockSeconds = 0.02;
constexpr uint32_t kProbePanelDepth = 256;
constexpr uint32_t kProbeMinRowsPerThread = 512;
// The rate assumed before the first block has been timed: slower than any node we profile (below
// even a Raspberry Pi 3 core), so the first block is short everywhere.
constexpr double kProbeSlowestThreadFlops = 1e9;

double probe_flops(double size) { return 2.0 * size * size * size; }

// The probe's product C = A B (size x size, row-major), run on the pool one block at a time so
// that the probe can stop between two blocks: a block is C[band] (+)= A[band, panel] B[panel, :]
// for a panel of kProbePanelDepth columns of A and a band of C's rows, sized from the rate seen so
// far to take about kProbeBlockSeconds. A product that fits in one block is one BLAS call, as a
// JOB of that size is. Connection thread only.
class ProbeProduct {
 public:
  ProbeProduct(ComputePool& pool, uint32_t size, const double* a, const double* b, double* c)
      : pool_(pool), threads_(std::max<uint32_t>(pool.threads(), 1)), size_(size), a_(a), b_(b), c_(c) {}

  // Runs the next block; true when that completed a repetition (the next block starts another).
  bool run_block() {
    const GemmTask task = next_block();
    const auto start = std::chrono::steady_clock::now();
#ifdef TESSERA_FAULT_HOOKS
    if (const std::optional<uint32_t> stall = fault_hooks().stall_probe_ms; stall && flops_ == 0.0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(*stall));
    }
#endif
    (void)pool_.run(task);
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    flops_ += 2.0 * static_cast<double>(task.m) * static_cast<double>(task.n) * static_cast<double>(task.k);
    return panel_ == 0 && row_ == 0;
  }

  // What the blocks so far ran at (wall time, so a CPU quota's throttling counts), or the slow
  // guess before any block.
  double flops_per_second() const { return seconds_ > 0.0 ? flops_ / seconds_ : kProbeSlowestThreadFlops * threads_; }

 private:
  // The block at (panel_, row_), and moves them on to the next one (back to 0, 0 after the last).
  GemmTask next_block() {
    const std::size_t n = size_;
    GemmTask task{n, n, n, a_, n, b_, n, c_, n};
    task.overwrite = true;
    const double target_flops = flops_per_second() * kProbeBlockSeconds;
    if (panel_ == 0 && row_ == 0 && probe_flops(size_) <= target_flops) return task;
    const uint32_t depth = std::min(kProbePanelDepth, size_ - panel_);
    const uint64_t fewest = std::min<uint64_t>(uint64_t{threads_} * (seconds_ > 0.0 ? kProbeMinRowsPerThread : 1), size_);
    const double wanted = std::max(target_flops / (2.0 * static_cast<double>(n) * depth), static_cast<double>(fewest));
    const auto rows = static_cast<uint32_t>(std::min(wanted, static_cast<double>(size_ - row_)));
    task.m = rows;
    task.k = depth;
    task.a = a_ + static_cast<std::size_t>(row_) * n + panel_;
    task.b = b_ + static_cast<std::size_t>(panel_) * n;
    task.c = c_ + static_cast<std::size_t>(row_) * n;
    task.overwrite = panel_ == 0;  // the first panel writes C, the others add to it
    row_ += rows;
    if (row_ == size_) {
      row_ = 0;
      panel_ += depth;
      if (panel_ == size_) panel_ = 0;
    }
    return task;
  }

  ComputePool& pool_;
  const uint32_t threads_;
  const uint32_t size_;
  const double* a_;
  const double* b_;
  double* c_;
  uint32_t panel_ = 0, row_ = 0;  // where the next block starts
  double flops_ = 0.0, seconds_ = 0.0;
};

// Returns freed memory to the system. A probe's matrices above glibc's mmap threshold are
// unmapped by free() itself; smaller ones come from a malloc arena (the threshold rises to 32 MiB
// once a mapped block of that size is freed), whose free pages stay resident until trimmed.
void return_free_memory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace

HandlerStep handle_probe(ServiceContext& context, const tp::FrameHeader& header) {
  const uint64_t request_id = header.request_id;
  tp::FrameConnection& connection = context.connection();
  if (header.payload_length < gemm::kProbeFixedBytes) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("PROBE payload of {} bytes is shorter than its {} fixed bytes",
                                    header.payload_length, gemm::kProbeFixedBytes),
                        request_id);
  }
  std::array<std::byte, gemm::kProbeFixedBytes> fixed{};
  if (const Status read = connection.read_exact(fixed); !read.is_ok()) return context.read_failed(read, request_id);
  Result<gemm::Probe> decoded = gemm::decode_probe_prefix(fixed, header.payload_length, gemm::limits_for(context.limits()));
  if (!decoded.is_ok()) return context.fail(tp::ErrorCode::kBadFrame, decoded.status().message(), request_id);
  const gemm::Probe& probe = *decoded;
  // decode_probe_prefix bounded it by Limits::max_echo_bytes (a u32).
  const auto echo_length = static_cast<std::size_t>(header.payload_length - gemm::kProbeFixedBytes);
  std::shared_ptr<Tile> echo;
  if (echo_length > 0) {
    // Echo bytes are charged to the tile-memory cap before they are allocated, as tiles are, and
    // the buffer is not zero-filled, so its pages fill only as bytes arrive.
    auto buffer = context.store().allocate_scratch(static_cast<uint32_t>((echo_length + 7) / 8), 1, /*zero_fill=*/false);
    if (!buffer.is_ok()) {
      return context.fail(tp::ErrorCode::kOutOfMemory,
                          fmt::format("PROBE echo of {} bytes: {}", echo_length, buffer.status().message()), request_id);
    }
    echo = std::move(buffer).value();
    const Status read = connection.read_exact(echo->raw_bytes().first(echo_length));
    if (!read.is_ok()) return context.read_failed(read, request_id);
  }
  gemm::ProbeResult result;
  result.kind = probe.kind;
  if (probe.kind == gemm::ProbeKind::kEcho) {
    const auto prefix = gemm::encode_probe_result_prefix(result, static_cast<uint32_t>(echo_length));
    tp::FrameHeader reply;
    reply.type = static_cast<uint16_t>(tp::MessageType::kProbeResult);
    reply.request_id = request_id;
    const std::array<asio::const_buffer, 2> parts{
        asio::buffer(prefix), asio::buffer(echo ? echo->raw_bytes().data() : nullptr, echo_length)};
    const Status written = connection.write_frame(reply, parts);
    if (!written.is_ok()) return context.read_failed(written, request_id);
    return HandlerStep::kContinue;
  }
  echo.reset();  // a GEMM probe's echo bytes are read and not returned
  const uint32_t size = probe.size;
  if (size == 0) return context.fail(tp::ErrorCode::kBadFrame, "GEMM probe of size 0", request_id);
  ComputePool& pool = context.pool();
  const uint32_t threads = pool.threads();
  const uint32_t bound = gemm_probe_size_bound(threads, gemm::limits_for(context.limits()).max_probe_size);
  if (size > bound) {
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GEMM probe of size {} refused: one repetition ({:.3g} flops) would take more "
                                    "than {:g} s on {} compute thread{} even at {:g} GFLOP/s a thread; this worker "
                                    "takes GEMM probes up to size {} (more --threads take larger ones)",
                                    size, probe_flops(size), kProbeRepetitionSeconds, threads,
                                    threads == 1 ? "" : "s", kProbeFastestThreadFlops / 1e9, bound),
                        request_id);
  }
  // Setting up and driving the probe is compute work, although this thread does it.
  const double probe_cpu_start = thread_cpu_seconds();
  const auto probe_cpu = [&] { context.add_connection_compute_cpu(thread_cpu_seconds() - probe_cpu_start); };
  TileStore& store = context.store();
  // No run reuses a probe's matrices: kept for reuse, a large probe's would stay resident after
  // the session, for nothing.
  // A and B are filled below; C is zero-filled so that its pages are faulted in here and not in the
  // warm-up, whose blocks time the rate the repetition bound is checked with.
  std::shared_ptr<Tile> matrices[3];
  for (std::size_t i = 0; i < 3; ++i) {
    std::shared_ptr<Tile>& matrix = matrices[i];
    auto allocated = store.allocate_scratch(size, size, /*zero_fill=*/i == 2, AfterUse::kReturnToSystem);
    if (!allocated.is_ok()) {
      return context.fail(tp::ErrorCode::kOutOfMemory,
                          fmt::format("GEMM probe of size {}: {}", size, allocated.status().message()), request_id);
    }
    matrix = std::move(allocated).value();
  }
  // Frees the matrices, back to the system, before the session goes on or ends.
  const auto release = [&] {
    for (std::shared_ptr<Tile>& matrix : matrices) matrix.reset();
    return_free_memory();
  };
  Tile& a = *matrices[0];
  Tile& b = *matrices[1];
  Tile& c = *matrices[2];
  // Values keep the accumulating C far from overflow and away from denormals, which run slowly.
  std::fill_n(a.data(), a.size(), 0.5);
  std::fill_n(b.data(), b.size(), 0.25);
  ProbeProduct product(pool, size, a.data(), b.data(), c.data());
  // Between blocks: the coordinator gone (nobody waits for the answer) or the worker stopping.
  const auto stopped = [&](std::string_view phase) {
    const std::string reason = fmt::format("GEMM probe {} x {} stopped during its {}: {}", size, size, phase,
                                           context.connection().peer_closed() ? "the coordinator closed the connection"
                                                                              : "the worker is stopping");
    probe_cpu();
    release();
    context.log(reason);
    return context.end(reason);
  };
  // Wall time over the whole loop, not the sum of job times: under a CPU quota the process is
  // often throttled between two jobs, and a sum of job times would hide exactly the slowness
  // the probe exists to measure (a quarter core would read as more than a quarter that way).
  // Untimed warm-up of one CPU-quota period: a node that idled before the probe has a full
  // quota slice banked, and spending it inside the timed window would make a throttled node read
  // fast. The warm-up also brings the operands into cache, and times the blocks that the
  // repetition bound below is checked with.
  constexpr double kWarmUpSeconds = 0.1;
  // The size bound above assumed the fastest core; this is the node's own rate (a slow node, or
  // one under a CPU quota or sharing its cores, can be far below it). A repetition the node could
  // not finish within the longest a probe may be asked to last would only hold the session until
  // the coordinator gives up on it; anything shorter is measured, however slow.
  const double longest_seconds = gemm::limits_for(context.limits()).max_probe_seconds;
  const auto too_long = [&] { return probe_flops(size) / product.flops_per_second() > longest_seconds; };
  // A refusal rests on a second of warm-up, ten quota periods: a node crowded out or throttled
  // through the first 0.1 s alone (a loaded host) would otherwise be refused a size it measures.
  constexpr double kRefusalEvidenceSeconds = 1.0;
  const auto warm_up_start = std::chrono::steady_clock::now();
  bool at_repetition_start = true;
  for (;;) {
    if (context.stopping()) return stopped("warm-up");
    at_repetition_start = product.run_block();
    const double warmed = std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_up_start).count();
    if (warmed >= kWarmUpSeconds && (warmed >= kRefusalEvidenceSeconds || !too_long())) break;
  }
  if (too_long()) {
    probe_cpu();
    release();
    const double rate = product.flops_per_second();
    const double expected_seconds = probe_flops(size) / rate;
    const auto largest = static_cast<uint32_t>(std::cbrt(rate * longest_seconds / 2.0));
    return context.fail(tp::ErrorCode::kBadFrame,
                        fmt::format("GEMM probe of size {} refused: one repetition would take about {:.1f} s at the "
                                    "{:.2f} GFLOP/s this worker measured ({} compute thread{}), more than the {:g} s "
                                    "a probe may last; probe up to size {} here",
                                    size, expected_seconds, rate / 1e9, threads, threads == 1 ? "" : "s",
                                    longest_seconds, largest),
                        request_id);
  }
  // Finish the repetition the warm-up was in (untimed), so that the timed ones are whole.
  while (!at_repetition_start) {
    if (context.stopping()) return stopped("warm-up");
    at_repetition_start = product.run_block();
  }
  uint32_t repetitions = 0;
  double seconds = 0.0;
  const auto probe_start = std::chrono::steady_clock::now();
  do {
    do {
      if (context.stopping()) return stopped("measurement");
    } while (!product.run_block());
    ++repetitions;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - probe_start).count();
  } while (seconds < probe.min_seconds && repetitions < std::numeric_limits<uint32_t>::max());
  probe_cpu();
  release();
  result.size = size;
  result.repetitions = repetitions;
  result.seconds = seconds;
  result.gflops = seconds > 0.0 ? probe_flops(size) * repetitions / seconds / 1e9 : 0.0;
  context.log(fmt::format("GEMM probe {} x {}: {} reps in {:.3f} s, {:.2f} GFLOP/s", size, size, repetitions,
                          seconds, result.gflops));
  const Status written = gemm::write_message(context.connection(), result, request_id);
  if (!written.is_ok()) return context.read_failed(written, request_id);
  return HandlerStep::kContinue;
}

uint32_t gemm_probe_size_bound(uint32_t threads, uint32_t protocol_max) {
  const double most_flops = std::max<uint32_t>(threads, 1) * kProbeFastestThreadFlops * kProbeRepetitionSeconds;
  auto size = static_cast<uint64_t>(std::cbrt(most_flops / 2.0));
  // cbrt may land one off either way: settle on the largest n with 2 n^3 <= most_flops.
  while (size > 0 && probe_flops(static_cast<double>(size)) > most_flops) --size;
  while (probe_flops(static_cast<double>(size + 1)) <= most_flops) ++size;
  return static_cast<uint32_t>(std::min<uint64_t>(size, protocol_max));
}

}  // namespace tessera::worker
