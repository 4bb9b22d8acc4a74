// ClusterSpec: the cluster description a user writes in YAML, loaded and validated strictly.
//
// Schema (docs/cluster-file.md has every key, default and error message):
//   cluster: NAME                       required, [A-Za-z0-9_.-]{1,64}
//   secret: TEXT | secret_file: PATH    exactly one; a relative secret_file is resolved against
//                                       the YAML file's folder
//   wire: plain | encrypted             default plain (HMAC-authenticated, in the clear);
//                                       encrypted: every link TLS 1.3 keyed by the secret
//   nodes:                              required, 1..256 entries
//     - name: NAME                      required, unique, [A-Za-z0-9_.-]{1,64}
//       host: HOST                      required (IPv4/IPv6 literal or host name)
//       port: 1..65535                  required; host:port unique
//       threads: 1..1024                default 1
//       kind: LABEL                     optional free label (desktop, pi, ...)
//       emulate:                        optional, reserved for cpu/link emulation
//         cpu: (0, 64]                  CPUs the node may use
//         cpu_period: 1ms..1s           CFS period of that quota (default 20ms; the kernel's is 100ms)
//         link: {rate: 100mbit, delay: 2ms, loss: 0.1}   tc-style; loss in percent 0..100
//   switch:                             optional: nodes behind one switch whose uplink to the
//                                       coordinator's host all their traffic with it shares
//     uplink: RATE                      required, tc-style (1gbit)
//     nodes: [NAME, ...]                default: every node not on the coordinator's host (a host
//                                       that is not loopback, or an emulated link of its own)
// Unknown keys, wrong types, duplicates and out-of-range values fail with kInvalidConfig and a
// message "FILE:LINE: what is wrong; what to write instead". Values; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/tls.hpp"

namespace tessera::balance::cluster {

// Emulated CPU and link limits for a node. cpu 0 means "not limited"; link_* are kept as the
// tc-style strings the user wrote ("100mbit", "2ms") and only meaningful when has_link.
struct EmulationSpec {
  double cpu = 0;
  // The CFS period over which the cpu quota is enforced. 20 ms: with the kernel's 100 ms a quarter
  // core has a 25 ms slice, so a job shorter than that runs at full speed and the quota never shows;
  // at 20 ms its slice is 5 ms, and long jobs pay nothing measurable for the more frequent throttling.
  // scripts/bench-cpu-period.sh measures both sides of the choice.
  uint32_t cpu_period_us = 20000;
  std::string link_rate, link_delay;
  double link_loss_percent = 0;
  bool has_link = false;
  bool operator==(const EmulationSpec&) const = default;
};

// One switch in front of some nodes: traffic between them and the coordinator's host crosses its
// uplink (shared by all of them at once); traffic between two of them does not.
struct SwitchSpec {
  std::string uplink_rate;         // tc-style, as written ("1gbit")
  double uplink_bytes_per_s = 0.0;
  std::vector<std::string> nodes;  // names, cluster order
  int line = 0;                    // 1-based line of switch:, for messages
  bool operator==(const SwitchSpec&) const = default;
};

// Bytes per second of a tc-style rate ("100mbit", "1gbit", "512kbit", "8000bit"); none when the
// text is not one.
std::optional<double> rate_bytes_per_second(std::string_view rate);

struct NodeSpec {
  std::string name;
  std::string host;
  uint16_t port = 0;
  uint32_t threads = 1;
  std::string kind;
  int line = 0;  // 1-based line of the node's entry in the YAML, for messages
  std::optional<EmulationSpec> emulate;  // absent when the node has no emulate: key
  // The cluster's wire:, copied into each node so that one node can be connected on its own.
  transport::WireMode wire = transport::WireMode::kPlain;
  std::string endpoint() const { return host + ":" + std::to_string(port); }
  bool operator==(const NodeSpec&) const = default;
};

struct ClusterSpec {
  std::string name;
  std::string secret;       // inline secret, empty when secret_file is used
  std::string secret_file;  // resolved path, empty when secret is inline
  std::vector<NodeSpec> nodes;
  std::string source_path;  // the YAML file it came from ("<string>" when parsed from text)
  int secret_line = 0;      // 1-based line of secret/secret_file, for resolve_secret's messages
  transport::WireMode wire = transport::WireMode::kPlain;
  std::optional<SwitchSpec> network_switch;  // the switch: key, when given
  bool operator==(const ClusterSpec&) const = default;

  // Whether the node at `index` sits behind the switch (false when there is none).
  bool behind_switch(std::size_t index) const;

  // The secret itself: inline, or read from secret_file with trailing whitespace trimmed. A
  // missing, unreadable or empty file fails with kInvalidConfig naming the file and YAML line.
  Result<std::string> resolve_secret() const;
  // Index of the node with that name, or -1.
  int find_node(std::string_view node_name) const;
};

// Reads and validates the file. An unreadable file fails with kIoError naming the path; anything
// wrong inside it with kInvalidConfig. Never throws.
Result<ClusterSpec> load_cluster_spec(const std::string& path);
// `source_name` is used in messages and to resolve a relative secret_file (its folder).
Result<ClusterSpec> parse_cluster_spec(std::string_view yaml_text, const std::string& source_name);

}  // namespace tessera::balance::cluster
