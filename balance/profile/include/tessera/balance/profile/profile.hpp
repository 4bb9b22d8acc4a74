// Profiles: what each node really delivers, measured by the node itself, and the file that keeps
// the measurements between runs.
//
// Per node: GEMM speed at geometric sizes (128 .. 2048, bounded by the node's tile memory and by
// a per-repetition time budget), each size measured in three timed windows whose median is kept
// (two more windows when they disagree by over 50%); link latency from echo round trips; link
// bandwidth to and from the node through a STORE into and a RESULT out of its tile memory, the
// path a multiply's data takes. The worker's CPU counters (STATS) read around the reference
// windows and the to-node transfers give the cores its compute gets and the CPU it spends per
// byte received, which the model charges to the node. Then the coordinator's own send capacity
// to all nodes at once.
// Nodes sharing a host are measured one at a time so they never compete for its cores; nodes on
// distinct hosts (as their workers name them) run their own probes at once, and their links are
// measured one node at a time so each figure is that link's alone. Then, since in a run
// they do compete (emulated nodes on one host, a coordinator sharing a desktop), every node's
// rate at the reference size is measured again with all nodes multiplying at once
// (concurrent_gflops: the bound of a run in which every node computes all the time, and what the
// model lets a node on the coordinator's host keep while others there multiply; see
// profile_model). With every node computing again (a stream of small GEMM jobs each), echo round
// trips give each link's latency under load (LinkProfile::busy_latency_s), which the expression
// scheduler charges on the many small dependent transfers of its runs. The profiler never reads
// emulation settings.
// Graph rates (model::GraphRates, for the graph placement model): on a worker that answers
// GRAPH_PROBE, the edge updates per second of the engine's asynchronous PageRank sweep on an R-MAT
// graph the worker generates itself, and the cost of sending and of receiving a remote delta, per
// entry and per batch (worker/graph_probe.hpp says how). A saved node without them (profiled
// before they existed) gets only its graph rates measured, its other figures reused.
// --quick measures one size (1024) in one window and the links with small transfers, and no graph
// rates (a node measured quick keeps those it had).
//
// A profile is saved as YAML next to the cluster file (configs/lab.yaml ->
// configs/lab.profile.yaml) and reused: a node is re-measured only when its fingerprint (address,
// threads, labels, emulation settings, and the facts its worker reports: version, arch, cores,
// memory, hostname) changed, when it is new, when --refresh is given, or when named by --node.
// ClusterProfile is a value; functions are thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/model/graph_rates.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::profile {

struct LinkProfile {
  double latency_s = 0.0;              // one way: half the median echo round trip
  double to_node_bytes_per_s = 0.0;
  double from_node_bytes_per_s = 0.0;
  // One way while every node of the cluster computes: what a message waits for a busy node's
  // receiving thread and the coordinator's, on shared or quota-limited cores. 0 when not
  // measured (older profiles).
  double busy_latency_s = 0.0;
  bool operator==(const LinkProfile&) const = default;
};

struct NodeProfile {
  std::string name;
  std::string endpoint;
  double gflops = 0.0;            // rate at the reference size: the Tinetti weight
  // Rate at the reference size while every node of the cluster multiplies at once; 0 when not
  // measured (older profiles, one-node clusters).
  double concurrent_gflops = 0.0;
  // The CPU cores the node's compute got during the reference GEMM windows (the worker's compute
  // CPU seconds over their wall time): 0.25 for a quarter-core quota, the thread count on idle
  // cores. 0 when not measured (older profiles).
  double compute_cores = 0.0;
  // The worker's communication CPU seconds per byte it received during the to-node link probe
  // (reading the socket into tile memory). 0 when not measured.
  double receive_cpu_s_per_byte = 0.0;
  // Seconds the node spends per job besides its arithmetic (decoding, queueing, the CREDIT), from
  // 64 tiny jobs sent back to back; 0 when not measured.
  double job_overhead_s = 0.0;
  // GFLOP/s on 1 x 2048 by 2048 x 2048 products (memory-bound), from jobs on tiles the worker
  // made itself; 0 when not measured. The model places it on the speed curve at
  // kVectorEquivalentSize.
  double vector_gflops = 0.0;
  uint32_t probe_size = 0;        // the reference size
  uint32_t repetitions = 0;       // GEMMs in the reference window
  double probe_seconds = 0.0;     // length of the reference window
  std::vector<model::SpeedPoint> speed;  // rate by size (the speed curve); empty in old profiles
  LinkProfile link;
  bool has_link = false;          // false in quick-GEMM-only profiles of older versions
  // What a graph run costs on the node; nullopt when not measured (older profiles, --quick, a
  // worker without GRAPH_PROBE).
  std::optional<model::GraphRates> graph;
  uint32_t threads = 0;           // the worker's compute threads
  uint32_t cores = 0;             // online CPUs the worker saw
  uint64_t memory_bytes = 0;
  std::string arch;
  std::string hostname;
  std::string worker_version;
  std::string fingerprint;        // see the file comment
  std::string measured_at;        // UTC, ISO 8601
  bool quick = false;
  bool operator==(const NodeProfile&) const = default;
};

struct ClusterProfile {
  std::string cluster;
  std::string measured_at;  // UTC, ISO 8601, of the newest measurement
  std::vector<NodeProfile> nodes;
  double coordinator_send_bytes_per_s = 0.0;  // 0 when not measured
  // The coordinator's CPU (user + system) per byte while it sends to all nodes at once; 0 when not
  // measured. On a host it shares with nodes this is CPU the nodes do not get (HostModel).
  double coordinator_cpu_s_per_byte = 0.0;
  // What the nodes behind the cluster's switch received at once (each direction is shaped alike):
  // its uplink as measured; 0 when the cluster has no switch or it was not measured.
  double switch_uplink_bytes_per_s = 0.0;
  bool operator==(const ClusterProfile&) const = default;

  // gflops normalised to sum 1, order of `nodes`.
  std::vector<double> relative_powers() const;
  const NodeProfile* find(const std::string& node_name) const;
};

struct ProfileOptions {
  bool quick = false;
  bool refresh = false;                 // re-measure every node
  std::vector<std::string> only_nodes;  // re-measure these (others reused when possible)
  uint32_t reference_size = 1024;       // the size whose rate is pw_i's numerator
  // Timed window per GEMM measurement; each follows a 0.1 s warm-up on the worker. A window of a
  // few CPU-quota periods (100 ms) can catch one slice more or less than its share, so a
  // throttled node reads up to ~40% off in a 0.25 s window: the reference size, which sets pw_i,
  // gets longer windows than the rest of the curve.
  double window_seconds = 0.2;
  double reference_window_seconds = 0.5;
  double quick_window_seconds = 0.5;
  // A node that sends nothing for this long while a probe is outstanding is given up (it stopped
  // answering); the whole of one node's measurements is also bounded (60 s quick, 180 s full).
  double silent_node_seconds = 30.0;
  // The graph probe: rmat:graph_probe_scale:16 generated on the worker (2^17 vertices, 2.1 M edges,
  // 9 MB of targets: past a Pi's caches and most of a desktop's), a sweep of this much CPU time,
  // sends and receives of batches of 64 and 65536 entries (65536: the engine's batch_max_entries).
  // A fraction of a CPU second in all on a fast core (half of it generating the graph); a quarter
  // core takes four times as long in wall time.
  uint32_t graph_probe_scale = 17;
  double graph_sweep_cpu_seconds = 0.08;
};

// The graph rates of a cluster as a small table (node, M edge updates/s, send and receive us per
// delta and per batch) for `tessera profile` to print; empty when no node has them.
std::string graph_rates_table(const ClusterProfile& profile);

// Progress lines for a person watching; `done` is true for a node's final line.
using ProfileProgress = std::function<void(const std::string& node_name, const std::string& what, bool done)>;

// Measures what `previous` cannot supply (see the file comment) and returns the whole profile in
// cluster order. `measured` (optional) receives the names of the nodes actually measured, those
// of which only the graph rates were measured included.
Result<ClusterProfile> run_profile(cluster::ClusterConnection& cluster, const cluster::ClusterSpec& spec,
                                   const std::optional<ClusterProfile>& previous, const ProfileOptions& options,
                                   const ProfileProgress& progress = {},
                                   std::vector<std::string>* measured = nullptr);

// What must stay equal for a node's measurements to be reused.
std::string node_fingerprint(const cluster::NodeSpec& node, const transport::Hello& hello);

// configs/lab.yaml -> configs/lab.profile.yaml
std::string default_profile_path(const std::string& cluster_config_path);
Status save_profile(const std::string& path, const ClusterProfile& profile);
Result<ClusterProfile> load_profile(const std::string& path);

// Weights for each node of `cluster`, in cluster order, from the profile. Fails naming the first
// node the profile lacks, with the command that fixes it.
Result<std::vector<double>> profile_weights(const ClusterProfile& profile, const cluster::ClusterSpec& cluster,
                                            const std::string& profile_path);

// The performance model of `cluster`'s nodes from the profile. Fails naming a node without
// measurements, or one measured before link probes existed (re-run `tessera profile --refresh`).
Result<model::ClusterModel> profile_model(const ClusterProfile& profile, const cluster::ClusterSpec& cluster,
                                   const std::string& profile_path);

}  // namespace tessera::balance::profile
