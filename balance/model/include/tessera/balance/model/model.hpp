// The performance model: what a node computes and transfers per second, and the finish time of
// every node for a given plan, predicted without running it.
//
// Speed is a function of problem size: a node's measured GEMM rates at several square sizes,
// interpolated piecewise-linearly in log(size) and held constant beyond the measured range. A job
// of shape m x k times k x n is looked up at its square-equivalent size cbrt(m n k).
// A link costs latency + bytes / bandwidth, with separate bandwidths to and from the node.
// The coordinator sends to all nodes at once (one thread per node), so concurrent transfers share
// its measured send capacity max-min fairly, each also capped by its own link.
//
// predict() replays the multiply driver's streaming protocol as a fluid simulation: per node, A's
// rows then one panel of B after another, at most `panels_in_flight` panels unacknowledged (a
// panel can be sent once the job `panels_in_flight` earlier has finished), each job starting when
// its panel has arrived and the previous job is done, the C block travelling back after the last
// job; a job's compute includes the CPU its received bytes cost the node and the node's share of
// contended cores (CpuModel). Nodes on the coordinator's host (HostModel) share its cores, moment
// by moment, with each other while they multiply and with the coordinator while it moves bytes.
// Pure functions and values; thread-compatible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/balance/plan/plan.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::model {

// A GEMM of m x k by k x n does 2 mnk flops on 8 (mk + kn + mn) bytes; its square-equivalent size
// is the square GEMM with the same flops per byte, 3 mnk / (mk + kn + mn) (n for n x n x n). A
// vector-matrix product (1 x n by n x n) is about 3.
double square_equivalent_size(double m, double n, double k);
inline constexpr double kVectorEquivalentSize = 3.0;

struct SpeedPoint {
  double size = 0.0;   // square GEMM dimension, or square-equivalent size
  double gflops = 0.0;
  bool operator==(const SpeedPoint&) const = default;
};

class SpeedCurve {
 public:
  SpeedCurve() = default;
  // Points in any order; sizes must be > 0 and distinct, rates >= 0. Nothing is refused: of
  // points with equal sizes the first given is kept, and sizes <= 0 or infinite are dropped.
  explicit SpeedCurve(std::vector<SpeedPoint> points);
  // Interpolated rate; 0 for an empty curve. Monotone between two points, constant outside.
  double gflops_at(double size) const;
  const std::vector<SpeedPoint>& points() const { return points_; }  // sorted by size
  bool operator==(const SpeedCurve&) const = default;

 private:
  std::vector<SpeedPoint> points_;
};

struct LinkModel {
  double latency_s = 0.0;
  double to_node_bytes_per_s = 0.0;    // coordinator -> node; 0 = unusable
  double from_node_bytes_per_s = 0.0;  // node -> coordinator; 0 = unusable
  // One-way latency while every node computes (profiled); 0 = not known. The expression
  // scheduler, whose runs wait on many small dependent transfers, charges the larger of the two;
  // predict() keeps latency_s (its transfers are few and large).
  double busy_latency_s = 0.0;
  double loaded_latency() const { return std::max(latency_s, busy_latency_s); }
  bool operator==(const LinkModel&) const = default;
};

// What else takes the node's CPU in a run, so that its compute can be forecast on a shared host.
// A job's compute time is (its GEMM at the speed curve's rate + the bytes the node received for
// it x receive_s_per_byte) / availability.
struct CpuModel {
  // Compute seconds lost per byte received: the worker's receive CPU per byte spread over the
  // cores its compute gets (a quarter-core node pays four times its CPU time). 0 = not charged.
  double receive_s_per_byte = 0.0;
  // The share of its measured-alone speed a node keeps while others use the same cores, in
  // (0, 1]; 1 = no contention modelled. profile_model leaves it at 1 (the all-at-once probe is
  // too noise-prone to drive forecasts); a caller that knows better may set it.
  double availability = 1.0;
  // Seconds each job costs the node besides its arithmetic (profiled); the expression scheduler
  // charges it per job, where tiles are small enough for it to matter. 0 = not charged.
  double job_overhead_s = 0.0;
  // availability as every cost divides by it: a value outside (0, 1] reads as 1 (none given) or
  // is capped at 1.
  double effective_availability() const { return availability > 0.0 ? std::min(availability, 1.0) : 1.0; }
  bool operator==(const CpuModel&) const = default;
};

// Where a node runs, for the CPU it shares: a node on the coordinator's own machine (an emulated
// node, or a worker beside the coordinator) competes with the coordinator's work of moving bytes
// and with the other nodes there for the machine's cores.
struct HostModel {
  bool with_coordinator = false;  // the node's host is the coordinator's
  double cores = 0.0;             // the host's online cores; 0 = unknown (no contention modelled)
  double node_cores = 0.0;        // the cores the node's compute uses when busy (its quota); 0 = unknown
  // The share of its speed alone the node keeps while other nodes on the host multiply too, in
  // (0, 1]: what the profile measured with every node multiplying at once. A fair division of the
  // cores promises more than the kernel delivers (it balances runnable threads, not quotas, so a
  // full-core node can share a core with a quarter-core one while the other core idles).
  double crowded_share = 1.0;
  bool operator==(const HostModel&) const = default;
};

struct NodeModel {
  std::string name;
  SpeedCurve speed;
  LinkModel link;
  CpuModel cpu;
  HostModel host;
  bool operator==(const NodeModel&) const = default;
};

struct ClusterModel {
  std::vector<NodeModel> nodes;              // cluster order
  double coordinator_send_bytes_per_s = 0.0; // all nodes at once; 0 = unlimited
  // The coordinator's CPU seconds (user and system) per byte it sends or receives; 0 = not charged.
  double coordinator_cpu_s_per_byte = 0.0;
  bool operator==(const ClusterModel&) const = default;
};

// The same cluster with only `nodes` (indices into model.nodes, in the order given): every
// cluster-wide figure (the coordinator's capacity and CPU per byte) kept.
ClusterModel model_of_nodes(const ClusterModel& model, const std::vector<std::size_t>& nodes);

// The same cluster with each node's availability multiplied by its share of its host's cores
// (host_availability, Prediction::host_share). REQUIRES: a share per node.
ClusterModel with_host_shares(const ClusterModel& model, const std::vector<double>& shares);

// Whether a forecast share of a node's cores is worth saying: below what rounds to 100%.
inline bool host_share_reduced(double share) { return share < 0.995; }

// The share of its compute each node keeps on the coordinator's host during a run, in (0, 1]:
// the host's cores divided max-min fairly (as the kernel's fair scheduler divides them between
// cgroups and processes) among the nodes there, each wanting node_cores x busy_fraction[i], and
// the coordinator, wanting coordinator_cpu_s / span_s; no more than its crowded_share for a busy
// node while another node there is busy too. 1 for every node elsewhere, for a host with room for
// all, and when the cores are unknown. REQUIRES: busy_fraction has a value per node.
std::vector<double> host_availability(const ClusterModel& model, const std::vector<double>& busy_fraction,
                                      double coordinator_cpu_s, double span_s);

struct Prediction {
  std::vector<double> finish_s;  // per node, plan order; 0 for nodes without rows
  double makespan_s = 0.0;
  // Per node, the share of its cores it kept while it multiplied (on the coordinator's host, the
  // rest went to other nodes there and to the coordinator); 1 where nothing competed.
  std::vector<double> host_share;
};

// On the coordinator's host, each moment of the replay divides the host's cores max-min fairly
// (as the kernel's fair scheduler divides them between cgroups and processes) among the nodes
// there that are multiplying, each wanting its quota (HostModel::node_cores), and the
// coordinator, wanting coordinator_cpu_s_per_byte x the bytes per second it is moving; a node
// short of cores computes proportionally slower, a coordinator short of them moves bytes so. A
// node multiplying while another there multiplies too runs at no more than its crowded_share.
// REQUIRES: plan.shares has one entry per model node, same order. A node given rows it cannot
// serve (zero speed or zero bandwidth) finishes at +infinity.
Prediction predict(const ClusterModel& model, const plan::Plan& plan);

// The `dynamic` policy's forecast: its pull protocol replayed tile by tile. Each tile the driver
// cuts (cut_row_tiles: quarter-size ones first and last, plan.tile_rows between) goes to the node that asks first (a node asks while it holds fewer than two
// unfinished tiles, as the driver does); it receives the tile's A, with its first tile all of B
// (kept for later tiles), over its own link one transfer after another, multiplies once the data
// and its previous tile are done, and sends C back. Links to the nodes share the coordinator's
// send capacity max-min fairly as if all received at once. Then the speculative copies: the tile
// arriving last goes, once, to the node that would deliver it soonest after its own work, while
// that beats the original (a node's finish is its last tile that counted). Not replayed: B's
// panels overlapping the first multiply (so a node's first tile is forecast late). Nodes that
// cannot compute or have no link take no tiles; with none left the makespan is +infinity. Nodes
// on the coordinator's host get the share of its cores host_availability() gives them over the
// whole replay (their busy time and the coordinator's bytes), replayed again twice.
// REQUIRES: as predict(); plan.tile_rows > 0 for a forecast.
Prediction predict_pull(const ClusterModel& model, const plan::Plan& plan);

// The `model` policy: rows chosen so that predicted finish times are as equal as the integer rows
// allow. Bisection on the common finish time T: each node takes the most rows it can finish by T
// (itself found by bisection, since a node's finish time grows with its rows); the smallest T at
// which the nodes together take all m rows wins. A node that is not worth its fixed cost (e.g. a
// slow link that must carry all of B before its first row pays off) gets 0 rows. Nodes with zero
// speed or zero bandwidth are excluded and named in `warnings`. The rows are sized with each
// node's receive charge and availability (CpuModel). When nodes share the coordinator's host, the
// rows are sized again (twice) with each node's compute at the share of its cores predict() says
// the previous plan left it, and the plan predict() forecasts soonest is kept.
struct ModelPlanResult {
  plan::Plan plan;
  std::vector<std::string> warnings;
};
// REQUIRES: request.node_names match model.nodes in order. request.policy and weights are ignored.
Result<ModelPlanResult> make_model_plan(const plan::PlanRequest& request, const ClusterModel& model);

}  // namespace tessera::balance::model
