#include "tessera/balance/multiply/report.hpp"

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace tessera::balance::multiply {

// A run's worker CPU figures, summed over its nodes (the report's and the studies').
double MultiplyRun::worker_io_cpu_s() const {
  double seconds = 0.0;
  for (const NodeRunStats& node : nodes) seconds += node.worker_io_cpu_s;
  return seconds;
}

double MultiplyRun::worker_compute_cpu_s() const {
  double seconds = 0.0;
  for (const NodeRunStats& node : nodes) seconds += node.worker_compute_cpu_s;
  return seconds;
}

std::optional<double> MultiplyRun::worker_comm_share() const {
  const double io = worker_io_cpu_s();
  const double total = io + worker_compute_cpu_s();
  if (total <= 0.0) return std::nullopt;
  return io / total;
}

std::optional<double> MultiplyReport::prediction_error() const {
  if (!prediction || !(run.makespan_s > 0.0)) return std::nullopt;
  return std::fabs(prediction->makespan_s - run.makespan_s) / run.makespan_s;
}

namespace {

uint64_t coordinator_bytes_sent(const multiply::MultiplyRun& run) {
  uint64_t bytes = 0;
  for (const multiply::NodeRunStats& node : run.nodes) bytes += node.bytes_to_node;
  return bytes;
}

}  // namespace

std::string format_report_table(const MultiplyReport& report) {
  const plan::Plan& plan = report.plan;
  std::string out = fmt::format(
      "multiply C({}x{}) = A({}x{}) x B({}x{})  policy {}  layout {}  panels {} x {} rows, queue {} refill {}\n\n",
      plan.m, plan.n, plan.m, plan.k, plan.k, plan.n, plan::policy_name(plan.policy), partition::layout_name(plan.layout),
      plan.panel_count(), plan.panel_width, plan.panels_in_flight, plan.refill_threshold);
  out += fmt::format("{:<12} {:<8} {:>7} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>10} {:>9}\n", "node", "kind",
                     "rows", "weight", "MB in", "MB out", "compute", "comm", "idle", "finish", "predicted",
                     "comm CPU");
  for (std::size_t i = 0; i < report.run.nodes.size(); ++i) {
    const multiply::NodeRunStats& node = report.run.nodes[i];
    const std::string kind = i < report.nodes.size() && !report.nodes[i].kind.empty() ? report.nodes[i].kind : "-";
    const std::string predicted = report.prediction && i < report.prediction->finish_s.size()
                                      ? fmt::format("{:.3f}s", report.prediction->finish_s[i])
                                      : "-";
    const std::optional<double> share = node.worker_comm_share();
    const std::string comm_cpu = share ? fmt::format("{:.1f}%", 100.0 * *share) : "-";
    out += fmt::format(
        "{:<12} {:<8} {:>7} {:>7.4f} {:>9.2f} {:>9.2f} {:>8.3f}s {:>7.3f}s {:>7.3f}s {:>8.3f}s {:>10} {:>9}\n",
        node.name, kind, node.rows, node.weight, static_cast<double>(node.bytes_to_node) / 1e6,
        static_cast<double>(node.bytes_from_node) / 1e6, node.compute_s,
        node.comm_s, node.idle_s, node.finish_s, predicted, comm_cpu);
  }
  out += fmt::format(
      "\nmakespan {:.3f} s (until every node was released; last result at {:.3f} s)   {:.2f} GFLOP/s   imbalance "
      "{:.3f} (slowest finish / mean finish)\n",
      report.run.makespan_s, report.run.last_result_s, report.run.gflops, report.run.imbalance);
  if (const std::optional<double> share = report.run.worker_comm_share()) {
    out += fmt::format("workers' CPU: {:.3f} s multiplying, {:.3f} s communicating ({:.1f}% of their CPU); "
                       "coordinator's CPU {:.3f} s\n",
                       report.run.worker_compute_cpu_s(), report.run.worker_io_cpu_s(), 100.0 * *share,
                       report.run.coordinator_cpu_s);
  }
  if (const std::optional<double> error = report.prediction_error()) {
    out += fmt::format("predicted makespan {:.3f} s   prediction error {:.1f}%\n", report.prediction->makespan_s,
                       *error * 100.0);
    // Said only where the model took cores away: nodes sharing the coordinator's host.
    std::vector<std::string> short_nodes;
    for (std::size_t i = 0; i < report.prediction->host_share.size() && i < report.run.nodes.size(); ++i) {
      const double share = report.prediction->host_share[i];
      if (model::host_share_reduced(share)) short_nodes.push_back(fmt::format("{} {:.0f}%", report.run.nodes[i].name, 100.0 * share));
    }
    if (!short_nodes.empty()) {
      out += fmt::format("  forecast with the host's cores shared with the coordinator: {} of their cores while "
                         "multiplying\n",
                         fmt::join(short_nodes, ", "));
    }
  } else if (report.plan.layout != partition::Layout::kRows) {
    out += fmt::format("predicted makespan: none for the {} layout (the model replays row strips)\n",
                       partition::layout_name(report.plan.layout));
  } else {
    out += "predicted makespan: no model (run `tessera profile` for speed curves and links)\n";
  }
  if (!report.run.chain.empty()) {
    uint64_t forwarded = 0;
    for (const multiply::NodeRunStats& node : report.run.nodes) forwarded += node.forwarded_bytes;
    out += fmt::format("B forwarded along the chain {}: the coordinator sent {:.1f} MB in all, the nodes forwarded "
                       "{:.1f} MB\n",
                       report.run.chain, 1e-6 * static_cast<double>(coordinator_bytes_sent(report.run)),
                       1e-6 * static_cast<double>(forwarded));
  }
  for (const std::string& note : report.run.chain_notes) out += fmt::format("  chain: {}\n", note);
  if (report.plan.policy == plan::Policy::kDynamic) {
    out += fmt::format("dynamic: {} tiles of up to {} rows; {} speculative copies ({} won)\n", report.run.tiles,
                       report.plan.tile_rows, report.run.speculative_copies, report.run.speculative_wins);
  }
  if (!report.run.lost_nodes.empty()) {
    const std::string tiles = fmt::format("{}", fmt::join(report.run.reissued_tiles, " "));
    out += fmt::format("LOST NODES: {}; {} tiles reissued to the others ({}); the product is complete\n",
                       fmt::join(report.run.lost_nodes, ", "), report.run.reissued_tiles.size(),
                       tiles.empty() ? "none were left" : tiles);
    for (const std::string& reason : report.run.lost_reasons) out += fmt::format("  {}\n", reason);
  }
  const multiply::Verification& check = report.verification;
  if (check.mode == multiply::VerifyMode::kNone) {
    out += "verified: not checked (--verify none)\n";
  } else {
    const std::string during = check.overlapped_seconds > 0.0
                                   ? fmt::format(" (+{:.3f} s on A and B during the run)", check.overlapped_seconds)
                                   : "";
    out += fmt::format("verified: {} ({}; worst error {:.3g} of the rounding bound, {:.3f} s{})\n",
                       check.passed ? "true" : "false", check.detail, check.max_error_ratio, check.seconds, during);
  }
  return out;
}

std::string report_json(const MultiplyReport& report) {
  using nlohmann::json;
  const plan::Plan& plan = report.plan;
  json nodes = json::array();
  for (std::size_t i = 0; i < report.run.nodes.size(); ++i) {
    const multiply::NodeRunStats& node = report.run.nodes[i];
    json entry = {{"name", node.name},
                  {"rows", node.rows},
                  {"weight", node.weight},
                  {"volume", node.volume},
                  {"tiles", node.tiles},
                  {"bytes_to_node", node.bytes_to_node},
                  {"bytes_from_node", node.bytes_from_node},
                  {"compute_s", node.compute_s},
                  {"comm_s", node.comm_s},
                  {"idle_s", node.idle_s},
                  {"finish_s", node.finish_s},
                  {"panels", node.panels},
                  {"pieces_by_chain", node.pieces_by_chain},
                  {"forwarded_bytes", node.forwarded_bytes},
                  {"abandoned_tiles", node.abandoned},
                  {"worker_io_cpu_s", node.worker_io_cpu_s},
                  {"worker_compute_cpu_s", node.worker_compute_cpu_s},
                  {"worker_comm_cpu_share", node.worker_comm_share() ? json(*node.worker_comm_share()) : json(nullptr)}};
    if (i < report.nodes.size()) {
      entry["kind"] = report.nodes[i].kind;
      entry["endpoint"] = report.nodes[i].endpoint();
    }
    entry["predicted_finish_s"] = report.prediction && i < report.prediction->finish_s.size()
                                      ? json(report.prediction->finish_s[i])
                                      : json(nullptr);
    entry["predicted_host_share"] = report.prediction && i < report.prediction->host_share.size()
                                        ? json(report.prediction->host_share[i])
                                        : json(nullptr);
    nodes.push_back(std::move(entry));
  }
  const multiply::Verification& check = report.verification;
  json left_out = json::array();
  for (const cluster::LeftOutNode& node : report.left_out_at_start) {
    left_out.push_back({{"node", node.node}, {"reason", node.reason}});
  }
  json document = {{"cluster", report.cluster},
                   {"policy", std::string(plan::policy_name(plan.policy))},
                   {"n", plan.n},
                   {"m", plan.m},
                   {"k", plan.k},
                   {"panel_width", plan.panel_width},
                   {"panels_in_flight", plan.panels_in_flight},
                   {"refill_threshold", plan.refill_threshold},
                   {"layout", std::string(partition::layout_name(plan.layout))},
                   {"distribution", std::string(plan::distribution_name(plan.distribution))},
                   // The chain as it ran ("" when B went to each node) and what changed it.
                   {"chain", report.run.chain},
                   {"chain_notes", report.run.chain_notes},
                   {"makespan_s", report.run.makespan_s},
                   {"last_result_s", report.run.last_result_s},
                   {"gflops", report.run.gflops},
                   {"imbalance", report.run.imbalance},
                   {"coordinator_cpu_s", report.run.coordinator_cpu_s},
                   // Every byte the coordinator wrote to the nodes (A, B, jobs, headers): what a switch's
                   // uplink carries toward them.
                   {"coordinator_bytes_sent", coordinator_bytes_sent(report.run)},
                   {"predicted_makespan_s", report.prediction ? json(report.prediction->makespan_s) : json(nullptr)},
                   {"prediction_error",
                    report.prediction_error() ? json(*report.prediction_error()) : json(nullptr)},
                   {"verified", check.mode == multiply::VerifyMode::kNone ? json(nullptr) : json(check.passed)},
                   {"verification",
                    {{"mode", std::string(multiply::verify_mode_name(check.mode))},
                     {"max_error_ratio", check.max_error_ratio},
                     {"max_abs_error", check.max_abs_error},
                     {"seconds", check.seconds},
                     {"overlapped_seconds", check.overlapped_seconds},
                     {"detail", check.detail}}},
                   {"nodes", std::move(nodes)},
                   {"left_out_at_start", std::move(left_out)},
                   {"tile_rows", plan.tile_rows},
                   {"tiles", report.run.tiles},
                   {"lost_nodes", report.run.lost_nodes},
                   {"lost_reasons", report.run.lost_reasons},
                   {"reissued_tiles", report.run.reissued_tiles},
                   {"speculative_copies", report.run.speculative_copies},
                   {"speculative_wins", report.run.speculative_wins}};
  return document.dump(2);
}

Status write_report_json(const std::string& path, const MultiplyReport& report) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) return io_error(fmt::format("cannot write report {}", path));
  file << report_json(report) << "\n";
  if (!file.flush()) return io_error(fmt::format("cannot write report {}", path));
  return Status::ok();
}

}  // namespace tessera::balance::multiply
