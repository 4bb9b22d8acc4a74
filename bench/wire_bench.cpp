// tessera-wire-bench: what an encrypted link costs per byte, without GEMM around it. One sender
// thread writes STORE frames of --tile-mib MiB (as the coordinator streams B panels) over a real
// loopback TCP connection to one receiver thread, which reads each frame whole and checks its
// CRC32C, as a worker does; plain and encrypted runs alternate --repeat times, so the machine's
// drift hits both alike. Prints per mode the median (min..max) of: GB/s moved, and the CPU
// seconds each side spends per GB (CLOCK_THREAD_CPUTIME_ID of the two threads). The receiver's
// CPU per GB is the figure that matters on a Pi, whose cores also compute; on this x86 machine it
// is also what a loopback link costs a worker. A figure generator, not a test.
//
//   tessera-wire-bench [--gib G] [--tile-mib M] [--repeat R]
#include <array>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tessera/core/stats.hpp"
#include "tessera/gemm/codec.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/worker/thread_cpu.hpp"

namespace gemm = tessera::gemm;
namespace tp = tessera::transport;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kSecret = "wire-bench-secret";

struct RunFigures {
  double gb_per_s = 0, sender_cpu_per_gb = 0, receiver_cpu_per_gb = 0;
};

// One connected pair on loopback, handshaken in `wire` mode.
struct Pair {
  asio::io_context server_context;
  std::unique_ptr<tp::FrameConnection> client, server;
};
std::unique_ptr<Pair> connect_pair(tp::WireMode wire) {
  auto pair = std::make_unique<Pair>();
  asio::ip::tcp::acceptor acceptor(pair->server_context, {asio::ip::address_v4::loopback(), 0});
  auto client = tp::FrameConnection::connect("127.0.0.1", acceptor.local_endpoint().port(), std::chrono::seconds(5));
  if (!client) throw std::runtime_error(client.status().to_string());
  pair->client = std::move(*client);
  asio::ip::tcp::socket socket(pair->server_context);
  acceptor.accept(socket);
  pair->server = std::make_unique<tp::FrameConnection>(std::move(socket), tp::Limits{});
  tp::Hello hello;
  hello.worker_version = "bench";
  hello.capabilities = tp::kCapabilityTls;
  hello.challenge = tp::random_challenge();
  tessera::Status server_status;
  std::thread worker([&] { server_status = tp::server_handshake(*pair->server, hello, kSecret); });
  auto seen = tp::client_handshake(*pair->client, kSecret, std::chrono::seconds(5), tp::SessionRole::kCoordinator, wire);
  worker.join();
  if (!seen || !server_status.is_ok()) throw std::runtime_error("handshake failed");
  return pair;
}

RunFigures run(tp::WireMode wire, uint64_t total_bytes, const std::vector<double>& tile) {
  std::unique_ptr<Pair> pair = connect_pair(wire);
  const uint64_t frames = std::max<uint64_t>(1, total_bytes / (tile.size() * sizeof(double)));
  // Rows of 1024 doubles (a MiB is 128 of them), so every --tile-mib stays within the codec's
  // max_tile_dim, as a worker checks it.
  const gemm::TilePrefix prefix{1, static_cast<uint32_t>(tile.size() / 1024), 1024, gemm::tile_crc32c(tile)};
  const gemm::Limits limits;
  double sender_cpu = 0, receiver_cpu = 0;
  tessera::Status received = tessera::Status::ok();
  const auto start = Clock::now();
  std::thread receiver([&] {
    const double cpu0 = tessera::worker::thread_cpu_seconds();
    std::vector<double> landing(tile.size());
    for (uint64_t i = 0; i < frames && received.is_ok(); ++i) {
      auto header = pair->server->read_header();
      if (!header) {
        received = header.status();
        break;
      }
      // As the worker's STORE handler: the prefix checked against the header, then the data
      // streamed into place with its CRC32C computed on the way.
      std::array<std::byte, gemm::kTilePrefixSize> prefix_in{};
      received = pair->server->read_exact(prefix_in);
      if (!received.is_ok()) break;
      tessera::Result<gemm::TilePrefix> stored = gemm::decode_store_prefix(prefix_in, header->payload_length, limits);
      if (!stored) {
        received = stored.status();
        break;
      }
      received = gemm::read_tile_data(*pair->server, "STORE", *stored, std::as_writable_bytes(std::span(landing)));
    }
    receiver_cpu = tessera::worker::thread_cpu_seconds() - cpu0;
  });
  const double cpu0 = tessera::worker::thread_cpu_seconds();
  for (uint64_t i = 0; i < frames; ++i) {
    if (tessera::Status sent = gemm::write_store(*pair->client, prefix, tile); !sent.is_ok()) {
      throw std::runtime_error(sent.to_string());
    }
  }
  sender_cpu = tessera::worker::thread_cpu_seconds() - cpu0;
  receiver.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!received.is_ok()) throw std::runtime_error(received.to_string());
  const double gb = static_cast<double>(frames * tile.size() * sizeof(double)) / 1e9;
  return {gb / seconds, sender_cpu / gb, receiver_cpu / gb};
}

std::string spread(const std::vector<double>& values, int digits) {
  return fmt::format("{:.{}f} ({:.{}f}..{:.{}f})", tessera::median(values), digits,
                     *std::min_element(values.begin(), values.end()), digits,
                     *std::max_element(values.begin(), values.end()), digits);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Plain against encrypted links: GB/s and CPU seconds per GB on each side"};
  double gib = 2.0;
  uint32_t tile_mib = 8;
  int repeat = 5;
  app.add_option("--gib", gib, "GiB moved per run")->check(CLI::Range(0.01, 64.0))->capture_default_str();
  app.add_option("--tile-mib", tile_mib, "MiB per STORE frame")->check(CLI::Range(1u, 1024u))->capture_default_str();
  app.add_option("--repeat", repeat, "runs of each mode, interleaved")->check(CLI::Range(1, 100))->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<double> tile(std::size_t{tile_mib} << 17);  // MiB of doubles
  for (std::size_t i = 0; i < tile.size(); ++i) tile[i] = static_cast<double>(i % 1000) * 0.5;
  const auto total = static_cast<uint64_t>(gib * static_cast<double>(1ull << 30));
  std::vector<RunFigures> plain, encrypted;
  try {
    for (int r = 0; r < repeat; ++r) {
      plain.push_back(run(tp::WireMode::kPlain, total, tile));
      encrypted.push_back(run(tp::WireMode::kEncrypted, total, tile));
    }
  } catch (const std::exception& e) {
    std::cerr << "tessera-wire-bench: " << e.what() << "\n";
    return 1;
  }
  fmt::print("{:.2f} GiB per run in {} MiB STORE frames, {} runs per mode, interleaved; median (min..max)\n\n", gib,
             tile_mib, repeat);
  fmt::print("| wire | GB/s | sender CPU s per GB | receiver CPU s per GB |\n|---|---|---|---|\n");
  for (const auto& [name, figures] : {std::pair{"plain", &plain}, std::pair{"encrypted", &encrypted}}) {
    std::vector<double> rate, sender, receiver;
    for (const RunFigures& f : *figures) {
      rate.push_back(f.gb_per_s);
      sender.push_back(f.sender_cpu_per_gb);
      receiver.push_back(f.receiver_cpu_per_gb);
    }
    fmt::print("| {} | {} | {} | {} |\n", name, spread(rate, 2), spread(sender, 3), spread(receiver, 3));
  }
  return 0;
}
