#include "tessera/balance/cluster/cluster_spec.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/core/files.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::balance::cluster {
namespace {

constexpr std::size_t kMaxNodes = 256;
constexpr std::size_t kMaxNameLength = 64;
constexpr uint32_t kMaxThreads = 1024;
constexpr double kMaxEmulatedCpus = 64;
// What a worker accepts (transport/auth.cpp): 4 KiB of secret, in a file of at most 64 KiB with
// trailing whitespace. Both sides keep the same limits so a secret that passes here works there.
constexpr std::size_t kMaxSecretBytes = 4096;
constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;

const std::vector<std::string> kTopKeys = {"cluster", "secret", "secret_file", "wire", "nodes", "switch"};
const std::vector<std::string> kSwitchKeys = {"uplink", "nodes"};
const std::vector<std::string> kNodeKeys = {"name", "host", "port", "threads", "kind", "emulate"};
const std::vector<std::string> kEmulateKeys = {"cpu", "cpu_period", "link"};
const std::vector<std::string> kLinkKeys = {"rate", "delay", "loss"};

// The walk below throws YamlError (fail_at) on the first problem; read_yaml turns it into a
// Status with file and line, so the walk reads as straight-line code.

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string require_name(const YAML::Node& value, int line, const std::string& key, const std::string& where,
                         const std::string& example) {
  const std::string name = yaml_text(value, line, key, where, example);
  if (!valid_name(name)) {
    fail_at(line, key + " " + single_quoted(name) + " in " + where + " is not a valid name; use 1 to 64 of " +
                   "A-Z a-z 0-9 _ . -, e.g. " + key + ": " + example);
  }
  return name;
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

// "20ms" -> 0.02; units us, ms, s; nothing else is a time.
std::optional<double> seconds_with_unit(std::string_view text) {
  static const std::pair<std::string_view, double> kUnits[] = {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
  for (const auto& [unit, scale] : kUnits) {
    if (text.size() <= unit.size() || text.substr(text.size() - unit.size()) != unit) continue;
    const std::string_view number = text.substr(0, text.size() - unit.size());
    const std::optional<double> value = parse_number(number);
    if (value && std::isdigit(static_cast<unsigned char>(number.front()))) return *value * scale;
  }
  return std::nullopt;
}

EmulationSpec parse_emulate(const YAML::Node& value, int line, const std::string& node_where) {
  const std::string where = "emulate of " + node_where;
  if (!value.IsMap() || value.size() == 0) {
    fail_at(line, where + " is " + describe_yaml(value) + "; emulate must be a mapping with cpu and/or link, e.g. " +
                   "emulate: {cpu: 2, link: {rate: 100mbit, delay: 2ms}}");
  }
  EmulationSpec spec;
  const YamlMap keys(value, line, kEmulateKeys, where);
  for (const auto& [key, entry] : keys.entries()) {
    const auto& [key_line, field] = entry;
    if (key == "cpu") {
      spec.cpu = yaml_number(field, key_line, "cpu", where, NumberRange{0, kMaxEmulatedCpus, false, true}, "1.5");
    } else if (key == "cpu_period") {
      const std::string text = field.IsScalar() ? field.Scalar() : describe_yaml(field);
      const std::optional<double> seconds = field.IsScalar() ? seconds_with_unit(text) : std::nullopt;
      if (!seconds || *seconds < 0.001 || *seconds > 1.0) {
        fail_at(key_line, where + " has cpu_period: " + printable(text) +
                              "; cpu_period must be a time from 1ms to 1s with a unit us, ms or s, e.g. cpu_period: 20ms");
      }
      spec.cpu_period_us = static_cast<uint32_t>(std::lround(*seconds * 1e6));
    } else if (key == "link") {
      const std::string link_where = "link of " + node_where;
      if (!field.IsMap() || field.size() == 0) {
        fail_at(key_line, link_where + " is " + describe_yaml(field) +
                           "; link must be a mapping of rate, delay and/or loss, e.g. " +
                           "link: {rate: 100mbit, delay: 2ms, loss: 0.1}");
      }
      spec.has_link = true;
      const YamlMap link_keys(field, key_line, kLinkKeys, link_where);
      for (const auto& [link_key, link_entry] : link_keys.entries()) {
        const auto& [link_line, link_value] = link_entry;
        const std::string text = link_value.IsScalar() ? link_value.Scalar() : describe_yaml(link_value);
        if (link_key == "rate") {
          if (!link_value.IsScalar() || !rate_bytes_per_second(text)) {
            fail_at(link_line, link_where + " has rate: " + printable(text) +
                                "; rate must be a number > 0 with a unit bit, kbit, mbit or gbit, e.g. rate: 100mbit");
          }
          spec.link_rate = text;
        } else if (link_key == "delay") {
          if (!link_value.IsScalar() || !seconds_with_unit(text)) {
            fail_at(link_line, link_where + " has delay: " + printable(text) +
                                "; delay must be a number >= 0 with a unit us, ms or s, e.g. delay: 2ms");
          }
          spec.link_delay = text;
        } else {
          std::string_view number = text;
          if (!number.empty() && number.back() == '%') number.remove_suffix(1);
          std::optional<double> loss;
          if (link_value.IsScalar()) loss = parse_number(number);
          if (!loss || *loss < 0 || *loss > 100) {
            fail_at(link_line, link_where + " has loss: " + printable(text) +
                                "; loss must be a percentage 0..100, e.g. loss: 0.5");
          }
          refuse_leading_zero(number, link_line, link_where + " has loss: " + printable(text), "loss");
          spec.link_loss_percent = *loss;
        }
      }
    }
  }
  return spec;
}

NodeSpec parse_node(const YAML::Node& value, int fallback_line, std::size_t index) {
  const int line = yaml_line(value, fallback_line);
  const std::string position = "node #" + std::to_string(index + 1);
  if (!value.IsMap()) {
    fail_at(line, position + " in nodes is " + describe_yaml(value) +
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
  const YamlMap keys(value, line, kNodeKeys, where);
  if (const YamlMap::Entry* name = keys.find("name")) {
    node.name = require_name(name->value, name->line, "name", position, "pi1");
  } else {
    fail_at(line, position + " has no name; add name: NAME (e.g. name: pi1)");
  }
  for (const char* required : {"host", "port"}) {
    if (!keys.has(required)) {
      fail_at(line, where + " has no " + required + "; add " + required + ": " +
                     (std::string(required) == "host" ? "ADDRESS (e.g. host: 10.0.0.11)" : "PORT (e.g. port: 7070)"));
    }
  }
  for (const auto& [key, entry] : keys.entries()) {
    const auto& [key_line, field] = entry;
    if (key == "host") {
      node.host = yaml_text(field, key_line, "host", where, "10.0.0.11");
      if (!valid_host(node.host)) {
        fail_at(key_line, where + " has host: " + printable(node.host) +
                           ", which is not an IP address or host name; e.g. host: 10.0.0.11 or host: pi1.local");
      }
    } else if (key == "port") {
      node.port = static_cast<uint16_t>(yaml_integer(field, key_line, "port", where, 1, 65535, "7070"));
    } else if (key == "threads") {
      node.threads = static_cast<uint32_t>(yaml_integer(field, key_line, "threads", where, 1, kMaxThreads, "4"));
    } else if (key == "kind") {
      node.kind = yaml_text(field, key_line, "kind", where, "pi");
    } else if (key == "emulate") {
      node.emulate = parse_emulate(field, key_line, where);
    }
  }
  return node;
}

// A node runs on the coordinator's host when it is reached on loopback without a link of its own.
bool on_coordinator_host(const NodeSpec& node) {
  const bool loopback = node.host == "localhost" || node.host.starts_with("127.") || node.host == "::1";
  return loopback && !(node.emulate && node.emulate->has_link);
}

SwitchSpec parse_switch(const YAML::Node& value, int line, const std::vector<NodeSpec>& nodes) {
  const std::string where = "switch";
  if (!value.IsMap() || value.size() == 0) {
    fail_at(line, "switch is " + describe_yaml(value) + "; switch must be a mapping with uplink (and optionally nodes), " +
                   "e.g. switch: {uplink: 1gbit, nodes: [pi1, pi2]}");
  }
  SwitchSpec spec;
  spec.line = line;
  const YamlMap keys(value, line, kSwitchKeys, where);
  const YamlMap::Entry* uplink = keys.find("uplink");
  if (uplink == nullptr) fail_at(line, "switch has no uplink; add its rate, e.g. switch: {uplink: 1gbit}");
  const std::string rate = uplink->value.IsScalar() ? uplink->value.Scalar() : describe_yaml(uplink->value);
  const std::optional<double> bytes = uplink->value.IsScalar() ? rate_bytes_per_second(rate) : std::nullopt;
  if (!bytes || *bytes <= 0.0) {
    fail_at(uplink->line, "switch has uplink: " + rate +
                              "; uplink must be a number > 0 with a unit bit, kbit, mbit or gbit, e.g. uplink: 1gbit");
  }
  spec.uplink_rate = rate;
  spec.uplink_bytes_per_s = *bytes;
  std::vector<bool> member(nodes.size(), false);
  if (const YamlMap::Entry* listed = keys.find("nodes")) {
    if (!listed->value.IsSequence() || listed->value.size() == 0) {
      fail_at(listed->line, "switch has nodes: " + describe_yaml(listed->value) +
                                "; nodes must be a list of node names, e.g. nodes: [pi1, pi2]");
    }
    for (const YAML::Node& entry : listed->value) {
      const std::string name = entry.IsScalar() ? entry.Scalar() : describe_yaml(entry);
      const auto at = std::find_if(nodes.begin(), nodes.end(), [&](const NodeSpec& node) { return node.name == name; });
      if (at == nodes.end()) {
        std::vector<std::string> names;
        for (const NodeSpec& node : nodes) names.push_back(node.name);
        fail_at(yaml_line(entry, listed->line), "switch lists " + single_quoted(name) + ", which is not a node; the nodes are " +
                                                    join(names, ", "));
      }
      if (on_coordinator_host(*at)) {
        fail_at(yaml_line(entry, listed->line),
                "switch lists " + single_quoted(at->name) + ", which runs on the coordinator's host (" + at->host +
                    " without a link of its own), so its traffic never crosses the switch; give it emulate: {link: "
                    "{rate: 1gbit}} or leave it out of switch.nodes");
      }
      member[static_cast<std::size_t>(at - nodes.begin())] = true;
    }
  } else {
    for (std::size_t i = 0; i < nodes.size(); ++i) member[i] = !on_coordinator_host(nodes[i]);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (member[i]) spec.nodes.push_back(nodes[i].name);
  }
  if (spec.nodes.empty()) {
    fail_at(line, "no node sits behind the switch: every node runs on the coordinator's host; list them with "
                  "switch: {uplink: ..., nodes: [...]} after giving them emulate: {link: ...}, or remove switch:");
  }
  return spec;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

ClusterSpec parse_document(const YAML::Node& root, const std::string& source_name) {
  if (!root.IsDefined() || root.IsNull()) {
    fail_at(1, "the cluster file is empty; it needs cluster: NAME, secret: TEXT (or secret_file: PATH) and nodes:");
  }
  const int root_line = yaml_line(root, 1);
  if (!root.IsMap()) {
    fail_at(root_line, "the cluster file holds " + describe_yaml(root) + " at the top; write a mapping with keys " +
                        join(kTopKeys, ", "));
  }
  ClusterSpec spec;
  spec.source_path = source_name;
  const YamlMap keys(root, root_line, kTopKeys, "the top level");

  if (const YamlMap::Entry* name = keys.find("cluster")) {
    spec.name = require_name(name->value, name->line, "cluster", "the top level", "lab");
  } else {
    fail_at(root_line, "no cluster name; add cluster: NAME at the top level (e.g. cluster: lab)");
  }

  const YamlMap::Entry* secret = keys.find("secret");
  const YamlMap::Entry* secret_file = keys.find("secret_file");
  if (secret != nullptr && secret_file != nullptr) {
    const int later = std::max(secret->line, secret_file->line);
    fail_at(later, "both secret (line " + std::to_string(secret->line) + ") and secret_file (line " +
                       std::to_string(secret_file->line) + ") are set; keep exactly one");
  }
  if (secret == nullptr && secret_file == nullptr) {
    fail_at(root_line, "no secret; add secret: TEXT or secret_file: PATH at the top level");
  }
  if (secret != nullptr) {
    spec.secret = yaml_text(secret->value, secret->line, "secret", "the top level", "a-long-random-string");
    spec.secret_line = secret->line;
  } else {
    const std::string path =
        yaml_text(secret_file->value, secret_file->line, "secret_file", "the top level", "lab.secret");
    std::filesystem::path resolved(path);
    if (resolved.is_relative()) resolved = std::filesystem::path(source_name).parent_path() / resolved;
    spec.secret_file = resolved.lexically_normal().string();
    spec.secret_line = secret_file->line;
  }

  if (const YamlMap::Entry* wire = keys.find("wire")) {
    const std::string text = yaml_text(wire->value, wire->line, "wire", "the top level", "encrypted");
    Result<transport::WireMode> mode = transport::parse_wire_mode(text);
    if (!mode) {
      fail_at(wire->line, "wire is " + single_quoted(text) +
                              "; write wire: plain (the default: authenticated, not encrypted) or wire: encrypted "
                              "(TLS 1.3 keyed by the secret)");
    }
    spec.wire = *mode;
  }

  const YamlMap::Entry* nodes = keys.find("nodes");
  if (nodes == nullptr) {
    fail_at(root_line, "no nodes; add nodes: with one entry per machine, e.g. '- {name: pi1, host: 10.0.0.11, port: 7070}'");
  }
  const auto& [nodes_line, node_list] = *nodes;
  if (!node_list.IsSequence()) {
    fail_at(nodes_line, "nodes is " + describe_yaml(node_list) +
                         "; nodes must be a list, one '- name: ...' entry per machine");
  }
  if (node_list.size() == 0) {
    fail_at(nodes_line, "nodes is empty; list at least one node, e.g. '- {name: pi1, host: 10.0.0.11, port: 7070}'");
  }
  if (node_list.size() > kMaxNodes) {
    fail_at(nodes_line, "nodes lists " + std::to_string(node_list.size()) + " entries; at most " +
                         std::to_string(kMaxNodes) + " are supported, split the cluster");
  }

  std::map<std::string, int> name_lines;
  std::map<std::string, const NodeSpec*> endpoints;
  spec.nodes.reserve(node_list.size());
  for (std::size_t i = 0; i < node_list.size(); ++i) {
    spec.nodes.push_back(parse_node(node_list[i], nodes_line, i));
    spec.nodes.back().wire = spec.wire;
    const NodeSpec& node = spec.nodes.back();
    if (auto [it, inserted] = name_lines.emplace(node.name, node.line); !inserted) {
      fail_at(node.line, "node name " + single_quoted(node.name) + " is used twice (lines " + std::to_string(it->second) +
                          " and " + std::to_string(node.line) + "); give each node a unique name");
    }
    // Host names are case-insensitive, so "Pi1:7070" and "pi1:7070" are one endpoint.
    const std::string endpoint = lowercase(node.endpoint());
    if (auto [it, inserted] = endpoints.emplace(endpoint, &node); !inserted) {
      fail_at(node.line, "nodes " + single_quoted(it->second->name) + " (line " + std::to_string(it->second->line) +
                          ") and " + single_quoted(node.name) + " (line " + std::to_string(node.line) +
                          ") both use " + node.endpoint() + "; give each node its own host:port");
    }
  }
  if (const YamlMap::Entry* network_switch = keys.find("switch")) {
    spec.network_switch = parse_switch(network_switch->value, network_switch->line, spec.nodes);
  }
  return spec;
}

std::string trim_trailing_whitespace(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

}  // namespace

Result<std::string> ClusterSpec::resolve_secret() const {
  const std::string where = printable(source_path) + ":" + std::to_string(secret_line) + ": ";
  if (secret_file.empty()) {
    if (secret.empty()) return invalid_config(where + "no secret; add secret: TEXT or secret_file: PATH");
    return secret;
  }
  // A regular file of at most kMaxSecretFileBytes: `secret_file: /dev/zero` or a FIFO is refused
  // by what it is instead of being read until memory runs out (or forever). The workers accept a
  // secret of at most 4 KiB after trimming, so a larger file cannot be a working secret anyway.
  // It must also be private (core's check_private_path, the run directory's check): a secret
  // others can read, or one another user can replace, is refused with the chmod/chown that fixes it.
  Result<std::string> content = read_private_file(secret_file, kMaxSecretFileBytes, "secret file");
  if (!content) {
    std::string fix = "; create it or fix the path (relative paths are resolved against the cluster file's folder)";
    if (content.status().code() == StatusCode::kInvalidArgument) fix = "";
    if (content.status().code() == StatusCode::kInvalidConfig) fix = "";
    if (content.status().code() == StatusCode::kResourceExhausted) {
      fix = "; a secret is one line (e.g. openssl rand -hex 32 > FILE)";
    }
    return invalid_config(where + content.status().message() + fix);
  }
  std::string text = trim_trailing_whitespace(std::move(*content));
  if (text.empty()) {
    return invalid_config(where + "secret_file " + single_quoted(secret_file) +
                          " is empty; put the shared secret in it (e.g. openssl rand -hex 32 > FILE)");
  }
  if (text.size() > kMaxSecretBytes) {
    return invalid_config(where + "secret_file " + single_quoted(secret_file) + " holds " +
                          std::to_string(text.size()) + " bytes; a secret may be at most " +
                          std::to_string(kMaxSecretBytes) + " (e.g. openssl rand -hex 32 > FILE)");
  }
  return text;
}

std::optional<double> rate_bytes_per_second(std::string_view rate) {
  // Longer units first: "kbit" ends in "bit" too.
  static const std::vector<std::pair<std::string_view, double>> kUnits = {
      {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"bit", 1.0}};
  for (const auto& [unit, bits] : kUnits) {
    if (!rate.ends_with(unit)) continue;
    const std::string_view digits = rate.substr(0, rate.size() - unit.size());
    const std::optional<double> number = parse_number(digits);
    // A plain number: it starts with a digit (no sign, no "inf"), and a rate is above 0.
    if (!number || digits.empty() || !std::isdigit(static_cast<unsigned char>(digits.front())) || !(*number > 0.0) ||
        !std::isfinite(*number)) {
      return std::nullopt;
    }
    return *number * bits / 8.0;
  }
  return std::nullopt;
}

bool ClusterSpec::behind_switch(std::size_t index) const {
  if (!network_switch || index >= nodes.size()) return false;
  return std::find(network_switch->nodes.begin(), network_switch->nodes.end(), nodes[index].name) !=
         network_switch->nodes.end();
}

int ClusterSpec::find_node(std::string_view node_name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == node_name) return static_cast<int>(i);
  }
  return -1;
}

Result<ClusterSpec> parse_cluster_spec(std::string_view text, const std::string& source_name) {
  ClusterSpec spec;
  TESSERA_RETURN_IF_ERROR(
      read_yaml(text, source_name, [&](const YAML::Node& root) { spec = parse_document(root, source_name); }));
  return spec;
}

Result<ClusterSpec> load_cluster_spec(const std::string& path) {
  Result<std::string> text = read_yaml_file(path, "cluster file");
  if (!text) return text.status();
  return parse_cluster_spec(*text, path);
}

}  // namespace tessera::balance::cluster
