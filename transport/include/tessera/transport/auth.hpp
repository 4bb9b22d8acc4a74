// Shared-secret authentication: HMAC-SHA256 challenge-response in both directions.
//
// The worker sends a random challenge in HELLO; the coordinator answers with a MAC over it plus a
// challenge of its own in AUTH; the worker answers AUTH_OK with a MAC over the coordinator's
// challenge. Each side thus proves it knows the secret without sending it. The one who answers
// HELLO is either the coordinator or another worker opening a peer link (the graph service's
// worker-to-worker deltas); its MAC's label says which, so a worker knows the role of every
// authenticated connection and a MAC made for one role is never accepted for the other. Pure
// functions over OpenSSL; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::transport {

using Challenge = std::array<uint8_t, kChallengeSize>;
using Mac = std::array<uint8_t, kMacSize>;

// Cryptographically random bytes (OpenSSL RAND_bytes).
Challenge random_challenge();

// Who answers a worker's HELLO.
enum class SessionRole : uint8_t {
  kCoordinator,  // a coordinator session: at most one per worker at a time
  kPeer,         // another worker of the same run (graph service), beside the coordinator's session
};
// "coordinator", "peer worker".
std::string_view role_name(SessionRole role);

// HMAC-SHA256(secret, "tessera-v1-coordinator" | worker_challenge | coordinator_challenge)
Mac coordinator_mac(std::string_view secret, const Challenge& worker_challenge,
                    const Challenge& coordinator_challenge);
// HMAC-SHA256(secret, "tessera-v2-peer" | worker_challenge | peer_challenge): AUTH's MAC from a
// worker that opens a peer link to the worker that sent HELLO.
Mac peer_mac(std::string_view secret, const Challenge& worker_challenge, const Challenge& peer_challenge);
// AUTH's MAC for `role`: coordinator_mac or peer_mac.
Mac client_mac(SessionRole role, std::string_view secret, const Challenge& worker_challenge,
               const Challenge& client_challenge);
// HMAC-SHA256(secret, "tessera-v1-worker" | coordinator_challenge | worker_challenge)
Mac worker_mac(std::string_view secret, const Challenge& coordinator_challenge,
               const Challenge& worker_challenge);

// HMAC-SHA256(key, data); the building block of both MACs, exposed for known-answer tests.
Mac hmac_sha256(std::string_view key, std::string_view data);

// Constant-time comparison.
bool mac_equal(const Mac& a, const Mac& b);

// A new cluster secret: kSecretBytes random bytes (OpenSSL RAND_bytes) as lowercase hex digits,
// the text `tessera keygen` writes (plus a newline) and read_secret_file reads back unchanged.
// IoError when the random generator fails (no entropy), never a weak secret.
inline constexpr std::size_t kSecretBytes = 32;
Result<std::string> generate_secret();

// Reads a secret file: content with trailing whitespace removed. Fails with kIoError if missing,
// unreadable, not a regular file, empty, or longer than 4096 bytes, and with kInvalidConfig when it is not
// private (core's check_private_path: others can read or change it, or another user owns it; the
// message gives the chmod/chown that fixes it); every message names the file.
Result<std::string> read_secret_file(const std::string& path);

}  // namespace tessera::transport
