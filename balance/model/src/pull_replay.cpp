// The pull replay: predict_pull() forecasts the `dynamic` policy by replaying its pull protocol
// tile by tile (replay.hpp says what it models), with nodes on the coordinator's host at the share
// of its cores the last replay left them (host.cpp).
#include "tessera/balance/model/replay.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <optional>
#include <vector>

#include "fluid_replay.hpp"
#include "fair_share.hpp"
#include "tessera/balance/model/host_sharing.hpp"

namespace tessera::balance::model {

namespace {

using namespace detail;

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
  const std::vector<double> shares =
      shared_transfer_rates(caps, behind_switch_of(model), model.switch_uplink_bytes_per_s, model.coordinator_send_bytes_per_s);
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

}  // namespace tessera::balance::model
