// Valid sample messages of every GEMM type, bulk payloads built from tiles, and whole frames, shared
// by the GEMM codec, fuzz and wire tests. The session's samples and the generic byte helpers
// (concat, put_le, whole_frame) are transport's (tests/transport/frame_samples.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "../transport/frame_samples.hpp"
#include "tessera/gemm/codec.hpp"

namespace tessera::gemm::testing {

using transport::testing::concat;
using transport::testing::put_le;
using transport::testing::whole_frame;

// One or more valid values of every non-bulk GEMM message type.
inline std::vector<GemmMessage> sample_messages() {
  Probe gemm_probe{ProbeKind::kGemm, 512, 0.25, {}};
  Probe echo_probe{ProbeKind::kEcho, 0, 0.0, std::vector<uint8_t>(100)};
  std::iota(echo_probe.echo.begin(), echo_probe.echo.end(), uint8_t{7});

  ProbeResult gemm_result{ProbeKind::kGemm, 512, 17, 0.61, 12.5, {}};
  ProbeResult echo_result{ProbeKind::kEcho, 0, 1, 0.000125, 0.0, {1, 2, 3, 0, 255}};

  Job job;
  job.job_id = 0x0102030405060708ull;
  job.flags = kJobCreateOutput | kJobReleaseA | kJobReleaseB | kJobSendResult;
  job.a_tile = 11;
  job.b_tile = 12;
  job.c_tile = 13;
  job.a_row = 1;
  job.a_col = 2;
  job.b_row = 3;
  job.b_col = 4;
  job.c_row = 5;
  job.c_col = 6;
  job.m = 100;
  job.n = 200;
  job.k = 300;
  job.c_rows = 105;
  job.c_cols = 206;
  Job plain_job;
  plain_job.job_id = 9;
  plain_job.m = plain_job.n = plain_job.k = 64;
  Job add_scaled_job;  // C[2:5, 0:7] += B[1][2] * A[3:6, 4:11]
  add_scaled_job.job_id = 10;
  add_scaled_job.op = JobOp::kAddScaled;
  add_scaled_job.flags = kJobReleaseB | kJobSendResult;
  add_scaled_job.a_tile = 21;
  add_scaled_job.b_tile = 22;
  add_scaled_job.c_tile = 23;
  add_scaled_job.a_row = 3;
  add_scaled_job.a_col = 4;
  add_scaled_job.b_row = 1;
  add_scaled_job.b_col = 2;
  add_scaled_job.c_row = 2;
  add_scaled_job.m = 3;
  add_scaled_job.n = 7;
  Job transposed_job = job;  // C[5:105, 6:206] += A[1:301, 2:102]^T * B[3:203, 4:304]^T
  transposed_job.job_id = 11;
  transposed_job.flags = kJobTransposeA | kJobTransposeB | kJobCreateOutput;
  Job transposed_add_scaled_job = add_scaled_job;  // C[2:5, 0:7] += B[1][2] * A[3:10, 4:7]^T
  transposed_add_scaled_job.job_id = 12;
  transposed_add_scaled_job.flags = kJobTransposeA | kJobReleaseA;

  Credit credit{0xFFFFFFFFFFFFFFFFull, 2, 1.5};
  Release release{{1, 2, 3, 0xFFFFFFFFu}};
  Release empty_release{};
  Stats stats{12.5, 0.125, 23.75, 12.0, 40, (3ull << 30) + 17, 0xFFFFFFFFFFFFFFFFull};
  Stats empty_stats{};

  return {gemm_probe, echo_probe,     gemm_result,    echo_result,
          job,        plain_job,      add_scaled_job, transposed_job,
          transposed_add_scaled_job,  credit,         release,
          empty_release, StatsRequest{}, stats,       empty_stats};
}

// GemmMessage has no operator== because Store and ResultTile hold spans; compare their data by value.
inline bool same_message(const GemmMessage& a, const GemmMessage& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&b](const auto& left) {
        using T = std::decay_t<decltype(left)>;
        const T& right = std::get<T>(b);
        if constexpr (std::is_same_v<T, Store>) {
          return left.tile == right.tile && std::ranges::equal(left.data, right.data);
        } else if constexpr (std::is_same_v<T, ResultTile>) {
          return left.job_id == right.job_id && left.compute_seconds == right.compute_seconds &&
                 left.tile == right.tile && std::ranges::equal(left.data, right.data);
        } else {
          return left == right;
        }
      },
      a);
}

inline std::span<const std::byte> as_bytes(const std::vector<double>& values) {
  return std::as_bytes(std::span<const double>(values));
}

inline std::vector<double> sample_tile_data(const TilePrefix& tile) {
  std::vector<double> data(std::size_t{tile.rows} * tile.cols);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(i) * 0.5 - 3.25;
  return data;
}

// `tile` with the CRC32C of `data`, as a sender fills it in.
inline TilePrefix with_crc(TilePrefix tile, const std::vector<double>& data) {
  tile.data_crc32c = tile_crc32c(data);
  return tile;
}

// Bulk payloads carry the CRC of their data whatever `tile.data_crc32c` says.
inline std::vector<std::byte> store_payload(const TilePrefix& tile, const std::vector<double>& data) {
  const auto prefix = encode_store_prefix(with_crc(tile, data));
  return concat({prefix, as_bytes(data)});
}

inline std::vector<std::byte> result_payload(uint64_t job_id, double seconds, const TilePrefix& tile,
                                             const std::vector<double>& data) {
  const auto prefix = encode_result_prefix(job_id, seconds, with_crc(tile, data));
  return concat({prefix, as_bytes(data)});
}

// A sample payload with its type, bulk ones included.
struct SamplePayload {
  uint16_t type = 0;
  std::vector<std::byte> payload;
};

inline std::vector<SamplePayload> sample_payloads() {
  std::vector<SamplePayload> out;
  for (const GemmMessage& message : sample_messages()) {
    out.push_back({static_cast<uint16_t>(gemm_message_type(message)), encode_gemm_payload(message)});
  }
  const TilePrefix store_tile{42, 3, 5};
  out.push_back({static_cast<uint16_t>(MessageType::kStore), store_payload(store_tile, sample_tile_data(store_tile))});
  const TilePrefix result_tile{43, 2, 1};
  out.push_back({static_cast<uint16_t>(MessageType::kResult),
                 result_payload(1234, 0.75, result_tile, sample_tile_data(result_tile))});
  return out;
}

}  // namespace tessera::gemm::testing
