// Measuring the cluster: every node's probes in turn (node_probes.cpp), then every node at once
// (GEMM rates while all multiply, link latency while all compute), the coordinator's send capacity,
// and which saved measurements can be reused (node_fingerprint). A node that falls silent while it
// is measured is dropped by the cluster's silent-node watchdog.
#include "tessera/balance/profile/profile.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "node_probes.hpp"
#include "tessera/balance/cluster/silent_node_watchdog.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/time.hpp"

namespace tessera::balance::profile {

namespace {

using probes::explain_lost_link;
using probes::GemmWindow;
using probes::kBandwidthProbeSeconds;
using probes::kBusyJobsInFlight;
using probes::kBusyLoadSize;
using probes::kMaxProbeBytes;
using probes::kProbeColumns;
using probes::kProbeJob;
using probes::kQuickBandwidthProbeSeconds;

// A node that stops answering mid-measurement (SIGSTOP, power lost behind a switch) must not hang
// the profiler: each read waits at most ProfileOptions::silent_node_seconds for a byte, and the
// watchdog shuts the connection down when the whole node takes longer than its budget (a write to
// a stopped node blocks once its socket buffer is full, which no read bound can catch). Both are
// far above what a healthy node needs: probes run for fractions of a second, and even a
// quarter-core Pi's full curve takes seconds, not minutes.
constexpr auto kQuickNodeBudget = std::chrono::seconds(60);
constexpr auto kFullNodeBudget = std::chrono::seconds(180);

// The budget of one node's measurements, on the cluster's silent-node watchdog: the node owes
// them from the start and nothing it sends meanwhile moves the deadline.
class MeasurementWatchdog {
 public:
  MeasurementWatchdog(cluster::NodeLink& link, std::chrono::seconds budget, double silent_seconds)
      : link_(link), budget_(budget), previous_read_timeout_(link.connection->read_timeout()),
        watchdog_(1, watch_options()) {
    link_.connection->set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(silent_seconds * 1000.0)));
    watchdog_.begin_owing(0);
  }
  ~MeasurementWatchdog() {
    watchdog_.stop();
    link_.connection->set_read_timeout(previous_read_timeout_);
  }
  MeasurementWatchdog(const MeasurementWatchdog&) = delete;
  MeasurementWatchdog& operator=(const MeasurementWatchdog&) = delete;
  // The failure to report instead of the broken read or write the shutdown caused.
  Status explain(const Status& failure) const {
    const std::optional<std::string> reason = watchdog_.silent_reason(0);
    return reason ? network_error(*reason) : failure;
  }

 private:
  cluster::SilentNodeWatchdog::Options watch_options() {
    cluster::SilentNodeWatchdog::Options options;
    // Budgets are seconds to minutes: a tenth of a second late is nothing.
    options.period = std::chrono::milliseconds(100);
    options.deadline_s = [seconds = static_cast<double>(budget_.count())](std::size_t) { return seconds; };
    options.describe = [this](const cluster::SilentNodeWatchdog::Silence&) {
      return fmt::format("node '{}' ({}) did not finish its measurements within {} s; it stopped answering",
                         link_.spec.name, link_.spec.endpoint(), budget_.count());
    };
    options.on_silent = [this](std::size_t, const std::string&) { link_.connection->shutdown(); };
    return options;
  }

  cluster::NodeLink& link_;
  const std::chrono::seconds budget_;
  const std::chrono::milliseconds previous_read_timeout_;
  cluster::SilentNodeWatchdog watchdog_;  // last: its thread uses the members above
};

// `probe()` (a Status or a Result) under a MeasurementWatchdog of `budget`: a failure the watchdog
// caused by shutting the silent node's connection is reported as the silence it was.
template <typename Probe>
auto watched(cluster::NodeLink& link, std::chrono::seconds budget, double silent_seconds, Probe&& probe) {
  MeasurementWatchdog watchdog(link, budget, silent_seconds);
  auto outcome = probe();
  using Outcome = decltype(outcome);
  if (outcome) return outcome;
  if constexpr (std::is_same_v<Outcome, Status>) {
    return watchdog.explain(outcome);
  } else {
    return Outcome(watchdog.explain(outcome.status()));
  }
}

// Every node receives a STORE at once, each sized to take about the same time over its own link.
// The capacity is the sum of the rates the nodes got while all were receiving: when the
// coordinator is not the bottleneck it equals the sum of the links, and the model's sharing then
// changes nothing; when it is, the sum is what the coordinator can push. (Dividing all bytes by
// the slowest node's time would measure the slowest link, not the coordinator.)
struct CoordinatorCapacity {
  double bytes_per_s = 0.0;
  double cpu_s_per_byte = 0.0;
  // All bytes over the time until the last arrived. For one bottleneck that every transfer crosses
  // (a switch's uplink) this is its rate: the sum of the rates counts the bottleneck twice once
  // the first transfer is done and the others speed up.
  double bytes_per_s_until_last = 0.0;
};

// `which`: the links to send to (indices into cluster.links() and nodes), all when empty. The
// same measurement, restricted to the nodes behind the switch, is the switch's uplink. Each send
// is watched: a stopped node's socket fills and the write to it blocks, which no read bound
// catches, so the watchdog shuts its link once the sends are four times late (counted as if they
// went one after another, each at its node's own measured rate) plus 5 s.
Result<CoordinatorCapacity> coordinator_send_capacity(cluster::ClusterConnection& cluster, const std::vector<NodeProfile>& nodes,
                                                      bool quick, double silent_seconds, const std::vector<double>& source,
                                                      std::vector<std::size_t> which = {}) {
  const double target = quick ? kQuickBandwidthProbeSeconds : kBandwidthProbeSeconds;
  if (which.empty()) {
    for (std::size_t i = 0; i < cluster.links().size(); ++i) which.push_back(i);
  }
  std::vector<uint32_t> rows(which.size());
  std::vector<Result<double>> seconds(which.size(), Result<double>(0.0));
  double one_after_another_s = 0.0;
  for (std::size_t w = 0; w < which.size(); ++w) {
    const double rate = nodes[which[w]].link.to_node_bytes_per_s;
    const double bytes = std::clamp(rate * target, double{1u << 20}, static_cast<double>(kMaxProbeBytes));
    rows[w] = probes::probe_rows(static_cast<std::size_t>(bytes));
    one_after_another_s += rate > 0.0 ? bytes / rate : target;
  }
  const auto budget = std::chrono::seconds(static_cast<int64_t>(std::ceil(4.0 * one_after_another_s)) + 5);
  const double cpu_before = process_cpu_seconds();
  {
    std::vector<std::jthread> senders;
    for (std::size_t w = 0; w < which.size(); ++w) {
      senders.emplace_back([&, w] {
        cluster::NodeLink& link = cluster.links()[which[w]];
        seconds[w] = watched(link, budget, silent_seconds, [&] { return probes::time_to_node(link, rows[w], source); });
      });
    }
  }
  const double cpu_spent = process_cpu_seconds() - cpu_before;
  CoordinatorCapacity capacity;
  double total_bytes = 0.0, last_s = 0.0;
  for (std::size_t w = 0; w < which.size(); ++w) {
    if (!seconds[w]) return explain_lost_link(cluster.links()[which[w]], seconds[w].status());
    const double bytes = 8.0 * rows[w] * kProbeColumns;
    capacity.bytes_per_s += bytes / std::max(*seconds[w], 1e-9);
    total_bytes += bytes;
    last_s = std::max(last_s, *seconds[w]);
  }
  capacity.bytes_per_s_until_last = total_bytes / std::max(last_s, 1e-9);
  capacity.cpu_s_per_byte = total_bytes > 0.0 ? std::max(cpu_spent, 0.0) / total_bytes : 0.0;
  return capacity;
}

// Every node runs the reference GEMM probe at the same moment, each on its own thread, in
// kConcurrentRounds rounds; a node's rate is the mean of its rounds but the slowest. The result is
// a node's rate when all compete for what they share (cores, memory bandwidth). It varies from
// round to round, and within a run from one moment to the next, with where the kernel puts the
// threads, so a run sees the mean; the slowest round is left out so that a burst of outside load
// (a build beside the profile can take most of a node's speed) counts for less.
constexpr int kConcurrentRounds = 5;

Status measure_concurrent_rates(cluster::ClusterConnection& cluster, const ProfileOptions& options,
                                std::vector<NodeProfile>& nodes) {
  const double window = options.quick ? options.quick_window_seconds : options.reference_window_seconds;
  std::vector<std::vector<double>> rates(nodes.size());
  for (int round = 0; round < kConcurrentRounds; ++round) {
    std::vector<Result<GemmWindow>> measured(nodes.size(), Result<GemmWindow>(GemmWindow{}));
    {
      std::vector<std::jthread> probe_threads;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        probe_threads.emplace_back([&, i] {
          cluster::NodeLink& link = cluster.links()[i];
          // The probe asks for `window` seconds but runs at least one GEMM (plus a warm-up), which
          // on a slow node can take far longer: four times the longer of the two, plus a margin
          // for the round trip, bounds it; a node silent past silent_node_seconds fails sooner.
          const double size = nodes[i].probe_size;
          const double one_gemm_s = nodes[i].gflops > 0.0 ? 2.0 * size * size * size / (nodes[i].gflops * 1e9) : 0.0;
          const auto budget =
              std::chrono::seconds(static_cast<int64_t>(std::ceil(4.0 * std::max(window, 2.0 * one_gemm_s))) + 5);
          measured[i] = watched(link, budget, options.silent_node_seconds,
                                [&] { return probes::gemm_window(link, nodes[i].probe_size, window); });
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

// Every node's busy_round_trip at the same moment, each on its own thread: the link latencies a
// run sees when every node is computing and every process wants the host's cores.
Status measure_busy_latencies(cluster::ClusterConnection& cluster, const ProfileOptions& options, std::vector<NodeProfile>& nodes,
                              uint64_t& job_id) {
  const int pings = options.quick ? 8 : 24;
  std::vector<Result<double>> trips(nodes.size(), Result<double>(0.0));
  {
    std::vector<std::jthread> probe_threads;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      probe_threads.emplace_back([&, i] {
        cluster::NodeLink& link = cluster.links()[i];
        // Each echo waits at most for a few of the node's jobs; a slow node's jobs bound it.
        const double job_s = nodes[i].gflops > 0.0
                                 ? 2.0 * std::pow(double{kBusyLoadSize}, 3.0) / (nodes[i].gflops * 1e9)
                                 : 1.0;
        const auto budget = std::chrono::seconds(
            static_cast<int64_t>(std::ceil(4.0 * (pings * 2 + kBusyJobsInFlight + 3) * job_s + pings * 0.025)) + 10);
        trips[i] = watched(link, budget, options.silent_node_seconds,
                           [&] { return probes::busy_round_trip(link, pings, job_id + (uint64_t{i} << 24)); });
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

// "41.2 M edge updates/s, send 0.021 + 3.1 / receive 0.012 + 2.0 us per delta + per batch"
std::string describe_graph_rates(const model::GraphRates& rates) {
  return fmt::format("{:.1f} M edge updates/s, send {:.3f} + {:.1f} / receive {:.3f} + {:.1f} us per delta + per batch",
                     rates.edge_updates_per_s / 1e6, rates.send_s_per_delta * 1e6, rates.send_s_per_batch * 1e6,
                     rates.receive_s_per_delta * 1e6, rates.receive_s_per_batch * 1e6);
}

// Raised when a probe changes what it measures (2: the vector rate reads four matrices in turn, and
// vector products run as dgemv on the worker), so that profiles the older probes measured are
// measured again instead of reused. (Graph rates did not raise it: a node saved without them gets
// them measured alone, see run_profile.)
constexpr int kProbeRevision = 2;

}  // namespace

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

std::string graph_rates_table(const ClusterProfile& profile) {
  std::string table;
  for (const NodeProfile& node : profile.nodes) {
    if (!node.graph) continue;
    if (table.empty()) {
      table = fmt::format("{:<12} {:>16} {:>10} {:>10} {:>10} {:>10}\n", "graph rates", "M edge updates/s",
                          "send us/d", "us/batch", "recv us/d", "us/batch");
    }
    const model::GraphRates& rates = *node.graph;
    table += fmt::format("{:<12} {:>16.1f} {:>10.4f} {:>10.2f} {:>10.4f} {:>10.2f}\n", node.name,
                         rates.edge_updates_per_s / 1e6, rates.send_s_per_delta * 1e6, rates.send_s_per_batch * 1e6,
                         rates.receive_s_per_delta * 1e6, rates.receive_s_per_batch * 1e6);
  }
  return table;
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
  // First the nodes whose saved figures stand (some measure only their graph rates); the others
  // are measured below.
  std::vector<std::optional<NodeProfile>> nodes(cluster.links().size());
  std::vector<std::size_t> to_measure;
  for (std::size_t index = 0; index < cluster.links().size(); ++index) {
    cluster::NodeLink& link = cluster.links()[index];
    const NodeProfile* known = previous ? previous->find(link.spec.name) : nullptr;
    const bool named = std::find(options.only_nodes.begin(), options.only_nodes.end(), link.spec.name) !=
                       options.only_nodes.end();
    const bool reusable = known != nullptr && !options.refresh && !named && known->has_link &&
                          known->fingerprint == node_fingerprint(link.spec, link.hello) &&
                          (options.quick || !known->quick);
    if (!reusable) {
      to_measure.push_back(index);
      continue;
    }
    NodeProfile node = *known;
    // Profiled before graph rates existed: those alone are measured, the rest is kept (the
    // other nodes' figures and the all-at-once measurements do not depend on them).
    if (!node.graph && !options.quick && probes::answers_graph_probe(link)) {
      if (progress) progress(link.spec.name, "graph rates (the other figures reused)", false);
      Result<model::GraphRates> rates =
          watched(link, kQuickNodeBudget, options.silent_node_seconds, [&] { return probes::graph_rates(link, options); });
      if (!rates) return explain_lost_link(link, rates.status());
      node.graph = *rates;
      if (progress) {
        progress(link.spec.name,
                 fmt::format("reused (measured {}); graph rates: {}", known->measured_at, describe_graph_rates(*rates)),
                 true);
      }
      if (measured != nullptr) measured->push_back(link.spec.name);
    } else if (progress) {
      progress(link.spec.name, fmt::format("reused (measured {})", known->measured_at), true);
    }
    nodes[index] = std::move(node);
  }

  // The probes that use only the node (its GEMM speed curve, its graph rates) run at once on nodes
  // of distinct hosts, one node at a time per host, so that nodes sharing a machine never compete
  // for its cores: profiling time grows with the nodes a machine holds, not with the cluster. A
  // worker names its host in its HELLO; one that names none counts as a host of its own.
  std::map<std::string, std::vector<std::size_t>> hosts;
  for (std::size_t index : to_measure) {
    const std::string& hostname = cluster.links()[index].hello.hostname;
    hosts[hostname.empty() ? "\n" + std::to_string(index) : hostname].push_back(index);
  }
  std::mutex progress_lock;
  const ProfileProgress shared_progress = [&](const std::string& node, const std::string& what, bool done) {
    const std::lock_guard<std::mutex> lock(progress_lock);
    progress(node, what, done);
  };
  const ProfileProgress& node_progress = progress ? shared_progress : progress;
  std::vector<Result<NodeProfile>> computed(cluster.links().size(), Result<NodeProfile>(NodeProfile{}));
  {
    std::vector<std::jthread> machines;
    for (const auto& [host, indices] : hosts) {
      machines.emplace_back([&, indices = &indices] {
        for (std::size_t index : *indices) {
          cluster::NodeLink& link = cluster.links()[index];
          computed[index] = watched(link, options.quick ? kQuickNodeBudget : kFullNodeBudget, options.silent_node_seconds,
                                    [&] { return probes::measure_node_compute(link, options, node_progress); });
          if (!computed[index]) return;  // the run fails with the first failure, in cluster order
        }
      });
    }
  }
  for (std::size_t index : to_measure) {
    if (!computed[index]) return explain_lost_link(cluster.links()[index], computed[index].status());
  }
  // The probes that move data between node and coordinator, one node at a time: each measures that
  // node's link alone.
  for (std::size_t index : to_measure) {
    cluster::NodeLink& link = cluster.links()[index];
    NodeProfile& node = *computed[index];
    const Status linked = watched(link, options.quick ? kQuickNodeBudget : kFullNodeBudget, options.silent_node_seconds,
                                  [&] { return probes::measure_node_link(link, options, progress, source, job_id, node); });
    if (!linked) return explain_lost_link(link, linked);
    if (progress) {
      progress(link.spec.name,
               fmt::format("{:.2f} GFLOP/s at {}, {} sizes; latency {:.3f} ms; {:.1f} / {:.1f} MB/s to / from{}",
                           node.gflops, node.probe_size, node.speed.size(), node.link.latency_s * 1e3,
                           node.link.to_node_bytes_per_s / 1e6, node.link.from_node_bytes_per_s / 1e6,
                           node.graph ? "; graph " + describe_graph_rates(*node.graph) : std::string()),
               true);
    }
    if (measured != nullptr) measured->push_back(link.spec.name);
    nodes[index] = std::move(node);
    any_measured = true;
  }
  for (std::optional<NodeProfile>& node : nodes) profile.nodes.push_back(std::move(*node));
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
    Result<CoordinatorCapacity> capacity = coordinator_send_capacity(cluster, profile.nodes, options.quick, options.silent_node_seconds, source);
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
  // The switch's uplink: the nodes behind it receiving at once (their links measured alone above).
  std::vector<std::size_t> behind;
  for (std::size_t i = 0; i < cluster.links().size(); ++i) {
    const int index = spec.find_node(cluster.links()[i].spec.name);
    if (index >= 0 && spec.behind_switch(static_cast<std::size_t>(index))) behind.push_back(i);
  }
  if (!behind.empty() && (any_measured || !previous || previous->switch_uplink_bytes_per_s <= 0.0)) {
    if (progress) progress("switch", "uplink: every node behind it receiving at once", false);
    Result<CoordinatorCapacity> uplink = coordinator_send_capacity(cluster, profile.nodes, options.quick, options.silent_node_seconds, source, behind);
    if (!uplink) return uplink.status();
    profile.switch_uplink_bytes_per_s = uplink->bytes_per_s_until_last;
    if (progress) {
      progress("switch",
               fmt::format("its {} nodes receive {:.1f} MB/s at once (uplink {} in the cluster file)", behind.size(),
                           uplink->bytes_per_s_until_last / 1e6, spec.network_switch->uplink_rate),
               true);
    }
  } else if (!behind.empty()) {
    profile.switch_uplink_bytes_per_s = previous->switch_uplink_bytes_per_s;
  }
  profile.measured_at = profile.nodes.empty() ? utc_now(UtcFormat::kIso8601) : profile.nodes.front().measured_at;
  for (const NodeProfile& node : profile.nodes) profile.measured_at = std::max(profile.measured_at, node.measured_at);
  return profile;
}

}  // namespace tessera::balance::profile
