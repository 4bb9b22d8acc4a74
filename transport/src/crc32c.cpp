// Two implementations of one function, chosen once per process: the SSE4.2 instruction folds 8
// bytes per instruction and the slicing-by-8 table fallback 8 bytes per eight lookups, both faster
// than any link we run delivers (a Pi's gigabit link included), so checking never becomes the
// bottleneck of a transfer.
#include "tessera/transport/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define TESSERA_CRC32C_X86 1
#endif

namespace tessera::transport {

namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, reflected

// tables[0] is the classic byte table; tables[j] advances a byte j positions further, so eight
// bytes are folded per step (slicing-by-8).
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> tables{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? kPolynomial : 0u);
    tables[0][i] = crc;
  }
  for (std::size_t j = 1; j < 8; ++j) {
    for (uint32_t i = 0; i < 256; ++i) tables[j][i] = (tables[j - 1][i] >> 8) ^ tables[0][tables[j - 1][i] & 0xFFu];
  }
  return tables;
}
constexpr auto kTables = make_tables();

uint32_t update_portable(uint32_t crc, const std::byte* data, std::size_t size) {
  while (size >= 8) {
    uint64_t word = 0;
    std::memcpy(&word, data, 8);  // little-endian hosts only, as the wire format (protocol.cpp)
    word ^= crc;
    crc = kTables[7][word & 0xFF] ^ kTables[6][(word >> 8) & 0xFF] ^ kTables[5][(word >> 16) & 0xFF] ^
          kTables[4][(word >> 24) & 0xFF] ^ kTables[3][(word >> 32) & 0xFF] ^ kTables[2][(word >> 40) & 0xFF] ^
          kTables[1][(word >> 48) & 0xFF] ^ kTables[0][word >> 56];
    data += 8;
    size -= 8;
  }
  for (std::size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ kTables[0][(crc ^ std::to_integer<uint32_t>(data[i])) & 0xFFu];
  return crc;
}

#ifdef TESSERA_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t update_sse42(uint32_t crc, const std::byte* data, std::size_t size) {
  uint64_t state = crc;
  while (size >= 8) {
    uint64_t word = 0;
    std::memcpy(&word, data, 8);
    state = _mm_crc32_u64(state, word);
    data += 8;
    size -= 8;
  }
  auto crc32 = static_cast<uint32_t>(state);
  for (std::size_t i = 0; i < size; ++i) crc32 = _mm_crc32_u8(crc32, std::to_integer<uint8_t>(data[i]));
  return crc32;
}
#endif

using UpdateFunction = uint32_t (*)(uint32_t, const std::byte*, std::size_t);

UpdateFunction pick_update() {
#ifdef TESSERA_CRC32C_X86
  if (__builtin_cpu_supports("sse4.2")) return update_sse42;
#endif
  return update_portable;
}

// A function-local static, so a static initializer elsewhere cannot see it unset.
UpdateFunction update_function() {
  static const UpdateFunction chosen = pick_update();
  return chosen;
}

}  // namespace

void Crc32c::update(std::span<const std::byte> bytes) {
  state_ = update_function()(state_, bytes.data(), bytes.size());
}

uint32_t crc32c(std::span<const std::byte> bytes) {
  Crc32c crc;
  crc.update(bytes);
  return crc.value();
}

const char* crc32c_implementation() {
#ifdef TESSERA_CRC32C_X86
  if (update_function() == update_sse42) return "hardware (SSE4.2)";
#endif
  return "portable table";
}

namespace detail {
// For tests: the portable path regardless of the CPU, so both implementations are checked.
uint32_t crc32c_portable(std::span<const std::byte> bytes) { return ~update_portable(0xFFFFFFFFu, bytes.data(), bytes.size()); }
}  // namespace detail

}  // namespace tessera::transport
