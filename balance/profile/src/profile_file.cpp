// The saved profile's file format: YAML next to the cluster file, written whole or not at all, read
// back with the strict reader (unknown keys, wrong types and repeated keys are refused with the
// line and what to write instead).
#include "tessera/balance/profile/profile.hpp"

#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::balance::profile {

namespace {

void emit_speed(YAML::Emitter& out, const std::vector<model::SpeedPoint>& speed) {
  out << YAML::Key << "speed" << YAML::Value << YAML::BeginSeq;
  for (const model::SpeedPoint& point : speed) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "size" << YAML::Value << point.size << YAML::Key
        << "gflops" << YAML::Value << point.gflops << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

const std::vector<std::string> kProfileKeys = {"cluster", "measured_at", "coordinator_send_bytes_per_s", "switch_uplink_bytes_per_s",
                                               "coordinator_cpu_s_per_byte", "nodes"};
// relative_power is written for people reading the file; it is derived, so never read back.
const std::vector<std::string> kNodeProfileKeys = {
    "name",        "endpoint",     "measured_at",   "quick",    "gflops",         "concurrent_gflops", "compute_cores", "receive_cpu_s_per_byte", "job_overhead_s", "vector_gflops",
    "relative_power", "probe_size", "repetitions", "probe_seconds", "speed",    "link", "graph",
    "threads",     "cores",        "memory_bytes",  "arch",     "hostname",       "worker_version",
    "fingerprint"};
const std::vector<std::string> kSpeedPointKeys = {"size", "gflops"};
const std::vector<std::string> kLinkProfileKeys = {"latency_s", "busy_latency_s", "to_node_bytes_per_s",
                                                   "from_node_bytes_per_s"};
const std::vector<std::string> kGraphRatesKeys = {"edge_updates_per_s", "send_s_per_delta", "send_s_per_batch",
                                                  "receive_s_per_delta", "receive_s_per_batch"};

constexpr cluster::NumberRange kNonNegative{0.0, 1e300};
constexpr uint64_t kMaxUint32 = 0xFFFFFFFFu;

cluster::YamlMap profile_map(const YAML::Node& value, int line, const std::vector<std::string>& keys, const std::string& where) {
  if (!value.IsMap()) cluster::fail_at(line, fmt::format("{} is {}; it must be a mapping", where, cluster::describe_yaml(value)));
  return cluster::YamlMap(value, line, keys, where);
}

NodeProfile parse_node_profile(const YAML::Node& value, int line, std::size_t index, const std::string& measured_at) {
  // Messages name the node once its name is known, even one about an unknown key.
  std::string where = fmt::format("node #{} in nodes", index + 1);
  if (value.IsMap()) {
    if (const YAML::Node name = value["name"]; name && name.IsScalar() && !name.Scalar().empty()) {
      where = fmt::format("node '{}'", name.Scalar());
    }
  }
  const cluster::YamlMap fields = profile_map(value, line, kNodeProfileKeys, where);
  NodeProfile node;
  if (std::optional<std::string> name = fields.text("name", "pi1")) {
    node.name = *name;
  } else {
    fields.fail_missing("name", "NAME");
  }
  node.endpoint = fields.text_or_empty("endpoint").value_or("");
  node.measured_at = fields.text_or_empty("measured_at").value_or(measured_at);
  node.quick = fields.boolean("quick").value_or(false);
  if (std::optional<double> gflops = fields.number("gflops", kNonNegative, "12.5")) {
    node.gflops = *gflops;
  } else {
    fields.fail_missing("gflops", "GFLOPS");
  }
  node.concurrent_gflops = fields.number("concurrent_gflops", kNonNegative, "9.5").value_or(0.0);
  node.compute_cores = fields.number("compute_cores", kNonNegative, "0.25").value_or(0.0);
  node.receive_cpu_s_per_byte = fields.number("receive_cpu_s_per_byte", kNonNegative, "1e-10").value_or(0.0);
  node.job_overhead_s = fields.number("job_overhead_s", kNonNegative, "5e-5").value_or(0.0);
  node.vector_gflops = fields.number("vector_gflops", kNonNegative, "3.5").value_or(0.0);
  node.probe_size = static_cast<uint32_t>(fields.integer("probe_size", 0, kMaxUint32, "1024").value_or(0));
  node.repetitions = static_cast<uint32_t>(fields.integer("repetitions", 0, kMaxUint32, "10").value_or(0));
  node.probe_seconds = fields.number("probe_seconds", kNonNegative, "0.3").value_or(0.0);
  if (const cluster::YamlMap::Entry* speed = fields.find("speed"); speed != nullptr && !speed->value.IsNull()) {
    if (!speed->value.IsSequence()) {
      cluster::fail_at(speed->line, fmt::format("node '{}' has speed {}; speed must be a list of {{size, gflops}}", node.name,
                                       cluster::describe_yaml(speed->value)));
    }
    for (const YAML::Node& point : speed->value) {
      const int point_line = cluster::yaml_line(point, speed->line);
      const cluster::YamlMap pair = profile_map(point, point_line, kSpeedPointKeys, fmt::format("a speed point of node '{}'", node.name));
      const std::optional<double> size = pair.number("size", kNonNegative, "1024");
      const std::optional<double> gflops = pair.number("gflops", kNonNegative, "12.5");
      if (!size) pair.fail_missing("size", "1024");
      if (!gflops) pair.fail_missing("gflops", "12.5");
      node.speed.push_back({*size, *gflops});
    }
  }
  if (const cluster::YamlMap::Entry* link = fields.find("link")) {
    const cluster::YamlMap link_fields = profile_map(link->value, link->line, kLinkProfileKeys, fmt::format("link of node '{}'", node.name));
    node.has_link = true;
    const std::optional<double> latency = link_fields.number("latency_s", kNonNegative, "0.0001");
    const std::optional<double> to_node = link_fields.number("to_node_bytes_per_s", kNonNegative, "1.2e8");
    const std::optional<double> from_node = link_fields.number("from_node_bytes_per_s", kNonNegative, "1.2e8");
    if (!latency) link_fields.fail_missing("latency_s", "SECONDS");
    if (!to_node) link_fields.fail_missing("to_node_bytes_per_s", "RATE");
    if (!from_node) link_fields.fail_missing("from_node_bytes_per_s", "RATE");
    node.link.latency_s = *latency;
    node.link.busy_latency_s = link_fields.number("busy_latency_s", kNonNegative, "0.004").value_or(0.0);
    node.link.to_node_bytes_per_s = *to_node;
    node.link.from_node_bytes_per_s = *from_node;
  }
  if (const cluster::YamlMap::Entry* graph = fields.find("graph"); graph != nullptr && !graph->value.IsNull()) {
    const cluster::YamlMap rates = profile_map(graph->value, graph->line, kGraphRatesKeys, fmt::format("graph of node '{}'", node.name));
    // Every figure is required: the placement model reads them together.
    const auto figure = [&](const char* key, const char* example) {
      const std::optional<double> number = rates.number(key, kNonNegative, example);
      if (!number) rates.fail_missing(key, example);
      return *number;
    };
    model::GraphRates measured;
    measured.edge_updates_per_s = figure("edge_updates_per_s", "4.5e7");
    measured.send_s_per_delta = figure("send_s_per_delta", "2e-8");
    measured.send_s_per_batch = figure("send_s_per_batch", "3e-6");
    measured.receive_s_per_delta = figure("receive_s_per_delta", "1.5e-8");
    measured.receive_s_per_batch = figure("receive_s_per_batch", "2e-6");
    if (!(measured.edge_updates_per_s > 0.0)) {
      cluster::fail_at(rates.find("edge_updates_per_s")->line,
                       fmt::format("node '{}' has graph edge_updates_per_s {}; it must be above 0 (re-run `tessera "
                                   "profile --refresh`, or delete the graph map to have it measured again)",
                                   node.name, measured.edge_updates_per_s));
    }
    node.graph = measured;
  }
  node.threads = static_cast<uint32_t>(fields.integer("threads", 0, kMaxUint32, "4").value_or(0));
  node.cores = static_cast<uint32_t>(fields.integer("cores", 0, kMaxUint32, "4").value_or(0));
  node.memory_bytes = fields.integer("memory_bytes", 0, UINT64_MAX, "8589934592").value_or(0);
  node.arch = fields.text_or_empty("arch").value_or("");
  node.hostname = fields.text_or_empty("hostname").value_or("");
  node.worker_version = fields.text_or_empty("worker_version").value_or("");
  node.fingerprint = fields.text_or_empty("fingerprint").value_or("");
  if (!(node.gflops > 0.0)) {
    cluster::fail_at(fields.find("gflops")->line,
            fmt::format("node '{}' has gflops {}; re-run `tessera profile --refresh`", node.name, node.gflops));
  }
  return node;
}

ClusterProfile parse_profile(const YAML::Node& root) {
  if (!root.IsMap()) {
    cluster::fail_at(cluster::yaml_line(root, 1), fmt::format("the profile holds {} at the top; it must be a mapping with keys {}",
                                            cluster::describe_yaml(root), join(kProfileKeys, ", ")));
  }
  const cluster::YamlMap top(root, cluster::yaml_line(root, 1), kProfileKeys, "the top level");
  ClusterProfile profile;
  if (std::optional<std::string> cluster = top.text("cluster", "lab")) {
    profile.cluster = *cluster;
  } else {
    top.fail_missing("cluster", "NAME");
  }
  profile.measured_at = top.text_or_empty("measured_at").value_or("");
  profile.coordinator_send_bytes_per_s = top.number("coordinator_send_bytes_per_s", kNonNegative, "1.2e9").value_or(0.0);
  profile.coordinator_cpu_s_per_byte = top.number("coordinator_cpu_s_per_byte", kNonNegative, "8e-10").value_or(0.0);
  profile.switch_uplink_bytes_per_s = top.number("switch_uplink_bytes_per_s", kNonNegative, "1.2e8").value_or(0.0);
  if (const cluster::YamlMap::Entry* nodes = top.find("nodes"); nodes != nullptr && !nodes->value.IsNull()) {
    if (!nodes->value.IsSequence()) {
      cluster::fail_at(nodes->line, fmt::format("nodes is {}; nodes must be a list", cluster::describe_yaml(nodes->value)));
    }
    for (std::size_t i = 0; i < nodes->value.size(); ++i) {
      const YAML::Node entry = nodes->value[i];
      profile.nodes.push_back(parse_node_profile(entry, cluster::yaml_line(entry, nodes->line), i, profile.measured_at));
    }
  }
  return profile;
}

}  // namespace

std::string default_profile_path(const std::string& cluster_config_path) {
  std::filesystem::path path(cluster_config_path);
  path.replace_extension();
  return path.string() + ".profile.yaml";
}

Status save_profile(const std::string& path, const ClusterProfile& profile) {
  YAML::Emitter out;
  out << YAML::Comment("Written by `tessera profile`; measured, not configured. Delete it or use --refresh to re-measure.");
  out << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << profile.cluster;
  out << YAML::Key << "measured_at" << YAML::Value << profile.measured_at;
  out << YAML::Key << "coordinator_send_bytes_per_s" << YAML::Value << profile.coordinator_send_bytes_per_s;
  if (profile.coordinator_cpu_s_per_byte > 0.0) {
    out << YAML::Key << "coordinator_cpu_s_per_byte" << YAML::Value << profile.coordinator_cpu_s_per_byte;
  }
  if (profile.switch_uplink_bytes_per_s > 0.0) {
    out << YAML::Key << "switch_uplink_bytes_per_s" << YAML::Value << profile.switch_uplink_bytes_per_s;
  }
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  const std::vector<double> powers = profile.relative_powers();
  for (std::size_t i = 0; i < profile.nodes.size(); ++i) {
    const NodeProfile& node = profile.nodes[i];
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << node.name;
    out << YAML::Key << "endpoint" << YAML::Value << node.endpoint;
    out << YAML::Key << "measured_at" << YAML::Value << node.measured_at;
    out << YAML::Key << "quick" << YAML::Value << node.quick;
    out << YAML::Key << "gflops" << YAML::Value << node.gflops;
    if (node.concurrent_gflops > 0.0) out << YAML::Key << "concurrent_gflops" << YAML::Value << node.concurrent_gflops;
    if (node.compute_cores > 0.0) out << YAML::Key << "compute_cores" << YAML::Value << node.compute_cores;
    if (node.job_overhead_s > 0.0) out << YAML::Key << "job_overhead_s" << YAML::Value << node.job_overhead_s;
    if (node.vector_gflops > 0.0) out << YAML::Key << "vector_gflops" << YAML::Value << node.vector_gflops;
    if (node.receive_cpu_s_per_byte > 0.0) {
      out << YAML::Key << "receive_cpu_s_per_byte" << YAML::Value << node.receive_cpu_s_per_byte;
    }
    out << YAML::Key << "relative_power" << YAML::Value << powers[i];
    out << YAML::Key << "probe_size" << YAML::Value << node.probe_size;
    out << YAML::Key << "repetitions" << YAML::Value << node.repetitions;
    out << YAML::Key << "probe_seconds" << YAML::Value << node.probe_seconds;
    emit_speed(out, node.speed);
    if (node.has_link) {
      out << YAML::Key << "link" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "latency_s" << YAML::Value << node.link.latency_s;
      if (node.link.busy_latency_s > 0.0) {
        out << YAML::Key << "busy_latency_s" << YAML::Value << node.link.busy_latency_s;
      }
      out << YAML::Key << "to_node_bytes_per_s" << YAML::Value << node.link.to_node_bytes_per_s;
      out << YAML::Key << "from_node_bytes_per_s" << YAML::Value << node.link.from_node_bytes_per_s;
      out << YAML::EndMap;
    }
    if (node.graph) {
      out << YAML::Key << "graph" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "edge_updates_per_s" << YAML::Value << node.graph->edge_updates_per_s;
      out << YAML::Key << "send_s_per_delta" << YAML::Value << node.graph->send_s_per_delta;
      out << YAML::Key << "send_s_per_batch" << YAML::Value << node.graph->send_s_per_batch;
      out << YAML::Key << "receive_s_per_delta" << YAML::Value << node.graph->receive_s_per_delta;
      out << YAML::Key << "receive_s_per_batch" << YAML::Value << node.graph->receive_s_per_batch;
      out << YAML::EndMap;
    }
    out << YAML::Key << "threads" << YAML::Value << node.threads;
    out << YAML::Key << "cores" << YAML::Value << node.cores;
    out << YAML::Key << "memory_bytes" << YAML::Value << node.memory_bytes;
    out << YAML::Key << "arch" << YAML::Value << node.arch;
    out << YAML::Key << "hostname" << YAML::Value << node.hostname;
    out << YAML::Key << "worker_version" << YAML::Value << node.worker_version;
    out << YAML::Key << "fingerprint" << YAML::Value << node.fingerprint;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;

  // Write to a temporary file and rename, so a crash never leaves half a profile behind.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    if (!file) return io_error(fmt::format("cannot write profile {}", temporary));
    file << out.c_str() << "\n";
    if (!file.flush()) return io_error(fmt::format("cannot write profile {}", temporary));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return io_error(fmt::format("cannot write profile {}: {}", path, error.message()));
  return Status::ok();
}

Result<ClusterProfile> load_profile(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    return not_found(fmt::format("no profile at {}; run `tessera profile CONFIG` first", path));
  }
  Result<std::string> text = cluster::read_yaml_file(path, "profile");
  if (!text) return text.status();
  ClusterProfile profile;
  TESSERA_RETURN_IF_ERROR(cluster::read_yaml(
      *text, path, [&](const YAML::Node& root) { profile = parse_profile(root); },
      "the profile is written by `tessera profile`; delete it or run `tessera profile --refresh`"));
  return profile;
}

}  // namespace tessera::balance::profile
