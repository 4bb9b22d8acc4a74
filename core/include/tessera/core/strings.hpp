// Small string helpers shared by every module: joining lists for messages, the "did you mean"
// suggestion for a mistyped name, and making text read from a file safe to print.
//
// Pure functions over values the caller owns; nothing is retained. Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

// The items written one after another with `separator` between them ("a, b, c"); "" for none.
// `format` turns an item into something a std::string can append (a string, string_view or
// char*); by default the item itself, so a list of strings needs no formatter.
template <std::ranges::input_range Range, typename Format = std::identity>
std::string join(const Range& items, std::string_view separator, Format format = {}) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    first = false;
    out += std::invoke(format, item);
  }
  return out;
}

// Levenshtein distance ignoring ASCII case: "Thread" and "threads" are 1 apart.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate that `word` is most plausibly a typo of, or "" when none is close: within a third
// of the longer word's length (at least 1), which keeps "thread" -> "threads" but not
// "colour" -> "cluster". The view refers into `candidates`.
std::string_view closest_match(std::string_view word, std::span<const std::string> candidates);

// `text` as it may appear in a message: valid UTF-8 is kept, every byte that is not part of a
// valid UTF-8 sequence, and every control character (tab, newline, escape, DEL, and the C1
// controls U+0080..U+009F, which some terminals take for escapes too), is written as \xNN, one
// per byte. Text read from a file (a name, a key, a value, a path) goes through this before it is
// quoted, so a message never puts raw bytes or terminal escapes on someone's screen. Backslashes
// are kept, so what it returns comes back unchanged: printable(printable(t)) == printable(t).
std::string printable(std::string_view text);

// A whole message made safe for a terminal: printable(), but with its newlines kept, so a
// message of several lines still reads as lines. Idempotent like printable(): text already
// escaped (by printable() where it quoted a file) is returned unchanged. What the CLI prints on
// stderr goes through this, behind the quoting sites, in case one of them was missed.
std::string printable_message(std::string_view text);

}  // namespace tessera
