// The pure parts of a graph run's set-up: flag values, the tolerance, peer endpoints. Kept apart
// from the driver so that they link (and are tested) without the wire.
#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/balance/graphs/peers.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::balance::graphs {

Result<GraphMode> parse_graph_mode(std::string_view name) {
  if (name == "async") return GraphMode::kAsync;
  if (name == "sync") return GraphMode::kSync;
  return invalid_argument(fmt::format("unknown mode \"{}\"; use async or sync", name));
}

std::string_view graph_mode_name(GraphMode mode) { return mode == GraphMode::kSync ? "sync" : "async"; }

Result<TargetWeights> parse_target_weights(std::string_view text) {
  TargetWeights parsed;
  if (text == "equal") return parsed;
  if (text == "profile") {
    parsed.source = TargetWeights::Source::kProfile;
    return parsed;
  }
  const auto refuse = [&](std::string_view why) {
    return invalid_argument(fmt::format("--weights \"{}\": {}; use profile, equal or one number per node, e.g. 4,1,1",
                                        text, why));
  };
  parsed.source = TargetWeights::Source::kExplicit;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(begin, end - begin);
    double value = 0.0;
    const auto [stop, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc() || stop != item.data() + item.size()) {
      return refuse(fmt::format("\"{}\" is not a number", item));
    }
    if (!std::isfinite(value) || value < 0.0) return refuse(fmt::format("{} is not a weight >= 0", item));
    parsed.weights.push_back(value);
    begin = end + 1;
  }
  bool any_positive = false;
  for (double weight : parsed.weights) any_positive |= weight > 0.0;
  if (!any_positive) return refuse("every weight is 0");
  return parsed;
}

std::string describe(const TargetWeights& weights) {
  switch (weights.source) {
    case TargetWeights::Source::kEqual: return "equal";
    case TargetWeights::Source::kProfile: return "profile";
    case TargetWeights::Source::kExplicit:
      return "explicit " + join(weights.weights, ",", [](double w) { return fmt::format("{:g}", w); });
  }
  return "equal";
}

Result<NodeChoice> parse_node_choice(std::string_view text) {
  NodeChoice choice;
  if (text == "auto") return choice;
  if (text == "all") {
    choice.mode = NodeChoice::Mode::kAll;
    return choice;
  }
  if (text == "best") {
    choice.mode = NodeChoice::Mode::kBest;
    return choice;
  }
  choice.mode = NodeChoice::Mode::kListed;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string name(text.substr(begin, end - begin));
    begin = end + 1;
    if (name.empty()) {
      return invalid_argument(fmt::format("--nodes \"{}\" has an empty name; use auto, all, best or node names separated by commas", text));
    }
    if (std::find(choice.listed.begin(), choice.listed.end(), name) != choice.listed.end()) {
      return invalid_argument(fmt::format("--nodes names \"{}\" twice; name each node once", name));
    }
    choice.listed.push_back(name);
  }
  return choice;
}

std::string describe(const NodeChoice& choice) {
  switch (choice.mode) {
    case NodeChoice::Mode::kAuto: return "auto";
    case NodeChoice::Mode::kAll: return "all";
    case NodeChoice::Mode::kBest: return "best";
    case NodeChoice::Mode::kListed: return join(choice.listed, ",");
  }
  return "auto";
}

Result<double> run_tolerance(const graph::AlgorithmSpec& spec, std::optional<double> requested) {
  if (!graph::is_linear(spec)) return 0.0;
  const double tolerance = requested.value_or(kDefaultGraphTolerance);
  if (!(tolerance > 0.0) || !std::isfinite(tolerance)) {
    return invalid_argument(fmt::format("--tolerance {} must be a number > 0, e.g. 1e-6", tolerance));
  }
  return tolerance;
}

Result<std::vector<std::vector<graph::PeerEndpoint>>> peer_endpoints(std::span<const cluster::NodeSpec> nodes,
                                                                      const PeerHosts& hosts,
                                                                      std::span<const std::size_t> part_nodes) {
  if (!hosts.empty()) {
    bool square = hosts.size() == nodes.size();
    for (const std::vector<std::string>& row : hosts) square = square && row.size() == nodes.size();
    if (!square) {
      return invalid_argument(fmt::format("peer hosts must name every node for every node ({} x {})", nodes.size(),
                                          nodes.size()));
    }
  }
  for (std::size_t node : part_nodes) {
    if (node >= nodes.size()) return invalid_argument(fmt::format("part placed on node {} of {}", node, nodes.size()));
  }
  std::vector<std::vector<graph::PeerEndpoint>> endpoints(part_nodes.size());
  for (std::size_t part = 0; part < part_nodes.size(); ++part) {
    const std::size_t receiver = part_nodes[part];
    for (std::size_t peer_part = 0; peer_part < part_nodes.size(); ++peer_part) {
      const cluster::NodeSpec& peer = nodes[part_nodes[peer_part]];
      const std::string& host = hosts.empty() ? peer.host : hosts[receiver][part_nodes[peer_part]];
      endpoints[part].push_back({host, peer.port});
    }
  }
  return endpoints;
}

}  // namespace tessera::balance::graphs
