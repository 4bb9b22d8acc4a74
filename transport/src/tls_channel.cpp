// TLS 1.3 with an external PSK over a socket BIO that never blocks. See tls_channel.hpp.
#include "tls_channel.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>

namespace tessera::transport {
namespace {

using Clock = std::chrono::steady_clock;

// --- A BIO over the connection's descriptor -------------------------------------------------
// MSG_DONTWAIT keeps the descriptor itself blocking for the plain path's Asio calls (the
// handshake frames before TLS); MSG_NOSIGNAL turns a write to a closed peer into EPIPE instead of
// a SIGPIPE that would end a process which did not ignore it (the CLI, a Python interpreter).

int descriptor_of(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int socket_write(BIO* bio, const char* data, std::size_t size, std::size_t* written) {
  BIO_clear_retry_flags(bio);
  for (;;) {
    const ssize_t sent = ::send(descriptor_of(bio), data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      *written = static_cast<std::size_t>(sent);
      return 1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return 0;
  }
}

int socket_read(BIO* bio, char* data, std::size_t size, std::size_t* received) {
  BIO_clear_retry_flags(bio);
  for (;;) {
    const ssize_t got = ::recv(descriptor_of(bio), data, size, MSG_DONTWAIT);
    if (got > 0) {
      *received = static_cast<std::size_t>(got);
      return 1;
    }
    if (got == 0) {
      errno = 0;  // end of stream: SSL_get_error then reports it as such, not as a socket error
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return 0;
  }
}

long socket_control(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

int socket_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tessera socket");
    if (made != nullptr) {
      BIO_meth_set_write_ex(made, socket_write);
      BIO_meth_set_read_ex(made, socket_read);
      BIO_meth_set_ctrl(made, socket_control);
      BIO_meth_set_create(made, socket_create);
    }
    return made;
  }();
  return method;
}

// poll(2) for `events` until `deadline`; true when ready (or in error: the next call reports it).
bool wait_socket(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX)));
    if (ready > 0) return true;
    if (ready == 0 && left.count() <= 0) return false;
    if (ready < 0 && errno != EINTR) return true;
  }
}

constexpr Clock::time_point kNoDeadline = Clock::time_point::max();
// Bytes of records gathered before a send, and read from the socket at once: large enough that
// system calls are rare next to the cipher's work, small enough to stay in cache.
constexpr long kWriteBufferBytes = 256 * 1024;
constexpr std::size_t kReadBufferBytes = 256 * 1024;

// TLS_AES_128_GCM_SHA256: the cipher the PSK is declared for. Any TLS 1.3 suite with the same
// hash may be negotiated with it; both offered below use SHA-256.
SSL_SESSION* psk_session(SSL* ssl, const TlsKey& key) {
  static constexpr unsigned char kAes128GcmSha256[] = {0x13, 0x01};
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
  SSL_SESSION* session = cipher != nullptr ? SSL_SESSION_new() : nullptr;
  if (session == nullptr) return nullptr;
  if (SSL_SESSION_set1_master_key(session, key.data(), key.size()) != 1 || SSL_SESSION_set_cipher(session, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(session);
    return nullptr;
  }
  return session;
}

std::string openssl_reason(unsigned long code) {
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? reason : "unknown TLS failure";
}

}  // namespace

struct TlsCallbacks {
  static int use_session(SSL* ssl, const EVP_MD* digest, const unsigned char** identity, std::size_t* identity_length,
                         SSL_SESSION** session) {
    auto* channel = static_cast<TlsChannel*>(SSL_get_app_data(ssl));
    SSL_SESSION* made = psk_session(ssl, channel->key_);
    if (made == nullptr) return 0;
    // Asked again for a suite of another hash (after a HelloRetryRequest): offer no PSK for it.
    if (digest != nullptr && digest != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(made))) {
      SSL_SESSION_free(made);
      *session = nullptr;
      return 1;
    }
    *identity = reinterpret_cast<const unsigned char*>(kTlsPskIdentity.data());
    *identity_length = kTlsPskIdentity.size();
    *session = made;
    return 1;
  }

  static int find_session(SSL* ssl, const unsigned char* identity, std::size_t identity_length,
                          SSL_SESSION** session) {
    auto* channel = static_cast<TlsChannel*>(SSL_get_app_data(ssl));
    const std::string_view offered(reinterpret_cast<const char*>(identity), identity_length);
    if (offered != kTlsPskIdentity) {
      channel->foreign_identity_ = std::string(offered.substr(0, 64));
      *session = nullptr;  // no certificate either, so the handshake fails
      return 1;
    }
    *session = psk_session(ssl, channel->key_);
    return *session != nullptr ? 1 : 0;
  }
};

TlsChannel::TlsChannel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

TlsChannel::~TlsChannel() {
  SSL_free(ssl_);  // also frees the BIO
  SSL_CTX_free(context_);
}

Result<std::unique_ptr<TlsChannel>> TlsChannel::handshake(int fd, Side side, const TlsKey& key, std::string peer,
                                                           Clock::time_point deadline) {
  std::unique_ptr<TlsChannel> channel(new TlsChannel(fd, std::move(peer)));
  channel->key_ = key;
  const std::string& who = channel->peer_;
  ERR_clear_error();
  BIO_METHOD* method = socket_method();
  channel->context_ = SSL_CTX_new(side == Side::kClient ? TLS_client_method() : TLS_server_method());
  if (method == nullptr || channel->context_ == nullptr) {
    return internal_error("TLS with " + who + ": OpenSSL cannot make a context: " + openssl_reason(ERR_get_error()));
  }
  SSL_CTX* context = channel->context_;
  SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION);
  // Both suites hash with SHA-256 as the PSK requires. AES-GCM first (the client's order
  // decides): desktops and the Pi 5 have AES instructions.
  SSL_CTX_set_ciphersuites(context, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256");
  // read_ahead: one recv fetches many records instead of two syscalls per 16 KiB record.
  SSL_CTX_set_read_ahead(context, 1);
  SSL_CTX_set_default_read_buffer_len(context, kReadBufferBytes);
  SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A peer that closes without close_notify is a closed connection like any other (BYE is the
  // orderly end of a session, not TLS's alert).
  SSL_CTX_set_options(context, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(context, 0);  // nothing to resume: every connection uses the PSK

  channel->ssl_ = SSL_new(context);
  BIO* socket_bio = BIO_new(method);
  BIO* buffered = BIO_new(BIO_f_buffer());
  if (channel->ssl_ == nullptr || socket_bio == nullptr || buffered == nullptr ||
      BIO_set_write_buffer_size(buffered, kWriteBufferBytes) != 1) {
    BIO_free(socket_bio);
    BIO_free(buffered);
    return internal_error("TLS with " + who + ": OpenSSL cannot make a session: " + openssl_reason(ERR_get_error()));
  }
  BIO_set_data(socket_bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  // OpenSSL hands each 16 KiB record to its BIO on its own: straight to the socket that is one
  // send(2) per record, a system call that can cost more than encrypting the record. Records
  // gather in a buffer instead and leave in large sends (flush() sends the rest). Reads go to the
  // socket BIO directly; read_ahead already makes them large.
  BIO_push(buffered, socket_bio);
  BIO_up_ref(socket_bio);  // one reference for the chain, one for the read side
  SSL_set_bio(channel->ssl_, socket_bio, buffered);
  SSL_set_app_data(channel->ssl_, channel.get());
  if (side == Side::kClient) {
    SSL_set_psk_use_session_callback(channel->ssl_, &TlsCallbacks::use_session);
    SSL_set_connect_state(channel->ssl_);
  } else {
    SSL_set_psk_find_session_callback(channel->ssl_, &TlsCallbacks::find_session);
    SSL_set_accept_state(channel->ssl_);
  }

  for (;;) {
    int error = SSL_ERROR_NONE;
    int saved_errno = 0;
    {
      std::lock_guard lock(channel->mutex_);
      ERR_clear_error();
      const int done = SSL_do_handshake(channel->ssl_);
      if (done == 1) break;
      error = SSL_get_error(channel->ssl_, done);
      saved_errno = errno;
    }
    const short events = error == SSL_ERROR_WANT_READ ? POLLIN : error == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (events == 0) return channel->fail("handshake", error, saved_errno);
    if (!wait_socket(fd, events, deadline)) {
      return network_error("TLS handshake with " + who + " did not finish in time (no answer)");
    }
  }
  return channel;
}

Result<std::size_t> TlsChannel::read_some(std::span<std::byte> out) {
  for (;;) {
    std::size_t received = 0;
    int error = SSL_ERROR_NONE;
    int saved_errno = 0;
    {
      std::lock_guard lock(mutex_);
      ERR_clear_error();
      if (SSL_read_ex(ssl_, out.data(), out.size(), &received) == 1) {
        needs_socket_ = false;
        return received;
      }
      error = SSL_get_error(ssl_, 0);
      saved_errno = errno;
      if (error == SSL_ERROR_WANT_READ) {
        needs_socket_ = true;
        return std::size_t{0};
      }
    }
    // Answering a key update can need the socket's send buffer; wait for it, then read on.
    if (error == SSL_ERROR_WANT_WRITE) {
      (void)wait_socket(fd_, POLLOUT, kNoDeadline);
      continue;
    }
    return fail("read", error, saved_errno);
  }
}

Status TlsChannel::write(std::span<const std::byte> data) {
  std::size_t done = 0;
  while (done < data.size()) {
    std::size_t written = 0;
    int error = SSL_ERROR_NONE;
    int saved_errno = 0;
    {
      std::lock_guard lock(mutex_);
      ERR_clear_error();
      if (SSL_write_ex(ssl_, data.data() + done, data.size() - done, &written) == 1) {
        done += written;
        continue;
      }
      error = SSL_get_error(ssl_, 0);
      saved_errno = errno;
    }
    if (error == SSL_ERROR_WANT_WRITE) {
      (void)wait_socket(fd_, POLLOUT, kNoDeadline);
    } else if (error == SSL_ERROR_WANT_READ) {
      (void)wait_socket(fd_, POLLIN, kNoDeadline);
    } else {
      return fail("write", error, saved_errno);
    }
  }
  return Status::ok();
}

Status TlsChannel::flush() {
  for (;;) {
    bool retry = false;
    int saved_errno = 0;
    {
      std::lock_guard lock(mutex_);
      BIO* out = SSL_get_wbio(ssl_);
      ERR_clear_error();
      if (BIO_flush(out) > 0) return Status::ok();
      retry = BIO_should_retry(out) != 0;
      saved_errno = errno;
    }
    if (!retry) return fail("write", SSL_ERROR_SYSCALL, saved_errno == 0 ? EPIPE : saved_errno);
    (void)wait_socket(fd_, POLLOUT, kNoDeadline);
  }
}

bool TlsChannel::has_buffered() {
  std::lock_guard lock(mutex_);
  return !needs_socket_ && SSL_has_pending(ssl_) == 1;
}

std::string TlsChannel::description() {
  std::lock_guard lock(mutex_);
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl_);
  return std::string(SSL_get_version(ssl_)) + " " + (cipher != nullptr ? SSL_CIPHER_get_name(cipher) : "(none)");
}

Status TlsChannel::fail(std::string_view during, int ssl_error, int saved_errno) {
  const std::string action = during == "handshake" ? "TLS handshake with " + peer_
                             : during == "read"    ? "read from " + peer_
                                                   : "write to " + peer_;
  if (ssl_error == SSL_ERROR_ZERO_RETURN || (ssl_error == SSL_ERROR_SYSCALL && saved_errno == 0)) {
    return network_error(during == "handshake" ? action + " failed: " + peer_ + " closed the connection"
                                               : peer_ + " closed the connection");
  }
  if (ssl_error == SSL_ERROR_SYSCALL) return network_error(action + " failed: " + std::strerror(saved_errno));
  const unsigned long code = ERR_peek_last_error();
  const int reason = ERR_GET_REASON(code);
  if (!foreign_identity_.empty()) {
    return auth_failed(action + " failed: it offered the key '" + foreign_identity_ + "', not '" +
                       std::string(kTlsPskIdentity) + "'; it is not a Tessera cluster member of this version");
  }
  // OpenSSL's server answers a PSK binder that does not verify with an illegal_parameter alert;
  // during our handshake nothing else the client sends can earn one, since both ends are ours.
  if (during == "handshake" && reason == SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER) {
    return auth_failed(action + " failed: " + peer_ + " refused our key (" + openssl_reason(code) +
                       "): the two ends derive different keys; check that both sides use the same secret file");
  }
  switch (reason) {
    case SSL_R_BINDER_DOES_NOT_VERIFY:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return auth_failed(action + " failed: the two ends derive different keys (" + openssl_reason(code) +
                         "); check that both sides use the same secret file");
    case SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC:
      return protocol_error(action + " failed: a TLS record failed its integrity check (" + openssl_reason(code) +
                            "): the bytes were changed on the way; the connection is closed");
    case SSL_R_SSLV3_ALERT_BAD_RECORD_MAC:
      return protocol_error(action + " failed: " + peer_ + " found a record from here changed on the way (" +
                            openssl_reason(code) + "); the connection is closed");
    default:
      return protocol_error(action + " failed: " + openssl_reason(code));
  }
}

}  // namespace tessera::transport
