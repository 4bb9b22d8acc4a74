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
#include <utility>
#include <vector>

#include "fluid_replay.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "fair_share.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/gemm/codec.hpp"

namespace tessera::balance::model {

namespace detail {

namespace {

namespace tp = tessera::transport;

// Wire overheads of the multiply driver's frames (transport/protocol.hpp): a STORE is a header and
// a tile prefix in front of the matrix data, a JOB a header and a 72-byte body, a RESULT a header
// and a result prefix. They matter only for tiny shares, but keep predict() byte-exact.
constexpr double kStoreOverheadBytes = tp::kHeaderSize + gemm::kTilePrefixSize;
// A worker forwards a piece cut-through, this much at a time (FrameConnection::kReadChunkBytes):
// it may start passing a panel on once the first chunk is in, and sends its last chunk only
// after receiving it.
constexpr double kForwardChunkBytes = static_cast<double>(tp::FrameConnection::kReadChunkBytes);
constexpr double kJobFrameBytes = tp::kHeaderSize + gemm::kJobPayloadBytes;
constexpr double kResultOverheadBytes = tp::kHeaderSize + gemm::kResultPrefixSize;

// How fast each of a node's activities progresses during one step of the simulation.
struct StepRates {
  double send = 0.0;    // bytes per second from the coordinator
  double forward = 0.0; // bytes per second of B this node forwards to the next of the chain
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

// A node's part in how B travels. Star: B's panels come from the coordinator, each under the
// node's own credits. Chain: only the chain's head gets them from the coordinator, under credits
// every chain node must have returned (`credit_gate`); every other node gets them from the node
// before it, and each node but the last forwards every panel, cut-through (from its first chunk on).
struct ChainRole {
  bool b_from_coordinator = true;
  const std::vector<double>* credit_gate = nullptr;  // per panel: when every chain node's credit is back
  bool forwards = false;
  double forward_latency_s = 0.0;  // to the next node of the chain
};

// A panel forwarded to the next node of the chain: when its first chunk is there (`start`, the
// next node may pass it on from then), or when it is whole there (`arrival`; +inf: not yet).
struct HandedOn {
  std::size_t panel = 0;
  double start = 0.0;
  double arrival = kInfinity;
};

// One node's replay of NodeStreamer::stream() and the worker's job loop.
class NodeReplay {
 public:
  NodeReplay(const SimNode& node, const SimShape& shape, const ChainRole& role = {})
      : node_(node), shape_(shape), role_(role) {
    panels_ = shape.panel_count();
    arrival_.assign(panels_, kInfinity);
    forward_ready_.assign(panels_, kInfinity);
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
      // its panel costs the node to receive and, along a chain, to send on. The profile measures
      // a worker's CPU per byte received only; sending a byte through the same socket stack is
      // charged at that figure too until a profile measures it.
      const double rate = usable_rate(node.speed->gflops_at(std::cbrt(rows * width * n)) * 1e9);
      const double handled_bytes = panel_bytes_[last] * (role.forwards ? 2.0 : 1.0);
      job_seconds_[last] = job_seconds(node.cpu, 2.0 * rows * width * n, rate, handled_bytes);
    }
    a_receive_seconds_ = job_seconds(node.cpu, 0.0, 1.0, a_bytes_);
    if (node.rows == 0) finish_ = 0.0;
  }

  bool idle() const { return node_.rows == 0; }
  bool sending() const { return sending_; }
  // Moving bytes on: a forward whose bytes are all out but that waits for its panel's last chunk
  // to arrive here takes no share of the links.
  bool forwarding() const { return forwarding_ && forward_left_ > 0.0; }
  bool computing() const { return job_running_; }
  bool returning() const { return result_running(); }
  double link_cap() const { return usable_rate(node_.to_node_bytes_per_s); }
  // When job `panel`'s credit is back at the coordinator (+inf until the job is done).
  double credit(std::size_t panel) const { return credit_[panel]; }
  // Panel `panel` forwarded by the node before this one in the chain: its first chunk here at
  // `start`, the whole of it at `arrival` (+inf: not known yet).
  void receive_forwarded(const HandedOn& handed) {
    forward_ready_[handed.panel] = std::min(forward_ready_[handed.panel], handed.start);
    arrival_[handed.panel] = std::min(arrival_[handed.panel], handed.arrival);
  }
  // The panels this node finished forwarding in the last advance(), for the next node; cleared.
  std::vector<HandedOn> take_handed_on() { return std::exchange(handed_on_, {}); }
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
      } else if (role_.b_from_coordinator && panels_sent_ < panels_ &&
                 (panels_sent_ < shape_.panels_in_flight || gate(panels_sent_ - shape_.panels_in_flight) <= now)) {
        const double bytes = panel_bytes_[is_last(panels_sent_)];
        // The head may pass the panel on once its first chunk is in (estimated at its link's rate).
        forward_ready_[panels_sent_] = now + node_.latency_s + std::min(bytes, kForwardChunkBytes) / link_cap();
        start_send(bytes, panels_sent_);
        ++panels_sent_;
      }
    }
    // Cut-through, panel by panel in order: a panel goes on once its first chunk is here.
    if (role_.forwards && !forwarding_ && panels_forwarded_ < panels_ && forward_ready_[panels_forwarded_] <= now) {
      forwarding_ = true;
      forward_panel_ = panels_forwarded_;
      forward_left_ = panel_bytes_[is_last(panels_forwarded_)];
      ++panels_forwarded_;
      // The next node has the first chunk one chunk's time (at this node's link out) and a
      // latency later, and may pass it on from then.
      handed_on_.push_back({forward_panel_,
                            now + role_.forward_latency_s + std::min(forward_left_, kForwardChunkBytes) / return_cap(),
                            kInfinity});
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
    // The last chunk goes on no sooner than one chunk's time after the panel is whole here.
    forward_done_ = forwarding_ ? std::max(now + time_to_finish(forward_left_, rates_.forward),
                                           arrival_[forward_panel_] + forward_tail_s())
                                : kInfinity;
    next = std::min({send_done_, job_done_, result_done_, forward_done_});
    if (!job_running_ && jobs_done_ < panels_) {
      const double ready = std::max(a_arrival_, arrival_[jobs_done_]);
      if (ready > now) next = std::min(next, ready);
    }
    if (role_.b_from_coordinator && a_started_ && !sending_ && panels_sent_ < panels_ &&
        panels_sent_ >= shape_.panels_in_flight) {
      const double credit = gate(panels_sent_ - shape_.panels_in_flight);
      if (credit > now) next = std::min(next, credit);
    }
    if (role_.forwards && !forwarding_ && panels_forwarded_ < panels_ && forward_ready_[panels_forwarded_] > now) {
      next = std::min(next, forward_ready_[panels_forwarded_]);
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
    if (forwarding_) {
      if (forward_done_ <= to) {
        forwarding_ = false;
        handed_on_.push_back({forward_panel_, kInfinity, forward_done_ + role_.forward_latency_s});
      } else {
        forward_left_ = std::max(0.0, forward_left_ - rates_.forward * dt);
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
  double forward_tail_s() const {
    return std::min(panel_bytes_[is_last(forward_panel_)], kForwardChunkBytes) / return_cap();
  }
  // When the coordinator may send panel p + panels_in_flight: job p's credit is back (star), or
  // every chain node's is (chain).
  double gate(std::size_t panel) const { return role_.credit_gate ? (*role_.credit_gate)[panel] : credit_[panel]; }

  void start_send(double bytes, std::optional<std::size_t> panel) {
    sending_ = true;
    send_left_ = bytes;
    sending_panel_ = panel;
  }

  SimNode node_;
  SimShape shape_;
  ChainRole role_;
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
  std::vector<double> forward_ready_;  // when panel p's first chunk is here (it may go on)
  std::vector<double> credit_;   // when job p's CREDIT is back at the coordinator

  bool job_running_ = false;
  std::size_t jobs_done_ = 0;
  double job_left_ = 0.0, job_done_ = kInfinity;
  double job_work_s_ = 0.0, job_wall_s_ = 0.0;

  bool forwarding_ = false;
  std::size_t forward_panel_ = 0, panels_forwarded_ = 0;
  double forward_left_ = 0.0, forward_done_ = kInfinity;
  std::vector<HandedOn> handed_on_;

  bool result_started_ = false;
  double result_left_ = 0.0, result_done_ = kInfinity;
  double finish_ = kInfinity;
};

// A chain's transfer rates for one step, max-min fair over every link they cross: from the
// coordinator (A to every node, B to the head), its send capacity, the switch's uplink for nodes
// behind it and the node's link in; results, the node's link out and the uplink's other
// direction; B forwarded from node s to node r, s's link out and r's link in (the worker-to-worker
// path runs at the slower of the two, less what else each carries), crossing the uplink only when
// one of the two is behind the switch and the other is not (two nodes behind it talk through the
// switch alone).
void chain_link_rates(std::span<const NodeReplay> replays, const SimLinks& links,
                      std::span<const std::ptrdiff_t> next_of, std::vector<StepRates>& rates) {
  const std::size_t count = replays.size();
  // Links: [0, count) the nodes' links in, [count, 2 count) their links out, then the
  // coordinator's send capacity and the uplink's two directions where they limit anything.
  std::vector<double> capacities;
  for (const NodeReplay& replay : replays) capacities.push_back(replay.link_cap());
  for (const NodeReplay& replay : replays) capacities.push_back(replay.return_cap());
  const auto limiting = [](double capacity) { return capacity > 0.0 && std::isfinite(capacity); };
  std::optional<std::size_t> coordinator, uplink_down, uplink_up;
  if (limiting(links.coordinator_bytes_per_s)) {
    coordinator = capacities.size();
    capacities.push_back(links.coordinator_bytes_per_s);
  }
  if (limiting(links.uplink_bytes_per_s)) {
    uplink_down = capacities.size();
    capacities.push_back(links.uplink_bytes_per_s);
    uplink_up = capacities.size();
    capacities.push_back(links.uplink_bytes_per_s);
  }
  const auto behind = [&](std::size_t node) { return uplink_down && links.behind(node); };

  enum class Kind { kSend, kResult, kForward };
  struct Transfer {
    std::size_t node;
    Kind kind;
  };
  std::vector<Transfer> transfers;
  std::vector<std::vector<std::size_t>> crossed;
  for (std::size_t i = 0; i < count; ++i) {
    if (replays[i].sending()) {
      std::vector<std::size_t> path{i};
      if (coordinator) path.push_back(*coordinator);
      if (behind(i)) path.push_back(*uplink_down);
      transfers.push_back({i, Kind::kSend});
      crossed.push_back(std::move(path));
    }
    if (replays[i].returning()) {
      std::vector<std::size_t> path{count + i};
      if (behind(i)) path.push_back(*uplink_up);
      transfers.push_back({i, Kind::kResult});
      crossed.push_back(std::move(path));
    }
    if (replays[i].forwarding() && next_of[i] >= 0) {
      const std::size_t to = static_cast<std::size_t>(next_of[i]);
      std::vector<std::size_t> path{count + i, to};
      if (behind(to) && !behind(i)) path.push_back(*uplink_down);
      if (behind(i) && !behind(to)) path.push_back(*uplink_up);
      transfers.push_back({i, Kind::kForward});
      crossed.push_back(std::move(path));
    }
  }
  const std::vector<double> shared = max_min_fair_flows(crossed, capacities);
  for (std::size_t t = 0; t < transfers.size(); ++t) {
    StepRates& rate = rates[transfers[t].node];
    switch (transfers[t].kind) {
      case Kind::kSend: rate.send = shared[t]; break;
      case Kind::kResult: rate.result = shared[t]; break;
      case Kind::kForward: rate.forward = shared[t]; break;
    }
  }
}

// A star's transfer rates for one step: the coordinator's send capacity (and the switch's uplink,
// for the nodes behind it) shared max-min fairly by the links that are receiving, results likewise
// through the uplink.
void star_link_rates(std::span<const NodeReplay> replays, const SimLinks& links, std::vector<StepRates>& rates) {
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
}

// Each step's rates: the links shared as star_link_rates or (along a chain, next_of not empty)
// chain_link_rates says; then, on the coordinator's host, its cores shared max-min fairly (as the
// kernel's fair scheduler shares them between cgroups and processes) by the nodes there that are
// multiplying, each wanting its quota, and the coordinator, wanting its CPU per byte x the bytes
// per second it sends and receives (not what nodes forward to each other: that is their work). A
// node short of cores computes at its share / its quota; a coordinator short of them moves bytes
// more slowly in proportion.
void step_rates(std::span<const NodeReplay> replays, const SimLinks& links, const SimHost& host,
                std::span<const std::ptrdiff_t> next_of, std::vector<StepRates>& rates) {
  if (next_of.empty()) {
    star_link_rates(replays, links, rates);
  } else {
    for (StepRates& rate : rates) rate = StepRates{};
    chain_link_rates(replays, links, next_of, rates);
  }
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

SimOutcome simulate(std::span<const SimNode> nodes, const SimShape& shape, const SimLinks& links, const SimHost& host,
                    std::span<const std::size_t> chain) {
  // Along a chain: who forwards to whom, and the credits that let the head take the next panel.
  std::vector<ChainRole> roles(nodes.size());
  std::vector<std::ptrdiff_t> next_of;
  std::vector<double> chain_credit;
  if (!chain.empty()) {
    next_of.assign(nodes.size(), -1);
    chain_credit.assign(shape.panel_count(), kInfinity);
    for (ChainRole& role : roles) role.b_from_coordinator = false;
    roles[chain.front()].b_from_coordinator = true;
    roles[chain.front()].credit_gate = &chain_credit;
    for (std::size_t c = 0; c + 1 < chain.size(); ++c) {
      const std::size_t from = chain[c], to = chain[c + 1];
      next_of[from] = static_cast<std::ptrdiff_t>(to);
      roles[from].forwards = true;
      // The latency between two workers is not measured; each one's to the coordinator crosses
      // the same network, so the larger of the two stands in for it.
      roles[from].forward_latency_s = std::max(nodes[from].latency_s, nodes[to].latency_s);
    }
  }
  std::vector<NodeReplay> replays;
  replays.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) replays.emplace_back(nodes[i], shape, roles[i]);

  std::vector<StepRates> rates(replays.size());
  double now = 0.0;
  for (;;) {
    // The head may take panel p + panels_in_flight once the chain node j hops down has its
    // credit for p - min(j, panels_in_flight) back: one extra panel per hop (up to twice the
    // window) keeps the pieces travelling to far members from stalling the chain (the driver's
    // rule, chain_feed.hpp).
    for (std::size_t p = 0; p < chain_credit.size(); ++p) {
      double all_back = 0.0;
      for (std::size_t j = 0; j < chain.size(); ++j) {
        const std::size_t extra = std::min<std::size_t>(j, shape.panels_in_flight);
        if (p >= extra) all_back = std::max(all_back, replays[chain[j]].credit(p - extra));
      }
      chain_credit[p] = all_back;
    }
    // What a node passed on reaches the next one: a forward just started (its first chunk's time
    // there, which the next node wakes for) or just finished (the panel whole there).
    const auto hand_on = [&] {
      for (std::size_t i = 0; i < next_of.size(); ++i) {
        for (const HandedOn& handed : replays[i].take_handed_on()) {
          replays[static_cast<std::size_t>(next_of[i])].receive_forwarded(handed);
        }
      }
    };
    for (NodeReplay& replay : replays) replay.start_ready(now);
    hand_on();
    step_rates(replays, links, host, next_of, rates);
    double next = kInfinity;
    for (std::size_t i = 0; i < replays.size(); ++i) {
      if (!replays[i].idle()) next = std::min(next, replays[i].next_event(now, rates[i]));
    }
    if (std::isinf(next)) break;
    for (NodeReplay& replay : replays) {
      if (!replay.idle()) replay.advance(now, next);
    }
    hand_on();
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
  // A chain entry naming no node, or one already named, is left out: the nodes it would have
  // reached never get B, and their finish says so (+inf).
  std::vector<std::size_t> chain;
  if (plan.distribution == plan::Distribution::kChain) {
    std::vector<bool> named(node_count, false);
    for (uint32_t node : plan.chain) {
      if (node >= node_count || named[node]) continue;
      named[node] = true;
      chain.push_back(node);
    }
  }
  SimOutcome outcome = simulate(nodes, shape, links, coordinator_host(model), chain);
  prediction.finish_s = std::move(outcome.finish);
  prediction.host_share = std::move(outcome.availability);
  for (double finish : prediction.finish_s) prediction.makespan_s = std::max(prediction.makespan_s, finish);
  return prediction;
}

}  // namespace tessera::balance::model
