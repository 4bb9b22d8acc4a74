#include "tessera/balance/cluster/cluster_spec.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace tessera::balance {
namespace {

constexpr std::size_t kMaxNodes = 256;
constexpr std::size_t kMaxNameLength = 64;
constexpr uint32_t kMaxThreads = 1024;
constexpr double kMaxEmulatedCpus = 64;

const std::vector<std::string> kTopKeys = {"cluster", "secret", "secret_file", "nodes"};
const std::vector<std::string> kNodeKeys = {"name", "host", "port", "threads", "kind", "emulate"};
const std::vector<std::string> kEmulateKeys = {"cpu", "link"};
const std::vector<std::string> kLinkKeys = {"rate", "delay", "loss"};

// Thrown on the first problem and turned into a Status at the module edge, so that the walk over
// the YAML tree reads as straight-line code.
struct ConfigError {
  int line;  // 1-based
  std::string message;
};

[[noreturn]] void fail(int line, std::string message) { throw ConfigError{line, std::move(message)}; }

// yaml-cpp marks are 0-based, and nodes it synthesised have none (-1).
int line_of(const YAML::Node& node, int fallback) {
  const int line = node.Mark().line;
  return line >= 0 ? line + 1 : fallback;
}

std::string single_quoted(std::string_view text) { return fmt::format("'{}'", text); }

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = prev[j - 1] + (std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                                                            std::tolower(static_cast<unsigned char>(b[j - 1]))
                                                        ? 0
                                                        : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// "; did you mean 'threads'?" when a valid key is a plausible typo of `key`, else "".
std::string suggestion(std::string_view key, const std::vector<std::string>& valid) {
  std::string best;
  std::size_t best_distance = std::string::npos;
  for (const std::string& candidate : valid) {
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  // A third of the longer word keeps "thread" -> "threads" but not "colour" -> "cluster".
  const std::size_t limit = std::max<std::size_t>(1, std::max(key.size(), best.size()) / 3);
  return best_distance <= limit ? "; did you mean " + single_quoted(best) + "?" : "";
}

std::string scalar_text(const YAML::Node& value) {
  if (value.IsScalar()) return single_quoted(value.Scalar());
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a mapping";
  return "nothing";
}

// Checks the keys of a mapping against `valid`, rejecting unknown and repeated ones, and returns
// key -> (key line, value). yaml-cpp keeps repeated keys and lookups return the first, so a
// repeated key would otherwise be silently ignored.
std::map<std::string, std::pair<int, YAML::Node>> checked_keys(const YAML::Node& map, int map_line,
                                                               const std::vector<std::string>& valid,
                                                               const std::string& where) {
  std::map<std::string, std::pair<int, YAML::Node>> out;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const int key_line = line_of(it->first, map_line);
    if (!it->first.IsScalar()) {
      fail(key_line, "a key in " + where + " is " + scalar_text(it->first) +
                         "; keys must be plain names, one of " + join(valid));
    }
    const std::string key = it->first.Scalar();
    if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
      fail(key_line, "unknown key " + single_quoted(key) + " in " + where + "; valid keys are " + join(valid) +
                         suggestion(key, valid));
    }
    auto [pos, inserted] = out.emplace(key, std::make_pair(key_line, it->second));
    if (!inserted) {
      fail(key_line, "key " + single_quoted(key) + " appears twice in " + where + " (first on line " +
                         std::to_string(pos->second.first) + "); keep one");
    }
  }
  return out;
}

std::string require_string(const YAML::Node& value, int line, const std::string& key, const std::string& where,
                           const std::string& example) {
  if (!value.IsScalar() || value.Scalar().empty()) {
    fail(line, where + " has " + key + " " + scalar_text(value) + "; " + key + " must be non-empty text, e.g. " +
                   key + ": " + example);
  }
  return value.Scalar();
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string require_name(const YAML::Node& value, int line, const std::string& key, const std::string& where,
                         const std::string& example) {
  const std::string name = require_string(value, line, key, where, example);
  if (!valid_name(name)) {
    fail(line, key + " " + single_quoted(name) + " in " + where + " is not a valid name; use 1 to 64 of " +
                   "A-Z a-z 0-9 _ . -, e.g. " + key + ": " + example);
  }
  return name;
}

// Strict decimal integer: digits only (an optional leading '+'), no sign tricks, no hex, no "8080.0".
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

uint64_t require_integer(const YAML::Node& value, int line, const std::string& key, const std::string& where,
                         uint64_t low, uint64_t high, const std::string& example) {
  const std::string rule = key + " must be an integer " + std::to_string(low) + ".." + std::to_string(high);
  std::optional<uint64_t> parsed;
  if (value.IsScalar()) parsed = parse_unsigned(value.Scalar());
  if (!parsed) {
    fail(line, where + " has " + key + ": " + (value.IsScalar() ? value.Scalar() : scalar_text(value)) + "; " +
                   rule + ", e.g. " + key + ": " + example);
  }
  if (*parsed < low || *parsed > high) {
    fail(line, where + " has " + key + ": " + value.Scalar() + ", out of range; " + rule + ", e.g. " + key +
                   ": " + example);
  }
  return *parsed;
}

bool valid_host(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  if (host.find(':') != std::string_view::npos) {
    // IPv6 literal; the exact grammar is left to the resolver, this only catches typos.
    return std::all_of(host.begin(), host.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '%';
    });
  }
  // IPv4 literals are host names as far as the character set goes: labels of A-Z a-z 0-9 -.
  std::size_t label_start = 0;
  for (std::size_t i = 0; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      const std::size_t length = i - label_start;
      if (length == 0 || length > 63) return false;
      if (host[label_start] == '-' || host[i - 1] == '-') return false;
      label_start = i + 1;
    } else if (!std::isalnum(static_cast<unsigned char>(host[i])) && host[i] != '-') {
      return false;
    }
  }
  return true;
}

// "<number><unit>" with a non-negative number and one of `units`, as tc writes rates and delays.
bool number_with_unit(std::string_view text, const std::vector<std::string>& units, bool positive) {
  for (const std::string& unit : units) {
    if (text.size() <= unit.size() || text.substr(text.size() - unit.size()) != unit) continue;
    const std::string_view number = text.substr(0, text.size() - unit.size());
    // Longer units share suffixes with shorter ones ("kbit" ends in "bit"); the number check rejects
    // the wrong split because "100k" is not a number.
    const std::optional<double> value = parse_number(number);
    if (value && std::isdigit(static_cast<unsigned char>(number.front())) && (positive ? *value > 0 : *value >= 0)) {
      return true;
    }
  }
  return false;
}

EmulationSpec parse_emulate(const YAML::Node& value, int line, const std::string& node_where) {
  const std::string where = "emulate of " + node_where;
  if (!value.IsMap() || value.size() == 0) {
    fail(line, where + " is " + scalar_text(value) + "; emulate must be a mapping with cpu and/or link, e.g. " +
                   "emulate: {cpu: 2, link: {rate: 100mbit, delay: 2ms}}");
  }
  EmulationSpec spec;
  for (const auto& [key, entry] : checked_keys(value, line, kEmulateKeys, where)) {
    const auto& [key_line, field] = entry;
    if (key == "cpu") {
      std::optional<double> cpu;
      if (field.IsScalar()) cpu = parse_number(field.Scalar());
      if (!cpu || !(*cpu > 0 && *cpu <= kMaxEmulatedCpus)) {
        fail(key_line, where + " has cpu: " + (field.IsScalar() ? field.Scalar() : scalar_text(field)) +
                           "; cpu must be a number in (0, 64], e.g. cpu: 1.5");
      }
      spec.cpu = *cpu;
    } else if (key == "link") {
      const std::string link_where = "link of " + node_where;
      if (!field.IsMap() || field.size() == 0) {
        fail(key_line, link_where + " is " + scalar_text(field) +
                           "; link must be a mapping of rate, delay and/or loss, e.g. " +
                           "link: {rate: 100mbit, delay: 2ms, loss: 0.1}");
      }
      spec.has_link = true;
      for (const auto& [link_key, link_entry] : checked_keys(field, key_line, kLinkKeys, link_where)) {
        const auto& [link_line, link_value] = link_entry;
        const std::string text = link_value.IsScalar() ? link_value.Scalar() : scalar_text(link_value);
        if (link_key == "rate") {
          if (!link_value.IsScalar() || !number_with_unit(text, {"kbit", "mbit", "gbit", "bit"}, true)) {
            fail(link_line, link_where + " has rate: " + text +
                                "; rate must be a number > 0 with a unit bit, kbit, mbit or gbit, e.g. rate: 100mbit");
          }
          spec.link_rate = text;
        } else if (link_key == "delay") {
          if (!link_value.IsScalar() || !number_with_unit(text, {"us", "ms", "s"}, false)) {
            fail(link_line, link_where + " has delay: " + text +
                                "; delay must be a number >= 0 with a unit us, ms or s, e.g. delay: 2ms");
          }
          spec.link_delay = text;
        } else {
          std::string_view number = text;
          if (!number.empty() && number.back() == '%') number.remove_suffix(1);
          std::optional<double> loss;
          if (link_value.IsScalar()) loss = parse_number(number);
          if (!loss || *loss < 0 || *loss > 100) {
            fail(link_line, link_where + " has loss: " + text +
                                "; loss must be a percentage 0..100, e.g. loss: 0.5");
          }
          spec.link_loss_percent = *loss;
        }
      }
    }
  }
  return spec;
}

NodeSpec parse_node(const YAML::Node& value, int fallback_line, std::size_t index) {
  const int line = line_of(value, fallback_line);
  const std::string position = "node #" + std::to_string(index + 1);
  if (!value.IsMap()) {
    fail(line, position + " in nodes is " + scalar_text(value) +
                   "; each node must be a mapping, e.g. '- {name: pi1, host: 10.0.0.11, port: 7070}'");
  }
  NodeSpec node;
  node.line = line;
  // A usable name is looked up before anything else so every later message, even about an
  // unknown key, can say which node it is about.
  std::string where = position;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == "name" && it->second.IsScalar() &&
        valid_name(it->second.Scalar())) {
      where = "node " + single_quoted(it->second.Scalar());
      break;
    }
  }
  const auto keys = checked_keys(value, line, kNodeKeys, where);
  if (auto it = keys.find("name"); it != keys.end()) {
    node.name = require_name(it->second.second, it->second.first, "name", position, "pi1");
  } else {
    fail(line, position + " has no name; add name: NAME (e.g. name: pi1)");
  }
  for (const char* required : {"host", "port"}) {
    if (!keys.count(required)) {
      fail(line, where + " has no " + required + "; add " + required + ": " +
                     (std::string(required) == "host" ? "ADDRESS (e.g. host: 10.0.0.11)" : "PORT (e.g. port: 7070)"));
    }
  }
  for (const auto& [key, entry] : keys) {
    const auto& [key_line, field] = entry;
    if (key == "host") {
      node.host = require_string(field, key_line, "host", where, "10.0.0.11");
      if (!valid_host(node.host)) {
        fail(key_line, where + " has host: " + node.host +
                           ", which is not an IP address or host name; e.g. host: 10.0.0.11 or host: pi1.local");
      }
    } else if (key == "port") {
      node.port = static_cast<uint16_t>(require_integer(field, key_line, "port", where, 1, 65535, "7070"));
    } else if (key == "threads") {
      node.threads = static_cast<uint32_t>(require_integer(field, key_line, "threads", where, 1, kMaxThreads, "4"));
    } else if (key == "kind") {
      node.kind = require_string(field, key_line, "kind", where, "pi");
    } else if (key == "emulate") {
      node.emulate = parse_emulate(field, key_line, where);
    }
  }
  return node;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

ClusterSpec parse_document(const YAML::Node& root, const std::string& source_name) {
  if (!root.IsDefined() || root.IsNull()) {
    fail(1, "the cluster file is empty; it needs cluster: NAME, secret: TEXT (or secret_file: PATH) and nodes:");
  }
  const int root_line = line_of(root, 1);
  if (!root.IsMap()) {
    fail(root_line, "the cluster file holds " + scalar_text(root) + " at the top; write a mapping with keys " +
                        join(kTopKeys));
  }
  ClusterSpec spec;
  spec.source_path = source_name;
  const auto keys = checked_keys(root, root_line, kTopKeys, "the top level");

  if (auto it = keys.find("cluster"); it != keys.end()) {
    spec.name = require_name(it->second.second, it->second.first, "cluster", "the top level", "lab");
  } else {
    fail(root_line, "no cluster name; add cluster: NAME at the top level (e.g. cluster: lab)");
  }

  const auto secret = keys.find("secret");
  const auto secret_file = keys.find("secret_file");
  if (secret != keys.end() && secret_file != keys.end()) {
    const int later = std::max(secret->second.first, secret_file->second.first);
    fail(later, "both secret (line " + std::to_string(secret->second.first) + ") and secret_file (line " +
                    std::to_string(secret_file->second.first) + ") are set; keep exactly one");
  }
  if (secret == keys.end() && secret_file == keys.end()) {
    fail(root_line, "no secret; add secret: TEXT or secret_file: PATH at the top level");
  }
  if (secret != keys.end()) {
    spec.secret = require_string(secret->second.second, secret->second.first, "secret", "the top level",
                                 "a-long-random-string");
    spec.secret_line = secret->second.first;
  } else {
    const std::string path = require_string(secret_file->second.second, secret_file->second.first,
                                            "secret_file", "the top level", "lab.secret");
    std::filesystem::path resolved(path);
    if (resolved.is_relative()) resolved = std::filesystem::path(source_name).parent_path() / resolved;
    spec.secret_file = resolved.lexically_normal().string();
    spec.secret_line = secret_file->second.first;
  }

  const auto nodes = keys.find("nodes");
  if (nodes == keys.end()) {
    fail(root_line, "no nodes; add nodes: with one entry per machine, e.g. '- {name: pi1, host: 10.0.0.11, port: 7070}'");
  }
  const auto& [nodes_line, node_list] = nodes->second;
  if (!node_list.IsSequence()) {
    fail(nodes_line, "nodes is " + scalar_text(node_list) +
                         "; nodes must be a list, one '- name: ...' entry per machine");
  }
  if (node_list.size() == 0) {
    fail(nodes_line, "nodes is empty; list at least one node, e.g. '- {name: pi1, host: 10.0.0.11, port: 7070}'");
  }
  if (node_list.size() > kMaxNodes) {
    fail(nodes_line, "nodes lists " + std::to_string(node_list.size()) + " entries; at most " +
                         std::to_string(kMaxNodes) + " are supported, split the cluster");
  }

  std::map<std::string, int> name_lines;
  std::map<std::string, const NodeSpec*> endpoints;
  spec.nodes.reserve(node_list.size());
  for (std::size_t i = 0; i < node_list.size(); ++i) {
    spec.nodes.push_back(parse_node(node_list[i], nodes_line, i));
    const NodeSpec& node = spec.nodes.back();
    if (auto [it, inserted] = name_lines.emplace(node.name, node.line); !inserted) {
      fail(node.line, "node name " + single_quoted(node.name) + " is used twice (lines " + std::to_string(it->second) +
                          " and " + std::to_string(node.line) + "); give each node a unique name");
    }
    // Host names are case-insensitive, so "Pi1:7070" and "pi1:7070" are one endpoint.
    const std::string endpoint = lowercase(node.endpoint());
    if (auto [it, inserted] = endpoints.emplace(endpoint, &node); !inserted) {
      fail(node.line, "nodes " + single_quoted(it->second->name) + " (line " + std::to_string(it->second->line) +
                          ") and " + single_quoted(node.name) + " (line " + std::to_string(node.line) +
                          ") both use " + node.endpoint() + "; give each node its own host:port");
    }
  }
  return spec;
}

std::string trim_trailing_whitespace(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

}  // namespace

Result<std::string> ClusterSpec::resolve_secret() const {
  const std::string where = source_path + ":" + std::to_string(secret_line) + ": ";
  if (secret_file.empty()) {
    if (secret.empty()) return invalid_config(where + "no secret; add secret: TEXT or secret_file: PATH");
    return secret;
  }
  std::ifstream in(secret_file, std::ios::binary);
  if (!in) {
    return invalid_config(where + "secret_file " + single_quoted(secret_file) + " cannot be read (" +
                          std::strerror(errno) + "); create it or fix the path (relative paths are " +
                          "resolved against the cluster file's folder)");
  }
  std::ostringstream content;
  content << in.rdbuf();
  std::string text = trim_trailing_whitespace(content.str());
  if (text.empty()) {
    return invalid_config(where + "secret_file " + single_quoted(secret_file) +
                          " is empty; put the shared secret in it (e.g. openssl rand -hex 32 > FILE)");
  }
  return text;
}

int ClusterSpec::find_node(std::string_view node_name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == node_name) return static_cast<int>(i);
  }
  return -1;
}

Result<ClusterSpec> parse_cluster_spec(std::string_view yaml_text, const std::string& source_name) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    return parse_document(root, source_name);
  } catch (const ConfigError& e) {
    return invalid_config(source_name + ":" + std::to_string(e.line) + ": " + e.message);
  } catch (const YAML::ParserException& e) {
    return invalid_config(source_name + ":" + std::to_string(e.mark.line >= 0 ? e.mark.line + 1 : 1) +
                          ": YAML syntax error: " + e.msg + "; check the indentation, colons and brackets there");
  } catch (const YAML::Exception& e) {
    return invalid_config(source_name + ":" + std::to_string(e.mark.line >= 0 ? e.mark.line + 1 : 1) +
                          ": cannot read the YAML: " + e.msg + "; simplify the file to plain keys and lists");
  } catch (const std::exception& e) {
    return invalid_config(source_name + ":1: cannot read the YAML: " + std::string(e.what()));
  }
}

Result<ClusterSpec> load_cluster_spec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return io_error("cannot open cluster file " + single_quoted(path) + ": " + std::strerror(errno) +
                    "; check the path (e.g. configs/lab.yaml)");
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return io_error("cannot read cluster file " + single_quoted(path) + ": " + std::strerror(errno));
  return parse_cluster_spec(content.str(), path);
}

}  // namespace tessera::balance
