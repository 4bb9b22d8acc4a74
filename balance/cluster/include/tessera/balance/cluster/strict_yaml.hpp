// Strict YAML: the one reader for the YAML files people and Tessera write (cluster files, study
// files, saved profiles), so that all three refuse the same mistakes with the same messages.
//
// yaml-cpp accepts what nobody meant: a key written twice (lookups silently return the first), a
// mistyped key (ignored), a value of the wrong type (converted, or defaulted by as<T>(fallback)).
// Here:
//   - read_yaml_file reads at most kMaxYamlFileBytes; read_yaml parses, refuses a repeated key in
//     any mapping at any depth, then hands the root to the caller's reader;
//   - YamlMap checks a mapping's keys against the allowed ones ("unknown key 'nodez' in the top
//     level; valid keys are ...; did you mean 'nodes'?") and keeps each key's line;
//   - the typed getters fail naming the key, what was written and an example of what to write.
// Every message reads "SOURCE:LINE: what is wrong; what to write instead".
//
// The checks throw YamlError, which only ever travels inside read_yaml: a reader throws it (also
// through fail_at for its own checks) and read_yaml returns it as a kInvalidConfig Status, so
// walking a tree reads as straight-line code and nothing escapes the module. Values; no shared
// state; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tessera/core/status.hpp"

namespace tessera::balance::cluster {

inline constexpr std::size_t kMaxYamlFileBytes = std::size_t{1} << 20;  // 1 MiB
inline constexpr int kMaxYamlDepth = 64;  // nesting; deeper means a mistake or an alias loop

// One problem in a document: the 1-based line and "what is wrong; what to write instead".
struct YamlError {
  int line = 1;
  std::string message;
};
[[noreturn]] void fail_at(int line, std::string message);

// The file's bytes, at most kMaxYamlFileBytes. `kind` names the file in messages ("cluster
// file"): kIoError when it cannot be opened or read, kResourceExhausted when it is larger.
Result<std::string> read_yaml_file(const std::string& path, std::string_view kind);

// Parses `text` (one document), refuses a control byte (NUL, ESC, ...: the file is not text), a
// key repeated anywhere, a YAML tag on any node, or nesting deeper than kMaxYamlDepth, then calls
// read(root); root may be null for an empty document. Every message is printable() (yaml-cpp's
// own syntax errors too), so no byte of the file reaches a terminal raw. A YamlError from
// `read`, and any yaml-cpp error, come back as kInvalidConfig "SOURCE:LINE: message", with
// " (remedy)" appended when `remedy` is given. Never throws.
Status read_yaml(std::string_view text, const std::string& source_name,
                 const std::function<void(const YAML::Node& root)>& read, std::string_view remedy = {});

// 1-based line of `node`; `fallback` for nodes yaml-cpp synthesised (they have no mark).
int yaml_line(const YAML::Node& node, int fallback);
// "'text'"
std::string single_quoted(std::string_view text);
// What a value is, for messages: "'8080'" for a scalar, "a list", "a mapping", "nothing".
std::string describe_yaml(const YAML::Node& value);

// Strict number parsing: decimal digits only (an optional leading '+'); no sign, hex or "80.0".
std::optional<uint64_t> parse_unsigned(std::string_view text);
// A finite decimal number (an optional leading '+'); no "nan", "inf" or trailing text.
std::optional<double> parse_number(std::string_view text);

// Fails at `line` when `number` is written with a leading zero ("016513", "-05.5"): YAML 1.1
// reads such a number as octal and YAML 1.2 as decimal, so it means different things to
// different tools. The message is `said` (what was written: "node 'a' has port: 016513"), why,
// and the number without the zero ("write port: 16513"; just "write 16513" when `key` is empty).
// The typed getters below call it on every number they read.
void refuse_leading_zero(std::string_view number, int line, std::string_view said, std::string_view key);

// The values a number may take, and how a message writes them: "(0, 64]", "[0, 100]".
struct NumberRange {
  double low = 0;
  double high = 0;
  bool low_included = true;
  bool high_included = true;
  bool contains(double value) const;
  std::string to_string() const;
};

// Typed reads of one value; `key` and `where` ("node 'pi1'") name it in the message, `example`
// is a valid value shown in the fix ("key: example"). Each fails at `line` when the value is not
// what it must be, and a number also when it has a leading zero (refuse_leading_zero). A tag on
// any value (`!!binary`, `!secret`) is refused before, by read_yaml.
// Non-empty text: "node 'a' has kind a list; kind must be non-empty text, e.g. kind: pi".
std::string yaml_text(const YAML::Node& value, int line, std::string_view key, std::string_view where,
                      std::string_view example);
// An integer low..high: "node 'a' has port: 70000, out of range; port must be an integer 1..65535, e.g. port: 7070".
uint64_t yaml_integer(const YAML::Node& value, int line, std::string_view key, std::string_view where, uint64_t low,
                      uint64_t high, std::string_view example);
// A number in `range`: "... has cpu: 65; cpu must be a number in (0, 64], e.g. cpu: 1.5".
double yaml_number(const YAML::Node& value, int line, std::string_view key, std::string_view where,
                   const NumberRange& range, std::string_view example);

// A mapping whose keys have been checked: every key a plain name from `allowed`. Keys are kept
// with their lines, in key order. Lookups never fail; the getters fail on a value of the wrong
// type and return nullopt for an absent key, so the caller decides what absence means.
class YamlMap {
 public:
  struct Entry {
    int line = 0;
    YAML::Node value;
  };

  // REQUIRES: `map` is a mapping (check IsMap() first: the message for something else belongs to
  // the caller, who knows what the mapping should look like). `line` is the mapping's own line
  // (used for nodes without marks); `where` names it in messages ("the top level", "node 'pi1'").
  YamlMap(const YAML::Node& map, int line, std::vector<std::string> allowed, std::string where);

  const Entry* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const std::map<std::string, Entry, std::less<>>& entries() const& { return entries_; }
  void entries() && = delete;  // `for (... : YamlMap(...).entries())` would iterate a dead map
  int line() const { return line_; }
  const std::string& where() const { return where_; }

  // Fails at the mapping's line: "WHERE has no KEY; add KEY: EXAMPLE".
  [[noreturn]] void fail_missing(std::string_view key, std::string_view example) const;

  std::optional<std::string> text(std::string_view key, std::string_view example) const;  // non-empty
  std::optional<std::string> text_or_empty(std::string_view key) const;                  // any scalar
  std::optional<uint64_t> integer(std::string_view key, uint64_t low, uint64_t high, std::string_view example) const;
  std::optional<double> number(std::string_view key, const NumberRange& range, std::string_view example) const;
  std::optional<bool> boolean(std::string_view key) const;  // true or false
  // A non-empty list; each item with its line. "sizes is 'x'; sizes must be a list, e.g. sizes: [2048]".
  std::optional<std::vector<Entry>> list(std::string_view key, std::string_view example) const;
  // A non-empty list of integers low..high, each checked at its own line.
  std::optional<std::vector<uint64_t>> integer_list(std::string_view key, uint64_t low, uint64_t high,
                                                    std::string_view example) const;
  // A non-empty list of numbers in `range`, each checked at its own line.
  std::optional<std::vector<double>> number_list(std::string_view key, const NumberRange& range,
                                                 std::string_view example) const;

 private:
  int line_;
  std::string where_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace tessera::balance::cluster
