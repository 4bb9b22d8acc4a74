// Coordinator-side helpers shared by the worker's in-process and real-process tests.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <asio.hpp>

#include "tessera/gemm/codec.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::worker::testing {

namespace tp = tessera::transport;

// A connection to the worker from a chosen loopback source address (127.0.0.0/8 is all local on
// Linux), so one test can play an attacker and a coordinator on different addresses.
inline std::unique_ptr<tp::FrameConnection> connect_from(asio::io_context& context, const std::string& source, uint16_t port) {
  asio::ip::tcp::socket socket(context);
  asio::error_code ec;
  socket.open(asio::ip::tcp::v4(), ec);
  if (!ec) socket.bind({asio::ip::make_address(source), 0}, ec);
  if (!ec) socket.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  EXPECT_FALSE(ec) << source << ": " << ec.message();
  if (ec) return nullptr;
  return std::make_unique<tp::FrameConnection>(std::move(socket), tp::Limits{});
}

// Shuts the connection down if the test is still waiting after `timeout`, so a worker that fails
// to answer makes the test fail instead of hang.
class Watchdog {
 public:
  Watchdog(tp::FrameConnection& connection, std::chrono::seconds timeout)
      : thread_([this, &connection, timeout] {
          std::unique_lock lock(mutex_);
          if (!cv_.wait_for(lock, timeout, [this] { return done_; })) connection.shutdown();
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A row-major matrix of small integers; products of these are exact in binary64.
struct Dense {
  uint32_t rows = 0, cols = 0;
  std::vector<double> values;
  Dense(uint32_t r, uint32_t c) : rows(r), cols(c), values(static_cast<std::size_t>(r) * c, 0.0) {}
  double& at(uint32_t i, uint32_t j) { return values[static_cast<std::size_t>(i) * cols + j]; }
  double at(uint32_t i, uint32_t j) const { return values[static_cast<std::size_t>(i) * cols + j]; }
  static Dense integers(uint32_t r, uint32_t c, int seed) {
    Dense d(r, c);
    for (uint32_t i = 0; i < r; ++i)
      for (uint32_t j = 0; j < c; ++j) d.at(i, j) = static_cast<double>((static_cast<int>(i * 3 + j * 7) + seed) % 7 - 3);
    return d;
  }
  Dense rows_range(uint32_t first, uint32_t count) const {
    Dense d(count, cols);
    for (uint32_t i = 0; i < count; ++i)
      for (uint32_t j = 0; j < cols; ++j) d.at(i, j) = at(first + i, j);
    return d;
  }
};

inline Dense multiply(const Dense& a, const Dense& b) {
  Dense c(a.rows, b.cols);
  for (uint32_t i = 0; i < a.rows; ++i)
    for (uint32_t j = 0; j < b.cols; ++j) {
      double sum = 0.0;
      for (uint32_t p = 0; p < a.cols; ++p) sum += a.at(i, p) * b.at(p, j);
      c.at(i, j) = sum;
    }
  return c;
}

inline Dense transpose(const Dense& a) {
  Dense t(a.cols, a.rows);
  for (uint32_t i = 0; i < a.rows; ++i)
    for (uint32_t j = 0; j < a.cols; ++j) t.at(j, i) = a.at(i, j);
  return t;
}

inline Status store_tile(tp::FrameConnection& connection, uint32_t id, const Dense& tile) {
  return gemm::write_store(connection, gemm::TilePrefix{id, tile.rows, tile.cols, gemm::tile_crc32c(tile.values)},
                           tile.values);
}

inline gemm::Job gemm_job(uint64_t job_id, uint32_t a, uint32_t b, uint32_t c, uint32_t m, uint32_t n, uint32_t k,
                        uint32_t flags = 0) {
  gemm::Job job;
  job.job_id = job_id;
  job.a_tile = a;
  job.b_tile = b;
  job.c_tile = c;
  job.m = m;
  job.n = n;
  job.k = k;
  job.flags = flags;
  return job;
}

// C[0:m, 0:n] += s * A[0:m, 0:n] with s the single entry of the 1x1 tile `scalar`.
inline gemm::Job add_scaled_job(uint64_t job_id, uint32_t a, uint32_t scalar, uint32_t c, uint32_t m, uint32_t n,
                              uint32_t flags = 0) {
  gemm::Job job = gemm_job(job_id, a, scalar, c, m, n, 0, flags);
  job.op = gemm::JobOp::kAddScaled;
  return job;
}

// Any message of a coordinator session with a GEMM worker: the session's own (transport) or the
// GEMM service's (gemm/codec.hpp), so that a test reads replies in order whichever codec they are.
using AnyMessage = std::variant<tp::Hello, tp::Auth, tp::AuthOk, tp::Error, tp::Bye, gemm::Probe, gemm::ProbeResult,
                                gemm::Store, gemm::Job, gemm::Credit, gemm::ResultTile, gemm::Release,
                                gemm::StatsRequest, gemm::Stats>;

// A frame read whole and decoded by its codec. STORE / RESULT data views `payload`: keep the frame.
struct AnyFrame {
  tp::FrameHeader header;
  std::vector<std::byte> payload;
  AnyMessage message;
};

// Reads the next frame: a session message through the connection, a GEMM one through
// gemm::read_payload. Another service's frame (forwarding, graph) is kProtocolError naming it,
// its payload left unread.
inline Result<AnyFrame> read_any_frame(tp::FrameConnection& connection) {
  Result<tp::FrameHeader> header = connection.read_header();
  if (!header) return header.status();
  auto as_any = [](auto&& message) {
    return std::visit([](auto&& m) { return AnyMessage(std::move(m)); }, std::move(message));
  };
  if (tp::is_session_message(header->type)) {
    Result<tp::IncomingFrame> frame = connection.read_payload(*header);
    if (!frame) return frame.status();
    return AnyFrame{frame->header, std::move(frame->payload), as_any(std::move(frame->message))};
  }
  if (gemm::is_gemm_message(header->type)) {
    Result<gemm::GemmFrame> frame = gemm::read_payload(connection, *header);
    if (!frame) return frame.status();
    // Moving the vector keeps its heap buffer, so STORE/RESULT spans stay valid.
    return AnyFrame{frame->header, std::move(frame->payload), as_any(std::move(frame->message))};
  }
  return protocol_error(connection.peer() + " sent " + tp::message_type_name(header->type) +
                        ", neither a session nor a GEMM message");
}

// Reads the next frame and expects message type T; fails the test otherwise.
template <typename T>
::testing::AssertionResult read_expect(tp::FrameConnection& connection, AnyFrame& frame) {
  auto read = read_any_frame(connection);
  if (!read.is_ok()) return ::testing::AssertionFailure() << "read failed: " << read.status().to_string();
  frame = std::move(read).value();
  if (!std::holds_alternative<T>(frame.message)) {
    auto failure = ::testing::AssertionFailure() << "got " << tp::message_type_name(frame.header.type);
    if (auto* error = std::get_if<tp::Error>(&frame.message)) {
      failure << " code " << static_cast<uint32_t>(error->code) << ": " << error->message;
    }
    return failure;
  }
  return ::testing::AssertionSuccess();
}

// Reads the next frame and expects ERROR with `code`.
inline ::testing::AssertionResult read_error(tp::FrameConnection& connection, tp::ErrorCode code,
                                             std::string* message = nullptr) {
  AnyFrame frame;
  auto result = read_expect<tp::Error>(connection, frame);
  if (!result) return result;
  const auto& error = std::get<tp::Error>(frame.message);
  if (message != nullptr) *message = error.message;
  if (error.code != code) {
    return ::testing::AssertionFailure() << "ERROR code " << static_cast<uint32_t>(error.code) << " (" << error.message
                                         << "), wanted " << static_cast<uint32_t>(code);
  }
  return ::testing::AssertionSuccess();
}

// The connection has been closed by the worker: the next read fails (no frame header arrives).
inline ::testing::AssertionResult read_closed(tp::FrameConnection& connection) {
  auto read = connection.read_header();
  if (read.is_ok()) return ::testing::AssertionFailure() << "got " << tp::message_type_name(read->type);
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::worker::testing
