// The performance model's values: what a node computes per second (a speed curve), what its link
// to the coordinator carries, what else takes its CPU, and where it runs (the host it may share
// with the coordinator). host.hpp divides a shared host's cores, replay.hpp forecasts a plan's
// finish times from these values, model_policy.hpp sizes a plan by them.
//
// Speed is a function of problem size: a node's measured GEMM rates at several square sizes,
// interpolated piecewise-linearly in log(size) and held constant beyond the measured range. A job
// of shape m x k times k x n is looked up at its square-equivalent size cbrt(m n k).
// A link costs latency + bytes / bandwidth, with separate bandwidths to and from the node.
// Plain values that own their data; thread-compatible.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

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
  // Behind the cluster's switch: what it exchanges with the coordinator also crosses the switch's
  // uplink (ClusterModel::switch_uplink_bytes_per_s), shared with the switch's other nodes.
  bool behind_switch = false;
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
  // The switch's uplink, each direction, shared max-min fairly by the nodes behind it
  // (LinkModel::behind_switch) within the coordinator's capacity; 0 = no switch.
  double switch_uplink_bytes_per_s = 0.0;
  // The coordinator's CPU seconds (user and system) per byte it sends or receives; 0 = not charged.
  double coordinator_cpu_s_per_byte = 0.0;
  bool operator==(const ClusterModel&) const = default;
};

// Per node (model order), whether what it receives crosses the switch's uplink: behind the switch,
// and the model has one (switch_uplink_bytes_per_s > 0).
std::vector<bool> behind_switch_of(const ClusterModel& model);

// The same cluster with only `nodes` (indices into model.nodes, in the order given): every
// cluster-wide figure (the coordinator's capacity and CPU per byte) kept.
ClusterModel model_of_nodes(const ClusterModel& model, const std::vector<std::size_t>& nodes);

}  // namespace tessera::balance::model
