// CRC32C (Castagnoli, the iSCSI / RFC 3720 checksum): the check value STORE and RESULT carry over
// their matrix data, so a payload damaged between the sender's memory and the receiver's is
// refused instead of entering a product.
//
// Incremental: feed the bytes in any number of pieces, in order, through one Crc32c and read
// value() at the end; readers update it chunk by chunk as data arrives, so checking costs no copy.
// Uses the SSE4.2 crc32 instruction when the CPU has it (chosen once at run time) and a portable
// slicing-by-8 table otherwise; both give the same values. Pure: thread-safe, no state besides
// each object's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::transport {

class Crc32c {
 public:
  void update(std::span<const std::byte> bytes);
  void update(const void* data, std::size_t size) { update({static_cast<const std::byte*>(data), size}); }
  // The CRC32C of everything fed so far (0 for nothing).
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

// The CRC32C of `bytes` in one call.
uint32_t crc32c(std::span<const std::byte> bytes);

// "hardware (SSE4.2)" or "portable table": which implementation this process uses.
const char* crc32c_implementation();

namespace detail {
// The portable table path whatever the CPU has, so tests can hold both paths to the same values.
uint32_t crc32c_portable(std::span<const std::byte> bytes);
}  // namespace detail

}  // namespace tessera::transport
