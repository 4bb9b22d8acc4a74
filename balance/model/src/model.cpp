#include "tessera/balance/model/model.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/transport/protocol.hpp"

namespace tessera::balance::model {

namespace {

namespace tp = tessera::transport;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Wire overheads of the multiply driver's frames (transport/protocol.hpp): a STORE is a header and
// a tile prefix in front of the matrix data, a JOB a header and a 72-byte body, a RESULT a header
// and a result prefix. They matter only for tiny shares, but keep predict() byte-exact.
constexpr double kStoreOverheadBytes = tp::kHeaderSize + tp::kTilePrefixSize;
constexpr double kJobFrameBytes = tp::kHeaderSize + tp::kJobPayloadBytes;
constexpr double kResultOverheadBytes = tp::kHeaderSize + tp::kResultPrefixSize;

// The outer bisection stops when the bracket on the common finish time is this tight; at 1e-6
// the rows the two ends give differ by about m * 1e-6 per node, i.e. by none for realistic m.
constexpr double kFinishTimeTolerance = 1e-6;
constexpr int kMaxBisectionSteps = 60;
// Sizing the model plan again with the host's cores shared as the last plan left them settles
// within two passes on the clusters measured (docs/performance.md, "The model on a shared host").
constexpr int kHostSharingPasses = 2;

// Max-min fair (water-filling) rates for flows with the given caps sharing `capacity`; a capacity
// <= 0 or infinite means the shared resource is no bottleneck. Caps may be infinite.
std::vector<double> max_min_fair(std::span<const double> caps, double capacity) {
  std::vector<double> rates(caps.begin(), caps.end());
  if (!(capacity > 0.0) || std::isinf(capacity)) return rates;
  std::vector<std::size_t> order(caps.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return caps[a] < caps[b]; });
  double remaining = capacity;
  for (std::size_t i = 0; i < order.size(); ++i) {
    // `remaining` stays finite: a flow is only subtracted when its cap is below a finite share.
    const double share = remaining / static_cast<double>(order.size() - i);
    const double cap = caps[order[i]];
    if (cap <= share) {
      rates[order[i]] = cap;
      remaining -= cap;
    } else {
      for (std::size_t j = i; j < order.size(); ++j) rates[order[j]] = share;
      break;
    }
  }
  return rates;
}

// A HostModel's crowded_share, read as 1 when it is not a share.
double crowded_share(const HostModel& host) {
  return host.crowded_share > 0.0 && host.crowded_share < 1.0 ? host.crowded_share : 1.0;
}

bool shares_coordinator_host(const HostModel& host) {
  return host.with_coordinator && host.cores > 0.0 && host.node_cores > 0.0;
}

// The coordinator's host's cores divided max-min fairly (as the kernel's fair scheduler divides
// them between cgroups and processes) among the nodes there, each wanting wants[i] cores, and the
// coordinator, wanting coordinator_wants. Each node's share is what it gets over what it wants (1
// for one wanting nothing), capped at crowded[i] while another node there wants cores too; the
// coordinator's likewise, uncapped.
struct CoreDivision {
  std::vector<double> node_share;
  double coordinator_share = 1.0;
};

CoreDivision divide_host_cores(std::vector<double> wants, const std::vector<double>& crowded, double coordinator_wants,
                               double cores) {
  CoreDivision division;
  division.node_share.assign(wants.size(), 1.0);
  const bool is_crowded = std::count_if(wants.begin(), wants.end(), [](double want) { return want > 0.0; }) >= 2;
  wants.push_back(coordinator_wants);
  const std::vector<double> got = max_min_fair(wants, cores);
  for (std::size_t i = 0; i + 1 < wants.size(); ++i) {
    if (!(wants[i] > 0.0)) continue;
    const double share = std::min(got[i] / wants[i], 1.0);
    division.node_share[i] = is_crowded ? std::min(share, crowded[i]) : share;
  }
  if (coordinator_wants > 0.0) division.coordinator_share = std::min(got.back() / coordinator_wants, 1.0);
  return division;
}

}  // namespace

ClusterModel model_of_nodes(const ClusterModel& model, const std::vector<std::size_t>& nodes) {
  ClusterModel out = model;
  out.nodes.clear();
  for (std::size_t node : nodes) out.nodes.push_back(model.nodes[node]);
  return out;
}

ClusterModel with_host_shares(const ClusterModel& model, const std::vector<double>& shares) {
  ClusterModel shared = model;
  for (std::size_t i = 0; i < shared.nodes.size(); ++i) {
    shared.nodes[i].cpu.availability = shared.nodes[i].cpu.effective_availability() * shares[i];
  }
  return shared;
}

double square_equivalent_size(double m, double n, double k) {
  const double bytes = m * k + k * n + m * n;
  return bytes > 0.0 ? 3.0 * m * n * k / bytes : 0.0;
}

std::vector<double> host_availability(const ClusterModel& model, const std::vector<double>& busy_fraction,
                                      double coordinator_cpu_s, double span_s) {
  std::vector<double> availability(model.nodes.size(), 1.0);
  std::vector<std::size_t> sharing;
  std::vector<double> wants;
  std::vector<double> crowded;
  double cores = 0.0;
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    const HostModel& host = model.nodes[i].host;
    if (!shares_coordinator_host(host)) continue;
    cores = std::max(cores, host.cores);
    sharing.push_back(i);
    wants.push_back(host.node_cores * std::clamp(busy_fraction[i], 0.0, 1.0));
    crowded.push_back(crowded_share(host));
  }
  if (sharing.empty() || !(span_s > 0.0)) return availability;
  const CoreDivision division = divide_host_cores(wants, crowded, std::max(coordinator_cpu_s, 0.0) / span_s, cores);
  for (std::size_t s = 0; s < sharing.size(); ++s) {
    if (wants[s] > 0.0) availability[sharing[s]] = std::clamp(division.node_share[s], 1e-3, 1.0);
  }
  return availability;
}

namespace {

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

// How fast each of a node's activities progresses during one step of the simulation.
struct StepRates {
  double send = 0.0;    // bytes per second from the coordinator
  double job = 1.0;     // seconds of job work per second: below 1 when the node's cores are short
  double result = 0.0;  // bytes per second back to the coordinator
};

struct SimShape {
  uint64_t n = 0, k = 0;
  uint64_t panel_width = 0;
  uint32_t panels_in_flight = 1;
  std::size_t panel_count() const { return static_cast<std::size_t>((k + panel_width - 1) / panel_width); }
};

// A rate that is NaN or negative cannot make progress; treating it as 0 sends the node to +inf
// instead of letting a bad curve run time backwards.
double usable_rate(double rate) { return rate > 0.0 ? rate : 0.0; }

// Seconds until `left` units are done at `rate`; +inf when the rate is 0.
double time_to_finish(double left, double rate) {
  if (left <= 0.0) return 0.0;
  return rate > 0.0 ? left / rate : kInfinity;
}

// Seconds a node works on a GEMM of `flops` at `flops_per_s` whose data (`received_bytes`) it
// had to read off its socket first: the receive CPU comes out of the same cores, and contention
// for those cores slows both. +inf when the node cannot compute.
double job_seconds(const CpuModel& cpu, double flops, double flops_per_s, double received_bytes) {
  const double gemm = flops > 0.0 ? (flops_per_s > 0.0 ? flops / flops_per_s : kInfinity) : 0.0;
  return (gemm + received_bytes * std::max(cpu.receive_s_per_byte, 0.0)) / cpu.effective_availability();
}

// One node's replay of NodeStreamer::stream() and the worker's job loop.
class NodeReplay {
 public:
  NodeReplay(const SimNode& node, const SimShape& shape) : node_(node), shape_(shape) {
    panels_ = shape.panel_count();
    arrival_.assign(panels_, kInfinity);
    credit_.assign(panels_, kInfinity);
    const double rows = static_cast<double>(node.rows);
    const double n = static_cast<double>(shape.n);
    a_bytes_ = 8.0 * rows * static_cast<double>(shape.k) + kStoreOverheadBytes;
    c_bytes_ = 8.0 * rows * n + kResultOverheadBytes;
    const uint64_t last_width = shape.k - (panels_ - 1) * shape.panel_width;
    for (int last = 0; last < 2; ++last) {
      const double width = static_cast<double>(last ? last_width : shape.panel_width);
      panel_bytes_[last] = 8.0 * width * n + kStoreOverheadBytes + kJobFrameBytes;
      // A job is an m_i x w by w x n GEMM, looked up at its square-equivalent size, plus the CPU
      // its panel costs the node to receive.
      const double rate = usable_rate(node.speed->gflops_at(std::cbrt(rows * width * n)) * 1e9);
      job_seconds_[last] = job_seconds(node.cpu, 2.0 * rows * width * n, rate, panel_bytes_[last]);
    }
    a_receive_seconds_ = job_seconds(node.cpu, 0.0, 1.0, a_bytes_);
    if (node.rows == 0) finish_ = 0.0;
  }

  bool idle() const { return node_.rows == 0; }
  bool sending() const { return sending_; }
  bool computing() const { return job_running_; }
  bool returning() const { return result_running(); }
  double link_cap() const { return usable_rate(node_.to_node_bytes_per_s); }
  double return_cap() const { return usable_rate(node_.from_node_bytes_per_s); }
  double host_cores_wanted() const { return node_.host_cores_wanted; }
  double crowded_share() const { return node_.crowded_share; }
  double finish() const { return finish_; }
  // Seconds of job work done, and seconds of wall time spent doing it: their ratio is the share
  // of its cores the node kept while it computed.
  double job_work_s() const { return job_work_s_; }
  double job_wall_s() const { return job_wall_s_; }

  // Starts whatever the protocol allows at `now`; a start never enables another at the same
  // instant because every transfer and job takes > 0 units of work.
  void start_ready(double now) {
    if (idle()) return;
    if (!sending_) {
      if (!a_started_) {
        a_started_ = true;
        start_send(a_bytes_, /*panel=*/std::nullopt);
      } else if (panels_sent_ < panels_ &&
                 (panels_sent_ < shape_.panels_in_flight || credit_[panels_sent_ - shape_.panels_in_flight] <= now)) {
        start_send(panel_bytes_[is_last(panels_sent_)], panels_sent_);
        ++panels_sent_;
      }
    }
    if (!job_running_ && jobs_done_ < panels_ && a_arrival_ <= now && arrival_[jobs_done_] <= now) {
      job_running_ = true;
      // The first job also pays for receiving A.
      job_left_ = job_seconds_[is_last(jobs_done_)] + (jobs_done_ == 0 ? a_receive_seconds_ : 0.0);
    }
    if (jobs_done_ == panels_ && !result_started_) {
      result_started_ = true;
      result_left_ = c_bytes_;
    }
  }

  // Earliest moment something of this node completes or a pending arrival/credit lands, given the
  // transfer rate the coordinator grants it. Remembers the completion times for advance().
  double next_event(double now, const StepRates& rates) {
    rates_ = rates;
    double next = kInfinity;
    send_done_ = sending_ ? now + time_to_finish(send_left_, rates_.send) : kInfinity;
    job_done_ = job_running_ ? now + time_to_finish(job_left_, rates_.job) : kInfinity;
    result_done_ = result_running() ? now + time_to_finish(result_left_, rates_.result) : kInfinity;
    next = std::min({send_done_, job_done_, result_done_});
    if (!job_running_ && jobs_done_ < panels_) {
      const double ready = std::max(a_arrival_, arrival_[jobs_done_]);
      if (ready > now) next = std::min(next, ready);
    }
    if (a_started_ && !sending_ && panels_sent_ < panels_ && panels_sent_ >= shape_.panels_in_flight) {
      const double credit = credit_[panels_sent_ - shape_.panels_in_flight];
      if (credit > now) next = std::min(next, credit);
    }
    return next;
  }

  // Moves from `now` to `to` (no later than any completion next_event() reported).
  void advance(double now, double to) {
    const double dt = to - now;
    if (sending_) {
      if (send_done_ <= to) {
        sending_ = false;
        // Every byte reaches the node one latency after it leaves, so with a full pipeline the
        // latency is paid once; a panel sent after a credit stall pays it again, as on the wire.
        const double arrival = send_done_ + node_.latency_s;
        if (sending_panel_) {
          arrival_[*sending_panel_] = arrival;
        } else {
          a_arrival_ = arrival;
        }
      } else {
        send_left_ = std::max(0.0, send_left_ - rates_.send * dt);
      }
    }
    if (job_running_) {
      job_wall_s_ += std::max(0.0, std::min(to, job_done_) - now);
      if (job_done_ <= to) {
        job_work_s_ += job_left_;
        job_running_ = false;
        credit_[jobs_done_] = job_done_ + node_.latency_s;
        ++jobs_done_;
      } else {
        job_work_s_ += std::min(job_left_, rates_.job * dt);
        job_left_ = std::max(0.0, job_left_ - rates_.job * dt);
      }
    }
    if (result_running()) {
      if (result_done_ <= to) {
        result_left_ = 0.0;
        finish_ = result_done_ + node_.latency_s;
      } else {
        result_left_ = std::max(0.0, result_left_ - rates_.result * dt);
      }
    }
  }

 private:
  // Jobs are measured in seconds of work (job_seconds), so they progress at 1 on uncontended
  // cores; +inf work (a node that cannot compute) never finishes.
  int is_last(std::size_t panel) const { return panel + 1 == panels_ ? 1 : 0; }
  bool result_running() const { return result_started_ && result_left_ > 0.0; }

  void start_send(double bytes, std::optional<std::size_t> panel) {
    sending_ = true;
    send_left_ = bytes;
    sending_panel_ = panel;
  }

  SimNode node_;
  SimShape shape_;
  std::size_t panels_ = 0;
  double a_bytes_ = 0.0, c_bytes_ = 0.0;
  double panel_bytes_[2] = {0.0, 0.0};  // [0] a full panel, [1] the last one
  double job_seconds_[2] = {0.0, 0.0};  // a full panel's job, the last one's
  double a_receive_seconds_ = 0.0;

  bool a_started_ = false;
  bool sending_ = false;
  std::optional<std::size_t> sending_panel_;  // empty while A is on the wire
  StepRates rates_;
  double send_left_ = 0.0, send_done_ = kInfinity;
  std::size_t panels_sent_ = 0;
  double a_arrival_ = kInfinity;
  std::vector<double> arrival_;  // when panel p (and its JOB) is at the node
  std::vector<double> credit_;   // when job p's CREDIT is back at the coordinator

  bool job_running_ = false;
  std::size_t jobs_done_ = 0;
  double job_left_ = 0.0, job_done_ = kInfinity;
  double job_work_s_ = 0.0, job_wall_s_ = 0.0;

  bool result_started_ = false;
  double result_left_ = 0.0, result_done_ = kInfinity;
  double finish_ = kInfinity;
};

// Each step's rates: the coordinator's send capacity shared max-min fairly by the links that are
// receiving; then, on the coordinator's host, its cores shared max-min fairly (as the kernel's fair
// scheduler shares them between cgroups and processes) by the nodes there that are multiplying,
// each wanting its quota, and the coordinator, wanting its CPU per byte x the bytes per second it
// sends and receives. A node short of cores computes at its share / its quota; a coordinator short
// of them moves bytes more slowly in proportion.
void step_rates(std::span<const NodeReplay> replays, double coordinator_bytes_per_s, const SimHost& host,
                std::vector<StepRates>& rates) {
  std::vector<double> caps;
  std::vector<std::size_t> senders;
  for (std::size_t i = 0; i < replays.size(); ++i) {
    rates[i] = StepRates{};
    if (replays[i].sending()) {
      senders.push_back(i);
      caps.push_back(replays[i].link_cap());
    }
    if (replays[i].returning()) rates[i].result = replays[i].return_cap();
  }
  const std::vector<double> shared = max_min_fair(caps, coordinator_bytes_per_s);
  for (std::size_t s = 0; s < senders.size(); ++s) rates[senders[s]].send = shared[s];
  if (!(host.cores > 0.0)) return;

  std::vector<std::size_t> on_host;
  std::vector<double> wants;
  std::vector<double> crowded;
  double bytes_per_s = 0.0;
  for (std::size_t i = 0; i < replays.size(); ++i) {
    bytes_per_s += rates[i].send + rates[i].result;
    if (replays[i].computing() && replays[i].host_cores_wanted() > 0.0) {
      on_host.push_back(i);
      wants.push_back(replays[i].host_cores_wanted());
      crowded.push_back(replays[i].crowded_share());
    }
  }
  if (on_host.empty()) return;  // the coordinator alone never runs short of a host's cores
  const double coordinator_wants = bytes_per_s * std::max(host.coordinator_cpu_s_per_byte, 0.0);
  const CoreDivision division =
      divide_host_cores(wants, crowded, std::isfinite(coordinator_wants) ? coordinator_wants : host.cores, host.cores);
  for (std::size_t s = 0; s < on_host.size(); ++s) rates[on_host[s]].job = division.node_share[s];
  if (division.coordinator_share < 1.0) {
    for (StepRates& rate : rates) {
      rate.send *= division.coordinator_share;
      rate.result *= division.coordinator_share;
    }
  }
}

// What a simulation yields per node: when it finished (+inf if never), and the share of its
// cores it kept while it multiplied (1 when it never computed or nothing competed).
struct SimOutcome {
  std::vector<double> finish;
  std::vector<double> availability;
};

// Fluid simulation of all nodes at once: piecewise-constant rates between events, so each step
// jumps straight to the next completion or timer. Ends when every node is done or nothing can
// progress any more (a zero rate somewhere); unfinished nodes keep finish = +inf.
SimOutcome simulate(std::span<const SimNode> nodes, const SimShape& shape, double coordinator_bytes_per_s,
                    const SimHost& host = {}) {
  std::vector<NodeReplay> replays;
  replays.reserve(nodes.size());
  for (const SimNode& node : nodes) replays.emplace_back(node, shape);

  std::vector<StepRates> rates(replays.size());
  double now = 0.0;
  for (;;) {
    for (NodeReplay& replay : replays) replay.start_ready(now);
    step_rates(replays, coordinator_bytes_per_s, host, rates);
    double next = kInfinity;
    for (std::size_t i = 0; i < replays.size(); ++i) {
      if (!replays[i].idle()) next = std::min(next, replays[i].next_event(now, rates[i]));
    }
    if (std::isinf(next)) break;
    for (NodeReplay& replay : replays) {
      if (!replay.idle()) replay.advance(now, next);
    }
    now = next;
  }

  SimOutcome outcome;
  for (const NodeReplay& replay : replays) {
    outcome.finish.push_back(replay.finish());
    // Work over wall time is 1 up to rounding where nothing competed; say exactly 1 there.
    const double wall = replay.job_wall_s();
    const double kept = wall > 0.0 && std::isfinite(replay.job_work_s()) ? replay.job_work_s() / wall : 1.0;
    outcome.availability.push_back(kept > 1.0 - 1e-9 ? 1.0 : std::max(kept, 1e-3));
  }
  return outcome;
}

// The coordinator's host as the simulation sees it: no contention is modelled when no node
// shares it.
SimHost coordinator_host(const ClusterModel& model) {
  SimHost host;
  for (const NodeModel& node : model.nodes) {
    if (shares_coordinator_host(node.host)) host.cores = std::max(host.cores, node.host.cores);
  }
  host.coordinator_cpu_s_per_byte = model.coordinator_cpu_s_per_byte;
  return host;
}

bool can_compute(const SpeedCurve& speed) {
  return std::any_of(speed.points().begin(), speed.points().end(),
                     [](const SpeedPoint& point) { return point.gflops > 0.0; });
}

// One node's predicted finish as a function of its rows, alone on a link capped at its fair
// share of the coordinator.
class SoloFinish {
 public:
  SoloFinish(const NodeModel& node, double to_node_cap, const SimShape& shape) : shape_(shape) {
    sim_.speed = &node.speed;
    sim_.cpu = node.cpu;
    sim_.latency_s = node.link.latency_s;
    sim_.to_node_bytes_per_s = to_node_cap;
    sim_.from_node_bytes_per_s = node.link.from_node_bytes_per_s;
  }

  double operator()(uint64_t rows) const {
    if (rows == 0) return 0.0;
    SimNode node = sim_;
    node.rows = rows;
    return simulate(std::span<const SimNode>(&node, 1), shape_, 0.0).finish.front();
  }

  // The largest r in [known_ok, known_too_many) with finish(r) <= deadline, given
  // finish(known_ok) <= deadline and finish(known_too_many) > deadline (or known_too_many = m + 1).
  // Assumes finish grows with rows (it does while a GEMM's rate grows more slowly than its size
  // cubed, i.e. for every measured curve); if it did not, the result would still be feasible.
  uint64_t max_rows_by(double deadline, uint64_t known_ok, uint64_t known_too_many) const {
    while (known_too_many - known_ok > 1) {
      const uint64_t mid = known_ok + (known_too_many - known_ok) / 2;
      if ((*this)(mid) <= deadline) {
        known_ok = mid;
      } else {
        known_too_many = mid;
      }
    }
    return known_ok;
  }

 private:
  SimNode sim_;
  SimShape shape_;
};

std::string excluded_reason(const NodeModel& node) {
  if (node.speed.points().empty()) return "its speed curve is empty (profile it first)";
  if (!can_compute(node.speed)) return "all its measured GEMM rates are 0";
  if (!(node.link.to_node_bytes_per_s > 0.0)) return "its link bandwidth to the node is 0";
  if (!(node.link.from_node_bytes_per_s > 0.0)) return "its link bandwidth from the node is 0";
  return {};
}

}  // namespace

SpeedCurve::SpeedCurve(std::vector<SpeedPoint> points) : points_(std::move(points)) {
  // A point without a positive, finite size has no place on a log axis; dropping it (rather
  // than failing) keeps a partly broken profile usable, as does keeping the first of duplicates.
  std::erase_if(points_, [](const SpeedPoint& point) { return !(point.size > 0.0) || std::isinf(point.size); });
  std::stable_sort(points_.begin(), points_.end(),
                   [](const SpeedPoint& a, const SpeedPoint& b) { return a.size < b.size; });
  points_.erase(std::unique(points_.begin(), points_.end(),
                            [](const SpeedPoint& a, const SpeedPoint& b) { return a.size == b.size; }),
                points_.end());
}

double SpeedCurve::gflops_at(double size) const {
  if (points_.empty()) return 0.0;
  if (!(size > points_.front().size)) return points_.front().gflops;
  if (size >= points_.back().size) return points_.back().gflops;
  const auto upper = std::upper_bound(points_.begin(), points_.end(), size,
                                      [](double value, const SpeedPoint& point) { return value < point.size; });
  const SpeedPoint& hi = *upper;
  const SpeedPoint& lo = *(upper - 1);
  // GEMM rates rise roughly with the logarithm of the size (cache blocking pays off in steps
  // of 2x), so log(size) is the axis on which straight lines fit profiles measured at 2^i.
  const double t = (std::log(size) - std::log(lo.size)) / (std::log(hi.size) - std::log(lo.size));
  return lo.gflops + t * (hi.gflops - lo.gflops);
}

Prediction predict(const ClusterModel& model, const plan::Plan& plan) {
  assert(plan.shares.size() == model.nodes.size());
  const std::size_t node_count = std::min(plan.shares.size(), model.nodes.size());
  SimShape shape;
  shape.n = plan.n;
  shape.k = plan.k;
  shape.panel_width = plan.panel_width == 0 ? plan.k : std::min(plan.panel_width, plan.k);
  shape.panels_in_flight = std::max<uint32_t>(plan.panels_in_flight, 1);

  std::vector<SimNode> nodes(node_count);
  for (std::size_t i = 0; i < node_count; ++i) {
    const NodeModel& node = model.nodes[i];
    nodes[i] = {plan.shares[i].rows.count, &node.speed, node.cpu, node.link.latency_s, node.link.to_node_bytes_per_s,
                node.link.from_node_bytes_per_s, shares_coordinator_host(node.host) ? node.host.node_cores : 0.0,
                crowded_share(node.host)};
  }

  Prediction prediction;
  if (plan.k == 0 || plan.n == 0) {
    prediction.finish_s.assign(node_count, 0.0);
    prediction.host_share.assign(node_count, 1.0);
    return prediction;
  }
  SimOutcome outcome = simulate(nodes, shape, model.coordinator_send_bytes_per_s, coordinator_host(model));
  prediction.finish_s = std::move(outcome.finish);
  prediction.host_share = std::move(outcome.availability);
  for (double finish : prediction.finish_s) prediction.makespan_s = std::max(prediction.makespan_s, finish);
  return prediction;
}

namespace {

// predict_pull's replay at the nodes' given availability; also the seconds each node multiplied
// and the bytes the coordinator moved, for the host's sharing.
struct PullReplay {
  Prediction prediction;
  std::vector<double> busy_s;
  double coordinator_bytes = 0.0;
};

PullReplay replay_pull(const ClusterModel& model, const plan::Plan& plan) {
  const std::size_t node_count = std::min(plan.shares.size(), model.nodes.size());
  PullReplay replay;
  Prediction& prediction = replay.prediction;
  prediction.finish_s.assign(node_count, 0.0);
  prediction.host_share.assign(node_count, 1.0);
  replay.busy_s.assign(node_count, 0.0);
  if (plan.m == 0 || plan.n == 0 || plan.k == 0 || plan.tile_rows == 0) return replay;

  // The driver keeps at most this many tiles in flight per node (run/multiply.cpp): the next
  // tile's A travels while the current one computes.
  constexpr std::size_t kTilesInFlight = 2;
  struct PullNode {
    bool usable = false;
    double to_node = 0.0, from_node = 0.0, latency = 0.0;
    double link_free = 0.0, compute_free = 0.0, back_free = 0.0, last_ask = 0.0;
    double bytes_moved = 0.0;
    double last_compute_s = 0.0;  // of the tile deliver() handed it last
    bool holds_b = false;
    std::deque<double> in_flight;  // result arrival times, in order
    double ask_time() const { return in_flight.size() < kTilesInFlight ? last_ask : in_flight.front(); }
  };
  std::vector<double> caps(node_count, 0.0);
  std::vector<PullNode> nodes(node_count);
  for (std::size_t i = 0; i < node_count; ++i) {
    const NodeModel& node = model.nodes[i];
    nodes[i].usable = excluded_reason(node).empty();
    caps[i] = nodes[i].usable ? node.link.to_node_bytes_per_s : 0.0;
  }
  const std::vector<double> shares = max_min_fair(caps, model.coordinator_send_bytes_per_s);
  for (std::size_t i = 0; i < node_count; ++i) {
    nodes[i].to_node = shares[i];
    nodes[i].from_node = model.nodes[i].link.from_node_bytes_per_s;
    nodes[i].latency = model.nodes[i].link.latency_s;
  }
  const double n = static_cast<double>(plan.n);
  const double k = static_cast<double>(plan.k);
  const double panel_depth =
      static_cast<double>(plan.panel_width == 0 ? plan.k : std::min(plan.panel_width, plan.k));
  struct PulledTile {
    std::size_t node;
    double rows;
    double arrival;  // of its result at the coordinator, from whichever node delivers it first
    double compute_s;  // on that node
    bool copied = false;
  };
  std::vector<PulledTile> tiles;
  // Node `i` (in state `node`) takes a tile of `rows` when it asks at `asked`: A (and B with its
  // first tile) over its link, the multiply, C back. Returns when C arrives.
  const auto deliver = [&](PullNode& node, std::size_t i, double rows, double asked) {
    double bytes = 8.0 * rows * k;
    if (!node.holds_b) bytes += 8.0 * k * n;
    node.holds_b = true;
    node.link_free = std::max(node.link_free, asked + node.latency) + bytes / node.to_node;
    // The worker multiplies a tile one B panel at a time: its rate is that of a panel's job.
    const double rate = model.nodes[i].speed.gflops_at(std::cbrt(rows * n * panel_depth)) * 1e9;
    const double compute_s = job_seconds(model.nodes[i].cpu, 2.0 * rows * n * k, rate, bytes);
    node.compute_free = std::max(node.compute_free, node.link_free) + compute_s;
    node.back_free = std::max(node.back_free, node.compute_free) + 8.0 * rows * n / node.from_node;
    node.last_compute_s = compute_s;
    node.bytes_moved += bytes + 8.0 * rows * n;
    return node.back_free + node.latency;
  };
  for (const partition::Block& cut : plan::cut_row_tiles(plan, node_count)) {
    const double rows = static_cast<double>(cut.rows);
    // The tile goes to the node that asks first: the one with a free slot soonest.
    std::optional<std::size_t> asker;
    for (std::size_t i = 0; i < node_count; ++i) {
      if (nodes[i].usable && (!asker || nodes[i].ask_time() < nodes[*asker].ask_time())) asker = i;
    }
    if (!asker) {
      prediction.makespan_s = kInfinity;
      return replay;
    }
    PullNode& node = nodes[*asker];
    const double asked = node.ask_time();
    if (node.in_flight.size() >= kTilesInFlight) node.in_flight.pop_front();
    node.last_ask = asked;
    const double arrival = deliver(node, *asker, rows, asked);
    node.in_flight.push_back(arrival);
    tiles.push_back({*asker, rows, arrival, node.last_compute_s});
  }
  // Near the end the driver copies a running tile to a node with nothing left when the copy would
  // arrive first (run/multiply.cpp, copy_pays), and stops sending the loser's pieces. Replayed
  // greedily: the tile arriving last is copied to the node that would deliver it soonest, while
  // that beats it; each tile once.
  for (;;) {
    std::optional<std::size_t> latest;
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      if (!tiles[t].copied && (!latest || tiles[t].arrival > tiles[*latest].arrival)) latest = t;
    }
    if (!latest) break;
    PulledTile& tile = tiles[*latest];
    tile.copied = true;  // looked at once, copied or not
    std::optional<std::size_t> best;
    double best_arrival = tile.arrival;
    PullNode best_state;
    for (std::size_t i = 0; i < node_count; ++i) {
      if (!nodes[i].usable || i == tile.node) continue;
      PullNode trial = nodes[i];
      // It asks once its own work is done.
      const double arrival = deliver(trial, i, tile.rows, trial.compute_free);
      if (arrival < best_arrival) {
        best = i;
        best_arrival = arrival;
        best_state = trial;
      }
    }
    if (!best) break;  // the latest tile cannot be beaten: nothing later can change the makespan
    nodes[*best] = best_state;
    tile.arrival = best_arrival;
    tile.node = *best;
    tile.compute_s = best_state.last_compute_s;
  }
  for (const PulledTile& tile : tiles) {
    prediction.finish_s[tile.node] = std::max(prediction.finish_s[tile.node], tile.arrival);
  }
  for (double finish : prediction.finish_s) prediction.makespan_s = std::max(prediction.makespan_s, finish);
  // A node is busy with the tiles that counted: one whose tile went to a copy elsewhere (a slow
  // link's, typically) would in the driver not have started it or stopped when it was settled.
  for (const PulledTile& tile : tiles) replay.busy_s[tile.node] += tile.compute_s;
  for (std::size_t i = 0; i < node_count; ++i) replay.coordinator_bytes += nodes[i].bytes_moved;
  return replay;
}

}  // namespace

Prediction predict_pull(const ClusterModel& model, const plan::Plan& plan) {
  assert(plan.shares.size() == model.nodes.size());
  PullReplay replay = replay_pull(model, plan);
  if (!(coordinator_host(model).cores > 0.0)) return replay.prediction;
  // The pull replay is a list schedule, not a fluid one, so the host's sharing is averaged over
  // the run (host_availability), as the expression scheduler does: each pass replays with every
  // node's compute at the share of its cores the last replay's busy time and bytes leave it.
  std::vector<double> shares(model.nodes.size(), 1.0);
  for (int pass = 0; pass < kHostSharingPasses; ++pass) {
    const double span = replay.prediction.makespan_s;
    if (!(span > 0.0) || !std::isfinite(span)) break;
    std::vector<double> busy(model.nodes.size(), 0.0);
    for (std::size_t i = 0; i < busy.size() && i < replay.busy_s.size(); ++i) busy[i] = replay.busy_s[i] / span;
    shares = host_availability(model, busy, replay.coordinator_bytes * model.coordinator_cpu_s_per_byte, span);
    replay = replay_pull(with_host_shares(model, shares), plan);
  }
  replay.prediction.host_share = shares;
  return replay.prediction;
}

namespace {

// Each node's finish time is modelled alone, with its link capped at its max-min fair share of
// the coordinator as if every usable node were receiving at once, and its compute at its CpuModel
// availability. That is pessimistic when nodes stop receiving at different times (the survivors
// then get more) and when a node ends up with 0 rows, but it makes every node's finish a function
// of its own rows only, which is what lets the common finish time be found by bisection.
// predict() of the resulting plan simulates the true sharing.
Result<ModelPlanResult> size_rows_by_finish_time(const plan::PlanRequest& request, const ClusterModel& model) {
  TESSERA_RETURN_IF_ERROR(plan::check_plan_request(request));
  TESSERA_RETURN_IF_ERROR(plan::check_layout(plan::Policy::kModel, request.layout));
  if (request.node_names.size() != model.nodes.size()) {
    return invalid_argument(fmt::format("{} node names given but the performance model has {} nodes",
                                        request.node_names.size(), model.nodes.size()));
  }
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    if (request.node_names[i] != model.nodes[i].name) {
      return invalid_argument(fmt::format("node {} is '{}' in the request but '{}' in the performance model", i,
                                          request.node_names[i], model.nodes[i].name));
    }
  }

  ModelPlanResult result;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    const std::string reason = excluded_reason(model.nodes[i]);
    if (reason.empty()) {
      usable.push_back(i);
    } else {
      result.warnings.push_back(fmt::format("node '{}' gets no rows: {}", model.nodes[i].name, reason));
    }
  }
  if (usable.empty()) {
    return invalid_argument(fmt::format("no node can take rows: {}", fmt::join(result.warnings, "; ")));
  }

  SimShape shape;
  shape.n = request.n;
  shape.k = request.k;
  shape.panel_width = std::min(request.panel_width, request.k);
  shape.panels_in_flight = request.panels_in_flight;

  std::vector<double> link_caps;
  for (std::size_t i : usable) link_caps.push_back(model.nodes[i].link.to_node_bytes_per_s);
  const std::vector<double> fair_caps = max_min_fair(link_caps, model.coordinator_send_bytes_per_s);
  std::vector<SoloFinish> solo;
  for (std::size_t u = 0; u < usable.size(); ++u) solo.emplace_back(model.nodes[usable[u]], fair_caps[u], shape);

  const uint64_t m = request.m;
  // Any single node doing everything is a feasible plan, so the best of those bounds T above.
  std::vector<double> alone(solo.size());
  for (std::size_t u = 0; u < solo.size(); ++u) alone[u] = solo[u](m);
  double hi = *std::min_element(alone.begin(), alone.end());
  if (std::isinf(hi)) {
    return invalid_argument("the performance model predicts that no node ever finishes; check the speed curves");
  }
  double lo = 0.0;
  // rows_lo[u] fit by `lo` (sum < m), rows_hi[u] fit by `hi` (sum >= m), and one row more does not.
  std::vector<uint64_t> rows_lo(usable.size(), 0);
  std::vector<uint64_t> rows_hi(usable.size());
  for (std::size_t u = 0; u < usable.size(); ++u) {
    // Checked directly so that sum(rows_hi) >= m holds even for a curve steep enough to make a
    // node's finish time dip somewhere as its rows grow.
    rows_hi[u] = alone[u] <= hi ? m : solo[u].max_rows_by(hi, 0, m + 1);
  }

  for (int step = 0; step < kMaxBisectionSteps && hi - lo > kFinishTimeTolerance * hi; ++step) {
    const double mid = lo + (hi - lo) / 2;
    std::vector<uint64_t> rows_mid(usable.size());
    uint64_t total = 0;
    for (std::size_t u = 0; u < usable.size(); ++u) {
      rows_mid[u] = solo[u].max_rows_by(mid, rows_lo[u], rows_hi[u] + 1);
      total += rows_mid[u];
    }
    if (total >= m) {
      hi = mid;
      rows_hi = std::move(rows_mid);
    } else {
      lo = mid;
      rows_lo = std::move(rows_mid);
    }
  }

  // The rows `lo` leaves over go one at a time to whichever node would finish its next row
  // soonest, among those that can take it by `hi`: the plan then finishes by hi.
  std::vector<uint64_t> rows = rows_lo;
  uint64_t assigned = std::accumulate(rows.begin(), rows.end(), uint64_t{0});
  std::vector<double> next_row_finish(usable.size(), kInfinity);
  for (std::size_t u = 0; u < usable.size(); ++u) {
    if (rows[u] < rows_hi[u]) next_row_finish[u] = solo[u](rows[u] + 1);
  }
  while (assigned < m) {
    const auto best = std::min_element(next_row_finish.begin(), next_row_finish.end());
    const std::size_t u = static_cast<std::size_t>(best - next_row_finish.begin());
    if (rows[u] >= rows_hi[u]) return internal_error("the model plan's bisection lost rows");
    ++rows[u];
    ++assigned;
    next_row_finish[u] = rows[u] < rows_hi[u] ? solo[u](rows[u] + 1) : kInfinity;
  }
  // A usable node left without rows is one whose first row would finish after everyone else is
  // done (typically: its link must first carry all of B); say so rather than drop it silently.
  double planned_finish = 0.0;
  for (std::size_t u = 0; u < usable.size(); ++u) {
    if (rows[u] > 0) planned_finish = std::max(planned_finish, solo[u](rows[u]));
  }
  for (std::size_t u = 0; u < usable.size(); ++u) {
    if (rows[u] > 0) continue;
    const NodeModel& node = model.nodes[usable[u]];
    const double b_bytes = 8.0 * static_cast<double>(request.n) * static_cast<double>(request.k);
    const bool b_alone_too_slow = b_bytes / node.link.to_node_bytes_per_s >= planned_finish;
    result.warnings.push_back(fmt::format(
        "node '{}' gets no rows: even one row would finish at {:.3f} s, no sooner than the plan ends at {:.3f} s{}",
        node.name, solo[u](1), planned_finish,
        b_alone_too_slow ? fmt::format(" (its link must first carry B, {:.1f} MB at {:.1f} MB/s)", b_bytes / 1e6,
                                       node.link.to_node_bytes_per_s / 1e6)
                         : ""));
  }

  plan::Plan& plan = result.plan;
  plan.policy = plan::Policy::kModel;
  plan.m = m;
  plan.n = request.n;
  plan.k = request.k;
  plan.panel_width = shape.panel_width;
  plan.panels_in_flight = request.panels_in_flight;
  plan.refill_threshold = request.refill_threshold;
  std::vector<uint64_t> node_rows(model.nodes.size(), 0);
  for (std::size_t u = 0; u < usable.size(); ++u) node_rows[usable[u]] = rows[u];
  uint64_t begin = 0;
  for (std::size_t i = 0; i < model.nodes.size(); ++i) {
    const double weight = static_cast<double>(node_rows[i]) / static_cast<double>(m);
    plan.shares.push_back({request.node_names[i], weight, partition::RowBlock{begin, node_rows[i]}, {}});
    begin += node_rows[i];
  }
  return result;
}

}  // namespace

Result<ModelPlanResult> make_model_plan(const plan::PlanRequest& request, const ClusterModel& model) {
  Result<ModelPlanResult> sized = size_rows_by_finish_time(request, model);
  if (!sized || !(coordinator_host(model).cores > 0.0)) return sized;
  // Nodes on the coordinator's host lose cores to each other and to the coordinator while it
  // moves bytes, by amounts that depend on the whole plan. Each pass sizes the rows again with
  // every node's compute at the share of its cores the last plan left it (predict's host_share),
  // and the plan whose forecast, sharing simulated, ends soonest is kept: never one the model
  // thinks worse than the plan sized without sharing.
  ModelPlanResult best = std::move(*sized);
  Prediction last = predict(model, best.plan);
  double best_makespan = last.makespan_s;
  for (int pass = 0; pass < kHostSharingPasses; ++pass) {
    Result<ModelPlanResult> candidate = size_rows_by_finish_time(request, with_host_shares(model, last.host_share));
    if (!candidate) break;
    last = predict(model, candidate->plan);
    if (last.makespan_s < best_makespan) {
      best_makespan = last.makespan_s;
      best = std::move(*candidate);
    }
  }
  return best;
}

}  // namespace tessera::balance::model
