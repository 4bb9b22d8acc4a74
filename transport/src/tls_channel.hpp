// TlsChannel: the TLS 1.3 session of one FrameConnection (private to transport).
//
// OpenSSL does the records; the bytes move through a BIO of our own over the connection's
// socket descriptor that never blocks (recv/send with MSG_DONTWAIT) and never raises SIGPIPE
// (MSG_NOSIGNAL), so the caller keeps control of every wait: it polls the descriptor within its
// own read bounds, and a shutdown(2) from another thread ends any wait at once.
//
// Thread-safety: one reading thread and any number of writers (FrameConnection serialises
// writers with its own mutex). OpenSSL allows one call on an SSL object at a time, so every call
// into it takes the channel's mutex; waits for the socket happen outside it.
// Ownership: the channel owns its SSL objects; the descriptor stays the connection's.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "tessera/core/status.hpp"
#include "tessera/transport/tls.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace tessera::transport {

class TlsChannel {
 public:
  enum class Side { kClient, kServer };

  // Runs the TLS handshake over `fd` (a connected TCP socket) as `side`, with `key` as the
  // external PSK, finishing by `deadline`. Failure: kAuthFailed when the two ends hold different
  // keys, kNetworkError when the deadline passes or the peer goes, kProtocolError otherwise; the
  // message names `peer`.
  static Result<std::unique_ptr<TlsChannel>> handshake(int fd, Side side, const TlsKey& key, std::string peer,
                                                       std::chrono::steady_clock::time_point deadline);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  // One read of decrypted bytes into `out` (REQUIRES: not empty). Returns the count, which is 0
  // when the socket must first deliver more bytes (poll for POLLIN, then call again). Failure:
  // kNetworkError "PEER closed the connection" or naming the socket error; kProtocolError when a
  // record fails its integrity check (the bytes were changed on the way).
  Result<std::size_t> read_some(std::span<std::byte> out);
  // Encrypts all of `data` into records, which gather in a write buffer and go out whenever it
  // fills; flush() sends the rest. Both wait for the socket while its buffer is full; the waits
  // have no bound of their own: the caller's watchdog shuts the socket down.
  Status write(std::span<const std::byte> data);
  Status flush();
  // True when decrypted or undecrypted bytes wait inside OpenSSL that read_some can use without
  // the socket (poll would not see them). False right after read_some asked for the socket.
  bool has_buffered();
  // "TLSv1.3 TLS_AES_128_GCM_SHA256"
  std::string description();

 private:
  TlsChannel(int fd, std::string peer);
  Status fail(std::string_view during, int ssl_error, int saved_errno);

  int fd_;
  std::string peer_;
  std::mutex mutex_;
  ssl_ctx_st* context_ = nullptr;
  ssl_st* ssl_ = nullptr;
  TlsKey key_{};
  // The last read stopped inside a record: what OpenSSL holds is not enough to go on with.
  bool needs_socket_ = false;
  // Set by the server's PSK callback when the client offered an identity other than ours.
  std::string foreign_identity_;

  friend struct TlsCallbacks;
};

}  // namespace tessera::transport
