// Blocking Asio calls with error_code overloads only: a failed or hostile peer becomes a Status,
// never an exception, and allocation failures for claimed payload sizes are caught at the edge.
#include "tessera/transport/frame_connection.hpp"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <array>
#include <cstring>
#include <optional>
#include <new>
#include <utility>
#include <variant>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/crc32c.hpp"
#include "tessera/transport/request.hpp"
#include "client_handshake.hpp"
#include "tls_channel.hpp"

namespace tessera::transport {

// read_payload hands out spans of doubles that view its std::vector<std::byte>; operator new's
// guaranteed alignment (16 on x86_64 and aarch64) is what makes those spans aligned.
static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= alignof(double));

namespace {

std::string format_host_port(std::string_view host, uint16_t port) {
  const bool bracket = host.find(':') != std::string_view::npos;
  return (bracket ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

std::string error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadFrame: return "BAD_FRAME";
    case ErrorCode::kAuthRequired: return "AUTH_REQUIRED";
    case ErrorCode::kAuthFailed: return "AUTH_FAILED";
    case ErrorCode::kBusy: return "BUSY";
    case ErrorCode::kNoSuchTile: return "NO_SUCH_TILE";
    case ErrorCode::kBadJob: return "BAD_JOB";
    case ErrorCode::kOutOfMemory: return "OUT_OF_MEMORY";
    case ErrorCode::kInternal: return "INTERNAL";
    case ErrorCode::kCorrupt: return "CORRUPT";
    case ErrorCode::kPeerFailed: return "PEER_FAILED";
    case ErrorCode::kThrottled: return "THROTTLED";
  }
  return "UNKNOWN(" + std::to_string(static_cast<uint32_t>(code)) + ")";
}

// "5 s", "0.5 s": read bounds in messages a person reads.
std::string format_seconds(std::chrono::milliseconds span) {
  if (span.count() % 1000 == 0) return std::to_string(span.count() / 1000) + " s";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(span.count()) / 1000.0);
  return text;
}

// poll(2) on one descriptor for `events`, restarting after signals until `timeout` has passed.
// Returns the revents, 0 on a quiet timeout. A poll failure other than EINTR reports POLLERR so
// the caller's next read surfaces the problem.
short poll_socket(int fd, short events, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, wait_ms);
    if (ready > 0) return entry.revents;
    if (ready == 0) {
      if (left.count() <= 0) return 0;
      continue;  // woke a little early: poll's granularity
    }
    if (errno != EINTR) return POLLERR;
  }
}

// An ERROR frame from the peer, as the Status our caller should see.
Status remote_error(const Error& error, const std::string& who) {
  return Status(status_code_of(error.code), who + " sent ERROR " + error_code_name(error.code) + ": " + error.message);
}

// Reads one handshake frame; a frame that breaks the protocol is answered with ERROR(kBadFrame)
// because the peer would otherwise wait for a reply that never comes. The type is checked from
// the header alone, before any payload is read, so an unauthenticated peer can never make us
// allocate a large payload (a STORE, an echo PROBE) by sending it first. `refusal` answers a
// frame of a type not in `expected`. A peer of another protocol version is refused with both
// versions and `upgrade_hint`, in a frame its version can read.
Result<FrameHeader> read_handshake_header(FrameConnection& connection, const std::string& who,
                                          std::initializer_list<MessageType> expected, ErrorCode refusal,
                                          std::string_view expectation, std::string_view upgrade_hint) {
  std::array<std::byte, kHeaderSize> header_bytes{};
  if (Status read = connection.read_exact(header_bytes); !read.is_ok()) {
    return read.with_context("handshake with " + who + ": ");
  }
  Result<FrameHeader> header = decode_header(header_bytes, connection.limits());
  if (!header) {
    if (std::optional<uint16_t> version = foreign_protocol_version(header_bytes)) {
      const std::string why = who + " speaks Tessera protocol v" + std::to_string(*version) + ", this build speaks v" +
                              std::to_string(kProtocolVersion) + "; " + std::string(upgrade_hint);
      const std::vector<std::byte> refusal_frame = encode_version_refusal(*version, version_mismatch(*version));
      const std::array<asio::const_buffer, 1> parts{asio::buffer(refusal_frame)};
      (void)connection.write_buffers(parts);  // best effort: the peer may not wait for it
      return protocol_error("handshake with " + who + ": " + why);
    }
    const Status status = header.status().with_context(connection.peer() + ": ");
    if (status.code() == StatusCode::kProtocolError) connection.write_error(ErrorCode::kBadFrame, status.message());
    return status.with_context("handshake with " + who + ": ");
  }
  if (std::find(expected.begin(), expected.end(), static_cast<MessageType>(header->type)) == expected.end()) {
    const std::string what = message_type_name(header->type) + " " + std::string(expectation);
    connection.write_error(refusal, what, header->request_id);
    return protocol_error("handshake with " + who + ": " + what);
  }
  return header;
}

// The payload of a frame whose header read_handshake_header admitted.
Result<IncomingFrame> read_handshake_payload(FrameConnection& connection, const std::string& who,
                                             const FrameHeader& header) {
  Result<IncomingFrame> frame = connection.read_payload(header);
  if (frame) return frame;
  const Status status = frame.status();
  if (status.code() == StatusCode::kProtocolError) connection.write_error(ErrorCode::kBadFrame, status.message());
  return status.with_context("handshake with " + who + ": ");
}

Result<IncomingFrame> read_handshake_frame(FrameConnection& connection, const std::string& who,
                                           std::initializer_list<MessageType> expected, ErrorCode refusal,
                                           std::string_view expectation, std::string_view upgrade_hint) {
  Result<FrameHeader> header = read_handshake_header(connection, who, expected, refusal, expectation, upgrade_hint);
  if (!header) return header.status();
  return read_handshake_payload(connection, who, *header);
}

// How long a client waits for its verdict in all once the worker has said it holds the answer
// (HELD), and how much past each HELD's estimate: the worker keeps a hold under 3.2 s and the line
// of answers ahead of one under half a minute, and says so again while the answer waits.
constexpr std::chrono::milliseconds kLongestHeldVerdict{60000};
constexpr std::chrono::milliseconds kHeldVerdictMargin{2000};

// The worker's answer to AUTH (AUTH_OK or ERROR), read past any HELD notices, each of which moves
// the read deadline to its estimate (plus a margin), never past kLongestHeldVerdict from now.
Result<IncomingFrame> read_verdict(FrameConnection& connection, const std::string& who, std::string_view upgrade_hint) {
  const auto cap = std::chrono::steady_clock::now() + kLongestHeldVerdict;
  for (;;) {
    Result<FrameHeader> header =
        read_handshake_header(connection, who, {MessageType::kAuthOk, MessageType::kError, MessageType::kHeld},
                              ErrorCode::kBadFrame, "instead of AUTH_OK", upgrade_hint);
    if (!header) return header.status();
    if (header->type != static_cast<uint16_t>(MessageType::kHeld)) return read_handshake_payload(connection, who, *header);
    // decode_header admitted only HELD's exact length.
    std::array<std::byte, kHeldPayloadBytes> payload{};
    if (Status read = connection.read_exact(payload); !read.is_ok()) return read.with_context("handshake with " + who + ": ");
    Result<Held> held = decode_held(payload);
    if (!held) {
      connection.write_error(ErrorCode::kBadFrame, held.status().message());
      return held.status().with_context("handshake with " + who + ": ");
    }
    const auto now = std::chrono::steady_clock::now();
    const auto until = std::min(cap, now + std::chrono::milliseconds(held->verdict_within_ms) + kHeldVerdictMargin);
    connection.set_read_deadline(
        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(until - now), std::chrono::milliseconds(1)));
  }
}

}  // namespace

FrameConnection::FrameConnection(asio::ip::tcp::socket socket, Limits limits)
    : socket_(std::move(socket)), limits_(limits) {
  asio::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  const asio::ip::tcp::endpoint endpoint = socket_.remote_endpoint(ec);
  peer_host_ = ec ? std::string("(unconnected)") : endpoint.address().to_string();
  peer_ = ec ? peer_host_ : format_host_port(peer_host_, endpoint.port());
}

FrameConnection::~FrameConnection() {
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
}

Result<std::unique_ptr<FrameConnection>> FrameConnection::connect(const std::string& host, uint16_t port,
                                                                  std::chrono::milliseconds timeout,
                                                                  Limits limits) {
  const std::string where = format_host_port(host, port);
  try {
    // Resolution and connection run asynchronously on a private context so one deadline bounds
    // both; the context then stays with the connection, which owns the socket bound to it.
    auto context = std::make_unique<asio::io_context>(1);
    asio::ip::tcp::resolver resolver(*context);
    asio::ip::tcp::socket socket(*context);
    bool finished = false;
    bool resolved = false;
    asio::error_code failure;
    resolver.async_resolve(host, std::to_string(port), asio::ip::tcp::resolver::numeric_service,
                           [&](const asio::error_code& resolve_ec, asio::ip::tcp::resolver::results_type results) {
                             if (resolve_ec) {
                               failure = resolve_ec;
                               finished = true;
                               return;
                             }
                             resolved = true;
                             asio::async_connect(socket, results,
                                                 [&](const asio::error_code& connect_ec, const asio::ip::tcp::endpoint&) {
                                                   failure = connect_ec;
                                                   finished = true;
                                                 });
                           });
    context->run_for(timeout);
    if (!finished) {
      resolver.cancel();
      asio::error_code ignored;
      socket.close(ignored);
      return network_error("connect to " + where + " timed out after " + std::to_string(timeout.count()) + " ms" +
                           (resolved ? "" : " (still resolving the host name)"));
    }
    if (failure) {
      return network_error(resolved ? "connect to " + where + " failed: " + failure.message()
                                    : "connect to " + where + ": cannot resolve " + host + ": " + failure.message());
    }
    auto connection = std::make_unique<FrameConnection>(std::move(socket), limits);
    connection->owned_context_ = std::move(context);
    return connection;
  } catch (const std::exception& e) {
    return network_error("connect to " + where + " failed: " + e.what());
  }
}

Status FrameConnection::write_message(const Message& message, uint64_t request_id, uint32_t flags) {
  try {
    const std::vector<std::byte> payload = encode_payload(message);
    FrameHeader header;
    header.type = static_cast<uint16_t>(message_type(message));
    header.request_id = request_id;
    header.flags = flags;
    const asio::const_buffer part = asio::buffer(payload);
    return write_frame(header, std::span<const asio::const_buffer>(&part, 1));
  } catch (const std::exception& e) {
    return internal_error("write to " + peer_ + ": cannot encode message: " + e.what());
  }
}

Status FrameConnection::write_frame(FrameHeader header, std::span<const asio::const_buffer> payload_parts) {
  try {
    uint64_t total = 0;
    for (const asio::const_buffer& part : payload_parts) total += part.size();
    header.payload_length = total;
    const std::array<std::byte, kHeaderSize> header_bytes = encode_header(header);
    std::vector<asio::const_buffer> buffers;
    buffers.reserve(payload_parts.size() + 1);
    buffers.push_back(asio::buffer(header_bytes));
    buffers.insert(buffers.end(), payload_parts.begin(), payload_parts.end());
    return write_gathered(buffers);
  } catch (const std::exception& e) {
    return internal_error("write to " + peer_ + " failed: " + e.what());
  }
}

Status FrameConnection::write_buffers(std::span<const asio::const_buffer> frame_parts) {
  return write_gathered(frame_parts);
}

void FrameConnection::write_error(ErrorCode code, std::string_view message, uint64_t request_id) {
  try {
    (void)write_message(Error{code, std::string(message)}, request_id);
  } catch (...) {
    // Best effort by contract: the peer may be gone, and this is usually already a failure path.
  }
}

Status FrameConnection::write_gathered(std::span<const asio::const_buffer> parts) {
  if (tls_) return write_gathered_tls(parts);
  try {
    std::lock_guard<std::mutex> lock(write_mutex_);
    asio::error_code ec;
    const std::size_t written = asio::write(socket_, parts, ec);
    bytes_sent_.fetch_add(written);
    if (ec) return network_error("write to " + peer_ + " failed: " + ec.message());
    return Status::ok();
  } catch (const std::exception& e) {
    return network_error("write to " + peer_ + " failed: " + e.what());
  }
}

Status FrameConnection::write_gathered_tls(std::span<const asio::const_buffer> parts) {
  // A record carries at most 16 KiB. Small parts (a header, a tile prefix) are gathered with what
  // follows them into full records, since a record per 32-byte header would cost a seal and a
  // tag each; large parts are encrypted straight from the caller's memory. `flush` below hands
  // gathered parts to TLS; the records themselves go out at the end.
  constexpr std::size_t kRecordBytes = 16384;
  try {
    std::lock_guard<std::mutex> lock(write_mutex_);
    std::vector<std::byte>& gathered = tls_gathered_;
    gathered.clear();
    gathered.reserve(kRecordBytes);
    auto flush = [&]() -> Status {
      if (gathered.empty()) return Status::ok();
      TESSERA_RETURN_IF_ERROR(tls_->write(gathered));
      bytes_sent_.fetch_add(gathered.size());
      gathered.clear();
      return Status::ok();
    };
    for (const asio::const_buffer& part : parts) {
      std::span<const std::byte> bytes(static_cast<const std::byte*>(part.data()), part.size());
      while (!bytes.empty()) {
        if (gathered.empty() && bytes.size() >= kRecordBytes) {
          TESSERA_RETURN_IF_ERROR(tls_->write(bytes));
          bytes_sent_.fetch_add(bytes.size());
          break;
        }
        const std::size_t take = std::min(bytes.size(), kRecordBytes - gathered.size());
        gathered.insert(gathered.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
        bytes = bytes.subspan(take);
        if (gathered.size() == kRecordBytes) TESSERA_RETURN_IF_ERROR(flush());
      }
    }
    TESSERA_RETURN_IF_ERROR(flush());
    return tls_->flush();  // the frame is on its way before the lock goes
  } catch (const std::exception& e) {
    return network_error("write to " + peer_ + " failed: " + e.what());
  }
}

Status FrameConnection::read_exact_tls(std::span<std::byte> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    Result<std::size_t> received = tls_->read_some(out.subspan(done));
    if (!received) return received.status();
    bytes_received_.fetch_add(*received);
    done += *received;
    // Nothing decrypted yet: wait for the socket within the read bounds (none: until shutdown).
    if (*received == 0) TESSERA_RETURN_IF_ERROR(wait_for_data());
  }
  return Status::ok();
}

Status FrameConnection::start_tls(TlsSide side, std::string_view secret) {
  if (tls_) return internal_error("start_tls: the connection to " + peer_ + " is already encrypted");
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = read_deadline_    ? *read_deadline_
                        : read_timeout_.count() > 0 ? now + read_timeout_
                                                    : now + kDefaultHandshakeTimeout;
  Result<std::unique_ptr<TlsChannel>> channel =
      TlsChannel::handshake(socket_.native_handle(), side == TlsSide::kClient ? TlsChannel::Side::kClient
                                                                              : TlsChannel::Side::kServer,
                            derive_tls_key(secret), peer_, deadline);
  if (!channel) return channel.status();
  tls_ = std::move(*channel);
  return Status::ok();
}

std::string FrameConnection::wire_description() const { return tls_ ? tls_->description() : "plain"; }

Result<FrameHeader> FrameConnection::read_header() {
  std::array<std::byte, kHeaderSize> bytes{};
  TESSERA_RETURN_IF_ERROR(read_exact(bytes));
  Result<FrameHeader> header = decode_header(bytes, limits_);
  if (!header) return header.status().with_context(peer_ + ": ");
  return header;
}

Status FrameConnection::read_exact(std::span<std::byte> out) {
  if (out.empty()) return Status::ok();
  if (tls_) return read_exact_tls(out);
  try {
    asio::error_code ec;
    if (read_timeout_.count() == 0 && !read_deadline_) {
      const std::size_t received = asio::read(socket_, asio::buffer(out.data(), out.size()), ec);
      bytes_received_.fetch_add(received);
      if (ec == asio::error::eof) return network_error(peer_ + " closed the connection");
      if (ec) return network_error("read from " + peer_ + " failed: " + ec.message());
      return Status::ok();
    }
    // Bounded: Asio's blocking reads cannot time out (with SO_RCVTIMEO they poll again forever),
    // so each wait for bytes is a poll(2) within the bounds and each read takes only what is there.
    std::size_t done = 0;
    while (done < out.size()) {
      TESSERA_RETURN_IF_ERROR(wait_for_data());
      const std::size_t received = socket_.read_some(asio::buffer(out.data() + done, out.size() - done), ec);
      bytes_received_.fetch_add(received);
      done += received;
      if (ec == asio::error::eof) return network_error(peer_ + " closed the connection");
      if (ec) return network_error("read from " + peer_ + " failed: " + ec.message());
    }
    return Status::ok();
  } catch (const std::exception& e) {
    return network_error("read from " + peer_ + " failed: " + e.what());
  }
}

Result<uint32_t> FrameConnection::read_checksummed(std::span<std::byte> out) { return read_checksummed(out, {}); }

Result<uint32_t> FrameConnection::read_checksummed(std::span<std::byte> out,
                                                   const std::function<void(std::size_t)>& on_chunk) {
  Crc32c crc;
  for (std::size_t offset = 0; offset < out.size();) {
    // Chunks keep the checked bytes in cache between the copy from the socket and the CRC.
    const std::span<std::byte> chunk = out.subspan(offset, std::min(kReadChunkBytes, out.size() - offset));
    TESSERA_RETURN_IF_ERROR(read_exact(chunk));
    crc.update(chunk);
    offset += chunk.size();
    if (on_chunk) on_chunk(offset);
  }
  return crc.value();
}

Status FrameConnection::read_growing(std::vector<std::byte>& out, uint64_t size) {
  uint64_t remaining = size;
  while (remaining > 0) {
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(kReadChunkBytes, remaining));
    const std::size_t old_size = out.size();
    // resize grows the capacity geometrically, so a payload of n bytes costs O(n) copying in all
    // and never more than about twice what has actually arrived.
    out.resize(old_size + chunk);
    const Status read = read_exact(std::span(out).subspan(old_size, chunk));
    if (!read.is_ok()) {
      out.resize(old_size);
      return read;
    }
    remaining -= chunk;
  }
  return Status::ok();
}

Status FrameConnection::wait_for_data() {
  using std::chrono::milliseconds;
  const auto now = std::chrono::steady_clock::now();
  milliseconds wait = read_timeout_.count() > 0 ? read_timeout_ : milliseconds::max();
  bool deadline_bounds = false;
  if (read_deadline_) {
    const auto left = std::chrono::duration_cast<milliseconds>(*read_deadline_ - now);
    if (left <= wait) {
      wait = std::max(left, milliseconds(0));
      deadline_bounds = true;
    }
  }
  if (wait_readable(wait)) return Status::ok();
  if (deadline_bounds) return network_error("no frame from " + peer_ + " within " + format_seconds(read_deadline_span_));
  return network_error("no frame from " + peer_ + " for " + format_seconds(read_timeout_));
}

void FrameConnection::set_read_timeout(std::chrono::milliseconds timeout) {
  read_timeout_ = std::max(timeout, std::chrono::milliseconds(0));
}

void FrameConnection::set_read_deadline(std::chrono::milliseconds span) {
  read_deadline_span_ = span;
  read_deadline_ = std::chrono::steady_clock::now() + span;
}

void FrameConnection::clear_read_deadline() { read_deadline_.reset(); }

bool FrameConnection::wait_readable(std::chrono::milliseconds timeout) {
  if (timeout == std::chrono::milliseconds::max()) timeout = std::chrono::hours(24 * 365);
  // Records already inside OpenSSL are invisible to poll.
  if (tls_ && tls_->has_buffered()) return true;
  return poll_socket(socket_.native_handle(), POLLIN, timeout) != 0;
}

bool FrameConnection::peer_closed() {
  const short events = poll_socket(socket_.native_handle(), POLLIN | POLLRDHUP, std::chrono::milliseconds(0));
  return (events & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

Result<IncomingFrame> FrameConnection::read_payload(const FrameHeader& header) {
  // The header may not come from read_header(); check it against our limits before trusting
  // payload_length with an allocation.
  Result<FrameHeader> checked = decode_header(encode_header(header), limits_);
  if (!checked) return checked.status().with_context(peer_ + ": ");
  if (!is_session_message(header.type)) {
    return protocol_error(peer_ + ": " + message_type_name(header.type) +
                          " is a service's message; read it with that service's codec");
  }
  const uint64_t length = header.payload_length;
  try {
    std::vector<std::byte> payload;
    TESSERA_RETURN_IF_ERROR(read_growing(payload, length));
    Result<Message> message = decode_payload(header.type, payload, limits_);
    if (!message) return message.status().with_context(peer_ + ": ");
    return IncomingFrame{header, std::move(payload), std::move(*message)};
  } catch (const std::bad_alloc&) {
    return resource_exhausted(peer_ + ": cannot allocate " + std::to_string(length) + " bytes for a " +
                              message_type_name(header.type) + " payload");
  } catch (const std::exception& e) {
    return internal_error(peer_ + ": reading a " + message_type_name(header.type) + " payload: " + e.what());
  }
}

Result<IncomingFrame> FrameConnection::read_frame() {
  Result<FrameHeader> header = read_header();
  if (!header) return header.status();
  return read_payload(*header);
}

void FrameConnection::shutdown() {
  // Only the shutdown(2) call: it is safe next to a blocked read on another thread, whereas
  // closing would race with that read over the descriptor.
  asio::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
}

uint64_t FrameConnection::unacknowledged_bytes() {
  int queued = 0;
  if (::ioctl(socket_.native_handle(), SIOCOUTQ, &queued) != 0 || queued < 0) return 0;
  return static_cast<uint64_t>(queued);
}

std::string FrameConnection::peer() const { return peer_; }
std::string FrameConnection::peer_host() const { return peer_host_; }

Result<Hello> client_handshake(FrameConnection& connection, std::string_view secret, std::chrono::milliseconds timeout,
                               SessionRole role, WireMode wire) {
  bool throttled = false;
  return client_handshake_noting_throttle(connection, secret, timeout, role, wire, throttled);
}

Result<Hello> client_handshake_noting_throttle(FrameConnection& connection, std::string_view secret,
                                               std::chrono::milliseconds timeout, SessionRole role, WireMode wire,
                                               bool& throttled) {
  throttled = false;
  const std::string who = "worker " + connection.peer();
  if (secret.empty()) return invalid_argument("handshake with " + who + ": the shared secret is empty");
  // One bound for both reads: a worker that accepted but stopped (SIGSTOP: the kernel still
  // completes the TCP handshake) would otherwise hold us in HELLO forever.
  connection.set_read_deadline(timeout);
  struct LiftDeadline {
    FrameConnection& connection;
    ~LiftDeadline() { connection.clear_read_deadline(); }
  } lift{connection};

  const std::string worker_upgrade = "upgrade tessera-worker on " + connection.peer_host();
  Result<IncomingFrame> first = read_handshake_frame(connection, who, {MessageType::kHello, MessageType::kError},
                                                     ErrorCode::kBadFrame, "instead of HELLO", worker_upgrade);
  if (!first) return first.status();
  if (const auto* error = std::get_if<Error>(&first->message)) return remote_error(*error, who);
  const auto* hello = &std::get<Hello>(first->message);  // read_handshake_frame admitted HELLO or ERROR only
  const bool encrypt = wire == WireMode::kEncrypted;
  if (encrypt && (hello->capabilities & kCapabilityTls) == 0) {
    return protocol_error("handshake with " + who + ": the link must be encrypted but the worker cannot encrypt (it "
                          "offers " + capability_names(hello->capabilities) + "); " + worker_upgrade +
                          ", or set wire: plain in the cluster file");
  }

  Auth auth;
  auth.challenge = random_challenge();
  auth.mac = client_mac(role, secret, hello->challenge, auth.challenge);
  Status sent = connection.write_message(auth, 0, encrypt ? kFrameFlagStartTls : 0);
  if (!sent.is_ok()) return sent.with_context("handshake with " + who + ": ");

  Result<IncomingFrame> answer = read_verdict(connection, who, worker_upgrade);
  if (!answer) return answer.status();
  if (const auto* error = std::get_if<Error>(&answer->message)) {
    if (error->code == ErrorCode::kAuthFailed) {
      return auth_failed(who + ": worker rejected the secret (" + error->message +
                         "); check that both sides use the same secret file");
    }
    if (error->code == ErrorCode::kThrottled) {
      // Not this side's secret: the worker did not look at it.
      throttled = true;
      return Status(StatusCode::kBusy, who + " is throttling connections from this address after failed "
                                           "authentications from it: " + error->message);
    }
    // The secret was right; the worker wants encryption the cluster file did not ask for.
    if (error->code == ErrorCode::kAuthRequired && !encrypt) return invalid_config(who + ": " + error->message);
    return remote_error(*error, who);
  }
  const auto* auth_ok = &std::get<AuthOk>(answer->message);  // read_handshake_frame admitted AUTH_OK or ERROR only
  if (!mac_equal(auth_ok->mac, worker_mac(secret, auth.challenge, hello->challenge))) {
    connection.write_error(ErrorCode::kAuthFailed, "worker's answer does not match the secret");
    return auth_failed(who + ": worker's answer does not match the secret; it does not know the shared secret");
  }
  if (encrypt) {
    if ((answer->header.flags & kFrameFlagStartTls) == 0) {
      return protocol_error("handshake with " + who + ": the worker did not agree to encrypt the link; " +
                            worker_upgrade + ", or set wire: plain in the cluster file");
    }
    TESSERA_RETURN_IF_ERROR(connection.start_tls(FrameConnection::TlsSide::kClient, secret));
  }
  return *hello;
}

namespace {

// server_handshake and server_handshake_any_role: the worker's side, accepting a peer worker's
// MAC label too when `accept_peers`.
Result<SessionRole> answer_hello(FrameConnection& connection, const Hello& hello, std::string_view secret,
                                 bool accept_peers, WireMode minimum, const ServerHandshakeHooks& hooks) {
  const std::string who = (accept_peers ? "coordinator or peer worker " : "coordinator ") + connection.peer();
  if (secret.empty()) return invalid_argument("handshake with " + who + ": the shared secret is empty");
  if (std::all_of(hello.challenge.begin(), hello.challenge.end(), [](uint8_t b) { return b == 0; })) {
    return internal_error("server_handshake: HELLO challenge is all zero; fill it with random_challenge()");
  }
  Status sent = connection.write_message(hello);
  if (!sent.is_ok()) return sent.with_context("handshake with " + who + ": ");

  Result<IncomingFrame> frame =
      read_handshake_frame(connection, who, {MessageType::kAuth, MessageType::kError, MessageType::kBye},
                           ErrorCode::kAuthRequired, "before authentication; send AUTH first",
                           "upgrade tessera on the coordinator's machine (" + connection.peer_host() + ")");
  if (!frame) return frame.status();
  if (const auto* error = std::get_if<Error>(&frame->message)) return remote_error(*error, who);
  if (std::holds_alternative<Bye>(frame->message)) {
    return network_error("handshake with " + who + ": coordinator said BYE before authenticating");
  }
  const auto* auth = &std::get<Auth>(frame->message);  // read_handshake_frame admitted AUTH, ERROR, BYE only
  // Both MACs are computed and compared whatever the first comparison gave, so the time taken
  // does not tell a peer which label came close.
  const bool coordinator = mac_equal(auth->mac, coordinator_mac(secret, hello.challenge, auth->challenge));
  const bool peer = accept_peers && mac_equal(auth->mac, peer_mac(secret, hello.challenge, auth->challenge));
  if (hooks.on_answer) {
    if (Status held = hooks.on_answer(coordinator || peer); !held.is_ok()) {
      return held.with_context("handshake with " + who + ": ");
    }
  }
  if (!coordinator && !peer) {
    const std::string whose = accept_peers ? "MAC (as coordinator or as peer worker)" : "coordinator's MAC";
    connection.write_error(ErrorCode::kAuthFailed, whose + " does not match the worker's secret");
    return auth_failed(who + ": " + whose + " does not match the secret; check that both sides use the same "
                             "secret file");
  }
  const bool encrypt = (frame->header.flags & kFrameFlagStartTls) != 0;
  if (!encrypt && minimum == WireMode::kEncrypted) {
    const std::string why = "this worker takes encrypted links only (tessera-worker --wire encrypted); set wire: "
                            "encrypted in the cluster file";
    connection.write_error(ErrorCode::kAuthRequired, why);
    return protocol_error("handshake with " + who + ": refused a plain link: " + why);
  }
  AuthOk ok;
  ok.mac = worker_mac(secret, auth->challenge, hello.challenge);
  sent = connection.write_message(ok, 0, encrypt ? kFrameFlagStartTls : 0);
  if (!sent.is_ok()) return sent.with_context("handshake with " + who + ": ");
  if (encrypt) TESSERA_RETURN_IF_ERROR(connection.start_tls(FrameConnection::TlsSide::kServer, secret));
  return peer ? SessionRole::kPeer : SessionRole::kCoordinator;
}

}  // namespace

Status server_handshake(FrameConnection& connection, const Hello& hello, std::string_view secret,
                        WireMode minimum, const ServerHandshakeHooks& hooks) {
  return answer_hello(connection, hello, secret, /*accept_peers=*/false, minimum, hooks).status();
}

Result<SessionRole> server_handshake_any_role(FrameConnection& connection, const Hello& hello,
                                              std::string_view secret, WireMode minimum,
                                              const ServerHandshakeHooks& hooks) {
  return answer_hello(connection, hello, secret, /*accept_peers=*/true, minimum, hooks);
}

Status write_held(FrameConnection& connection, const Held& held) {
  const std::vector<std::byte> payload = encode_held(held);
  FrameHeader header;
  header.type = static_cast<uint16_t>(MessageType::kHeld);
  const std::array<asio::const_buffer, 1> parts{asio::buffer(payload)};
  return connection.write_frame(header, parts);
}

}  // namespace tessera::transport
