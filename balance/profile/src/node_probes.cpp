// Probes of one node: what each measures and why (the declarations, in node_probes.hpp, say what
// they return). The profile's measurement of a whole cluster is measure_cluster.cpp.
#include "node_probes.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/stats.hpp"
#include "tessera/core/time.hpp"
#include "tessera/graph/wire.hpp"
#include "tessera/transport/request.hpp"
#include "tessera/gemm/client.hpp"

namespace tessera::balance::profile::probes {

namespace tp = tessera::transport;

namespace {

constexpr uint32_t kCurveSizes[] = {128, 256, 512, 1024, 2048};
constexpr int kWindows = 3;
constexpr int kExtraWindows = 2;
constexpr double kDisagreement = 1.5;  // max/min of the windows that triggers extra windows

}  // namespace

std::string who_of(const cluster::NodeLink& link) { return fmt::format("node '{}' ({})", link.spec.name, link.spec.endpoint()); }

// The connection is given up either way: a parting ERROR is all that is left to read.
Status explain_lost_link(cluster::NodeLink& link, const Status& failure) {
  if (failure.code() != StatusCode::kNetworkError) return failure;
  std::optional<Status> parting = tp::read_parting_error(*link.connection);
  return parting ? parting->with_context(who_of(link) + ": ") : failure;
}

namespace {

const char* probe_kind_name(gemm::ProbeKind kind) { return kind == gemm::ProbeKind::kGemm ? "GEMM" : "echo"; }

// One probe round trip; returns the answer and the wall time it took.
Result<gemm::ProbeResult> exchange(cluster::NodeLink& link, const gemm::Probe& probe, double& seconds) {
  const auto start = Clock::now();
  Result<gemm::ProbeResult> result = gemm::GemmClient(*link.connection).probe(probe);
  seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!result) return result.status().with_context(who_of(link) + ": probe failed: ");
  if (result->kind != probe.kind) {
    return protocol_error(fmt::format("{} answered a {} probe with a {} result", who_of(link),
                                      probe_kind_name(probe.kind), probe_kind_name(result->kind)));
  }
  return result;
}

}  // namespace

Result<GemmWindow> gemm_window(cluster::NodeLink& link, uint32_t size, double window_seconds) {
  gemm::Probe probe;
  probe.kind = gemm::ProbeKind::kGemm;
  probe.size = size;
  probe.min_seconds = window_seconds;
  double wall = 0.0;
  Result<gemm::ProbeResult> result = exchange(link, probe, wall);
  if (!result) return result.status();
  if (!(result->gflops > 0.0) || !std::isfinite(result->gflops)) {
    return protocol_error(fmt::format("{} reported a GEMM rate of {} GFLOP/s", who_of(link), result->gflops));
  }
  return GemmWindow{result->gflops, result->repetitions, result->seconds};
}

namespace {

// The worker's session counters (CPU split into compute and communication, bytes), read before
// and after a probe to learn what the probe cost the node's CPU.
Result<gemm::Stats> worker_stats(cluster::NodeLink& link) {
  Result<gemm::Stats> stats = gemm::GemmClient(*link.connection).stats();
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
  gemm::Probe probe;
  probe.kind = gemm::ProbeKind::kEcho;
  probe.echo.assign(64, 0x33);
  for (int i = 0; i < pings; ++i) {
    double seconds = 0.0;
    Result<gemm::ProbeResult> result = exchange(link, probe, seconds);
    if (!result) return result.status();
    trips.push_back(seconds);
  }
  return median(trips);
}

// Link bandwidth is measured over the path a multiply's data takes: a STORE read straight into
// the worker's tile memory, and a RESULT written straight from it. (PROBE payloads are copied on
// both sides, which a multiply's data never is, so they would read a fast link far below what a
// multiply gets.) Tile ids at the top of the range keep clear of the driver's.
constexpr uint32_t kProbeTile = 0xFFFFFF00u;
constexpr uint32_t kProbeA = 0xFFFFFF01u;
constexpr uint32_t kProbeB = 0xFFFFFF02u;
constexpr uint32_t kProbeC = 0xFFFFFF03u;

}  // namespace

uint32_t probe_rows(std::size_t bytes) {
  return static_cast<uint32_t>(std::max<std::size_t>(1, bytes / (8 * kProbeColumns)));
}

namespace {

// The next answer of a link probe, which must be a `Reply` (a CREDIT, a PROBE_RESULT).
template <typename Reply>
Result<Reply> read_link_probe_reply(cluster::NodeLink& link, gemm::GemmClient& client) {
  Result<gemm::GemmClient::Reply> reply = client.next({gemm::message_type_of<Reply>()});
  if (!reply) return reply.status().with_context(who_of(link) + ": link probe failed: ");
  return std::get<Reply>(std::move(*reply));
}

}  // namespace

// The STORE, then an echo that the worker answers only after it has read the whole STORE.
Result<double> time_to_node(cluster::NodeLink& link, uint32_t rows, const std::vector<double>& data) {
  gemm::GemmClient client(*link.connection);
  const auto start = Clock::now();
  TESSERA_RETURN_IF_ERROR(client.store(kProbeTile, rows, kProbeColumns, data.data()));
  gemm::Probe echo;
  echo.kind = gemm::ProbeKind::kEcho;
  Result<gemm::ProbeResult> reply = client.probe(echo);
  if (!reply) return reply.status().with_context(who_of(link) + ": link probe failed: ");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const uint32_t released[] = {kProbeTile};
  TESSERA_RETURN_IF_ERROR(client.release(released));
  return seconds;
}

namespace {

// Seconds to move `rows` x 1024 doubles from the node: a 1x1x1 job whose output tile is that
// large, created beforehand so that only the RESULT is timed.
// Stores 1x1 tiles of 1.0 as kProbeA and kProbeB and returns a 1x1x1 job reading them into kProbeC.
Result<gemm::Job> unit_job(gemm::GemmClient& client) {
  const double one = 1.0;
  TESSERA_RETURN_IF_ERROR(client.store(kProbeA, 1, 1, &one));
  TESSERA_RETURN_IF_ERROR(client.store(kProbeB, 1, 1, &one));
  gemm::Job job;
  job.a_tile = kProbeA;
  job.b_tile = kProbeB;
  job.c_tile = kProbeC;
  job.m = job.n = job.k = 1;
  return job;
}

Result<double> time_from_node(cluster::NodeLink& link, uint32_t rows, std::vector<double>& landing, uint64_t& job_id) {
  gemm::GemmClient client(*link.connection);
  Result<gemm::Job> unit = unit_job(client);
  if (!unit) return unit.status();
  gemm::Job job = *unit;
  job.c_rows = rows;
  job.c_cols = kProbeColumns;
  job.job_id = job_id++;
  job.flags = gemm::kJobCreateOutput;
  TESSERA_RETURN_IF_ERROR(client.job(job));
  if (Result<gemm::Credit> credit = read_link_probe_reply<gemm::Credit>(link, client); !credit) return credit.status();

  landing.assign(std::size_t{rows} * kProbeColumns, 0.0);
  job.job_id = job_id++;
  job.flags = gemm::kJobSendResult;
  const auto start = Clock::now();
  TESSERA_RETURN_IF_ERROR(client.job(job));
  double seconds = 0.0;
  while (client.owes()) {
    Result<gemm::GemmClient::Reply> reply = client.next({tp::MessageType::kResult, tp::MessageType::kCredit});
    if (!reply) return reply.status().with_context(who_of(link) + ": link probe failed: ");
    const auto* result = std::get_if<gemm::GemmClient::ResultHeader>(&*reply);
    if (result == nullptr) continue;  // the job's CREDIT
    if (result->tile.rows != rows || result->tile.cols != kProbeColumns) {
      return protocol_error(fmt::format("{} returned a {}x{} probe tile for {}x{}", who_of(link), result->tile.rows,
                                        result->tile.cols, rows, kProbeColumns));
    }
    TESSERA_RETURN_IF_ERROR(client.read_result(*result, landing));
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const uint32_t released[] = {kProbeA, kProbeB, kProbeC};
  TESSERA_RETURN_IF_ERROR(client.release(released));
  return seconds;
}

// Seconds a node takes per job besides the job's arithmetic: `count` 1x1x1 jobs sent back to
// back, from the first written to the last CREDIT read, divided by `count` (decoding, queueing,
// waking the compute thread, the CREDIT). The best of `repeats`: interference only adds.
Result<double> job_overhead(cluster::NodeLink& link, int count, int repeats, uint64_t& job_id) {
  gemm::GemmClient client(*link.connection);
  Result<gemm::Job> unit = unit_job(client);
  if (!unit) return unit.status();
  gemm::Job job = *unit;
  job.c_rows = job.c_cols = 1;
  double best = std::numeric_limits<double>::infinity();
  for (int repeat = 0; repeat < repeats; ++repeat) {
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
      job.job_id = job_id++;
      job.flags = (repeat == 0 && i == 0) ? gemm::kJobCreateOutput : 0u;
      TESSERA_RETURN_IF_ERROR(client.job(job));
    }
    for (int i = 0; i < count; ++i) {
      if (Result<gemm::Credit> credit = read_link_probe_reply<gemm::Credit>(link, client); !credit) return credit.status();
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / count);
  }
  const uint32_t released[] = {kProbeA, kProbeB, kProbeC};
  TESSERA_RETURN_IF_ERROR(client.release(released));
  return best;
}

// Makes tiles on the worker without sending them: stores a 1 x 1 tile as kProbeA, then for each
// (tile, rows, cols) a 1x1x1 job reading it that creates its output tile at that size (zeros but
// one corner). Waits for each job's CREDIT.
struct MadeTile {
  uint32_t tile = 0, rows = 0, cols = 0;
};
Status make_tiles_on_worker(cluster::NodeLink& link, gemm::GemmClient& client, const std::vector<MadeTile>& tiles,
                            uint64_t& job_id) {
  const double one = 1.0;
  TESSERA_RETURN_IF_ERROR(client.store(kProbeA, 1, 1, &one));
  gemm::Job make;
  make.a_tile = make.b_tile = kProbeA;
  make.m = make.n = make.k = 1;
  make.flags = gemm::kJobCreateOutput;
  for (const MadeTile& made : tiles) {
    make.job_id = job_id++;
    make.c_tile = made.tile;
    make.c_rows = made.rows;
    make.c_cols = made.cols;
    TESSERA_RETURN_IF_ERROR(client.job(make));
    if (Result<gemm::Credit> credit = read_link_probe_reply<gemm::Credit>(link, client); !credit) return credit.status();
  }
  return Status::ok();
}

// The node's rate on vector-matrix products (1 x n by n x n, n = kVectorProbeSize): memory-bound
// where a square GEMM is compute-bound, the kind of job a Markov chain or a HITS step runs. The
// tiles are made on the worker by jobs that create their outputs (nothing of size travels), then
// `count` products are timed from the first written to the last CREDIT; the best of `repeats`.
// The products take turns on kVectorProbeMatrices matrices (128 MB in all), so each reads its
// matrix from memory as a run's jobs do: their tiles arrive well before they are used, behind
// other jobs' tiles. One 32 MB matrix read over and over would partly stay in cache and read
// faster than a run's vector products go.
constexpr uint32_t kVectorProbeSize = 2048;  // a 32 MB matrix: past the caches, as a chain's is
constexpr uint32_t kVectorProbeMatrices = 4;
constexpr uint32_t kVectorProbeFirstMatrix = 0xFFFFFF10u;
Result<double> vector_gflops(cluster::NodeLink& link, int count, int repeats, uint64_t& job_id) {
  const uint32_t n = kVectorProbeSize;
  std::vector<MadeTile> made{{kProbeC, 1, n}, {kProbeTile, 1, n}};
  std::vector<uint32_t> released{kProbeA, kProbeC, kProbeTile};
  for (uint32_t i = 0; i < kVectorProbeMatrices; ++i) {
    made.push_back({kVectorProbeFirstMatrix + i, n, n});
    released.push_back(kVectorProbeFirstMatrix + i);
  }
  gemm::GemmClient client(*link.connection);
  TESSERA_RETURN_IF_ERROR(make_tiles_on_worker(link, client, made, job_id));
  gemm::Job job;
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
      TESSERA_RETURN_IF_ERROR(client.job(job));
    }
    for (int i = 0; i < count; ++i) {
      if (Result<gemm::Credit> credit = read_link_probe_reply<gemm::Credit>(link, client); !credit) return credit.status();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * count / std::max(seconds, 1e-9) / 1e9);
  }
  TESSERA_RETURN_IF_ERROR(client.release(released));
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

}  // namespace

Result<NodeProfile> measure_node_compute(cluster::NodeLink& link, const ProfileOptions& options, const ProfileProgress& progress) {
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
    Result<gemm::Stats> before = is_reference ? worker_stats(link) : Result<gemm::Stats>(gemm::Stats{});
    if (!before) return before.status();
    const auto window_start = Clock::now();
    Result<GemmWindow> rate = gemm_rate(link, size, window, windows);
    if (!rate) return rate.status();
    if (is_reference) {
      Result<gemm::Stats> after = worker_stats(link);
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

  if (!options.quick && answers_graph_probe(link)) {
    say("graph rates");
    Result<model::GraphRates> rates = graph_rates(link, options);
    if (!rates) return rates.status();
    node.graph = *rates;
  }
  return node;
}

Status measure_node_link(cluster::NodeLink& link, const ProfileOptions& options, const ProfileProgress& progress,
                         const std::vector<double>& source, uint64_t& job_id, NodeProfile& node) {
  auto say = [&](const std::string& what) {
    if (progress) progress(link.spec.name, what, false);
  };
  say("latency");
  Result<double> round_trip = round_trip_seconds(link, options.quick ? 5 : 15);
  if (!round_trip) return round_trip.status();
  node.link.latency_s = *round_trip / 2.0;
  const double target = options.quick ? kQuickBandwidthProbeSeconds : kBandwidthProbeSeconds;
  const int repeats = options.quick ? 1 : 2;
  say("bandwidth to node");
  Result<gemm::Stats> before_receive = worker_stats(link);
  if (!before_receive) return before_receive.status();
  Result<double> to_node = bandwidth(link, true, *round_trip, target, repeats, source, job_id);
  if (!to_node) return to_node.status();
  Result<gemm::Stats> after_receive = worker_stats(link);
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
  return Status::ok();
}

bool answers_graph_probe(const cluster::NodeLink& link) {
  return (link.hello.capabilities & tp::kCapabilityGraphProbe) != 0;
}

namespace {

// What the worker charges for a probe of rmat:scale:16 (worker/graph_probe.cpp's
// graph_probe_bytes, rounded up): asked for only when it fits, since an ERROR ends the session.
constexpr uint32_t kGraphProbeEdgeFactor = 16;
uint64_t graph_probe_bytes_bound(uint32_t scale) {
  const uint64_t vertices = uint64_t{1} << scale;
  return vertices * kGraphProbeEdgeFactor * 64 + vertices * 96 + 65536 * 64 + (8u << 20);
}

}  // namespace

Result<model::GraphRates> graph_rates(cluster::NodeLink& link, const ProfileOptions& options) {
  graph::GraphProbe probe;
  probe.scale = std::clamp(options.graph_probe_scale, graph::kGraphProbeMinScale, graph::kGraphProbeMaxScale);
  probe.edge_factor = kGraphProbeEdgeFactor;
  probe.sweep_cpu_seconds = options.graph_sweep_cpu_seconds;
  const uint64_t cap = link.hello.tile_memory_cap;
  while (cap != 0 && probe.scale > graph::kGraphProbeMinScale && graph_probe_bytes_bound(probe.scale) > cap) --probe.scale;
  if (cap != 0 && graph_probe_bytes_bound(probe.scale) > cap) {
    return resource_exhausted(fmt::format("{}: its tile memory cap of {} bytes holds no graph probe", who_of(link), cap));
  }
  Result<graph::GraphProbeResult> result = graph::probe_graph(*link.connection, probe);
  if (!result) return result.status().with_context(who_of(link) + ": graph probe failed: ");
  model::GraphRates rates;
  rates.edge_updates_per_s = result->edge_updates_per_s;
  rates.send_s_per_delta = result->send_s_per_delta;
  rates.send_s_per_batch = result->send_s_per_batch;
  rates.receive_s_per_delta = result->receive_s_per_delta;
  rates.receive_s_per_batch = result->receive_s_per_batch;
  for (double figure : {rates.edge_updates_per_s, rates.send_s_per_delta, rates.send_s_per_batch,
                        rates.receive_s_per_delta, rates.receive_s_per_batch}) {
    if (!(figure >= 0.0) || !std::isfinite(figure)) {
      return protocol_error(fmt::format("{} reported a graph rate of {}", who_of(link), figure));
    }
  }
  if (!(rates.edge_updates_per_s > 0.0)) {
    return protocol_error(fmt::format("{} reported no edge updates in its graph probe", who_of(link)));
  }
  return rates;
}

// One node's echo round trips while it computes: kBusyLoadSize-cubed GEMM jobs on tiles the worker
// makes itself (nothing of size travels), kBusyJobsInFlight of them queued at all times, and
// echoes written at times spread evenly over kBusyEchoSpread after the previous answer, not
// after a CREDIT (a node that has just sent one is running, and answered at once, while a
// message's wait on a quota-limited node comes when it has spent its quota). The worker answers
// an echo on its receiving thread while its compute thread works, as it reads a run's STOREs;
// the round trip also waits for the coordinator's own reading thread. Returns the mean round
// trip: a chain of dependent transfers pays the rare long waits too.
namespace {

constexpr auto kBusyEchoSpread = std::chrono::microseconds(25'000);  // over a 20 ms quota period
constexpr uint32_t kBusyX = 0xFFFFFF04u, kBusyY = 0xFFFFFF05u, kBusyZ = 0xFFFFFF06u;

}  // namespace

Result<double> busy_round_trip(cluster::NodeLink& link, int pings, uint64_t job_id) {
  constexpr uint32_t n = kBusyLoadSize;
  gemm::GemmClient client(*link.connection);
  TESSERA_RETURN_IF_ERROR(make_tiles_on_worker(link, client, {{kBusyX, n, n}, {kBusyY, n, n}, {kBusyZ, n, n}}, job_id));
  gemm::Job load;
  load.a_tile = kBusyX;
  load.b_tile = kBusyY;
  load.c_tile = kBusyZ;
  load.m = load.n = load.k = kBusyLoadSize;
  const auto send_load = [&]() -> Status {
    load.job_id = job_id++;
    return client.job(load);
  };
  for (int i = 0; i < kBusyJobsInFlight; ++i) TESSERA_RETURN_IF_ERROR(send_load());
  std::vector<double> trips;
  gemm::Probe echo;
  echo.kind = gemm::ProbeKind::kEcho;
  echo.echo.assign(64, 0x33);
  bool echo_out = false;
  Clock::time_point echo_sent;
  while (static_cast<int>(trips.size()) < pings || client.owes()) {
    if (!echo_out && static_cast<int>(trips.size()) < pings) {
      // The k-th echo waits (7k mod pings) / pings of the spread: every phase once, in mixed order.
      const auto step = (7 * static_cast<int64_t>(trips.size())) % pings;
      std::this_thread::sleep_for(kBusyEchoSpread * step / pings);
      TESSERA_RETURN_IF_ERROR(client.send_probe(echo));
      echo_sent = Clock::now();
      echo_out = true;
    }
    Result<gemm::GemmClient::Reply> reply = client.next({tp::MessageType::kCredit, tp::MessageType::kProbeResult});
    if (!reply) return reply.status().with_context(who_of(link) + ": busy latency probe failed: ");
    if (std::holds_alternative<gemm::ProbeResult>(*reply)) {
      if (!echo_out) return protocol_error(fmt::format("{} answered an echo it was not sent", who_of(link)));
      trips.push_back(std::chrono::duration<double>(Clock::now() - echo_sent).count());
      echo_out = false;
      continue;
    }
    // Keep the node busy until the last echo is back, then let the queue drain.
    if (static_cast<int>(trips.size()) < pings) TESSERA_RETURN_IF_ERROR(send_load());
  }
  const uint32_t released[] = {kProbeA, kBusyX, kBusyY, kBusyZ};
  TESSERA_RETURN_IF_ERROR(client.release(released));
  double total = 0.0;
  for (double trip : trips) total += trip;
  return trips.empty() ? 0.0 : total / static_cast<double>(trips.size());
}

}  // namespace tessera::balance::profile::probes
