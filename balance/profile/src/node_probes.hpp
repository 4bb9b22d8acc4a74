// Probes of one node (private to balance/profile): the GEMM windows and speed curve, link latency
// and bandwidth over the path a multiply's data takes, the per-job cost, the vector-matrix rate,
// and echo round trips while the node computes. measure_cluster.cpp strings them together over
// the cluster; what each probe measures and why is said where it is defined (node_probes.cpp).
// Every probe talks on the link it is given and nothing else: the caller owns the link and must
// not use it from another thread meanwhile. Probes of different links may run at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::profile::probes {

using Clock = std::chrono::steady_clock;

// How long a bandwidth probe's transfers should last (full profile, --quick).
constexpr double kBandwidthProbeSeconds = 0.25;
constexpr double kQuickBandwidthProbeSeconds = 0.08;

// Link probes move rows of kProbeColumns doubles (8 KiB), at most kMaxProbeBytes at once. Job ids
// start at kProbeJob, tile ids near the top of the range: clear of the drivers'.
constexpr uint32_t kProbeColumns = 1024;
constexpr uint64_t kProbeJob = 0xFFFFFFFF00000000ull;
constexpr std::size_t kMaxProbeBytes = 64u << 20;

// The load busy_round_trip keeps on a node: jobs of this size cubed, this many queued. 512 is
// 268 MFLOP a job: milliseconds on a fast core, longer than a 20 ms quota period on a quarter one.
constexpr uint32_t kBusyLoadSize = 512;
constexpr int kBusyJobsInFlight = 4;

struct GemmWindow {
  double gflops = 0.0;
  uint32_t repetitions = 0;
  double seconds = 0.0;
};

// "node 'pi1' (10.0.0.5:7070)": how messages name a node.
std::string who_of(const cluster::NodeLink& link);

// A worker that refuses a link probe's STORE (over its tile memory cap) answers ERROR and closes
// without reading the data, so the probe's write fails before the answer is read: returns that
// answer in place of a network failure when there is one, else `failure`.
Status explain_lost_link(cluster::NodeLink& link, const Status& failure);

// One timed GEMM probe of size^3 lasting at least `window_seconds` on the worker. Fails on a
// network or protocol error, or a rate that is not a positive finite number.
Result<GemmWindow> gemm_window(cluster::NodeLink& link, uint32_t size, double window_seconds);

// The rows of kProbeColumns doubles that make about `bytes` (at least one).
uint32_t probe_rows(std::size_t bytes);

// Seconds to move `rows` x kProbeColumns doubles of `data` into the node's tile memory.
// REQUIRES: data holds at least rows x kProbeColumns values.
Result<double> time_to_node(cluster::NodeLink& link, uint32_t rows, const std::vector<double>& data);

// The probes of one node that use only the node itself (its speed curve, its graph rates, as
// `options` asks): nodes on distinct hosts can run them at once. The node's identity comes from
// its HELLO. Fails with the first probe that fails.
Result<NodeProfile> measure_node_compute(cluster::NodeLink& link, const ProfileOptions& options, const ProfileProgress& progress);

// The probes of `node` that move data between it and the coordinator (latency, bandwidth each way
// and the receive CPU, per-job cost, vector-matrix rate): one node at a time, so that each
// measures that node's link alone. `source` is the bytes link probes send (kMaxProbeBytes of
// them), `job_id` the next job id to use (advanced past those used).
Status measure_node_link(cluster::NodeLink& link, const ProfileOptions& options, const ProfileProgress& progress,
                         const std::vector<double>& source, uint64_t& job_id, NodeProfile& node);

// Whether the node's worker answers GRAPH_PROBE (its HELLO has kCapabilityGraphProbe).
bool answers_graph_probe(const cluster::NodeLink& link);

// The node's graph rates from one GRAPH_PROBE (see ProfileOptions for its size), scaled down when
// the worker's tile memory cap would not hold it. Fails on a network or protocol error, a figure
// that is not a finite number >= 0, or no edge rate; kResourceExhausted without asking when even
// the smallest probe would not fit.
// REQUIRES: answers_graph_probe(link).
Result<model::GraphRates> graph_rates(cluster::NodeLink& link, const ProfileOptions& options);

// The mean echo round trip (`pings` of them) while the node computes a queue of
// kBusyLoadSize-cubed GEMMs; job ids from `job_id` on.
Result<double> busy_round_trip(cluster::NodeLink& link, int pings, uint64_t job_id);

}  // namespace tessera::balance::profile::probes
