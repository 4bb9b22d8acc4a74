#include "tessera/balance/cluster/strict_yaml.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>

#include "tessera/core/files.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::balance::cluster {
namespace {

// Aliases let a small file stand for a huge tree ("billion laughs"); the walk stops counting here.
constexpr std::size_t kMaxYamlValues = 1'000'000;

std::string where_of(const std::string& path) { return path.empty() ? "the top level" : path; }

// The 1-based line of byte `pos` of `text`.
int line_at(std::string_view text, std::size_t pos) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

// A YAML file is text (YAML 1.2, 5.1: no C0 control but tab, line feed and carriage return, no
// DEL). A NUL or an escape byte means a binary file or a corrupt one, and yaml-cpp would read it
// into a value or stumble over it with "unknown escape character"; refuse it by name instead.
// Bytes that are not UTF-8 are left to the parser: a Latin-1 name is a mistake the checks below
// quote (escaped), not binary content.
void check_is_text(std::string_view text) {
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte >= 0x20 && byte != 0x7f) continue;
    if (byte == '\t' || byte == '\n' || byte == '\r') continue;
    // The ASCII names; tab, line feed and carriage return never get here.
    static constexpr std::array<const char*, 32> kNames = {
        "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS",  "HT", "LF",  "VT",  "FF", "CR",  "SO",  "SI",
        "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS",  "RS",  "US"};
    const char* name = byte == 0x7f ? "DEL" : kNames[byte];
    const int line = line_at(text, pos);
    fail_at(line, fmt::format("this line holds the byte {1} ({0}), and a YAML file is text; remove the {0} byte at "
                              "line {2} (a file that is binary throughout is not a Tessera YAML file: is it the right "
                              "one?)",
                              name, printable(text.substr(pos, 1)), line));
  }
}

// The first line where the document nests deeper than kMaxYamlDepth, for when yaml-cpp gives up
// on depth first (its own guard stops at a recursion depth of 500, a few hundred levels, and
// reports only "bad file", at a mark that is not where the nesting went too deep). Counts flow brackets outside quotes and comments, and
// block levels by indentation and "- " indicators; block scalars' lines are skipped. An
// estimate, asked only after yaml-cpp refused the depth, never to refuse a file it read.
std::optional<int> too_deep_line(std::string_view text) {
  std::vector<std::size_t> block_columns;  // the column of each open block level
  int flow_depth = 0;
  char quote = 0;                           // the open quote of a flow scalar, or 0
  // The indentation a block scalar's lines exceed; npos outside one. (Not an optional: g++ 12
  // warns that one may be read uninitialised.)
  std::size_t block_scalar = std::string_view::npos;
  int line = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view content = text.substr(start, end - start);
    start = end + 1;
    ++line;
    const std::size_t indent = std::min(content.find_first_not_of(' '), content.size());
    const bool blank = indent == content.size() || content[indent] == '#' || content[indent] == '\r';
    if (block_scalar != std::string_view::npos) {
      if (blank || indent > block_scalar) continue;
      block_scalar = std::string_view::npos;
    }
    if (blank && quote == 0) continue;
    std::size_t i = indent;
    if (quote == 0 && flow_depth == 0) {
      while (!block_columns.empty() && block_columns.back() > indent) block_columns.pop_back();
      if (block_columns.empty() || block_columns.back() < indent) block_columns.push_back(indent);
      // "- - x": every indicator opens a level of its own on the same line.
      while (i + 1 < content.size() && content[i] == '-' && (content[i + 1] == ' ' || content[i + 1] == '\t')) {
        i = std::min(content.find_first_not_of(" \t", i + 1), content.size());
        block_columns.push_back(i);
      }
    }
    if (static_cast<int>(block_columns.size()) + flow_depth > kMaxYamlDepth) return line;
    char last = 0;
    for (; i < content.size(); ++i) {
      const char c = content[i];
      if (quote != 0) {
        if (quote == '"' && c == '\\') {
          ++i;
        } else if (c == quote) {
          quote = 0;
        }
        continue;
      }
      if (c == '#' && (i == 0 || content[i - 1] == ' ' || content[i - 1] == '\t')) break;
      // A quote opens a quoted scalar only where a value starts ("it's" is plain text).
      if ((c == '"' || c == '\'') && (last == 0 || std::string_view(":-[{,?").find(last) != std::string_view::npos)) {
        quote = c;
      } else if (c == '[' || c == '{') {
        if (++flow_depth + static_cast<int>(block_columns.size()) > kMaxYamlDepth) return line;
      } else if ((c == ']' || c == '}') && flow_depth > 0) {
        --flow_depth;
      }
      if (c != ' ' && c != '\t' && c != '\r') last = c;
    }
    // "key: |" or "key: >-": the lines below, indented past this one, are the scalar's text.
    if (quote == 0 && flow_depth == 0 && (last == '|' || last == '>' || last == '-' || last == '+' ||
                                          std::isdigit(static_cast<unsigned char>(last)))) {
      const std::size_t indicator = content.find_last_of("|>");
      if (indicator != std::string_view::npos &&
          content.find_first_not_of("+-0123456789 \t\r", indicator + 1) == std::string_view::npos &&
          (indicator == 0 || content[indicator - 1] == ' ')) {
        block_scalar = indent;
      }
    }
  }
  return std::nullopt;
}

// The tag written on `node` ("!!binary", "!secret", "!<tag:x>"), or none. yaml-cpp gives every
// quoted scalar the tag "!", the same as a written "! x", so for a scalar what was written is read
// from the text at its mark, which is where its tag (or an anchor before it) starts. A block
// mapping's mark is its first key's, so for collections only the tag yaml-cpp resolved counts.
std::optional<std::string> written_tag(const YAML::Node& node, std::string_view text) {
  const int mark = node.Mark().pos;
  std::size_t at = mark >= 0 && node.IsScalar() ? static_cast<std::size_t>(mark) : text.size();
  if (at < text.size() && text[at] == '&') {  // "&anchor !tag value"
    at = std::min(text.find_first_of(" \t\r\n", at), text.size());
    at = std::min(text.find_first_not_of(" \t", at), text.size());
  }
  if (at < text.size() && text[at] == '!') {
    const std::size_t end = std::min(text.find_first_of(" \t\r\n,[]{}", at), text.size());
    return std::string(text.substr(at, end - at));
  }
  const std::string& tag = node.Tag();
  if (tag.empty() || tag == "?" || tag == "!") return std::nullopt;
  // Shown as it was most likely written: "tag:yaml.org,2002:map" is "!!map".
  constexpr std::string_view kCoreSchema = "tag:yaml.org,2002:";
  return tag.starts_with(kCoreSchema) ? "!!" + tag.substr(kCoreSchema.size()) : tag;
}

// yaml-cpp keeps a tag and then ignores it: `secret: !!binary aGk=` is read as the text "aGk=",
// not decoded. Tessera converts nothing by tag, so a tag would only ever be ignored; refuse it.
void check_untagged(const YAML::Node& node, std::string_view text, int line, const std::string& what) {
  const std::optional<std::string> tag = written_tag(node, text);
  if (!tag) return;
  fail_at(line, fmt::format("{} has the YAML tag {}; tags are not supported (Tessera would ignore it and read the "
                            "value as written): remove {} and write the value itself as plain text",
                            what, single_quoted(*tag), single_quoted(*tag)));
}

// yaml-cpp ends a quoted scalar that is never closed at the end of the file, without a word: the
// rest of the file becomes one value (`cluster: "lab` then read as a cluster named "lab secret: x
// nodes: ..."). A quoted scalar starts at its mark; refuse it when no closing quote follows.
void check_quote_closed(const YAML::Node& scalar, std::string_view text, int line) {
  const int start = scalar.Mark().pos;
  if (start < 0 || static_cast<std::size_t>(start) >= text.size()) return;
  const char quote = text[static_cast<std::size_t>(start)];
  if (quote != '"' && quote != '\'') return;
  for (std::size_t i = static_cast<std::size_t>(start) + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;  // an escape: the next character is never the closing quote
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside a single-quoted value
        continue;
      }
      return;
    }
  }
  fail_at(line, fmt::format("unterminated quote: the value that starts with {} here is never closed, so the rest of "
                            "the file would be read as part of it; add the closing {}",
                            quote, quote));
}

// yaml-cpp keeps every repeated key and its lookups return the first, so a repeated key would be
// ignored without a word; this walk refuses it wherever it is (and unterminated quotes and tags,
// above).
void check_unique_keys(const YAML::Node& node, const std::string& path, int depth, int parent_line,
                       std::size_t& values_left, std::string_view text) {
  const int line = yaml_line(node, parent_line);
  if (node.IsScalar()) check_quote_closed(node, text, line);
  check_untagged(node, text, line, where_of(path));
  if (depth > kMaxYamlDepth) {
    fail_at(line, fmt::format("{} nests deeper than {} levels; flatten it", where_of(path), kMaxYamlDepth));
  }
  if (values_left-- == 0) {
    fail_at(line, fmt::format("the document expands to more than {} values (aliases?); write it out plainly",
                              kMaxYamlValues));
  }
  if (node.IsMap()) {
    std::map<std::string, int, std::less<>> first_lines;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const int key_line = yaml_line(it->first, line);
      std::string child_path = path;
      if (it->first.IsScalar()) {
        const std::string& key = it->first.Scalar();
        if (auto [first, inserted] = first_lines.emplace(key, key_line); !inserted) {
          fail_at(key_line, fmt::format("key {} appears twice in {} (first on line {}); keep one",
                                        single_quoted(key), where_of(path), first->second));
        }
        child_path += (path.empty() ? "" : ".") + key;
      } else {
        check_unique_keys(it->first, path, depth + 1, key_line, values_left, text);
      }
      if (it->first.IsScalar()) {
        check_quote_closed(it->first, text, key_line);
        check_untagged(it->first, text, key_line,
                       "the key " + single_quoted(it->first.Scalar()) + " in " + where_of(path));
      }
      check_unique_keys(it->second, child_path, depth + 1, key_line, values_left, text);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      check_unique_keys(node[i], fmt::format("{}[{}]", path, i), depth + 1, line, values_left, text);
    }
  }
}

int mark_line(const YAML::Mark& mark) { return mark.line >= 0 ? mark.line + 1 : 1; }

// The 1-based line of the `---` that opens the document yaml-cpp says starts near `mark_line`
// (its mark is its first node, or past the end for an empty document): the nearest line at or
// before it that starts with `---` (or the line after a `...` that ends the previous one). A `---`
// in column 0 always marks a document (inside a block scalar it would have to be indented).
int document_start_line(std::string_view text, int mark_line) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (int line = std::min<int>(mark_line, static_cast<int>(lines.size())); line >= 1; --line) {
    const std::string_view content = lines[static_cast<std::size_t>(line - 1)];
    // After an explicit end (`...`) a document may start without `---`: it starts below the end.
    if (content.starts_with("...")) return std::min(line + 1, mark_line);
    if (content.starts_with("---") && (content.size() == 3 || content[3] == ' ' || content[3] == '\t' ||
                                       content[3] == '\r')) {
      return line;
    }
  }
  return mark_line;
}

std::string scalar_or_description(const YAML::Node& value) {
  return value.IsScalar() ? printable(value.Scalar()) : describe_yaml(value);
}

}  // namespace

void fail_at(int line, std::string message) { throw YamlError{line, std::move(message)}; }

Result<std::string> read_yaml_file(const std::string& path, std::string_view kind) {
  // A FIFO, a directory or a device (/dev/zero, /dev/stdin) is refused by what it is, before a
  // read that could block forever; the cap below bounds what a regular file can make us hold.
  Result<std::string> text = read_regular_file(path, kMaxYamlFileBytes, kind);
  if (text) return text;
  if (text.status().code() == StatusCode::kResourceExhausted) {
    return resource_exhausted(fmt::format("{} {} is larger than {} KiB, the most a Tessera YAML file may be; "
                                          "is it the right file?",
                                          kind, single_quoted(path), kMaxYamlFileBytes / 1024));
  }
  return text.status();
}

Status read_yaml(std::string_view text, const std::string& source_name,
                 const std::function<void(const YAML::Node& root)>& read, std::string_view remedy) {
  const std::string suffix = remedy.empty() ? "" : fmt::format(" ({})", remedy);
  auto at = [&](int line, const std::string& message) {
    return invalid_config(fmt::format("{}:{}: {}{}", printable(source_name), line, message, suffix));
  };
  try {
    check_is_text(text);
    // LoadAll, not Load: Load silently returns the first of several documents (`---`), and the
    // rest of the file would be ignored.
    const std::vector<YAML::Node> documents = YAML::LoadAll(std::string(text));
    if (documents.size() > 1) {
      const int second = document_start_line(text, mark_line(documents[1].Mark()));
      return at(second, "a second YAML document starts here; a Tessera file holds one document: remove this '---' "
                        "line and merge what follows into the first document, or move it to a file of its own");
    }
    const YAML::Node root = documents.empty() ? YAML::Node() : documents.front();
    std::size_t values_left = kMaxYamlValues;
    check_unique_keys(root, "", 0, 1, values_left, text);
    read(root);
    return Status::ok();
  } catch (const YamlError& e) {
    return at(e.line, e.message);
  } catch (const YAML::DeepRecursion& e) {
    // What check_unique_keys says of nesting yaml-cpp could read, said of deeper nesting too.
    return at(too_deep_line(text).value_or(mark_line(e.mark)),
              fmt::format("the document nests deeper than {} levels here; flatten it", kMaxYamlDepth));
  } catch (const YAML::ParserException& e) {
    // yaml-cpp's messages quote the byte it stumbled on ("unknown escape character: X") raw.
    return at(mark_line(e.mark),
              "YAML syntax error: " + printable(e.msg) + "; check the indentation, colons and brackets there");
  } catch (const YAML::Exception& e) {
    return at(mark_line(e.mark),
              "cannot read the YAML: " + printable(e.msg) + "; simplify the file to plain keys and lists");
  } catch (const std::exception& e) {
    return at(1, "cannot read the YAML: " + printable(e.what()));
  }
}

int yaml_line(const YAML::Node& node, int fallback) {
  const int line = node.Mark().line;
  return line >= 0 ? line + 1 : fallback;
}

// Every key, value and name a message quotes passes through here, so bytes from a file never
// reach a terminal raw.
std::string single_quoted(std::string_view text) { return fmt::format("'{}'", printable(text)); }

std::string describe_yaml(const YAML::Node& value) {
  if (value.IsScalar()) return single_quoted(value.Scalar());
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a mapping";
  return "nothing";
}

std::optional<uint64_t> parse_unsigned(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_number(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

void refuse_leading_zero(std::string_view number, int line, std::string_view said, std::string_view key) {
  const std::size_t sign = !number.empty() && (number.front() == '+' || number.front() == '-') ? 1 : 0;
  const auto digit_at = [&](std::size_t i) { return i < number.size() && number[i] >= '0' && number[i] <= '9'; };
  if (!digit_at(sign) || number[sign] != '0' || !digit_at(sign + 1)) return;
  std::size_t first = sign;
  while (number[first] == '0' && digit_at(first + 1)) ++first;  // "007" -> "7", "00" -> "0", "00.5" -> "0.5"
  const std::string fixed = std::string(number.substr(0, sign)) + std::string(number.substr(first));
  fail_at(line, fmt::format("{}: a leading zero is ambiguous (octal in YAML 1.1); write {}{}", said,
                            key.empty() ? "" : fmt::format("{}: ", key), printable(fixed)));
}

bool NumberRange::contains(double value) const {
  return (low_included ? value >= low : value > low) && (high_included ? value <= high : value < high);
}

std::string NumberRange::to_string() const {
  return fmt::format("{}{:g}, {:g}{}", low_included ? '[' : '(', low, high, high_included ? ']' : ')');
}

std::string yaml_text(const YAML::Node& value, int line, std::string_view key, std::string_view where,
                      std::string_view example) {
  if (!value.IsScalar() || value.Scalar().empty()) {
    fail_at(line, fmt::format("{} has {} {}; {} must be non-empty text, e.g. {}: {}", where, key, describe_yaml(value),
                              key, key, example));
  }
  return value.Scalar();
}

uint64_t yaml_integer(const YAML::Node& value, int line, std::string_view key, std::string_view where, uint64_t low,
                      uint64_t high, std::string_view example) {
  const std::string rule = fmt::format("{} must be an integer {}..{}, e.g. {}: {}", key, low, high, key, example);
  std::optional<uint64_t> parsed;
  if (value.IsScalar()) parsed = parse_unsigned(value.Scalar());
  if (!parsed) fail_at(line, fmt::format("{} has {}: {}; {}", where, key, scalar_or_description(value), rule));
  refuse_leading_zero(value.Scalar(), line, fmt::format("{} has {}: {}", where, key, printable(value.Scalar())), key);
  if (*parsed < low || *parsed > high) {
    fail_at(line, fmt::format("{} has {}: {}, out of range; {}", where, key, printable(value.Scalar()), rule));
  }
  return *parsed;
}

double yaml_number(const YAML::Node& value, int line, std::string_view key, std::string_view where,
                   const NumberRange& range, std::string_view example) {
  std::optional<double> parsed;
  if (value.IsScalar()) parsed = parse_number(value.Scalar());
  if (parsed) {
    refuse_leading_zero(value.Scalar(), line, fmt::format("{} has {}: {}", where, key, printable(value.Scalar())), key);
  }
  if (!parsed || !range.contains(*parsed)) {
    fail_at(line, fmt::format("{} has {}: {}; {} must be a number in {}, e.g. {}: {}", where, key,
                              scalar_or_description(value), key, range.to_string(), key, example));
  }
  return *parsed;
}

YamlMap::YamlMap(const YAML::Node& map, int line, std::vector<std::string> allowed, std::string where)
    : line_(line), where_(std::move(where)) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const int key_line = yaml_line(it->first, line_);
    if (!it->first.IsScalar()) {
      fail_at(key_line, fmt::format("a key in {} is {}; keys must be plain names, one of {}", where_,
                                    describe_yaml(it->first), join(allowed, ", ")));
    }
    const std::string& key = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      const std::string_view meant = closest_match(key, allowed);
      fail_at(key_line, fmt::format("unknown key {} in {}; valid keys are {}{}", single_quoted(key), where_,
                                    join(allowed, ", "),
                                    meant.empty() ? "" : fmt::format("; did you mean {}?", single_quoted(meant))));
    }
    // read_yaml has refused repeated keys already.
    entries_.emplace(key, Entry{key_line, it->second});
  }
}

const YamlMap::Entry* YamlMap::find(std::string_view key) const {
  auto found = entries_.find(key);
  return found == entries_.end() ? nullptr : &found->second;
}

void YamlMap::fail_missing(std::string_view key, std::string_view example) const {
  fail_at(line_, fmt::format("{} has no {}; add {}: {}", where_, key, key, example));
}

std::optional<std::string> YamlMap::text(std::string_view key, std::string_view example) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  return yaml_text(entry->value, entry->line, key, where_, example);
}

std::optional<std::string> YamlMap::text_or_empty(std::string_view key) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  if (entry->value.IsNull()) return std::string();
  if (!entry->value.IsScalar()) {
    fail_at(entry->line, fmt::format("{} has {} {}; {} must be text", where_, key, describe_yaml(entry->value), key));
  }
  return entry->value.Scalar();
}

std::optional<uint64_t> YamlMap::integer(std::string_view key, uint64_t low, uint64_t high,
                                         std::string_view example) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  return yaml_integer(entry->value, entry->line, key, where_, low, high, example);
}

std::optional<double> YamlMap::number(std::string_view key, const NumberRange& range, std::string_view example) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  return yaml_number(entry->value, entry->line, key, where_, range, example);
}

std::optional<bool> YamlMap::boolean(std::string_view key) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  if (entry->value.IsScalar() && entry->value.Scalar() == "true") return true;
  if (entry->value.IsScalar() && entry->value.Scalar() == "false") return false;
  fail_at(entry->line, fmt::format("{} has {}: {}; {} must be true or false", where_, key,
                                   scalar_or_description(entry->value), key));
}

std::optional<std::vector<YamlMap::Entry>> YamlMap::list(std::string_view key, std::string_view example) const {
  const Entry* entry = find(key);
  if (entry == nullptr) return std::nullopt;
  if (!entry->value.IsSequence() || entry->value.size() == 0) {
    fail_at(entry->line, fmt::format("{} has {} {}; {} must be a non-empty list, e.g. {}: {}", where_, key,
                                     entry->value.IsSequence() ? "empty" : describe_yaml(entry->value), key, key,
                                     example));
  }
  std::vector<Entry> items;
  for (const YAML::Node& item : entry->value) items.push_back({yaml_line(item, entry->line), item});
  return items;
}

std::optional<std::vector<uint64_t>> YamlMap::integer_list(std::string_view key, uint64_t low, uint64_t high,
                                                           std::string_view example) const {
  std::optional<std::vector<Entry>> items = list(key, example);
  if (!items) return std::nullopt;
  std::vector<uint64_t> values;
  for (const Entry& item : *items) {
    std::optional<uint64_t> value;
    if (item.value.IsScalar()) value = parse_unsigned(item.value.Scalar());
    if (value) {
      refuse_leading_zero(item.value.Scalar(), item.line,
                          fmt::format("{} has {} in {}", where_, describe_yaml(item.value), key), "");
    }
    if (!value || *value < low || *value > high) {
      fail_at(item.line, fmt::format("{} has {} in {}; {} must be integers {}..{}, e.g. {}: {}", where_,
                                     describe_yaml(item.value), key, key, low, high, key, example));
    }
    values.push_back(*value);
  }
  return values;
}

std::optional<std::vector<double>> YamlMap::number_list(std::string_view key, const NumberRange& range,
                                                        std::string_view example) const {
  std::optional<std::vector<Entry>> items = list(key, example);
  if (!items) return std::nullopt;
  std::vector<double> values;
  for (const Entry& item : *items) {
    std::optional<double> value;
    if (item.value.IsScalar()) value = parse_number(item.value.Scalar());
    if (value) {
      refuse_leading_zero(item.value.Scalar(), item.line,
                          fmt::format("{} has {} in {}", where_, describe_yaml(item.value), key), "");
    }
    if (!value || !range.contains(*value)) {
      fail_at(item.line, fmt::format("{} has {} in {}; {} must be numbers in {}, e.g. {}: {}", where_,
                                     describe_yaml(item.value), key, key, range.to_string(), key, example));
    }
    values.push_back(*value);
  }
  return values;
}

}  // namespace tessera::balance::cluster
