#include "tessera/transport/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "tessera/core/files.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::transport {
namespace {

constexpr std::size_t kMaxSecretBytes = 4096;
// A secret file is a line of text; anything much bigger is the wrong file.
constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;

constexpr std::string_view kCoordinatorLabel = "tessera-v1-coordinator";
constexpr std::string_view kWorkerLabel = "tessera-v1-worker";
constexpr std::string_view kPeerLabel = "tessera-v2-peer";

// Without working randomness or HMAC no session can be authenticated safely, and these functions
// have no error channel: stop loudly instead of handing out predictable challenges.
[[noreturn]] void crypto_failure(const char* what) {
  std::fprintf(stderr, "tessera: fatal: OpenSSL %s failed\n", what);
  std::abort();
}

Mac labelled_mac(std::string_view secret, std::string_view label, const Challenge& first, const Challenge& second) {
  std::string data;
  data.reserve(label.size() + first.size() + second.size());
  data.append(label);
  data.append(reinterpret_cast<const char*>(first.data()), first.size());
  data.append(reinterpret_cast<const char*>(second.data()), second.size());
  return hmac_sha256(secret, data);
}

}  // namespace

Challenge random_challenge() {
  Challenge challenge{};
  if (RAND_bytes(challenge.data(), static_cast<int>(challenge.size())) != 1) crypto_failure("RAND_bytes");
  return challenge;
}

Result<std::string> generate_secret() {
  std::array<unsigned char, kSecretBytes> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return io_error("cannot make a secret: OpenSSL RAND_bytes has no randomness to give");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string secret;
  secret.reserve(2 * bytes.size());
  for (const unsigned char byte : bytes) {
    secret.push_back(kHex[byte >> 4]);
    secret.push_back(kHex[byte & 0x0f]);
  }
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return secret;
}

Mac hmac_sha256(std::string_view key, std::string_view data) {
  // OpenSSL rejects a null key pointer even with length 0, which an empty string_view may carry.
  static const unsigned char kEmpty[1] = {0};
  const auto* key_bytes = key.empty() ? kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  if (key.size() > static_cast<std::size_t>(INT_MAX)) crypto_failure("HMAC (key too long)");
  Mac mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key_bytes, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
           data.size(), mac.data(), &length) == nullptr ||
      length != mac.size()) {
    crypto_failure("HMAC-SHA256");
  }
  return mac;
}

Mac coordinator_mac(std::string_view secret, const Challenge& worker_challenge, const Challenge& coordinator_challenge) {
  return labelled_mac(secret, kCoordinatorLabel, worker_challenge, coordinator_challenge);
}

Mac peer_mac(std::string_view secret, const Challenge& worker_challenge, const Challenge& peer_challenge) {
  return labelled_mac(secret, kPeerLabel, worker_challenge, peer_challenge);
}

Mac client_mac(SessionRole role, std::string_view secret, const Challenge& worker_challenge,
               const Challenge& client_challenge) {
  return role == SessionRole::kPeer ? peer_mac(secret, worker_challenge, client_challenge)
                                    : coordinator_mac(secret, worker_challenge, client_challenge);
}

std::string_view role_name(SessionRole role) {
  return role == SessionRole::kPeer ? "peer worker" : "coordinator";
}

Mac worker_mac(std::string_view secret, const Challenge& coordinator_challenge, const Challenge& worker_challenge) {
  return labelled_mac(secret, kWorkerLabel, coordinator_challenge, worker_challenge);
}

bool mac_equal(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

Result<std::string> read_secret_file(const std::string& path) {
  // Refused unless private (core's check, shared with the coordinator's secret_file and the run
  // directory), and never read past the cap: a FIFO or /dev/zero is refused by what it is.
  Result<std::string> read = read_private_file(path, kMaxSecretFileBytes, "secret file");
  if (!read) {
    // A secret others can read keeps its own code (the fix is chmod, not the path); any other
    // failure to get the bytes is an I/O error, as it always was for this function.
    if (read.status().code() == StatusCode::kInvalidConfig) return read.status();
    return io_error(read.status().message());
  }
  std::string content = std::move(*read);
  while (!content.empty() && std::string_view(" \t\r\n\v\f").find(content.back()) != std::string_view::npos) content.pop_back();
  if (content.size() > kMaxSecretBytes) {
    return io_error("secret file '" + printable(path) + "': longer than " + std::to_string(kMaxSecretBytes) +
                    " bytes; is this the right file?");
  }
  if (content.empty()) {
    return io_error("secret file '" + printable(path) + "': empty; put the shared secret on its first line");
  }
  return content;
}

}  // namespace tessera::transport
