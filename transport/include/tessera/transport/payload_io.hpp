// Field-by-field payload encoding and decoding, shared by the wire codecs (transport's own in
// protocol.cpp, the GEMM service's in gemm/codec.hpp, the graph service's in graph/wire_codec.hpp) so every message is written and
// checked the same way: little-endian whatever the host, strings as u16 length + bytes, and
// decoders that name the message, field and value when they refuse, checking each length against
// the bytes actually present before anything is copied.
// Values; thread-compatible (one writer or reader per object).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::transport {

// Longest string the encoder emits; decoders enforce Limits::max_string_bytes (4096 by default).
inline constexpr std::size_t kMaxEncodedStringBytes = Limits{}.max_string_bytes;

// kProtocolError "<message>: <detail>", the form of every payload refusal.
inline Status field_error(std::string_view message, std::string_view detail) {
  return protocol_error(std::string(message) + ": " + std::string(detail));
}

// kProtocolError "<message>: <field> <value> out of range <low>..<high>".
inline Status out_of_range(std::string_view message, std::string_view field, uint64_t value, uint64_t low,
                           uint64_t high) {
  return field_error(message, std::string(field) + " " + std::to_string(value) + " out of range " +
                                  std::to_string(low) + ".." + std::to_string(high));
}

// "0x0000beef": a 32-bit value (a magic, a checksum) as a message quotes it.
inline std::string hex32(uint32_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += kDigits[(value >> shift) & 0xF];
  return out;
}

// Writes the low `size` bytes of `value`, little-endian, at `offset` of a fixed-size prefix.
template <std::size_t N>
void store_le(std::array<std::byte, N>& out, std::size_t offset, uint64_t value, int size) {
  for (int i = 0; i < size; ++i) out[offset + static_cast<std::size_t>(i)] = static_cast<std::byte>(value >> (8 * i));
}

// The little-endian unsigned integer of `size` bytes at `data`.
inline uint64_t load_le(const std::byte* data, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) value = (value << 8) | std::to_integer<uint64_t>(data[i]);
  return value;
}

// Appends fields to a payload in order.
class PayloadWriter {
 public:
  explicit PayloadWriter(std::size_t expected_size) { bytes_.reserve(expected_size); }

  void u8(uint8_t value) { bytes_.push_back(static_cast<std::byte>(value)); }
  void u16(uint16_t value) { put_le(value, 2); }
  void u32(uint32_t value) { put_le(value, 4); }
  void u64(uint64_t value) { put_le(value, 8); }
  void f64(double value) { put_le(std::bit_cast<uint64_t>(value), 8); }
  void zeros(std::size_t count) { bytes_.insert(bytes_.end(), count, std::byte{0}); }
  void raw(const uint8_t* data, std::size_t size) {
    const auto* first = reinterpret_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), first, first + size);
  }
  void raw(std::span<const std::byte> bytes) { bytes_.insert(bytes_.end(), bytes.begin(), bytes.end()); }
  template <std::size_t N>
  void array(const std::array<uint8_t, N>& value) { raw(value.data(), N); }

  // Over-long strings are cut (at a UTF-8 character boundary) rather than failing: they are
  // names and error texts, and a shortened reason is better than none.
  void string(const std::string& value) {
    std::size_t size = value.size();
    if (size > kMaxEncodedStringBytes) {
      size = kMaxEncodedStringBytes;
      while (size > 0 && (static_cast<uint8_t>(value[size]) & 0xC0) == 0x80) --size;
    }
    u16(static_cast<uint16_t>(size));
    raw(reinterpret_cast<const uint8_t*>(value.data()), size);
  }

  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  void put_le(uint64_t value, int size) {
    for (int i = 0; i < size; ++i) bytes_.push_back(static_cast<std::byte>(value >> (8 * i)));
  }
  std::vector<std::byte> bytes_;
};

// Reads fields in order; the first failure is kept and every later read fails too, so a decoder
// can chain reads and check once. `message` (the name errors start with) is viewed, not copied:
// it must outlive the reader, as a string literal does.
class PayloadReader {
 public:
  PayloadReader(std::string_view message, std::span<const std::byte> payload)
      : message_(message), payload_(payload) {}

  bool u8(std::string_view field, uint8_t& out) { return get(field, 1, out); }
  bool u16(std::string_view field, uint16_t& out) { return get(field, 2, out); }
  bool u32(std::string_view field, uint32_t& out) { return get(field, 4, out); }
  bool u64(std::string_view field, uint64_t& out) { return get(field, 8, out); }
  // One byte that must be 0 or 1 ("linked 2 is neither 0 nor 1" otherwise).
  bool boolean(std::string_view field, bool& out) {
    uint8_t value = 0;
    if (!u8(field, value)) return false;
    if (value > 1) return fail(std::string(field) + " " + std::to_string(value) + " is neither 0 nor 1");
    out = value == 1;
    return true;
  }
  bool f64(std::string_view field, double& out) {
    uint64_t bits = 0;
    if (!get(field, 8, bits)) return false;
    out = std::bit_cast<double>(bits);
    return true;
  }

  template <std::size_t N>
  bool array(std::string_view field, std::array<uint8_t, N>& out) {
    if (!take(field, N)) return false;
    std::memcpy(out.data(), payload_.data() + offset_ - N, N);
    return true;
  }

  bool zero_padding(std::string_view field, std::size_t size) {
    if (!take(field, size)) return false;
    for (std::size_t i = offset_ - size; i < offset_; ++i) {
      if (payload_[i] != std::byte{0}) {
        return fail(std::string(field) + " byte " + std::to_string(i - (offset_ - size)) + " is " +
                    std::to_string(std::to_integer<unsigned>(payload_[i])) + ", must be 0");
      }
    }
    return true;
  }

  bool string(std::string_view field, uint32_t max_bytes, std::string& out) {
    uint16_t size = 0;
    if (!u16(field, size)) return false;
    if (size > max_bytes) {
      return fail(std::string(field) + " length " + std::to_string(size) + " out of range 0.." +
                  std::to_string(max_bytes));
    }
    if (!take(field, size)) return false;
    out.assign(reinterpret_cast<const char*>(payload_.data() + offset_ - size), size);
    return true;
  }

  // A u32 length followed by that many bytes, at most max_bytes.
  bool byte_vector(std::string_view field, uint32_t max_bytes, std::vector<uint8_t>& out) {
    uint32_t size = 0;
    const std::string length_field = std::string(field) + "_length";
    if (!u32(length_field, size)) return false;
    if (size > max_bytes) {
      return fail(length_field + " " + std::to_string(size) + " out of range 0.." + std::to_string(max_bytes));
    }
    if (!take(field, size)) return false;
    const auto* first = reinterpret_cast<const uint8_t*>(payload_.data() + offset_ - size);
    out.assign(first, first + size);
    return true;
  }

  // The next `size` bytes, viewed in place (bulk arrays a decoder copies out itself).
  bool bytes(std::string_view field, std::size_t size, std::span<const std::byte>& out) {
    if (!take(field, size)) return false;
    out = payload_.subspan(offset_ - size, size);
    return true;
  }

  // Everything read; nothing may follow.
  bool finish() {
    if (!status_.is_ok()) return false;
    if (offset_ != payload_.size()) {
      return fail(std::to_string(payload_.size() - offset_) + " trailing bytes after the last field (payload " +
                  std::to_string(payload_.size()) + " bytes, message ends at " + std::to_string(offset_) + ")");
    }
    return true;
  }

  bool fail(std::string detail) {
    if (status_.is_ok()) status_ = field_error(message_, detail);
    return false;
  }

  std::size_t offset() const { return offset_; }
  std::size_t remaining() const { return payload_.size() - offset_; }
  const Status& status() const { return status_; }

 private:
  bool take(std::string_view field, std::size_t size) {
    if (!status_.is_ok()) return false;
    if (size > payload_.size() - offset_) {
      return fail("truncated at " + std::string(field) + ": needs " + std::to_string(size) + " bytes at offset " +
                  std::to_string(offset_) + ", payload has " + std::to_string(payload_.size()));
    }
    offset_ += size;
    return true;
  }

  template <typename T>
  bool get(std::string_view field, int size, T& out) {
    if (!take(field, static_cast<std::size_t>(size))) return false;
    out = static_cast<T>(load_le(payload_.data() + offset_ - static_cast<std::size_t>(size), size));
    return true;
  }

  std::string_view message_;
  std::span<const std::byte> payload_;
  std::size_t offset_ = 0;
  Status status_;
};

}  // namespace tessera::transport
