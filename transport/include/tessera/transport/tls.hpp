// Encrypted links: TLS 1.3 keyed by the cluster secret, no certificates.
//
// A cluster runs its links plain (the default: HMAC challenge-response proves who is talking,
// frames travel in the clear with a CRC32C per tile) or encrypted (`wire: encrypted`): after the
// HMAC handshake both ends switch the same TCP connection to TLS 1.3 with an external
// pre-shared key derived from the secret (RFC 8446 section 2.2 with psk_dhe_ke, so each
// connection also gets fresh ECDHE keys: recording traffic and stealing the secret later does
// not decrypt it). Every frame after AUTH_OK is then confidential and integrity-protected by
// AES-GCM or ChaCha20-Poly1305 records; a changed byte fails the connection.
//
// The switch is negotiated in the handshake (frame_connection.hpp): a worker that can encrypt
// says so with kCapabilityTls in HELLO, the client asks with kFrameFlagStartTls on AUTH and the
// worker agrees with the same flag on AUTH_OK. A client that wants encryption refuses a worker
// that does not agree, and a worker started with `--wire encrypted` refuses plain clients, so a
// man in the middle cannot downgrade a link either side insists on.
//
// Pure values and functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "tessera/core/status.hpp"

namespace tessera::transport {

enum class WireMode : uint8_t {
  kPlain,      // HMAC handshake, frames in the clear
  kEncrypted,  // HMAC handshake, then TLS 1.3 with the secret's pre-shared key
};
// "plain", "encrypted".
std::string_view wire_mode_name(WireMode mode);
// Parses "plain" / "encrypted"; anything else fails with kInvalidArgument listing both.
Result<WireMode> parse_wire_mode(std::string_view text);

// AUTH and AUTH_OK header flag: switch this connection to TLS once AUTH_OK has been sent.
inline constexpr uint32_t kFrameFlagStartTls = 1u << 0;

// The pre-shared key both ends derive from the cluster secret: HKDF-SHA256 (RFC 5869) with the
// label below, so the key used by TLS is never the secret the HMAC handshake uses.
inline constexpr std::size_t kTlsKeyBytes = 32;
using TlsKey = std::array<uint8_t, kTlsKeyBytes>;
TlsKey derive_tls_key(std::string_view secret);
// The PSK identity both ends use; a key that differs fails the TLS handshake's binder check.
inline constexpr std::string_view kTlsPskIdentity = "tessera-cluster-v1";

}  // namespace tessera::transport
