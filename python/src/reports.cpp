#include "reports.hpp"

#include <pybind11/stl.h>

#include <algorithm>

#include "errors.hpp"
#include "tessera/graph/algorithm.hpp"

namespace tessera::python {

namespace tb = tessera::balance;
namespace tp = tessera::partition;

py::list lifecycle_list(const std::vector<tessera::emulation::NodeLifecycle>& nodes) {
  py::list list;
  for (const tessera::emulation::NodeLifecycle& node : nodes) {
    list.append(py::dict(py::arg("name") = node.name, py::arg("state") = std::string(tessera::emulation::node_state_name(node.state)),
                         py::arg("pid") = node.pid, py::arg("detail") = node.detail));
  }
  return list;
}

py::list reachability_list(const std::vector<tessera::emulation::NodeReachability>& nodes) {
  py::list list;
  for (const tessera::emulation::NodeReachability& node : nodes) {
    list.append(py::dict(py::arg("name") = node.name, py::arg("endpoint") = node.endpoint,
                         py::arg("state") = std::string(tessera::emulation::reach_name(node.reach)),
                         py::arg("reachable") = node.reachable, py::arg("busy") = node.busy,
                         py::arg("detail") = node.detail,
                         py::arg("load") = node.load() ? py::object(py::float_(*node.load())) : py::object(py::none()),
                         py::arg("cores") = node.hello ? py::object(py::int_(node.hello->cores)) : py::object(py::none()),
                         py::arg("local_pid") = node.local_pid == 0 ? py::object(py::none()) : py::int_(node.local_pid)));
  }
  return list;
}

py::dict profile_dict(const tb::profile::ClusterProfile& profile, const std::string& path) {
  const std::vector<double> powers = profile.relative_powers();
  py::list nodes;
  for (std::size_t i = 0; i < profile.nodes.size(); ++i) {
    const tb::profile::NodeProfile& node = profile.nodes[i];
    py::list speed;
    for (const tb::model::SpeedPoint& point : node.speed) speed.append(py::make_tuple(point.size, point.gflops));
    nodes.append(py::dict(
        py::arg("name") = node.name, py::arg("endpoint") = node.endpoint, py::arg("gflops") = node.gflops,
        py::arg("relative_power") = powers[i], py::arg("speed") = speed, py::arg("probe_size") = node.probe_size,
        py::arg("latency_s") = node.link.latency_s, py::arg("to_node_bytes_per_s") = node.link.to_node_bytes_per_s,
        py::arg("from_node_bytes_per_s") = node.link.from_node_bytes_per_s, py::arg("threads") = node.threads,
        py::arg("cores") = node.cores, py::arg("memory_bytes") = node.memory_bytes, py::arg("arch") = node.arch,
        py::arg("hostname") = node.hostname, py::arg("worker_version") = node.worker_version,
        py::arg("measured_at") = node.measured_at, py::arg("quick") = node.quick));
  }
  return py::dict(py::arg("cluster") = profile.cluster, py::arg("measured_at") = profile.measured_at,
                  py::arg("path") = path,
                  py::arg("coordinator_send_bytes_per_s") = profile.coordinator_send_bytes_per_s,
                  py::arg("nodes") = nodes);
}

py::dict plan_dict(const tb::plan::Plan& plan) {
  py::list shares;
  for (const tb::plan::NodeShare& share : plan.shares) {
    py::list blocks;
    for (const tp::Block& block : share.blocks) {
      blocks.append(py::make_tuple(block.row_begin, block.rows, block.col_begin, block.cols, block.k_begin, block.depth));
    }
    shares.append(py::dict(py::arg("node") = share.node_name, py::arg("weight") = share.weight,
                           py::arg("rows") = py::make_tuple(share.rows.begin, share.rows.end()),
                           py::arg("blocks") = blocks));
  }
  py::list chain;
  for (uint32_t node : plan.chain) chain.append(node < plan.shares.size() ? plan.shares[node].node_name : std::string());
  return py::dict(py::arg("policy") = std::string(tb::plan::policy_name(plan.policy)), py::arg("m") = plan.m,
                  py::arg("n") = plan.n, py::arg("k") = plan.k, py::arg("panel_width") = plan.panel_width,
                  py::arg("panels_in_flight") = plan.panels_in_flight,
                  py::arg("refill_threshold") = plan.refill_threshold,
                  py::arg("layout") = std::string(tp::layout_name(plan.layout)), py::arg("tile_rows") = plan.tile_rows,
                  py::arg("distribution") = std::string(tb::plan::distribution_name(plan.distribution)),
                  py::arg("chain") = chain, py::arg("shares") = shares, py::arg("text") = plan.to_string());
}

namespace {

py::object field(const py::dict& dict, const char* key, const char* what) {
  if (!dict.contains(key)) raise_status(invalid_argument(std::string(what) + " has no '" + key + "'"));
  return dict[key];
}

}  // namespace

tb::plan::Plan plan_from_dict(const py::dict& dict) {
  tb::plan::Plan plan;
  try {
    plan.policy = value_or_raise(tb::plan::parse_policy(field(dict, "policy", "the plan").cast<std::string>()));
    plan.m = field(dict, "m", "the plan").cast<uint64_t>();
    plan.n = field(dict, "n", "the plan").cast<uint64_t>();
    plan.k = field(dict, "k", "the plan").cast<uint64_t>();
    plan.panel_width = field(dict, "panel_width", "the plan").cast<uint64_t>();
    plan.panels_in_flight = field(dict, "panels_in_flight", "the plan").cast<uint32_t>();
    plan.refill_threshold = field(dict, "refill_threshold", "the plan").cast<uint32_t>();
    plan.layout = value_or_raise(tp::parse_layout(field(dict, "layout", "the plan").cast<std::string>()));
    plan.tile_rows = field(dict, "tile_rows", "the plan").cast<uint64_t>();
    for (const py::handle item : field(dict, "shares", "the plan")) {
      const auto share_dict = py::reinterpret_borrow<py::dict>(item);
      tb::plan::NodeShare share;
      share.node_name = field(share_dict, "node", "a share").cast<std::string>();
      share.weight = field(share_dict, "weight", "a share").cast<double>();
      const auto rows = field(share_dict, "rows", "a share").cast<std::pair<uint64_t, uint64_t>>();
      share.rows = {rows.first, rows.second - rows.first};
      for (const py::handle block_item : field(share_dict, "blocks", "a share")) {
        const auto b = block_item.cast<std::vector<uint64_t>>();
        if (b.size() != 6) raise_status(invalid_argument("a plan block has 6 numbers (row_begin, rows, col_begin, cols, k_begin, depth)"));
        share.blocks.push_back({b[0], b[1], b[2], b[3], b[4], b[5]});
      }
      plan.shares.push_back(std::move(share));
    }
    // Absent from plans written before chains existed: B then goes to each node.
    if (dict.contains("distribution")) {
      plan.distribution = value_or_raise(tb::plan::parse_distribution(dict["distribution"].cast<std::string>()));
    }
    if (dict.contains("chain")) {
      for (const py::handle item : dict["chain"]) {
        const auto name = item.cast<std::string>();
        const auto found = std::find_if(plan.shares.begin(), plan.shares.end(),
                                        [&](const tb::plan::NodeShare& share) { return share.node_name == name; });
        if (found == plan.shares.end()) raise_status(invalid_argument("the plan's chain names '" + name + "', which has no share"));
        plan.chain.push_back(static_cast<uint32_t>(found - plan.shares.begin()));
      }
    }
  } catch (const py::cast_error& error) {
    raise_status(invalid_argument(std::string("the plan has a field of the wrong type: ") + error.what()));
  }
  return plan;
}

py::dict prediction_dict(const tb::model::Prediction& prediction, const tb::plan::Plan& plan) {
  py::dict finish;
  for (std::size_t i = 0; i < plan.shares.size() && i < prediction.finish_s.size(); ++i) {
    finish[py::str(plan.shares[i].node_name)] = prediction.finish_s[i];
  }
  return py::dict(py::arg("makespan_s") = prediction.makespan_s, py::arg("finish_s") = finish);
}

py::dict partition_dict(const tp::Partition& partition, const std::vector<std::string>& names) {
  const tp::PartitionQuality& quality = partition.quality;
  py::list parts;
  for (std::size_t i = 0; i < quality.parts.size(); ++i) {
    const tp::PartQuality& part = quality.parts[i];
    parts.append(py::dict(py::arg("name") = names[i], py::arg("weight") = part.weight, py::arg("target") = part.target,
                          py::arg("target_weight") = part.target * static_cast<double>(quality.total_weight),
                          py::arg("vertices") = part.vertices));
  }
  return py::dict(py::arg("total_weight") = quality.total_weight, py::arg("imbalance") = quality.imbalance,
                  py::arg("max_target_deviation") = quality.max_target_deviation,
                  py::arg("edge_cut") = quality.edge_cut, py::arg("comm_volume") = quality.comm_volume,
                  py::arg("note") = partition.note, py::arg("parts") = parts);
}

}  // namespace tessera::python
