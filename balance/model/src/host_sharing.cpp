// Host-core sharing: how the nodes on the coordinator's host and the coordinator divide its
// cores (host.hpp), and the max-min fair division the replays also use for links (host_sharing.hpp).
#include "tessera/balance/model/host_sharing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "fair_share.hpp"

namespace tessera::balance::model {

namespace detail {

namespace {
constexpr double kUnlimited = std::numeric_limits<double>::infinity();
}  // namespace

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

std::vector<double> shared_transfer_rates(std::span<const double> caps, const std::vector<bool>& behind, double uplink,
                                          double capacity) {
  std::vector<double> capped(caps.begin(), caps.end());
  if (uplink > 0.0 && std::isfinite(uplink)) {
    std::vector<std::size_t> members;
    std::vector<double> member_caps;
    for (std::size_t i = 0; i < caps.size() && i < behind.size(); ++i) {
      if (!behind[i]) continue;
      members.push_back(i);
      member_caps.push_back(caps[i]);
    }
    const std::vector<double> through_uplink = max_min_fair(member_caps, uplink);
    for (std::size_t m = 0; m < members.size(); ++m) capped[members[m]] = through_uplink[m];
  }
  return max_min_fair(capped, capacity);
}

std::vector<double> max_min_fair_flows(std::span<const std::vector<std::size_t>> flow_links,
                                       std::span<const double> capacities) {
  std::vector<double> rates(flow_links.size(), 0.0);
  std::vector<bool> frozen(flow_links.size(), false);
  std::vector<double> remaining(capacities.begin(), capacities.end());
  std::vector<std::size_t> crossing(capacities.size());
  for (;;) {
    std::fill(crossing.begin(), crossing.end(), std::size_t{0});
    bool rising = false;
    for (std::size_t f = 0; f < flow_links.size(); ++f) {
      if (frozen[f]) continue;
      rising = true;
      for (std::size_t link : flow_links[f]) ++crossing[link];
    }
    if (!rising) break;
    // The rise every unfrozen transfer takes before the first of their links is full.
    double step = kUnlimited;
    std::size_t fullest = capacities.size();
    for (std::size_t link = 0; link < capacities.size(); ++link) {
      if (crossing[link] == 0) continue;
      const double share = std::max(remaining[link], 0.0) / static_cast<double>(crossing[link]);
      if (share < step) {
        step = share;
        fullest = link;
      }
    }
    if (fullest == capacities.size()) {
      for (std::size_t f = 0; f < flow_links.size(); ++f) {
        if (!frozen[f]) rates[f] = kUnlimited;
      }
      break;
    }
    std::vector<bool> full(capacities.size(), false);
    for (std::size_t link = 0; link < capacities.size(); ++link) {
      if (crossing[link] == 0) continue;
      remaining[link] -= step * static_cast<double>(crossing[link]);
      // The link that set the step is full by construction; others within rounding of it too.
      full[link] = link == fullest || remaining[link] <= 1e-12 * capacities[link];
    }
    for (std::size_t f = 0; f < flow_links.size(); ++f) {
      if (frozen[f]) continue;
      rates[f] += step;
      frozen[f] = std::any_of(flow_links[f].begin(), flow_links[f].end(), [&](std::size_t link) { return full[link]; });
    }
  }
  return rates;
}

double crowded_share(const HostModel& host) {
  return host.crowded_share > 0.0 && host.crowded_share < 1.0 ? host.crowded_share : 1.0;
}

bool shares_coordinator_host(const HostModel& host) {
  return host.with_coordinator && host.cores > 0.0 && host.node_cores > 0.0;
}

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

}  // namespace detail

ClusterModel with_host_shares(const ClusterModel& model, const std::vector<double>& shares) {
  ClusterModel shared = model;
  for (std::size_t i = 0; i < shared.nodes.size(); ++i) {
    shared.nodes[i].cpu.availability = shared.nodes[i].cpu.effective_availability() * shares[i];
  }
  return shared;
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
    if (!detail::shares_coordinator_host(host)) continue;
    cores = std::max(cores, host.cores);
    sharing.push_back(i);
    wants.push_back(host.node_cores * std::clamp(busy_fraction[i], 0.0, 1.0));
    crowded.push_back(detail::crowded_share(host));
  }
  if (sharing.empty() || !(span_s > 0.0)) return availability;
  const detail::CoreDivision division = detail::divide_host_cores(wants, crowded, std::max(coordinator_cpu_s, 0.0) / span_s, cores);
  for (std::size_t s = 0; s < sharing.size(); ++s) {
    if (wants[s] > 0.0) availability[sharing[s]] = std::clamp(division.node_share[s], 1e-3, 1.0);
  }
  return availability;
}

}  // namespace tessera::balance::model
