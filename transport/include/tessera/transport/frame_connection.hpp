// FrameConnection: one TCP connection that moves Tessera frames, with Asio's blocking calls.
//
// Used by the coordinator (one connection per worker, each driven by its own thread) and by the
// worker's session. Writing is thread-safe (an internal mutex keeps frames whole); reading must
// happen on one thread at a time. shutdown() may be called from any thread and makes blocked
// reads and writes return an error. Failures come back as Status values, never exceptions.
// Byte counters are updated atomically and may be read from any thread.
//
// No reader trusts a claimed length with memory: payloads are read in chunks of at most
// kReadChunkBytes into buffers that grow only as bytes arrive, so a header claiming gigabytes
// with a few bytes behind it costs at most one chunk.
//
// Reads can be bounded (set_read_timeout: no byte for N s; set_read_deadline: the whole read by
// a point in time) so a peer that stops answering without closing its socket (SIGSTOP, a node
// that lost power behind a switch) fails the read with kNetworkError "no frame from PEER for N
// s" instead of hanging; the bounds, wait_readable() and peer_closed() belong to the reading
// thread. Writes are bounded by the caller: a watchdog calls shutdown().
//
// A connection may switch to TLS 1.3 once (start_tls, done by the handshakes below when the
// cluster's wire is encrypted; see tls.hpp). Everything above stays the same: the calls, the
// bounds, the counters (which then count the frames' bytes, not the records').
#pragma once

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/auth.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/transport/tls.hpp"

namespace tessera::transport {

class TlsChannel;

// One of the session's frames read whole: header, its payload bytes, and the decoded message.
struct IncomingFrame {
  FrameHeader header;
  std::vector<std::byte> payload;
  Message message;
};

class FrameConnection {
 public:
  // Largest piece a reader asks the socket for, and so the most a lying length can make it
  // allocate ahead of the data. It is also the step in which a worker passes a piece of B on
  // along a chain (cut-through), so it is the wait each hop adds: 256 KiB takes 21 ms at
  // 100 Mbit/s, a quarter of what 1 MiB would, and a chain pays that once per node. It still fits
  // a core's cache between the copy from the socket and the checksum.
  static constexpr std::size_t kReadChunkBytes = std::size_t{1} << 18;

  FrameConnection(asio::ip::tcp::socket socket, Limits limits);
  ~FrameConnection();
  FrameConnection(const FrameConnection&) = delete;
  FrameConnection& operator=(const FrameConnection&) = delete;

  // Resolves and connects with a deadline. Failure: kNetworkError naming host:port and the reason.
  static Result<std::unique_ptr<FrameConnection>> connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout,
                                                          Limits limits = {});

  // Encodes and writes one of the session's messages with the header `flags` (a service's
  // messages are written through its codec, with write_frame).
  Status write_message(const Message& message, uint64_t request_id = 0, uint32_t flags = 0);
  // Writes header + payload parts with one gathered write; the header's payload_length is set
  // to the parts' total. Matrix memory can be sent this way without copying.
  Status write_frame(FrameHeader header, std::span<const asio::const_buffer> payload_parts);
  // Writes the same pre-encoded frame bytes as another connection did (marshal-once broadcast).
  Status write_buffers(std::span<const asio::const_buffer> frame_parts);
  // ERROR frame; errors writing it are ignored (the peer may already be gone).
  void write_error(ErrorCode code, std::string_view message, uint64_t request_id = 0);

  // Reads and validates the next header.
  Result<FrameHeader> read_header();
  // Reads exactly out.size() bytes.
  Status read_exact(std::span<std::byte> out);
  // Reads exactly out.size() bytes in chunks and returns their CRC32C, computed on the way.
  Result<uint32_t> read_checksummed(std::span<std::byte> out);
  // The same, calling on_chunk(bytes read so far) after each chunk: a worker forwards what has
  // arrived of a tile while the rest is still coming (cut-through).
  Result<uint32_t> read_checksummed(std::span<std::byte> out, const std::function<void(std::size_t)>& on_chunk);
  // Reads bytes into `out` (appended) until it holds `size` more, growing it chunk by chunk as
  // data arrives. On failure `out` holds whatever arrived.
  Status read_growing(std::vector<std::byte>& out, uint64_t size);
  // Reads the payload of `header`, one of the session's messages, and decodes it. The buffer grows
  // as the payload arrives (see read_growing), never to a merely claimed size. A service's
  // message is refused (kProtocolError) before anything is read: its codec reads it.
  Result<IncomingFrame> read_payload(const FrameHeader& header);
  // read_header() + read_payload().
  Result<IncomingFrame> read_frame();

  // --- Read bounds (reading thread only) ---
  // Every later read fails with kNetworkError "no frame from PEER for N s" when no byte arrives
  // for `timeout`. Zero (the default) waits forever.
  void set_read_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds read_timeout() const { return read_timeout_; }
  // Every later read fails with kNetworkError "no frame from PEER within N s" once `span` from
  // now has passed, however the bytes trickle in (a handshake must not last forever).
  // clear_read_deadline() lifts it.
  void set_read_deadline(std::chrono::milliseconds span);
  void clear_read_deadline();
  // Waits at most `timeout` for something to read: true when a read would not block (data, the
  // end of the stream, or an error the read will report), false when the time passed quietly.
  bool wait_readable(std::chrono::milliseconds timeout);
  // True when the peer has closed or reset the connection; never blocks. For long handlers that
  // do not read (a GEMM probe) to notice that nobody waits for their answer.
  bool peer_closed();

  // --- Encryption ---
  enum class TlsSide { kClient, kServer };
  // Switches the connection to TLS 1.3 keyed by `secret` (tls.hpp), as client or server. The
  // TLS handshake ends by the read deadline when one is set, else within the read timeout, else
  // within kDefaultHandshakeTimeout. Call it at most once, from the reading thread, while no
  // other thread writes. Failure: kAuthFailed when the peer's key differs, kNetworkError,
  // kProtocolError; the connection is then unusable.
  Status start_tls(TlsSide side, std::string_view secret);
  bool encrypted() const { return tls_ != nullptr; }
  WireMode wire() const { return encrypted() ? WireMode::kEncrypted : WireMode::kPlain; }
  // "plain" or "TLSv1.3 TLS_AES_128_GCM_SHA256".
  std::string wire_description() const;

  void shutdown();
  std::string peer() const;       // "127.0.0.1:7071"
  std::string peer_host() const;  // "127.0.0.1"
  const Limits& limits() const { return limits_; }
  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  uint64_t bytes_received() const { return bytes_received_.load(); }
  // Bytes written but not yet acknowledged by the peer (the kernel's send queue: a link slower
  // than the writer, or a reader that stopped reading, makes it grow); 0 if the kernel cannot
  // tell. Any thread.
  uint64_t unacknowledged_bytes();

 private:
  Status write_gathered(std::span<const asio::const_buffer> parts);
  Status write_gathered_tls(std::span<const asio::const_buffer> parts);
  Status read_exact_tls(std::span<std::byte> out);
  // Waits for readability within the read bounds; kNetworkError naming the bound that passed.
  Status wait_for_data();

  std::unique_ptr<asio::io_context> owned_context_;  // set when created by connect()
  asio::ip::tcp::socket socket_;
  Limits limits_;
  std::mutex write_mutex_;
  std::string peer_;
  std::string peer_host_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::chrono::milliseconds read_timeout_{0};                      // 0: none
  std::optional<std::chrono::steady_clock::time_point> read_deadline_;
  std::chrono::milliseconds read_deadline_span_{0};                // for the message
  std::unique_ptr<TlsChannel> tls_;      // set by start_tls
  std::vector<std::byte> tls_gathered_;  // small frame parts sharing one record; under write_mutex_
};

// How long a handshake may take when the caller gives no bound: a worker that accepted the
// connection but says nothing (stopped, overloaded) must not hold the coordinator.
inline constexpr std::chrono::milliseconds kDefaultHandshakeTimeout{10000};

// Coordinator side of the handshake: reads HELLO, sends AUTH, expects AUTH_OK with a valid MAC.
// Reading HELLO and AUTH_OK together takes at most `timeout` (kNetworkError "no frame from H:P
// within N s" otherwise), unless the worker says it holds the answer (HELD, protocol.hpp): each
// HELD moves the deadline to its estimate plus 2 s, never past 60 s after AUTH went out. The
// connection's read bounds are as before afterwards.
// Failure: kAuthFailed ("worker rejected the secret" / "worker's answer does not match the
// secret"), kBusy ("worker H:P is throttling connections from this address": it would not look at
// the answer, another program there having failed to authenticate too often), kProtocolError (a worker of another protocol version: "worker H:P speaks Tessera
// protocol v1, this build speaks v2; upgrade tessera-worker on H"), kNetworkError. On success
// returns the worker's HELLO; checking its capabilities is the caller's business.
// `wire` kEncrypted: AUTH asks for TLS (kFrameFlagStartTls) and the connection is encrypted on
// success; a worker whose HELLO lacks kCapabilityTls or whose AUTH_OK does not agree is refused
// with kProtocolError naming it, so nothing is ever sent in the clear that was meant not to be.
// `role` kPeer: the caller is a worker opening a peer link (graph service); AUTH then carries
// peer_mac instead of coordinator_mac, and the worker it reaches serves it beside its
// coordinator session instead of refusing it as busy.
Result<Hello> client_handshake(FrameConnection& connection, std::string_view secret,
                               std::chrono::milliseconds timeout = kDefaultHandshakeTimeout,
                               SessionRole role = SessionRole::kCoordinator, WireMode wire = WireMode::kPlain);

// Worker side: sends `hello` (its challenge must be fresh), reads AUTH, checks the MAC, answers
// AUTH_OK. A wrong MAC gets ERROR(kAuthFailed) and kAuthFailed; any other frame before AUTH gets
// ERROR(kAuthRequired); a frame of another protocol version gets ERROR(kBadFrame) naming both
// versions (in a header that version can read) and kProtocolError. The caller closes the
// connection on failure. Bound the wait for AUTH with set_read_deadline() before calling: a
// peer that says nothing otherwise holds the caller for as long as it likes.
// A client whose AUTH asks for TLS gets AUTH_OK with kFrameFlagStartTls and the connection is
// encrypted on success. `minimum` kEncrypted refuses a client that does not ask
// (ERROR(kAuthRequired) naming the setting, kProtocolError); kPlain accepts both.
// `hooks` lets the caller act between the MAC check and the answer (ServerHandshakeHooks).
struct ServerHandshakeHooks {
  // AUTH has arrived and its MAC is checked (`mac_right`), before any answer is written. The
  // caller may hold the connection here (the worker's auth throttle holds every answer from an
  // address that failed too often, right or wrong alike, so that the wait tells nothing) and
  // learns the verdict from `mac_right`: a caller that counts failures has counted this one before
  // the peer can know it failed and try again. A failed Status refuses the connection with no
  // answer written by the handshake (the caller writes its own ERROR, if any, before returning)
  // and is the handshake's result. Not set: every answer goes out at once.
  std::function<Status(bool mac_right)> on_answer;
};
Status server_handshake(FrameConnection& connection, const Hello& hello, std::string_view secret,
                        WireMode minimum = WireMode::kPlain, const ServerHandshakeHooks& hooks = {});
// The same, accepting AUTH from a coordinator or from a peer worker (either MAC label), and
// returning which one authenticated. A MAC that matches neither label fails as above.
Result<SessionRole> server_handshake_any_role(FrameConnection& connection, const Hello& hello,
                                              std::string_view secret, WireMode minimum = WireMode::kPlain,
                                              const ServerHandshakeHooks& hooks = {});
// HELD, from a ServerHandshakeHooks::on_answer that holds the answer: tells the client when to
// expect its verdict (protocol.hpp).
Status write_held(FrameConnection& connection, const Held& held);

}  // namespace tessera::transport
