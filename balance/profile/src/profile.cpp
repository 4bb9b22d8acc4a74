#include "tessera/balance/profile/profile.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/core/time.hpp"
#include "tessera/transport/request.hpp"

namespace tessera::balance::profile {

namespace {

using Clock = std::chrono::steady_clock;
namespace tp = tessera::transport;

constexpr uint32_t kCurveSizes[] = {128, 256, 512, 1024, 2048};
constexpr int kWindows = 3;
constexpr int kExtraWindows = 2;
constexpr double kDisagreement = 1.5;  // max/min of the windows that triggers extra windows
constexpr double kBandwidthProbeSeconds = 0.25;
constexpr double kQuickBandwidthProbeSeconds = 0.08;

// A node that stops answering mid-measurement (SIGSTOP, power lost behind a switch) must not hang
// the profiler: each read waits at most ProfileOptions::silent_node_seconds for a byte, and a watchdog shuts the
// connection down when the whole node takes longer than its budget (a write to a stopped node
// blocks once its socket buffer is full, which no read bound can catch). Both are far above what
// a healthy node needs: probes run for fractions of a second, a quarter-core Pi's full curve ~7 s.
constexpr auto kQuickNodeBudget = std::chrono::seconds(60);
constexpr auto kFullNodeBudget = std::chrono::seconds(180);

class MeasurementWatchdog {
 public:
  MeasurementWatchdog(cluster::NodeLink& link, std::chrono::seconds budget, double silent_seconds)
      : link_(link), budget_(budget), previous_read_timeout_(link.connection->read_timeout()) {
    link_.connection->set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(silent_seconds * 1000.0)));
    thread_ = std::jthread([this](std::stop_token stop) {
      std::unique_lock lock(mutex_);
      if (!done_.wait_for(lock, stop, budget_, [] { return false; })) {
        if (!stop.stop_requested()) {
          fired_ = true;
          link_.connection->shutdown();
        }
      }
    });
  }
  ~MeasurementWatchdog() {
    thread_.request_stop();
    thread_.join();
    link_.connection->set_read_timeout(previous_read_timeout_);
  }
  // The failure to report instead of the broken read or write the shutdown caused.
  Status explain(const Status& failure) const {
    if (!fired_) return failure;
    return network_error(fmt::format("node '{}' ({}) did not finish its measurements within {} s; it stopped answering",
                                     link_.spec.name, link_.spec.endpoint(), budget_.count()));
  }

 private:
  cluster::NodeLink& link_;
  const std::chrono::seconds budget_;
  const std::chrono::milliseconds previous_read_timeout_;
  std::mutex mutex_;
  std::condition_variable_any done_;
  std::atomic<bool> fired_{false};
  std::jthread thread_;
};

std::string who_of(const cluster::NodeLink& link) { return fmt::format("node '{}' ({})", link.spec.name, link.spec.endpoint()); }

const char* probe_kind_name(tp::ProbeKind kind) { return kind == tp::ProbeKind::kGemm ? "GEMM" : "echo"; }

// A worker that refuses a link probe's STORE (over its tile memory cap) answers ERROR and closes
// without reading the data, so the probe's write fails before the answer is read: the answer says
// why. The connection is given up either way.
Status explain_lost_link(cluster::NodeLink& link, const Status& failure) {
  if (failure.code() != StatusCode::kNetworkError) return failure;
  std::optional<Status> parting = tp::read_parting_error(*link.connection);
  return parting ? parting->with_context(who_of(link) + ": ") : failure;
}

// One probe round trip; returns the answer and the wall time it took.
Result<tp::ProbeResult> exchange(cluster::NodeLink& link, const tp::Probe& probe, double& seconds) {
  const auto start = Clock::now();
  Result<tp::ProbeResult> result = tp::request_reply<tp::ProbeResult>(*link.connection, probe);
  seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!result) return result.status().with_context(who_of(link) + ": probe failed: ");
  if (result->kind != probe.kind) {
    return protocol_error(fmt::format("{} answered a {} probe with a {} result", who_of(link),
                                      probe_kind_name(probe.kind), probe_kind_name(result->kind)));
  }
  return result;
}

struct GemmWindow {
  double gflops = 0.0;
  uint32_t repetitions = 0;
  double seconds = 0.0;
};

Result<GemmWindow> gemm_window(cluster::NodeLink& link, uint32_t size, double window_seconds) {
  tp::Probe probe;
  probe.kind = tp::ProbeKind::kGemm;
  probe.size = size;
  probe.min_seconds = window_seconds;
  double wall = 0.0;
  Result<tp::ProbeResult> result = exchange(link, probe, wall);
  if (!result) return result.status();
  if (!(result->gflops > 0.0) || !std::isfinite(result->gflops)) {
    return protocol_error(fmt::format("{} reported a GEMM rate of {} GFLOP/s", who_of(link), result->gflops));
  }
  return GemmWindow{result->gflops, result->repetitions, result->seconds};
}

// The worker's session counters (CPU split into compute and communication, bytes), read before
// and after a probe to learn what the probe cost the node's CPU.
Result<tp::Stats> worker_stats(cluster::NodeLink& link) {
  Result<tp::Stats> stats = tp::request_reply<tp::Stats>(*link.connection, tp::StatsRequest{});
  if (!stats) return stats.status().with_context(who_of(link) + ": asking for its CPU counters: ");
  return stats;
}

// Median of several windows; when they disagree a lot (an outlier: another process, a quota
// slice caught at a window's edge), two more windows are measured before taking the median.
Result<GemmWindow> gemm_rate(cluster::NodeLink& link, uint32_t size, double window_seconds, int windows) {
  std::vector<GemmWindow> measured;
  auto measure = [&](int count) -> Status {
    for (int i = 0; i < count; ++i) {
      Result<GemmWindow> window = gemm_window(link, size, window_seconds);
      if (!window) return window.status();
      measured.push_back(*window);
    }
    return Status::ok();
  };
  TESSERA_RETURN_IF_ERROR(measure(windows));
  auto spread = [&] {
    auto [low, high] = std::minmax_element(measured.begin(), measured.end(),
                                           [](const GemmWindow& a, const GemmWindow& b) { return a.gflops < b.gflops; });
    return high->gflops / low->gflops;
  };
  if (windows > 1 && spread() > kDisagreement) TESSERA_RETURN_IF_ERROR(measure(kExtraWindows));
  std::sort(measured.begin(), measured.end(),
            [](const GemmWindow& a, const GemmWindow& b) { return a.gflops < b.gflops; });
  return measured[measured.size() / 2];
}

Result<double> round_trip_seconds(cluster::NodeLink& link, int pings) {
  std::vector<double> trips;
  tp::Probe probe;
  probe.kind = tp::ProbeKind::kEcho;
  probe.echo.assign(64, 0x33);
  for (int i = 0; i < pings; ++i) {
    double seconds = 0.0;
    Result<tp::ProbeResult> result = exchange(link, probe, seconds);
    if (!result) return result.status();
    trips.push_back(seconds);
  }
  return median(trips);
}

// Link bandwidth is measured over the path a multiply's data takes: a STORE read straight into
// the worker's tile memory, and a RESULT written straight from it. (Copying probes through
// PROBE payloads measured loopback at a third of what a multiply gets.) Tile ids at the top of
// the range keep clear of the driver's.
constexpr uint32_t kProbeTile = 0xFFFFFF00u;
constexpr uint32_t kProbeA = 0xFFFFFF01u;
constexpr uint32_t kProbeB = 0xFFFFFF02u;
constexpr uint32_t kProbeC = 0xFFFFFF03u;
constexpr uint32_t kProbeColumns = 1024;  // 8 KiB rows
constexpr uint64_t kProbeJob = 0xFFFFFFFF00000000ull;
constexpr std::size_t kMaxProbeBytes = 64u << 20;

uint32_t probe_rows(std::size_t bytes) {
  return static_cast<uint32_t>(std::max<std::size_t>(1, bytes / (8 * kProbeColumns)));
}

Status write_store(cluster::NodeLink& link, uint32_t tile_id, uint32_t rows, uint32_t cols, const double* data) {
  const std::span<const double> values(data, std::size_t{rows} * cols);
  return link.connection->write_store({tile_id, rows, cols, tp::tile_crc32c(values)}, values);
}

template <typename Reply>
Result<Reply> read_link_probe_reply(cluster::NodeLink& link) {
  Result<Reply> reply = tp::read_reply<Reply>(*link.connection);
  if (!reply) return reply.status().with_context(who_of(link) + ": link probe failed: ");
  return reply;
}

// Seconds to move `rows` x 1024 doubles to the node: the STORE, then an echo that the worker
// answers only after it has read the whole STORE.
Result<double> time_to_node(cluster::NodeLink& link, uint32_t rows, const std::vector<double>& data) {
  const auto start = Clock::now();
  TESSERA_RETURN_IF_ERROR(write_store(link, kProbeTile, rows, kProbeColumns, data.data()));
  tp::Probe echo;
  echo.kind = tp::ProbeKind::kEcho;
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(echo));
  Result<tp::ProbeResult> reply = read_link_probe_reply<tp::ProbeResult>(link);
  if (!reply) return reply.status();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(tp::Release{{kProbeTile}}));
  return seconds;
}

// Seconds to move `rows` x 1024 doubles from the node: a 1x1x1 job whose output tile is that
// large, created beforehand so that only the RESULT is timed.
// Stores 1x1 tiles of 1.0 as kProbeA and kProbeB and returns a 1x1x1 job reading them into kProbeC.
Result<tp::Job> unit_job(cluster::NodeLink& link) {
  const double one = 1.0;
  TESSERA_RETURN_IF_ERROR(write_store(link, kProbeA, 1, 1, &one));
  TESSERA_RETURN_IF_ERROR(write_store(link, kProbeB, 1, 1, &one));
  tp::Job job;
  job.a_tile = kProbeA;
  job.b_tile = kProbeB;
  job.c_tile = kProbeC;
  job.m = job.n = job.k = 1;
  return job;
}

Result<double> time_from_node(cluster::NodeLink& link, uint32_t rows, std::vector<double>& landing, uint64_t& job_id) {
  Result<tp::Job> unit = unit_job(link);
  if (!unit) return unit.status();
  tp::Job job = *unit;
  job.c_rows = rows;
  job.c_cols = kProbeColumns;
  job.job_id = job_id++;
  job.flags = tp::kJobCreateOutput;
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(job));
  if (Result<tp::Credit> credit = read_link_probe_reply<tp::Credit>(link); !credit) return credit.status();

  landing.assign(std::size_t{rows} * kProbeColumns, 0.0);
  job.job_id = job_id++;
  job.flags = tp::kJobSendResult;
  const auto start = Clock::now();
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(job));
  double seconds = 0.0;
  bool have_credit = false, have_result = false;
  while (!have_credit || !have_result) {
    Result<tp::FrameHeader> header =
        tp::read_reply_header(*link.connection, {tp::MessageType::kResult, tp::MessageType::kCredit});
    if (!header) return header.status().with_context(who_of(link) + ": link probe failed: ");
    if (header->type == static_cast<uint16_t>(tp::MessageType::kResult)) {
      std::array<std::byte, tp::kResultPrefixSize> prefix_bytes;
      TESSERA_RETURN_IF_ERROR(link.connection->read_exact(prefix_bytes));
      Result<tp::ResultPrefix> prefix =
          tp::decode_result_prefix(prefix_bytes, header->payload_length, link.connection->limits());
      if (!prefix) return prefix.status();
      if (prefix->tile.rows != rows || prefix->tile.cols != kProbeColumns) {
        return protocol_error(fmt::format("{} returned a {}x{} probe tile for {}x{}", who_of(link),
                                          prefix->tile.rows, prefix->tile.cols, rows, kProbeColumns));
      }
      TESSERA_RETURN_IF_ERROR(link.connection->read_tile_data(
          "RESULT", prefix->tile,
          std::span<std::byte>(reinterpret_cast<std::byte*>(landing.data()), landing.size() * sizeof(double))));
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
      have_result = true;
      continue;
    }
    Result<tp::IncomingFrame> credit = link.connection->read_payload(*header);
    if (!credit) return credit.status().with_context(who_of(link) + ": link probe failed: ");
    have_credit = true;
  }
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(tp::Release{{kProbeA, kProbeB, kProbeC}}));
  return seconds;
}

// Seconds a node takes per job besides the job's arithmetic: `count` 1x1x1 jobs sent back to
// back, from the first written to the last CREDIT read, divided by `count` (decoding, queueing,
// waking the compute thread, the CREDIT). The best of `repeats`: interference only adds.
Result<double> job_overhead(cluster::NodeLink& link, int count, int repeats, uint64_t& job_id) {
  Result<tp::Job> unit = unit_job(link);
  if (!unit) return unit.status();
  tp::Job job = *unit;
  job.c_rows = job.c_cols = 1;
  double best = std::numeric_limits<double>::infinity();
  for (int repeat = 0; repeat < repeats; ++repeat) {
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
      job.job_id = job_id++;
      job.flags = (repeat == 0 && i == 0) ? tp::kJobCreateOutput : 0u;
      TESSERA_RETURN_IF_ERROR(link.connection->write_message(job));
    }
    for (int i = 0; i < count; ++i) {
      if (Result<tp::Credit> credit = read_link_probe_reply<tp::Credit>(link); !credit) return credit.status();
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / count);
  }
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(tp::Release{{kProbeA, kProbeB, kProbeC}}));
  return best;
}

// Makes tiles on the worker without sending them: stores a 1 x 1 tile as kProbeA, then for each
// (tile, rows, cols) a 1x1x1 job reading it that creates its output tile at that size (zeros but
// one corner). Waits for each job's CREDIT.
struct MadeTile {
  uint32_t tile = 0, rows = 0, cols = 0;
};
Status make_tiles_on_worker(cluster::NodeLink& link, const std::vector<MadeTile>& tiles, uint64_t& job_id) {
  const double one = 1.0;
  TESSERA_RETURN_IF_ERROR(write_store(link, kProbeA, 1, 1, &one));
  tp::Job make;
  make.a_tile = make.b_tile = kProbeA;
  make.m = make.n = make.k = 1;
  make.flags = tp::kJobCreateOutput;
  for (const MadeTile& made : tiles) {
    make.job_id = job_id++;
    make.c_tile = made.tile;
    make.c_rows = made.rows;
    make.c_cols = made.cols;
    TESSERA_RETURN_IF_ERROR(link.connection->write_message(make));
    if (Result<tp::Credit> credit = read_link_probe_reply<tp::Credit>(link); !credit) return credit.status();
  }
  return Status::ok();
}

// The node's rate on vector-matrix products (1 x n by n x n, n = kVectorProbeSize): memory-bound
// where a square GEMM is compute-bound, the kind of job a Markov chain or a HITS step runs. The
// tiles are made on the worker by jobs that create their outputs (nothing of size travels), then
// `count` products are timed from the first written to the last CREDIT; the best of `repeats`.
// The products take turns on kVectorProbeMatrices matrices (128 MB in all), so each reads its
// matrix from memory as a run's jobs do: their tiles arrive well before they are used, behind
// other jobs' tiles. One 32 MB matrix read over and over partly stays cached and read 1.5-2x
// faster than the runs' vector products went (2026-11-27: the desktop 4.2 GFLOP/s against 2.0
// in a Markov chain on it alone).
constexpr uint32_t kVectorProbeSize = 2048;  // a 32 MB matrix: past the caches, as a chain's is
constexpr uint32_t kVectorProbeMatrices = 4;
constexpr uint32_t kVectorProbeFirstMatrix = 0xFFFFFF10u;
Result<double> vector_gflops(cluster::NodeLink& link, int count, int repeats, uint64_t& job_id) {
  const uint32_t n = kVectorProbeSize;
  std::vector<MadeTile> made{{kProbeC, 1, n}, {kProbeTile, 1, n}};
  tp::Release release{{kProbeA, kProbeC, kProbeTile}};
  for (uint32_t i = 0; i < kVectorProbeMatrices; ++i) {
    made.push_back({kVectorProbeFirstMatrix + i, n, n});
    release.tile_ids.push_back(kVectorProbeFirstMatrix + i);
  }
  TESSERA_RETURN_IF_ERROR(make_tiles_on_worker(link, made, job_id));
  tp::Job job;
  job.a_tile = kProbeC;  // 1 x n (zeros: the same arithmetic and memory traffic as any values)
  job.c_tile = kProbeTile;
  job.m = 1;
  job.n = job.k = n;
  double best = 0.0;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
      job.job_id = job_id++;
      job.b_tile = kVectorProbeFirstMatrix + static_cast<uint32_t>(i) % kVectorProbeMatrices;
      TESSERA_RETURN_IF_ERROR(link.connection->write_message(job));
    }
    for (int i = 0; i < count; ++i) {
      if (Result<tp::Credit> credit = read_link_probe_reply<tp::Credit>(link); !credit) return credit.status();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * count / std::max(seconds, 1e-9) / 1e9);
  }
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(release));
  return best;
}

// A small transfer estimates the rate, then transfers sized to last about `target_seconds`
// measure it; the best is kept, since interference only ever makes a transfer slower. Rates are
// net of one round trip.
Result<double> bandwidth(cluster::NodeLink& link, bool to_node, double round_trip, double target_seconds, int repeats,
                         const std::vector<double>& source, uint64_t& job_id) {
  std::vector<double> landing;
  auto rate = [&](std::size_t bytes) -> Result<double> {
    const uint32_t rows = probe_rows(bytes);
    Result<double> seconds = to_node ? time_to_node(link, rows, source) : time_from_node(link, rows, landing, job_id);
    if (!seconds) return seconds;
    const double moved = 8.0 * rows * kProbeColumns;
    return moved / std::max(*seconds - round_trip, *seconds * 0.05);
  };
  Result<double> trial = rate(256u << 10);
  if (!trial) return trial;
  const auto bytes = static_cast<std::size_t>(
      std::clamp(*trial * target_seconds, double{1u << 20}, static_cast<double>(kMaxProbeBytes)));
  double best = 0.0;
  for (int i = 0; i < repeats; ++i) {
    Result<double> measured = rate(bytes);
    if (!measured) return measured;
    best = std::max(best, *measured);
  }
  return best;
}

Result<NodeProfile> measure_node(cluster::NodeLink& link, const ProfileOptions& options, const ProfileProgress& progress,
                                 const std::vector<double>& source, uint64_t& job_id) {
  auto say = [&](const std::string& what) {
    if (progress) progress(link.spec.name, what, false);
  };
  NodeProfile node;
  node.name = link.spec.name;
  node.endpoint = link.spec.endpoint();
  node.threads = link.hello.threads;
  node.cores = link.hello.cores;
  node.memory_bytes = link.hello.memory_bytes;
  node.arch = link.hello.arch;
  node.hostname = link.hello.hostname;
  node.worker_version = link.hello.worker_version;
  node.fingerprint = node_fingerprint(link.spec, link.hello);
  node.measured_at = utc_now(UtcFormat::kIso8601);
  node.quick = options.quick;

  // GEMM speed curve.
  const int windows = options.quick ? 1 : kWindows;
  std::vector<uint32_t> sizes;
  if (options.quick) {
    sizes.push_back(options.reference_size);
  } else {
    sizes.assign(std::begin(kCurveSizes), std::end(kCurveSizes));
    if (std::find(sizes.begin(), sizes.end(), options.reference_size) == sizes.end()) {
      sizes.push_back(options.reference_size);
      std::sort(sizes.begin(), sizes.end());
    }
  }
  double last_rate = 0.0;
  for (uint32_t size : sizes) {
    const double flops = 2.0 * size * static_cast<double>(size) * size;
    const bool is_reference = size == options.reference_size;
    // Three size x size doubles live in the worker's tile store during a probe.
    if (!is_reference && link.hello.tile_memory_cap != 0 &&
        3.0 * 8.0 * size * static_cast<double>(size) > static_cast<double>(link.hello.tile_memory_cap)) {
      continue;
    }
    const double window = options.quick ? options.quick_window_seconds
                          : is_reference  ? options.reference_window_seconds
                                          : options.window_seconds;
    // Skip sizes whose single GEMM would outlast two windows at the rate seen so far.
    if (!is_reference && last_rate > 0.0 && flops / (last_rate * 1e9) > 2.0 * window) continue;
    say(fmt::format("GEMM {}x{}", size, size));
    Result<tp::Stats> before = is_reference ? worker_stats(link) : Result<tp::Stats>(tp::Stats{});
    if (!before) return before.status();
    const auto window_start = Clock::now();
    Result<GemmWindow> rate = gemm_rate(link, size, window, windows);
    if (!rate) return rate.status();
    if (is_reference) {
      Result<tp::Stats> after = worker_stats(link);
      if (!after) return after.status();
      const double wall = std::chrono::duration<double>(Clock::now() - window_start).count();
      node.compute_cores = (after->compute_cpu_seconds - before->compute_cpu_seconds) / std::max(wall, 1e-9);
    }
    node.speed.push_back({static_cast<double>(size), rate->gflops});
    last_rate = rate->gflops;
    if (is_reference) {
      node.gflops = rate->gflops;
      node.probe_size = size;
      node.repetitions = rate->repetitions;
      node.probe_seconds = rate->seconds;
    }
  }

  // Link.
  say("latency");
  Result<double> round_trip = round_trip_seconds(link, options.quick ? 5 : 15);
  if (!round_trip) return round_trip.status();
  node.link.latency_s = *round_trip / 2.0;
  const double target = options.quick ? kQuickBandwidthProbeSeconds : kBandwidthProbeSeconds;
  const int repeats = options.quick ? 1 : 2;
  say("bandwidth to node");
  Result<tp::Stats> before_receive = worker_stats(link);
  if (!before_receive) return before_receive.status();
  Result<double> to_node = bandwidth(link, true, *round_trip, target, repeats, source, job_id);
  if (!to_node) return to_node.status();
  Result<tp::Stats> after_receive = worker_stats(link);
  if (!after_receive) return after_receive.status();
  const double received = static_cast<double>(after_receive->bytes_received - before_receive->bytes_received);
  if (received > 0.0) {
    node.receive_cpu_s_per_byte =
        std::max(after_receive->io_cpu_seconds - before_receive->io_cpu_seconds, 0.0) / received;
  }
  say("bandwidth from node");
  Result<double> from_node = bandwidth(link, false, *round_trip, target, repeats, source, job_id);
  if (!from_node) return from_node.status();
  node.link.to_node_bytes_per_s = *to_node;
  node.link.from_node_bytes_per_s = *from_node;
  node.has_link = true;
  say("per-job cost");
  // 64 jobs: well past the pipeline's start, a few milliseconds even on a quarter-core node.
  Result<double> per_job = job_overhead(link, 64, options.quick ? 2 : 3, job_id);
  if (!per_job) return per_job.status();
  node.job_overhead_s = *per_job;
  // Its tiles take 32 MB; a worker with less tile memory than twice that goes without (its
  // refusal would end the session).
  if (link.hello.tile_memory_cap >= 2 * 8ull * kVectorProbeSize * (kVectorProbeSize + 2)) {
    say("vector-matrix rate");
    Result<double> vector = vector_gflops(link, 8, options.quick ? 1 : 2, job_id);
    if (!vector) return vector.status();
    node.vector_gflops = *vector;
  }
  return node;
}

// Every node receives a STORE at once, each sized to take about the same time over its own link.
// The capacity is the sum of the rates the nodes got while all were receiving: when the
// coordinator is not the bottleneck it equals the sum of the links, and the model's sharing then
// changes nothing; when it is, the sum is what the coordinator can push. (Dividing all bytes by
// the slowest node's time instead measured the slowest link, not the coordinator.)
struct CoordinatorCapacity {
  double bytes_per_s = 0.0;
  double cpu_s_per_byte = 0.0;
};

Result<CoordinatorCapacity> coordinator_send_capacity(cluster::ClusterConnection& cluster, const std::vector<NodeProfile>& nodes,
                                                      bool quick, const std::vector<double>& source) {
  const double target = quick ? kQuickBandwidthProbeSeconds : kBandwidthProbeSeconds;
  std::vector<uint32_t> rows(cluster.links().size());
  std::vector<Result<double>> seconds(cluster.links().size(), Result<double>(0.0));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double bytes = std::clamp(nodes[i].link.to_node_bytes_per_s * target, double{1u << 20},
                                    static_cast<double>(kMaxProbeBytes));
    rows[i] = probe_rows(static_cast<std::size_t>(bytes));
  }
  const double cpu_before = process_cpu_seconds();
  {
    std::vector<std::jthread> senders;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      senders.emplace_back([&, i] { seconds[i] = time_to_node(cluster.links()[i], rows[i], source); });
    }
  }
  const double cpu_spent = process_cpu_seconds() - cpu_before;
  CoordinatorCapacity capacity;
  double total_bytes = 0.0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!seconds[i]) return explain_lost_link(cluster.links()[i], seconds[i].status());
    const double bytes = 8.0 * rows[i] * kProbeColumns;
    capacity.bytes_per_s += bytes / std::max(*seconds[i], 1e-9);
    total_bytes += bytes;
  }
  capacity.cpu_s_per_byte = total_bytes > 0.0 ? std::max(cpu_spent, 0.0) / total_bytes : 0.0;
  return capacity;
}

// Every node runs the reference GEMM probe at the same moment, each on its own thread, in
// kConcurrentRounds rounds; a node's rate is the mean of its rounds but the slowest. The result is
// a node's rate when all compete for what they share (cores, memory bandwidth). It varies from
// round to round with where the kernel puts the threads (on local-mixed-lan a full-core node kept
// 78-99% of its speed alone from one profile to the next, and 67-98% from one tenth of a second
// of a run to the next), so a run sees the mean; the slowest round is left out so that a burst
// of outside load (a build once gave a desktop a quarter of its speed) counts for less.
constexpr int kConcurrentRounds = 5;

Status measure_concurrent_rates(cluster::ClusterConnection& cluster, const ProfileOptions& options,
                                std::vector<NodeProfile>& nodes) {
  const double window = options.quick ? options.quick_window_seconds : options.reference_window_seconds;
  std::vector<std::vector<double>> rates(nodes.size());
  for (int round = 0; round < kConcurrentRounds; ++round) {
    std::vector<Result<GemmWindow>> measured(nodes.size(), Result<GemmWindow>(GemmWindow{}));
    {
      std::vector<std::jthread> probes;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        probes.emplace_back([&, i] {
          cluster::NodeLink& link = cluster.links()[i];
          // The probe asks for `window` seconds but runs at least one GEMM (plus a warm-up), which
          // on a slow node can take far longer: four times the longer of the two, plus a margin
          // for the round trip, bounds it; a node silent past silent_node_seconds fails sooner.
          const double size = nodes[i].probe_size;
          const double one_gemm_s = nodes[i].gflops > 0.0 ? 2.0 * size * size * size / (nodes[i].gflops * 1e9) : 0.0;
          const auto budget =
              std::chrono::seconds(static_cast<int64_t>(std::ceil(4.0 * std::max(window, 2.0 * one_gemm_s))) + 5);
          MeasurementWatchdog watchdog(link, budget, options.silent_node_seconds);
          Result<GemmWindow> probe = gemm_window(link, nodes[i].probe_size, window);
          measured[i] = probe ? std::move(probe) : Result<GemmWindow>(watchdog.explain(probe.status()));
        });
      }
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!measured[i]) return explain_lost_link(cluster.links()[i], measured[i].status());
      rates[i].push_back(measured[i]->gflops);
    }
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) nodes[i].concurrent_gflops = mean_without_slowest(rates[i]);
  return Status::ok();
}

// One node's echo round trips while it computes: kBusyLoadSize-cubed GEMM jobs on tiles the worker
// makes itself (nothing of size travels), kBusyJobsInFlight of them queued at all times, and
// echoes written at times spread evenly over kBusyEchoSpread after the previous answer, not
// after a CREDIT (a node that has just sent one is running, and answered at once, while a
// message's wait on a quota-limited node comes when it has spent its quota). The worker answers
// an echo on its receiving thread while its compute thread works, as it reads a run's STOREs;
// the round trip also waits for the coordinator's own reading thread. Returns the mean round
// trip: a chain of dependent transfers pays the rare long waits too.
constexpr uint32_t kBusyLoadSize = 512;  // 268 MFLOP: 8 ms on a desktop core, over 30 ms on a quarter core
constexpr int kBusyJobsInFlight = 4;
constexpr auto kBusyEchoSpread = std::chrono::microseconds(25'000);  // over a 20 ms quota period
constexpr uint32_t kBusyX = 0xFFFFFF04u, kBusyY = 0xFFFFFF05u, kBusyZ = 0xFFFFFF06u;

Result<double> busy_round_trip(cluster::NodeLink& link, int pings, uint64_t job_id) {
  constexpr uint32_t n = kBusyLoadSize;
  TESSERA_RETURN_IF_ERROR(make_tiles_on_worker(link, {{kBusyX, n, n}, {kBusyY, n, n}, {kBusyZ, n, n}}, job_id));
  tp::Job load;
  load.a_tile = kBusyX;
  load.b_tile = kBusyY;
  load.c_tile = kBusyZ;
  load.m = load.n = load.k = kBusyLoadSize;
  int in_flight = 0;
  const auto send_load = [&]() -> Status {
    load.job_id = job_id++;
    ++in_flight;
    return link.connection->write_message(load);
  };
  for (int i = 0; i < kBusyJobsInFlight; ++i) TESSERA_RETURN_IF_ERROR(send_load());
  std::vector<double> trips;
  tp::Probe echo;
  echo.kind = tp::ProbeKind::kEcho;
  echo.echo.assign(64, 0x33);
  bool echo_out = false;
  Clock::time_point echo_sent;
  while (static_cast<int>(trips.size()) < pings || in_flight > 0) {
    if (!echo_out && static_cast<int>(trips.size()) < pings) {
      // The k-th echo waits (7k mod pings) / pings of the spread: every phase once, in mixed order.
      const auto step = (7 * static_cast<int64_t>(trips.size())) % pings;
      std::this_thread::sleep_for(kBusyEchoSpread * step / pings);
      TESSERA_RETURN_IF_ERROR(link.connection->write_message(echo));
      echo_sent = Clock::now();
      echo_out = true;
    }
    Result<tp::FrameHeader> header =
        tp::read_reply_header(*link.connection, {tp::MessageType::kCredit, tp::MessageType::kProbeResult});
    if (!header) return header.status().with_context(who_of(link) + ": busy latency probe failed: ");
    const bool is_echo = header->type == static_cast<uint16_t>(tp::MessageType::kProbeResult);
    Result<tp::IncomingFrame> frame = link.connection->read_payload(*header);
    if (!frame) return frame.status().with_context(who_of(link) + ": busy latency probe failed: ");
    if (is_echo) {
      if (!echo_out) return protocol_error(fmt::format("{} answered an echo it was not sent", who_of(link)));
      trips.push_back(std::chrono::duration<double>(Clock::now() - echo_sent).count());
      echo_out = false;
      continue;
    }
    --in_flight;
    // Keep the node busy until the last echo is back, then let the queue drain.
    if (static_cast<int>(trips.size()) < pings) TESSERA_RETURN_IF_ERROR(send_load());
  }
  TESSERA_RETURN_IF_ERROR(link.connection->write_message(tp::Release{{kProbeA, kBusyX, kBusyY, kBusyZ}}));
  double total = 0.0;
  for (double trip : trips) total += trip;
  return trips.empty() ? 0.0 : total / static_cast<double>(trips.size());
}

// Every node's busy_round_trip at the same moment, each on its own thread: the link latencies a
// run sees when every node is computing and every process wants the host's cores.
Status measure_busy_latencies(cluster::ClusterConnection& cluster, const ProfileOptions& options, std::vector<NodeProfile>& nodes,
                              uint64_t& job_id) {
  const int pings = options.quick ? 8 : 24;
  std::vector<Result<double>> trips(nodes.size(), Result<double>(0.0));
  {
    std::vector<std::jthread> probes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      probes.emplace_back([&, i] {
        cluster::NodeLink& link = cluster.links()[i];
        // Each echo waits at most for a few of the node's jobs; a slow node's jobs bound it.
        const double job_s = nodes[i].gflops > 0.0
                                 ? 2.0 * std::pow(double{kBusyLoadSize}, 3.0) / (nodes[i].gflops * 1e9)
                                 : 1.0;
        const auto budget = std::chrono::seconds(
            static_cast<int64_t>(std::ceil(4.0 * (pings * 2 + kBusyJobsInFlight + 3) * job_s + pings * 0.025)) + 10);
        MeasurementWatchdog watchdog(link, budget, options.silent_node_seconds);
        Result<double> measured = busy_round_trip(link, pings, job_id + (uint64_t{i} << 24));
        trips[i] = measured ? std::move(measured) : Result<double>(watchdog.explain(measured.status()));
      });
    }
  }
  job_id += uint64_t{nodes.size()} << 24;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!trips[i]) return explain_lost_link(cluster.links()[i], trips[i].status());
    nodes[i].link.busy_latency_s = *trips[i] / 2.0;
  }
  return Status::ok();
}

void emit_speed(YAML::Emitter& out, const std::vector<model::SpeedPoint>& speed) {
  out << YAML::Key << "speed" << YAML::Value << YAML::BeginSeq;
  for (const model::SpeedPoint& point : speed) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "size" << YAML::Value << point.size << YAML::Key
        << "gflops" << YAML::Value << point.gflops << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

const std::vector<std::string> kProfileKeys = {"cluster", "measured_at", "coordinator_send_bytes_per_s",
                                               "coordinator_cpu_s_per_byte", "nodes"};
// relative_power is written for people reading the file; it is derived, so never read back.
const std::vector<std::string> kNodeProfileKeys = {
    "name",        "endpoint",     "measured_at",   "quick",    "gflops",         "concurrent_gflops", "compute_cores", "receive_cpu_s_per_byte", "job_overhead_s", "vector_gflops",
    "relative_power", "probe_size", "repetitions", "probe_seconds", "speed",    "link",
    "threads",     "cores",        "memory_bytes",  "arch",     "hostname",       "worker_version",
    "fingerprint"};
const std::vector<std::string> kSpeedPointKeys = {"size", "gflops"};
const std::vector<std::string> kLinkProfileKeys = {"latency_s", "busy_latency_s", "to_node_bytes_per_s",
                                                   "from_node_bytes_per_s"};

constexpr cluster::NumberRange kNonNegative{0.0, 1e300};
constexpr uint64_t kMaxUint32 = 0xFFFFFFFFu;

cluster::YamlMap profile_map(const YAML::Node& value, int line, const std::vector<std::string>& keys, const std::string& where) {
  if (!value.IsMap()) cluster::fail_at(line, fmt::format("{} is {}; it must be a mapping", where, cluster::describe_yaml(value)));
  return cluster::YamlMap(value, line, keys, where);
}

NodeProfile parse_node_profile(const YAML::Node& value, int line, std::size_t index, const std::string& measured_at) {
  // Messages name the node once its name is known, even one about an unknown key.
  std::string where = fmt::format("node #{} in nodes", index + 1);
  if (value.IsMap()) {
    if (const YAML::Node name = value["name"]; name && name.IsScalar() && !name.Scalar().empty()) {
      where = fmt::format("node '{}'", name.Scalar());
    }
  }
  const cluster::YamlMap fields = profile_map(value, line, kNodeProfileKeys, where);
  NodeProfile node;
  if (std::optional<std::string> name = fields.text("name", "pi1")) {
    node.name = *name;
  } else {
    fields.fail_missing("name", "NAME");
  }
  node.endpoint = fields.text_or_empty("endpoint").value_or("");
  node.measured_at = fields.text_or_empty("measured_at").value_or(measured_at);
  node.quick = fields.boolean("quick").value_or(false);
  if (std::optional<double> gflops = fields.number("gflops", kNonNegative, "12.5")) {
    node.gflops = *gflops;
  } else {
    fields.fail_missing("gflops", "GFLOPS");
  }
  node.concurrent_gflops = fields.number("concurrent_gflops", kNonNegative, "9.5").value_or(0.0);
  node.compute_cores = fields.number("compute_cores", kNonNegative, "0.25").value_or(0.0);
  node.receive_cpu_s_per_byte = fields.number("receive_cpu_s_per_byte", kNonNegative, "1e-10").value_or(0.0);
  node.job_overhead_s = fields.number("job_overhead_s", kNonNegative, "5e-5").value_or(0.0);
  node.vector_gflops = fields.number("vector_gflops", kNonNegative, "3.5").value_or(0.0);
  node.probe_size = static_cast<uint32_t>(fields.integer("probe_size", 0, kMaxUint32, "1024").value_or(0));
  node.repetitions = static_cast<uint32_t>(fields.integer("repetitions", 0, kMaxUint32, "10").value_or(0));
  node.probe_seconds = fields.number("probe_seconds", kNonNegative, "0.3").value_or(0.0);
  if (const cluster::YamlMap::Entry* speed = fields.find("speed"); speed != nullptr && !speed->value.IsNull()) {
    if (!speed->value.IsSequence()) {
      cluster::fail_at(speed->line, fmt::format("node '{}' has speed {}; speed must be a list of {{size, gflops}}", node.name,
                                       cluster::describe_yaml(speed->value)));
    }
    for (const YAML::Node& point : speed->value) {
      const int point_line = cluster::yaml_line(point, speed->line);
      const cluster::YamlMap pair = profile_map(point, point_line, kSpeedPointKeys, fmt::format("a speed point of node '{}'", node.name));
      const std::optional<double> size = pair.number("size", kNonNegative, "1024");
      const std::optional<double> gflops = pair.number("gflops", kNonNegative, "12.5");
      if (!size) pair.fail_missing("size", "1024");
      if (!gflops) pair.fail_missing("gflops", "12.5");
      node.speed.push_back({*size, *gflops});
    }
  }
  if (const cluster::YamlMap::Entry* link = fields.find("link")) {
    const cluster::YamlMap link_fields = profile_map(link->value, link->line, kLinkProfileKeys, fmt::format("link of node '{}'", node.name));
    node.has_link = true;
    const std::optional<double> latency = link_fields.number("latency_s", kNonNegative, "0.0001");
    const std::optional<double> to_node = link_fields.number("to_node_bytes_per_s", kNonNegative, "1.2e8");
    const std::optional<double> from_node = link_fields.number("from_node_bytes_per_s", kNonNegative, "1.2e8");
    if (!latency) link_fields.fail_missing("latency_s", "SECONDS");
    if (!to_node) link_fields.fail_missing("to_node_bytes_per_s", "RATE");
    if (!from_node) link_fields.fail_missing("from_node_bytes_per_s", "RATE");
    node.link.latency_s = *latency;
    node.link.busy_latency_s = link_fields.number("busy_latency_s", kNonNegative, "0.004").value_or(0.0);
    node.link.to_node_bytes_per_s = *to_node;
    node.link.from_node_bytes_per_s = *from_node;
  }
  node.threads = static_cast<uint32_t>(fields.integer("threads", 0, kMaxUint32, "4").value_or(0));
  node.cores = static_cast<uint32_t>(fields.integer("cores", 0, kMaxUint32, "4").value_or(0));
  node.memory_bytes = fields.integer("memory_bytes", 0, UINT64_MAX, "8589934592").value_or(0);
  node.arch = fields.text_or_empty("arch").value_or("");
  node.hostname = fields.text_or_empty("hostname").value_or("");
  node.worker_version = fields.text_or_empty("worker_version").value_or("");
  node.fingerprint = fields.text_or_empty("fingerprint").value_or("");
  if (!(node.gflops > 0.0)) {
    cluster::fail_at(fields.find("gflops")->line,
            fmt::format("node '{}' has gflops {}; re-run `tessera profile --refresh`", node.name, node.gflops));
  }
  return node;
}

ClusterProfile parse_profile(const YAML::Node& root) {
  if (!root.IsMap()) {
    cluster::fail_at(cluster::yaml_line(root, 1), fmt::format("the profile holds {} at the top; it must be a mapping with keys {}",
                                            cluster::describe_yaml(root), join(kProfileKeys, ", ")));
  }
  const cluster::YamlMap top(root, cluster::yaml_line(root, 1), kProfileKeys, "the top level");
  ClusterProfile profile;
  if (std::optional<std::string> cluster = top.text("cluster", "lab")) {
    profile.cluster = *cluster;
  } else {
    top.fail_missing("cluster", "NAME");
  }
  profile.measured_at = top.text_or_empty("measured_at").value_or("");
  profile.coordinator_send_bytes_per_s = top.number("coordinator_send_bytes_per_s", kNonNegative, "1.2e9").value_or(0.0);
  profile.coordinator_cpu_s_per_byte = top.number("coordinator_cpu_s_per_byte", kNonNegative, "8e-10").value_or(0.0);
  if (const cluster::YamlMap::Entry* nodes = top.find("nodes"); nodes != nullptr && !nodes->value.IsNull()) {
    if (!nodes->value.IsSequence()) {
      cluster::fail_at(nodes->line, fmt::format("nodes is {}; nodes must be a list", cluster::describe_yaml(nodes->value)));
    }
    for (std::size_t i = 0; i < nodes->value.size(); ++i) {
      const YAML::Node entry = nodes->value[i];
      profile.nodes.push_back(parse_node_profile(entry, cluster::yaml_line(entry, nodes->line), i, profile.measured_at));
    }
  }
  return profile;
}

}  // namespace

std::vector<double> ClusterProfile::relative_powers() const {
  double total = 0.0;
  for (const NodeProfile& node : nodes) total += node.gflops;
  std::vector<double> powers;
  for (const NodeProfile& node : nodes) powers.push_back(total > 0.0 ? node.gflops / total : 0.0);
  return powers;
}

const NodeProfile* ClusterProfile::find(const std::string& node_name) const {
  auto found = std::find_if(nodes.begin(), nodes.end(), [&](const NodeProfile& node) { return node.name == node_name; });
  return found == nodes.end() ? nullptr : &*found;
}

// Raised when a probe changes what it measures (2: the vector rate reads four matrices in turn, and
// vector products run as dgemv on the worker), so that profiles the older probes measured are
// measured again instead of reused.
constexpr int kProbeRevision = 2;

std::string node_fingerprint(const cluster::NodeSpec& node, const transport::Hello& hello) {
  std::string emulation = "none";
  if (node.emulate) {
    emulation = fmt::format("cpu={};link={},{},{}", node.emulate->cpu, node.emulate->has_link ? node.emulate->link_rate : "",
                            node.emulate->link_delay, node.emulate->link_loss_percent);
    // Profiles measured before the key existed were measured with the kernel's 100 ms; only a
    // period other than that is named, so those stay valid exactly when they still apply.
    if (node.emulate->cpu_period_us != 100000) {
      emulation += fmt::format(";period={}us", node.emulate->cpu_period_us);
    }
  }
  return fmt::format(
      "{}|threads={}|kind={}|emulate={}|worker={}|arch={}|cores={}|threads_reported={}|memory={}|host={}|probes={}",
      node.endpoint(), node.threads, node.kind, emulation, hello.worker_version, hello.arch, hello.cores, hello.threads,
      hello.memory_bytes, hello.hostname, kProbeRevision);
}

Result<ClusterProfile> run_profile(cluster::ClusterConnection& cluster, const cluster::ClusterSpec& spec,
                                   const std::optional<ClusterProfile>& previous, const ProfileOptions& options,
                                   const ProfileProgress& progress, std::vector<std::string>* measured) {
  ClusterProfile profile;
  profile.cluster = spec.name;
  bool any_measured = false;
  // The bytes every link probe sends, touched once here so that page faults are not timed.
  const std::vector<double> source(kMaxProbeBytes / sizeof(double), 1.0);
  uint64_t job_id = kProbeJob;
  for (cluster::NodeLink& link : cluster.links()) {
    const NodeProfile* known = previous ? previous->find(link.spec.name) : nullptr;
    const bool named = std::find(options.only_nodes.begin(), options.only_nodes.end(), link.spec.name) !=
                       options.only_nodes.end();
    const bool reusable = known != nullptr && !options.refresh && !named && known->has_link &&
                          known->fingerprint == node_fingerprint(link.spec, link.hello) &&
                          (options.quick || !known->quick);
    if (reusable) {
      profile.nodes.push_back(*known);
      if (progress) progress(link.spec.name, fmt::format("reused (measured {})", known->measured_at), true);
      continue;
    }
    Result<NodeProfile> node = [&]() -> Result<NodeProfile> {
      MeasurementWatchdog watchdog(link, options.quick ? kQuickNodeBudget : kFullNodeBudget, options.silent_node_seconds);
      Result<NodeProfile> measured_node = measure_node(link, options, progress, source, job_id);
      if (!measured_node) return watchdog.explain(measured_node.status());
      return measured_node;
    }();
    if (!node) return explain_lost_link(link, node.status());
    if (progress) {
      progress(link.spec.name,
               fmt::format("{:.2f} GFLOP/s at {}, {} sizes; latency {:.3f} ms; {:.1f} / {:.1f} MB/s to / from", node->gflops,
                           node->probe_size, node->speed.size(), node->link.latency_s * 1e3,
                           node->link.to_node_bytes_per_s / 1e6, node->link.from_node_bytes_per_s / 1e6),
               true);
    }
    if (measured != nullptr) measured->push_back(link.spec.name);
    profile.nodes.push_back(std::move(*node));
    any_measured = true;
  }
  const bool concurrency_known = std::all_of(profile.nodes.begin(), profile.nodes.end(),
                                             [](const NodeProfile& node) { return node.concurrent_gflops > 0.0; });
  if (profile.nodes.size() > 1 && (any_measured || !concurrency_known)) {
    if (progress) progress("all nodes", "GEMM rates with every node multiplying at once", false);
    TESSERA_RETURN_IF_ERROR(measure_concurrent_rates(cluster, options, profile.nodes));
    if (progress) {
      std::string rates;
      for (const NodeProfile& node : profile.nodes) {
        rates += fmt::format("{}{} {:.2f} ({:.0f}%)", rates.empty() ? "" : ", ", node.name, node.concurrent_gflops,
                             100.0 * node.concurrent_gflops / node.gflops);
      }
      progress("all nodes", fmt::format("GFLOP/s together: {}", rates), true);
    }
  }
  const bool busy_latency_known = std::all_of(profile.nodes.begin(), profile.nodes.end(),
                                              [](const NodeProfile& node) { return node.link.busy_latency_s > 0.0; });
  if (!profile.nodes.empty() && (any_measured || !busy_latency_known)) {
    if (progress) progress("all nodes", "message latency with every node computing", false);
    TESSERA_RETURN_IF_ERROR(measure_busy_latencies(cluster, options, profile.nodes, job_id));
    if (progress) {
      std::string latencies;
      for (const NodeProfile& node : profile.nodes) {
        latencies += fmt::format("{}{} {:.3f} ms", latencies.empty() ? "" : ", ", node.name,
                                 node.link.busy_latency_s * 1e3);
      }
      progress("all nodes", fmt::format("latency while computing (one way): {}", latencies), true);
    }
  }
  if (any_measured || !previous || previous->coordinator_send_bytes_per_s <= 0.0) {
    if (progress) progress("coordinator", "send capacity to all nodes at once", false);
    Result<CoordinatorCapacity> capacity = coordinator_send_capacity(cluster, profile.nodes, options.quick, source);
    if (!capacity) return capacity.status();
    profile.coordinator_send_bytes_per_s = capacity->bytes_per_s;
    profile.coordinator_cpu_s_per_byte = capacity->cpu_s_per_byte;
    if (progress) {
      progress("coordinator",
               fmt::format("sends {:.1f} MB/s to all nodes at once, {:.2f} CPU ns per byte", capacity->bytes_per_s / 1e6,
                           capacity->cpu_s_per_byte * 1e9),
               true);
    }
  } else {
    profile.coordinator_send_bytes_per_s = previous->coordinator_send_bytes_per_s;
    profile.coordinator_cpu_s_per_byte = previous->coordinator_cpu_s_per_byte;
  }
  profile.measured_at = profile.nodes.empty() ? utc_now(UtcFormat::kIso8601) : profile.nodes.front().measured_at;
  for (const NodeProfile& node : profile.nodes) profile.measured_at = std::max(profile.measured_at, node.measured_at);
  return profile;
}

std::string default_profile_path(const std::string& cluster_config_path) {
  std::filesystem::path path(cluster_config_path);
  path.replace_extension();
  return path.string() + ".profile.yaml";
}

Status save_profile(const std::string& path, const ClusterProfile& profile) {
  YAML::Emitter out;
  out << YAML::Comment("Written by `tessera profile`; measured, not configured. Delete it or use --refresh to re-measure.");
  out << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << profile.cluster;
  out << YAML::Key << "measured_at" << YAML::Value << profile.measured_at;
  out << YAML::Key << "coordinator_send_bytes_per_s" << YAML::Value << profile.coordinator_send_bytes_per_s;
  if (profile.coordinator_cpu_s_per_byte > 0.0) {
    out << YAML::Key << "coordinator_cpu_s_per_byte" << YAML::Value << profile.coordinator_cpu_s_per_byte;
  }
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  const std::vector<double> powers = profile.relative_powers();
  for (std::size_t i = 0; i < profile.nodes.size(); ++i) {
    const NodeProfile& node = profile.nodes[i];
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << node.name;
    out << YAML::Key << "endpoint" << YAML::Value << node.endpoint;
    out << YAML::Key << "measured_at" << YAML::Value << node.measured_at;
    out << YAML::Key << "quick" << YAML::Value << node.quick;
    out << YAML::Key << "gflops" << YAML::Value << node.gflops;
    if (node.concurrent_gflops > 0.0) out << YAML::Key << "concurrent_gflops" << YAML::Value << node.concurrent_gflops;
    if (node.compute_cores > 0.0) out << YAML::Key << "compute_cores" << YAML::Value << node.compute_cores;
    if (node.job_overhead_s > 0.0) out << YAML::Key << "job_overhead_s" << YAML::Value << node.job_overhead_s;
    if (node.vector_gflops > 0.0) out << YAML::Key << "vector_gflops" << YAML::Value << node.vector_gflops;
    if (node.receive_cpu_s_per_byte > 0.0) {
      out << YAML::Key << "receive_cpu_s_per_byte" << YAML::Value << node.receive_cpu_s_per_byte;
    }
    out << YAML::Key << "relative_power" << YAML::Value << powers[i];
    out << YAML::Key << "probe_size" << YAML::Value << node.probe_size;
    out << YAML::Key << "repetitions" << YAML::Value << node.repetitions;
    out << YAML::Key << "probe_seconds" << YAML::Value << node.probe_seconds;
    emit_speed(out, node.speed);
    if (node.has_link) {
      out << YAML::Key << "link" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "latency_s" << YAML::Value << node.link.latency_s;
      if (node.link.busy_latency_s > 0.0) {
        out << YAML::Key << "busy_latency_s" << YAML::Value << node.link.busy_latency_s;
      }
      out << YAML::Key << "to_node_bytes_per_s" << YAML::Value << node.link.to_node_bytes_per_s;
      out << YAML::Key << "from_node_bytes_per_s" << YAML::Value << node.link.from_node_bytes_per_s;
      out << YAML::EndMap;
    }
    out << YAML::Key << "threads" << YAML::Value << node.threads;
    out << YAML::Key << "cores" << YAML::Value << node.cores;
    out << YAML::Key << "memory_bytes" << YAML::Value << node.memory_bytes;
    out << YAML::Key << "arch" << YAML::Value << node.arch;
    out << YAML::Key << "hostname" << YAML::Value << node.hostname;
    out << YAML::Key << "worker_version" << YAML::Value << node.worker_version;
    out << YAML::Key << "fingerprint" << YAML::Value << node.fingerprint;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;

  // Write to a temporary file and rename, so a crash never leaves half a profile behind.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    if (!file) return io_error(fmt::format("cannot write profile {}", temporary));
    file << out.c_str() << "\n";
    if (!file.flush()) return io_error(fmt::format("cannot write profile {}", temporary));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return io_error(fmt::format("cannot write profile {}: {}", path, error.message()));
  return Status::ok();
}

Result<ClusterProfile> load_profile(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    return not_found(fmt::format("no profile at {}; run `tessera profile CONFIG` first", path));
  }
  Result<std::string> text = cluster::read_yaml_file(path, "profile");
  if (!text) return text.status();
  ClusterProfile profile;
  TESSERA_RETURN_IF_ERROR(cluster::read_yaml(
      *text, path, [&](const YAML::Node& root) { profile = parse_profile(root); },
      "the profile is written by `tessera profile`; delete it or run `tessera profile --refresh`"));
  return profile;
}

Result<std::vector<double>> profile_weights(const ClusterProfile& profile, const cluster::ClusterSpec& cluster,
                                            const std::string& profile_path) {
  std::vector<double> weights;
  for (const cluster::NodeSpec& node : cluster.nodes) {
    const NodeProfile* measured = profile.find(node.name);
    if (measured == nullptr) {
      return not_found(fmt::format("profile {} has no measurement for node '{}'; run `tessera profile {}`",
                                   profile_path, node.name, cluster.source_path));
    }
    weights.push_back(measured->gflops);
  }
  return weights;
}

Result<model::ClusterModel> profile_model(const ClusterProfile& profile, const cluster::ClusterSpec& cluster,
                                   const std::string& profile_path) {
  model::ClusterModel model;
  model.coordinator_send_bytes_per_s = profile.coordinator_send_bytes_per_s;
  model.coordinator_cpu_s_per_byte = profile.coordinator_cpu_s_per_byte;
  struct utsname names {};
  const std::string coordinator_host = ::uname(&names) == 0 ? std::string(names.nodename) : std::string();
  for (const cluster::NodeSpec& node : cluster.nodes) {
    const NodeProfile* measured = profile.find(node.name);
    if (measured == nullptr) {
      return not_found(fmt::format("profile {} has no measurement for node '{}'; run `tessera profile {}`",
                                   profile_path, node.name, cluster.source_path));
    }
    if (!measured->has_link || measured->speed.empty()) {
      return not_found(fmt::format("profile {} has no speed curve or link measurement for node '{}' (an older "
                                   "profile); run `tessera profile {} --refresh`",
                                   profile_path, node.name, cluster.source_path));
    }
    model::NodeModel entry;
    entry.name = node.name;
    // The curve measured alone, charged for the CPU its received bytes take (CpuModel; left out
    // when the profile predates the measurement).
    // The vector-matrix rate joins the curve at its square-equivalent size (a square GEMM of the
    // same flops per byte, 3 mnk / (mk + kn + mn): about 3), below every square probe.
    std::vector<model::SpeedPoint> points = measured->speed;
    if (measured->vector_gflops > 0.0) points.push_back({model::kVectorEquivalentSize, measured->vector_gflops});
    entry.speed = model::SpeedCurve(std::move(points));
    if (measured->compute_cores > 0.0) {
      entry.cpu.receive_s_per_byte = measured->receive_cpu_s_per_byte / measured->compute_cores;
    }
    entry.cpu.job_overhead_s = measured->job_overhead_s;
    entry.link = {measured->link.latency_s, measured->link.to_node_bytes_per_s, measured->link.from_node_bytes_per_s,
                  measured->link.busy_latency_s};
    // A worker reporting the coordinator's host name runs beside it and shares its cores.
    entry.host.with_coordinator = !coordinator_host.empty() && measured->hostname == coordinator_host;
    entry.host.cores = measured->cores;
    entry.host.node_cores = measured->compute_cores;
    // What it kept with every node multiplying at once (measure_concurrent_rates: the mean of its
    // rounds but the slowest, as single rounds scatter; docs/performance-model.md, "Shared hosts").
    if (measured->gflops > 0.0 && measured->concurrent_gflops > 0.0) {
      entry.host.crowded_share = std::min(measured->concurrent_gflops / measured->gflops, 1.0);
    }
    model.nodes.push_back(std::move(entry));
  }
  return model;
}

}  // namespace tessera::balance::profile
