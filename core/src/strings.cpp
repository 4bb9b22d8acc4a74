#include "tessera/core/strings.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace tessera {
namespace {

bool same_letter(char a, char b) {
  return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
}

// printable() and printable_message() in one: `keep_newlines` is their only difference.
std::string escaped(std::string_view text, bool keep_newlines) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  const auto escape = [&](unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0x0f];
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if ((byte < 0x20 && !(keep_newlines && byte == '\n')) || byte == 0x7f) {
        escape(byte);
      } else {
        out += static_cast<char>(byte);
      }
      ++i;
      continue;
    }
    // The length of the sequence the lead byte announces, and the range its second byte must be
    // in (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;
    if (byte >= 0xc2 && byte <= 0xdf) {
      length = 2;
    } else if (byte >= 0xe0 && byte <= 0xef) {
      length = 3;
      if (byte == 0xe0) low = 0xa0;
      if (byte == 0xed) high = 0x9f;
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      length = 4;
      if (byte == 0xf0) low = 0x90;
      if (byte == 0xf4) high = 0x8f;
    }
    bool valid = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = k == 1 ? next >= low && next <= high : next >= 0x80 && next <= 0xbf;
    }
    if (!valid) {
      escape(byte);
      ++i;
      continue;
    }
    // U+0080..U+009F (C2 80..C2 9F) are the C1 controls: U+009B is CSI, the same as ESC [, to a
    // terminal that honours 8-bit controls. Both bytes are escaped, as for any other control.
    if (byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      escape(byte);
      escape(static_cast<unsigned char>(text[i + 1]));
      i += 2;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace

std::string printable(std::string_view text) { return escaped(text, /*keep_newlines=*/false); }

std::string printable_message(std::string_view text) { return escaped(text, /*keep_newlines=*/true); }

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = previous[j - 1] + (same_letter(a[i - 1], b[j - 1]) ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string_view closest_match(std::string_view word, std::span<const std::string> candidates) {
  std::string_view best;
  std::size_t best_distance = std::string::npos;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  const std::size_t limit = std::max<std::size_t>(1, std::max(word.size(), best.size()) / 3);
  return best_distance <= limit ? best : std::string_view();
}

}  // namespace tessera
