// libFuzzer harness for the authenticated handshake (transport/frame_connection.hpp): the only
// code an unauthenticated peer reaches on a worker's port, and the first a hostile "worker"
// reaches in the coordinator.
//
// Each input is one session on a loopback TCP connection: the real code on one end, the fuzzer's
// bytes on the other. Input byte 0 picks the setting, the rest are the peer's bytes:
//   bit 0  0: the worker's server_handshake is real, the bytes play a coordinator;
//          1: the coordinator's client_handshake is real, the bytes play a worker.
//   bit 1  "knows the secret": the harness writes the correct MAC into the peer's AUTH / AUTH_OK
//          frame where it has one, so the fuzzer also explores what follows a valid MAC (a random
//          MAC would stop every session at the first check).
// The peer's bytes are written, then its sending half is closed, so the real side always sees
// the end of its input: it must return a Status (never crash, never hang: scripts/fuzz.sh runs
// with -timeout) and must not succeed unless bit 1 supplied the MAC.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"

namespace {

using namespace tessera::transport;
using tessera::Result;

constexpr std::string_view kSecret = "fuzz-harness-secret";
constexpr uint8_t kCoordinatorIsReal = 1u << 0;
constexpr uint8_t kPeerKnowsSecret = 1u << 1;

// One listening socket for the whole run: a fresh connection per input costs a connect and an
// accept on loopback, far less than a fresh port would.
struct Loopback {
  asio::io_context context;
  asio::ip::tcp::acceptor acceptor{context, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0)};

  // Both ends of a new connection: {real side, fuzzed peer}. Made with asynchronous operations:
  // libFuzzer's -timeout timer is a SIGALRM without SA_RESTART, which makes a blocking connect or
  // accept fail with EINTR now and then (and a retried connect could pair the wrong ends), while
  // Asio's event loop simply resumes after an interrupted wait.
  std::pair<asio::ip::tcp::socket, asio::ip::tcp::socket> connect_pair() {
    asio::ip::tcp::socket client(context);
    asio::ip::tcp::socket server(context);
    asio::error_code connect_ec, accept_ec;
    acceptor.async_accept(server, [&accept_ec](const asio::error_code& ec) { accept_ec = ec; });
    client.async_connect(acceptor.local_endpoint(), [&connect_ec](const asio::error_code& ec) { connect_ec = ec; });
    context.restart();
    context.run();
    if (connect_ec || accept_ec) {
      std::fprintf(stderr, "fuzz_handshake: loopback connection failed: %s / %s\n", connect_ec.message().c_str(),
                   accept_ec.message().c_str());
      std::abort();
    }
    return {std::move(server), std::move(client)};
  }
};

Loopback& loopback() {
  static Loopback* instance = new Loopback();  // never destroyed: outlives libFuzzer's exit paths
  return *instance;
}

// A fixed worker HELLO; a fixed challenge keeps each input's behaviour reproducible.
Hello worker_hello() {
  Hello hello;
  hello.worker_version = "0.1.0";
  hello.arch = "x86_64";
  hello.hostname = "fuzz-worker";
  hello.cores = 2;
  hello.threads = 2;
  hello.memory_bytes = 1ull << 30;
  hello.tile_memory_cap = 1ull << 29;
  hello.capabilities = kCapabilityGemm;
  for (std::size_t i = 0; i < hello.challenge.size(); ++i) hello.challenge[i] = static_cast<uint8_t>(i + 1);
  return hello;
}

// The header at `frame` if it is a valid header of `type` whose payload is all present.
std::optional<FrameHeader> whole_frame_of(std::span<const std::byte> frame, MessageType type) {
  if (frame.size() < kHeaderSize) return std::nullopt;
  Result<FrameHeader> header = decode_header(frame.first<kHeaderSize>(), Limits{});
  if (!header || header->type != static_cast<uint16_t>(type)) return std::nullopt;
  if (header->payload_length > frame.size() - kHeaderSize) return std::nullopt;
  return *header;
}

void write_all(asio::ip::tcp::socket& socket, std::span<const std::byte> bytes) {
  asio::error_code ignored;  // the real side may have closed already: that is one of the outcomes
  asio::write(socket, asio::buffer(bytes.data(), bytes.size()), ignored);
}

void close_sending(asio::ip::tcp::socket& socket) {
  asio::error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_send, ignored);
}

// The real side runs on its own thread and closes its connection when done, as its callers do,
// so that a peer waiting for a reply sees the end instead of waiting forever.
template <typename Handshake>
std::thread run_real_side(FrameConnection& connection, bool& succeeded, Handshake handshake) {
  return std::thread([&connection, &succeeded, handshake] {
    succeeded = handshake(connection);
    connection.shutdown();
  });
}

bool fuzz_worker(asio::ip::tcp::socket real, asio::ip::tcp::socket peer, std::vector<std::byte> bytes, bool sign) {
  const Hello hello = worker_hello();
  FrameConnection connection(std::move(real), Limits{});
  bool succeeded = false;
  std::thread worker = run_real_side(connection, succeeded, [&hello](FrameConnection& c) {
    const tessera::Status status = server_handshake(c, hello, kSecret);
    if (!status.is_ok() && status.message().empty()) std::abort();  // a failure must say why
    return status.is_ok();
  });
  if (sign) {
    if (std::optional<FrameHeader> header = whole_frame_of(bytes, MessageType::kAuth);
        header && header->payload_length == kAuthPayloadBytes) {
      Challenge coordinator_challenge{};
      std::memcpy(coordinator_challenge.data(), bytes.data() + kHeaderSize + kMacSize, kChallengeSize);
      const Mac mac = coordinator_mac(kSecret, hello.challenge, coordinator_challenge);
      std::memcpy(bytes.data() + kHeaderSize, mac.data(), kMacSize);
    }
  }
  write_all(peer, bytes);
  close_sending(peer);
  worker.join();
  return succeeded;
}

bool fuzz_coordinator(asio::ip::tcp::socket real, asio::ip::tcp::socket peer, std::vector<std::byte> bytes,
                      bool sign) {
  FrameConnection connection(std::move(real), Limits{});
  bool succeeded = false;
  std::thread coordinator = run_real_side(connection, succeeded, [](FrameConnection& c) {
    const tessera::Result<Hello> hello = client_handshake(c, kSecret);
    if (!hello && hello.status().message().empty()) std::abort();
    return hello.is_ok();
  });
  std::span<const std::byte> rest(bytes);
  std::optional<FrameHeader> hello_header = whole_frame_of(rest, MessageType::kHello);
  if (sign && hello_header) {
    // The worker's AUTH_OK signs the coordinator's fresh challenge, so the peer must read AUTH
    // before it can answer: send HELLO, read AUTH, then sign and send the rest.
    const std::size_t hello_size = kHeaderSize + static_cast<std::size_t>(hello_header->payload_length);
    write_all(peer, rest.first(hello_size));
    const Result<Message> hello = decode_payload(hello_header->type, rest.subspan(kHeaderSize, hello_size - kHeaderSize),
                                                 Limits{});
    FrameConnection peer_connection(std::move(peer), Limits{});
    Result<IncomingFrame> auth = peer_connection.read_frame();
    const std::size_t auth_ok_at = hello_size;
    if (hello && auth && std::holds_alternative<Auth>(auth->message)) {
      std::optional<FrameHeader> ok_header = whole_frame_of(rest.subspan(auth_ok_at), MessageType::kAuthOk);
      if (ok_header && ok_header->payload_length == kAuthOkPayloadBytes) {
        const Mac mac = worker_mac(kSecret, std::get<Auth>(auth->message).challenge, std::get<Hello>(*hello).challenge);
        std::memcpy(bytes.data() + auth_ok_at + kHeaderSize, mac.data(), kMacSize);
      }
    }
    const std::array<asio::const_buffer, 1> tail{asio::buffer(bytes.data() + auth_ok_at, bytes.size() - auth_ok_at)};
    (void)peer_connection.write_buffers(tail);
    peer_connection.shutdown();  // ends the real side's reads even if it still waits for more
    coordinator.join();
    return succeeded;
  }
  write_all(peer, bytes);
  close_sending(peer);
  coordinator.join();
  return succeeded;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t setting = data[0];
  const bool sign = (setting & kPeerKnowsSecret) != 0;
  std::vector<std::byte> bytes(size - 1);
  if (size > 1) std::memcpy(bytes.data(), data + 1, size - 1);

  auto [real, peer] = loopback().connect_pair();
  const bool succeeded = (setting & kCoordinatorIsReal) != 0
                             ? fuzz_coordinator(std::move(real), std::move(peer), std::move(bytes), sign)
                             : fuzz_worker(std::move(real), std::move(peer), std::move(bytes), sign);
  if (succeeded && !sign) {
    std::fprintf(stderr, "fuzz_handshake: a peer without the secret completed the handshake\n");
    std::abort();
  }
  return 0;
}
