#include "tessera/transport/block_key.hpp"

#include <bit>
#include <cstring>

#include <openssl/evp.h>

#include "tessera/core/strings.hpp"

namespace tessera::transport {

static_assert(std::endian::native == std::endian::little, "block keys hash doubles as they lie in memory");

Result<BlockKey> block_key(uint32_t rows, uint32_t cols, std::span<const double> values) {
  // "tessera-block-v1" | rows (u32 LE) | cols (u32 LE) | values
  std::array<unsigned char, 24> prefix{};
  std::memcpy(prefix.data(), "tessera-block-v1", 16);
  std::memcpy(prefix.data() + 16, &rows, 4);
  std::memcpy(prefix.data() + 20, &cols, 4);
  BlockKey key;
  unsigned int length = 0;
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  const bool ok = context != nullptr && EVP_DigestInit_ex(context, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(context, prefix.data(), prefix.size()) == 1 &&
                  EVP_DigestUpdate(context, values.data(), values.size_bytes()) == 1 &&
                  EVP_DigestFinal_ex(context, reinterpret_cast<unsigned char*>(key.digest.data()), &length) == 1 &&
                  length == key.digest.size();
  EVP_MD_CTX_free(context);
  // SHA-256 from the default provider fails only for lack of memory; a zero key would name every
  // block alike, so the failure is the answer.
  if (!ok) return internal_error("SHA-256 of a block failed (out of memory?)");
  return key;
}

std::string to_hex(const BlockKey& key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * key.digest.size());
  for (std::byte b : key.digest) {
    hex += kDigits[std::to_integer<unsigned>(b) >> 4];
    hex += kDigits[std::to_integer<unsigned>(b) & 0xF];
  }
  return hex;
}

Result<BlockKey> block_key_from_hex(std::string_view hex) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  BlockKey key;
  bool ok = hex.size() == 2 * key.digest.size();
  for (std::size_t i = 0; ok && i < key.digest.size(); ++i) {
    const int high = digit(hex[2 * i]);
    const int low = digit(hex[2 * i + 1]);
    ok = high >= 0 && low >= 0;
    if (ok) key.digest[i] = static_cast<std::byte>(high * 16 + low);
  }
  if (!ok) return invalid_argument("'" + printable(hex) + "' is not a block key (64 lowercase hex digits)");
  return key;
}

}  // namespace tessera::transport
