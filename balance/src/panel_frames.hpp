// Internal to tessera_balance: B's k-panels as STORE frames encoded once and written to every
// node from the same bytes (marshal-once broadcast), shared by the static and dynamic drivers.
// Frames point into B's memory; B must outlive them. Values; thread-safe to read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/balance/matrix.hpp"
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

}  // namespace tessera::balance::detail
