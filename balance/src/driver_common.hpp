// Internal to tessera_balance: what the static and dynamic multiply drivers share. B's k-panels
// as STORE frames encoded once and written to every node from the same bytes (marshal-once
// broadcast; frames point into B's memory, which must outlive them), and the run statistics
// derived from the nodes' figures. Pure functions and values.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/balance/matrix.hpp"
#include "tessera/balance/multiply.hpp"
#include "tessera/balance/plan.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::balance::detail {

inline constexpr uint32_t kFirstPanelTile = 16;

struct PanelFrame {
  std::array<std::byte, transport::kHeaderSize> header{};
  std::array<std::byte, transport::kTilePrefixSize> prefix{};
  const double* data = nullptr;
  std::size_t data_bytes = 0;
  uint64_t row_begin = 0;
  uint32_t rows = 0;
};

inline std::vector<PanelFrame> encode_panels(const Plan& plan, const Matrix& b) {
  namespace tp = tessera::transport;
  std::vector<PanelFrame> panels;
  for (uint64_t row = 0; row < plan.k; row += plan.panel_width) {
    PanelFrame frame;
    frame.row_begin = row;
    frame.rows = static_cast<uint32_t>(std::min(plan.panel_width, plan.k - row));
    const tp::TilePrefix tile{static_cast<uint32_t>(kFirstPanelTile + panels.size()), frame.rows,
                              static_cast<uint32_t>(plan.n)};
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kStore);
    header.payload_length = tp::store_payload_bytes(tile);
    frame.header = tp::encode_header(header);
    frame.prefix = tp::encode_store_prefix(tile);
    frame.data = b.row(row);
    frame.data_bytes = static_cast<std::size_t>(frame.rows) * plan.n * sizeof(double);
    panels.push_back(frame);
  }
  return panels;
}

inline double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Makespan (slowest finish among nodes that delivered rows), each node's idle time, GFLOP/s and
// imbalance (slowest / mean finish over those nodes), from the per-node figures of `run`.
inline void complete_run_statistics(const Plan& plan, MultiplyRun& run) {
  double finish_sum = 0.0;
  std::size_t busy = 0;
  for (const NodeRunStats& stats : run.nodes) {
    if (stats.rows == 0) continue;
    run.makespan_s = std::max(run.makespan_s, stats.finish_s);
    finish_sum += stats.finish_s;
    ++busy;
  }
  for (NodeRunStats& stats : run.nodes) stats.idle_s = std::max(0.0, run.makespan_s - stats.compute_s);
  const double flops = 2.0 * static_cast<double>(plan.m) * static_cast<double>(plan.n) * static_cast<double>(plan.k);
  run.gflops = run.makespan_s > 0.0 ? flops / run.makespan_s / 1e9 : 0.0;
  run.imbalance = busy > 0 && finish_sum > 0.0 ? run.makespan_s / (finish_sum / static_cast<double>(busy)) : 1.0;
}

}  // namespace tessera::balance::detail
