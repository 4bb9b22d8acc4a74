// The static replay: predict() replays a static plan's streaming protocol as a fluid simulation
// (replay.hpp says what it models). The simulation is also what the model policy sizes rows with
// (model_policy.cpp), through fluid_replay.hpp.
#include "tessera/balance/model/replay.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fluid_replay.hpp"
#include "host_sharing.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::balance::model {

namespace detail {

namespace {

namespace tp = tessera::transport;

// Wire overheads of the multiply driver's frames (transport/protocol.hpp): a STORE is a header and
// a tile prefix in front of the matrix data, a JOB a header and a 72-byte body, a RESULT a header
// and a result prefix. They matter only for tiny shares, but keep predict() byte-exact.
constexpr double kStoreOverheadBytes = tp::kHeaderSize + tp::kTilePrefixSize;
constexpr double kJobFrameBytes = tp::kHeaderSize + tp::kJobPayloadBytes;
constexpr double kResultOverheadBytes = tp::kHeaderSize + tp::kResultPrefixSize;

// How fast each of a node's activities progresses during one step of the simulation.
struct StepRates {
  double send = 0.0;    // bytes per second from the coordinator
  double job = 1.0;     // seconds of job work per second: below 1 when the node's cores are short
  double result = 0.0;  // bytes per second back to the coordinator
};

// A rate that is NaN or negative cannot make progress; treating it as 0 sends the node to +inf
// instead of letting a bad curve run time backwards.
double usable_rate(double rate) { return rate > 0.0 ? rate : 0.0; }

// Seconds until `left` units are done at `rate`; +inf when the rate is 0.
double time_to_finish(double left, double rate) {
  if (left <= 0.0) return 0.0;
  return rate > 0.0 ? left / rate : kInfinity;
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

// Each step's rates: the coordinator's send capacity (and the switch's uplink, for the nodes behind
// it) shared max-min fairly by the links that are receiving, results likewise through the uplink; then, on the coordinator's host, its cores shared max-min fairly (as the kernel's fair
// scheduler shares them between cgroups and processes) by the nodes there that are multiplying,
// each wanting its quota, and the coordinator, wanting its CPU per byte x the bytes per second it
// sends and receives. A node short of cores computes at its share / its quota; a coordinator short
// of them moves bytes more slowly in proportion.
void step_rates(std::span<const NodeReplay> replays, const SimLinks& links, const SimHost& host, std::vector<StepRates>& rates) {
  std::vector<double> caps, return_caps;
  std::vector<bool> behind, returning_behind;
  std::vector<std::size_t> senders, returners;
  for (std::size_t i = 0; i < replays.size(); ++i) {
    rates[i] = StepRates{};
    if (replays[i].sending()) {
      senders.push_back(i);
      caps.push_back(replays[i].link_cap());
      behind.push_back(links.behind(i));
    }
    if (replays[i].returning()) {
      returners.push_back(i);
      return_caps.push_back(replays[i].return_cap());
      returning_behind.push_back(links.behind(i));
    }
  }
  const std::vector<double> shared = shared_transfer_rates(caps, behind, links.uplink_bytes_per_s, links.coordinator_bytes_per_s);
  for (std::size_t s = 0; s < senders.size(); ++s) rates[senders[s]].send = shared[s];
  // Results come back over the uplink's other direction; the coordinator receives them as fast.
  const std::vector<double> returned = shared_transfer_rates(return_caps, returning_behind, links.uplink_bytes_per_s, 0.0);
  for (std::size_t r = 0; r < returners.size(); ++r) rates[returners[r]].result = returned[r];
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

bool can_compute(const SpeedCurve& speed) {
  return std::any_of(speed.points().begin(), speed.points().end(),
                     [](const SpeedPoint& point) { return point.gflops > 0.0; });
}

}  // namespace

double job_seconds(const CpuModel& cpu, double flops, double flops_per_s, double received_bytes) {
  const double gemm = flops > 0.0 ? (flops_per_s > 0.0 ? flops / flops_per_s : kInfinity) : 0.0;
  return (gemm + received_bytes * std::max(cpu.receive_s_per_byte, 0.0)) / cpu.effective_availability();
}

SimOutcome simulate(std::span<const SimNode> nodes, const SimShape& shape, const SimLinks& links, const SimHost& host) {
  std::vector<NodeReplay> replays;
  replays.reserve(nodes.size());
  for (const SimNode& node : nodes) replays.emplace_back(node, shape);

  std::vector<StepRates> rates(replays.size());
  double now = 0.0;
  for (;;) {
    for (NodeReplay& replay : replays) replay.start_ready(now);
    step_rates(replays, links, host, rates);
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

SimHost coordinator_host(const ClusterModel& model) {
  SimHost host;
  for (const NodeModel& node : model.nodes) {
    if (shares_coordinator_host(node.host)) host.cores = std::max(host.cores, node.host.cores);
  }
  host.coordinator_cpu_s_per_byte = model.coordinator_cpu_s_per_byte;
  return host;
}

std::string excluded_reason(const NodeModel& node) {
  if (node.speed.points().empty()) return "its speed curve is empty (profile it first)";
  if (!can_compute(node.speed)) return "all its measured GEMM rates are 0";
  if (!(node.link.to_node_bytes_per_s > 0.0)) return "its link bandwidth to the node is 0";
  if (!(node.link.from_node_bytes_per_s > 0.0)) return "its link bandwidth from the node is 0";
  return {};
}

}  // namespace detail

Prediction predict(const ClusterModel& model, const plan::Plan& plan) {
  using namespace detail;
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
  const SimLinks links{model.coordinator_send_bytes_per_s, model.switch_uplink_bytes_per_s, behind_switch_of(model)};
  SimOutcome outcome = simulate(nodes, shape, links, coordinator_host(model));
  prediction.finish_s = std::move(outcome.finish);
  prediction.host_share = std::move(outcome.availability);
  for (double finish : prediction.finish_s) prediction.makespan_s = std::max(prediction.makespan_s, finish);
  return prediction;
}

}  // namespace tessera::balance::model
