#include "tessera/balance/profile.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace tessera::balance {

namespace {

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::vector<double> ClusterProfile::relative_powers() const {
  double total = 0.0;
  for (const NodeProfile& node : nodes) total += node.gflops;
  std::vector<double> powers;
  for (const NodeProfile& node : nodes) powers.push_back(total > 0.0 ? node.gflops / total : 0.0);
  return powers;
}

Result<ClusterProfile> run_quick_profile(ClusterConnection& cluster, const std::string& cluster_name,
                                         const QuickProfileOptions& options,
                                         const std::function<void(const NodeProfile&)>& on_node) {
  ClusterProfile profile;
  profile.cluster = cluster_name;
  profile.measured_at = utc_now_iso8601();
  for (NodeLink& link : cluster.links()) {
    const std::string who = fmt::format("node '{}' ({})", link.spec.name, link.spec.endpoint());
    transport::Probe probe;
    probe.kind = transport::ProbeKind::kGemm;
    probe.gemm_size = options.probe_size;
    probe.min_seconds = options.min_seconds;
    TESSERA_RETURN_IF_ERROR(link.connection->write_message(probe).with_context(who + ": "));
    Result<transport::IncomingFrame> reply = link.connection->read_frame();
    if (!reply) return reply.status().with_context(who + ": profile probe failed: ");
    if (auto* error = std::get_if<transport::Error>(&reply->message)) {
      return Status(StatusCode::kNetworkError, fmt::format("{} refused the probe: {}", who, error->message));
    }
    auto* result = std::get_if<transport::ProbeResult>(&reply->message);
    if (result == nullptr || result->kind != transport::ProbeKind::kGemm) {
      return protocol_error(fmt::format("{} answered the GEMM probe with {}", who,
                                        transport::message_type_name(reply->header.type)));
    }
    if (!(result->gflops > 0.0)) {
      return protocol_error(fmt::format("{} reported a GEMM rate of {} GFLOP/s", who, result->gflops));
    }
    NodeProfile node;
    node.name = link.spec.name;
    node.endpoint = link.spec.endpoint();
    node.gflops = result->gflops;
    node.probe_size = result->gemm_size;
    node.repetitions = result->repetitions;
    node.probe_seconds = result->seconds;
    node.threads = link.hello.threads;
    node.cores = link.hello.cores;
    node.arch = link.hello.arch;
    node.worker_version = link.hello.worker_version;
    if (on_node) on_node(node);
    profile.nodes.push_back(std::move(node));
  }
  return profile;
}

std::string default_profile_path(const std::string& cluster_config_path) {
  std::filesystem::path path(cluster_config_path);
  path.replace_extension();
  return path.string() + ".profile.yaml";
}

Status save_profile(const std::string& path, const ClusterProfile& profile) {
  YAML::Emitter out;
  out << YAML::Comment("Written by `tessera profile`; measured, not configured. Delete to re-measure.");
  out << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << profile.cluster;
  out << YAML::Key << "measured_at" << YAML::Value << profile.measured_at;
  out << YAML::Key << "method" << YAML::Value << profile.method;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  const std::vector<double> powers = profile.relative_powers();
  for (std::size_t i = 0; i < profile.nodes.size(); ++i) {
    const NodeProfile& node = profile.nodes[i];
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << node.name;
    out << YAML::Key << "endpoint" << YAML::Value << node.endpoint;
    out << YAML::Key << "gflops" << YAML::Value << node.gflops;
    out << YAML::Key << "relative_power" << YAML::Value << powers[i];
    out << YAML::Key << "probe_size" << YAML::Value << node.probe_size;
    out << YAML::Key << "repetitions" << YAML::Value << node.repetitions;
    out << YAML::Key << "probe_seconds" << YAML::Value << node.probe_seconds;
    out << YAML::Key << "threads" << YAML::Value << node.threads;
    out << YAML::Key << "cores" << YAML::Value << node.cores;
    out << YAML::Key << "arch" << YAML::Value << node.arch;
    out << YAML::Key << "worker_version" << YAML::Value << node.worker_version;
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
  try {
    const YAML::Node root = YAML::LoadFile(path);
    ClusterProfile profile;
    profile.cluster = root["cluster"].as<std::string>();
    profile.measured_at = root["measured_at"].as<std::string>("");
    profile.method = root["method"].as<std::string>("quick-gemm");
    for (const YAML::Node& entry : root["nodes"]) {
      NodeProfile node;
      node.name = entry["name"].as<std::string>();
      node.endpoint = entry["endpoint"].as<std::string>("");
      node.gflops = entry["gflops"].as<double>();
      node.probe_size = entry["probe_size"].as<uint32_t>(0);
      node.repetitions = entry["repetitions"].as<uint32_t>(0);
      node.probe_seconds = entry["probe_seconds"].as<double>(0.0);
      node.threads = entry["threads"].as<uint32_t>(0);
      node.cores = entry["cores"].as<uint32_t>(0);
      node.arch = entry["arch"].as<std::string>("");
      node.worker_version = entry["worker_version"].as<std::string>("");
      if (!(node.gflops > 0.0)) {
        return invalid_config(fmt::format("{}:{}: node '{}' has gflops {}; re-run `tessera profile`", path,
                                          entry.Mark().line + 1, node.name, node.gflops));
      }
      profile.nodes.push_back(std::move(node));
    }
    return profile;
  } catch (const YAML::Exception& error) {
    return invalid_config(fmt::format("{}:{}: unreadable profile ({}); delete it and run `tessera profile`",
                                      path, error.mark.line + 1, error.msg));
  }
}

Result<std::vector<double>> profile_weights(const ClusterProfile& profile, const ClusterSpec& cluster,
                                            const std::string& profile_path) {
  std::vector<double> weights;
  for (const NodeSpec& node : cluster.nodes) {
    auto found = std::find_if(profile.nodes.begin(), profile.nodes.end(),
                              [&](const NodeProfile& measured) { return measured.name == node.name; });
    if (found == profile.nodes.end()) {
      return not_found(fmt::format("profile {} has no measurement for node '{}'; run `tessera profile {}`",
                                   profile_path, node.name, cluster.source_path));
    }
    weights.push_back(found->gflops);
  }
  return weights;
}

}  // namespace tessera::balance
