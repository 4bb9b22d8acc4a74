#include "tessera/transport/tls.hpp"

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessera::transport {

std::string_view wire_mode_name(WireMode mode) {
  switch (mode) {
    case WireMode::kPlain: return "plain";
    case WireMode::kEncrypted: return "encrypted";
  }
  return "plain";
}

Result<WireMode> parse_wire_mode(std::string_view text) {
  if (text == "plain") return WireMode::kPlain;
  if (text == "encrypted") return WireMode::kEncrypted;
  return invalid_argument("wire mode '" + std::string(text) + "' is not one of: plain, encrypted");
}

TlsKey derive_tls_key(std::string_view secret) {
  static constexpr std::string_view kInfo = "tessera tls 1.3 external psk v1";
  TlsKey key{};
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, OSSL_KDF_NAME_HKDF, nullptr);
  EVP_KDF_CTX* context = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()), secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(kInfo.data()), kInfo.size()),
      OSSL_PARAM_construct_end()};
  const bool derived = context != nullptr && EVP_KDF_derive(context, key.data(), key.size(), params) == 1;
  EVP_KDF_CTX_free(context);
  EVP_KDF_free(kdf);
  // Like the HMAC of the handshake, this has no error channel: a key that is not derived from
  // the secret must never be used, so stop loudly.
  if (!derived) {
    std::fprintf(stderr, "tessera: fatal: OpenSSL HKDF failed\n");
    std::abort();
  }
  return key;
}

}  // namespace tessera::transport
