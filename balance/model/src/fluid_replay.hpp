// What the performance model's replays and its policy share: one node and the plan's shape as
// the fluid simulation sees them, the simulation itself, and a job's seconds on a node.
// Implemented in static_replay.cpp; private to the model library. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "tessera/balance/model/cluster_model.hpp"

namespace tessera::balance::model::detail {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// What the simulation needs of one node; the link cap may be tighter than the node's own link
// (make_model_plan caps it at the node's fair share of the coordinator).
struct SimNode {
  uint64_t rows = 0;
  const SpeedCurve* speed = nullptr;
  CpuModel cpu;
  double latency_s = 0.0;
  double to_node_bytes_per_s = 0.0;
  double from_node_bytes_per_s = 0.0;
  // The cores the node's compute takes on the coordinator's host while it multiplies; 0 when it
  // runs elsewhere (or its host is unknown) and competes with nothing modelled.
  double host_cores_wanted = 0.0;
  double crowded_share = 1.0;  // HostModel::crowded_share
};

// The coordinator's host, for nodes that share its cores: the cores, and the coordinator's CPU
// per byte it moves. No contention is modelled when cores is 0.
struct SimHost {
  double cores = 0.0;
  double coordinator_cpu_s_per_byte = 0.0;
};

// What the transfers between the coordinator and the nodes share: the coordinator's send capacity
// (<= 0: no limit) and, for nodes behind the switch, its uplink (<= 0: no switch).
struct SimLinks {
  double coordinator_bytes_per_s = 0.0;
  double uplink_bytes_per_s = 0.0;
  std::vector<bool> behind_switch;  // per node; missing entries: not behind it
  bool behind(std::size_t node) const { return node < behind_switch.size() && behind_switch[node]; }
};

struct SimShape {
  uint64_t n = 0, k = 0;
  uint64_t panel_width = 0;
  uint32_t panels_in_flight = 1;
  std::size_t panel_count() const { return static_cast<std::size_t>((k + panel_width - 1) / panel_width); }
};

// What a simulation yields per node: when it finished (+inf if never), and the share of its
// cores it kept while it multiplied (1 when it never computed or nothing competed).
struct SimOutcome {
  std::vector<double> finish;
  std::vector<double> availability;
};

// Seconds a node works on a GEMM of `flops` at `flops_per_s` whose data (`received_bytes`) it
// had to read off its socket first: the receive CPU comes out of the same cores, and contention
// for those cores slows both. +inf when the node cannot compute.
double job_seconds(const CpuModel& cpu, double flops, double flops_per_s, double received_bytes);

// Fluid simulation of all nodes at once: piecewise-constant rates between events, so each step
// jumps straight to the next completion or timer. Ends when every node is done or nothing can
// progress any more (a zero rate somewhere); unfinished nodes keep finish = +inf.
// `chain` empty: star, every node gets B from the coordinator. Otherwise B is forwarded along it
// (distinct indices into `nodes`, head first; replay.hpp says how); a node with rows that is not
// on it never gets B.
SimOutcome simulate(std::span<const SimNode> nodes, const SimShape& shape, const SimLinks& links, const SimHost& host = {},
                    std::span<const std::size_t> chain = {});

// The coordinator's host as the simulation sees it: no contention is modelled when no node
// shares it.
SimHost coordinator_host(const ClusterModel& model);

// Why `node` can take no work (an empty or all-zero speed curve, a link of bandwidth 0); empty when it can.
std::string excluded_reason(const NodeModel& node);

}  // namespace tessera::balance::model::detail
