// `tessera status`: every node checked at once, against the saved profile.
#include "tessera/cli/commands.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/balance/profile/profile.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/core/time.hpp"
#include "subcommands.hpp"

namespace tessera::cli {

namespace {

// What differs between a node now and when it was profiled ("threads 1 -> 2"), empty if nothing.
std::vector<std::string> changes_since_profile(const transport::Hello& hello, const profile::NodeProfile& profiled) {
  std::vector<std::string> changed;
  if (profiled.threads != 0 && hello.threads != profiled.threads) {
    changed.push_back(fmt::format("threads {} -> {}", profiled.threads, hello.threads));
  }
  if (profiled.cores != 0 && hello.cores != profiled.cores) {
    changed.push_back(fmt::format("cores {} -> {}", profiled.cores, hello.cores));
  }
  if (profiled.memory_bytes != 0 && hello.memory_bytes != profiled.memory_bytes) {
    // Available memory moves a little all the time; only a change of a tenth or more counts.
    const double ratio = static_cast<double>(hello.memory_bytes) / static_cast<double>(profiled.memory_bytes);
    if (ratio < 0.9 || ratio > 1.1) {
      changed.push_back(fmt::format("memory {:.1f} -> {:.1f} GiB", static_cast<double>(profiled.memory_bytes) / 1073741824.0,
                                    static_cast<double>(hello.memory_bytes) / 1073741824.0));
    }
  }
  if (!profiled.arch.empty() && hello.arch != profiled.arch) {
    changed.push_back(fmt::format("arch {} -> {}", profiled.arch, hello.arch));
  }
  if (!profiled.worker_version.empty() && hello.worker_version != profiled.worker_version) {
    changed.push_back(fmt::format("version {} -> {}", profiled.worker_version, hello.worker_version));
  }
  return changed;
}

std::string age_text(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f} min", seconds / 60);
  if (seconds < 172800) return fmt::format("{:.0f} h", seconds / 3600);
  return fmt::format("{:.0f} days", seconds / 86400);
}

struct StatusLine {
  emulation::NodeReachability node;
  std::optional<double> profile_age_s;  // none: the node has no saved profile entry
  std::vector<std::string> changed;
};

Result<std::vector<StatusLine>> status_lines(const cluster::ClusterSpec& cluster, const StatusCommand& command,
                                             const std::optional<profile::ClusterProfile>& profile) {
  Result<std::vector<emulation::NodeReachability>> nodes =
      emulation::cluster_status(cluster, command.lifecycle.local, std::chrono::milliseconds(command.deadline_ms));
  if (!nodes) return nodes.status();
  std::vector<StatusLine> lines;
  const auto now = std::chrono::system_clock::now();
  for (emulation::NodeReachability& node : *nodes) {
    StatusLine line{std::move(node), std::nullopt, {}};
    if (profile) {
      for (const profile::NodeProfile& profiled : profile->nodes) {
        if (profiled.name != line.node.name) continue;
        if (auto at = parse_utc_iso8601(profiled.measured_at)) {
          line.profile_age_s = std::max(0.0, std::chrono::duration<double>(now - *at).count());
        }
        if (line.node.hello) line.changed = changes_since_profile(*line.node.hello, profiled);
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// "0.42/2": the 1-minute load average over the cores it is measured against, so "3.9/4" on a Pi
// and "3.9/16" on a desktop read differently at a glance, and the first number is still the one
// `uptime` prints on the node. "-" when the node did not report one.
std::string load_text(const emulation::NodeReachability& node) {
  const std::optional<double> load = node.load();
  if (!load) return "-";
  return node.hello->cores > 0 ? fmt::format("{:.2f}/{}", *load, node.hello->cores) : fmt::format("{:.2f}", *load);
}

std::string status_json(const std::string& cluster_name, const std::string& profile_path,
                        const std::vector<StatusLine>& lines) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const StatusLine& line : lines) {
    const emulation::NodeReachability& node = line.node;
    nlohmann::json entry = {{"name", node.name},
                            {"endpoint", node.endpoint},
                            {"state", emulation::reach_name(node.reach)},
                            {"detail", node.detail},
                            {"check_s", node.seconds},
                            {"wire", node.wire.empty() ? nlohmann::json(nullptr) : nlohmann::json(node.wire)},
                            {"load", node.load() ? nlohmann::json(*node.load()) : nlohmann::json(nullptr)},
                            {"local_pid", node.local_pid == 0 ? nlohmann::json(nullptr) : nlohmann::json(node.local_pid)},
                            {"profile_age_s", line.profile_age_s ? nlohmann::json(*line.profile_age_s) : nlohmann::json(nullptr)},
                            {"changed_since_profile", line.changed}};
    if (node.hello) {
      entry["worker"] = {{"version", node.hello->worker_version}, {"arch", node.hello->arch},
                         {"hostname", node.hello->hostname},      {"threads", node.hello->threads},
                         {"cores", node.hello->cores},            {"memory_bytes", node.hello->memory_bytes},
                         {"tile_memory_cap", node.hello->tile_memory_cap},
                         {"capabilities", transport::capability_names(node.hello->capabilities)}};
    }
    nodes.push_back(std::move(entry));
  }
  return nlohmann::json{{"cluster", cluster_name}, {"profile", profile_path}, {"nodes", std::move(nodes)}}.dump(2);
}

}  // namespace

int command_status(const StatusCommand& command, std::ostream& out, std::ostream& err) {
  Result<emulation::ReachableCluster> reachable =
      emulation::load_reachable_cluster(command.lifecycle.config_path, command.lifecycle.local.run_dir);
  if (!reachable) return report_failure(err, reachable.status());
  print_warnings(err, reachable->warnings);
  const cluster::ClusterSpec* cluster = &reachable->spec;
  if (command.deadline_ms < 50 || command.deadline_ms > 60000) {
    return report_failure(err, invalid_argument(fmt::format("--deadline-ms {} must be within 50..60000", command.deadline_ms)));
  }
  if (!(command.watch_s >= 0.0) || command.watch_s > 86400.0) {
    return report_failure(err, invalid_argument(fmt::format("--watch {} must be within 0..86400 seconds", command.watch_s)));
  }
  const std::string profile_path =
      command.profile_path.empty() ? profile::default_profile_path(command.lifecycle.config_path) : command.profile_path;
  const bool redraw = command.watch_s > 0.0 && ::isatty(STDOUT_FILENO) == 1 && !command.json;
  for (;;) {
    std::optional<profile::ClusterProfile> profile;
    std::error_code missing;
    if (std::filesystem::exists(profile_path, missing)) {
      Result<profile::ClusterProfile> loaded = profile::load_profile(profile_path);
      if (loaded) {
        profile = std::move(*loaded);
      } else {
        err << "tessera: ignoring the saved profile: " << loaded.status().message() << "\n";
      }
    }
    // A secret that cannot be had (a secret_file others can read, ...) is bad input, exit 2, as
    // for multiply; each node UNREACHABLE with exit 1 would hide it behind the network.
    Result<std::vector<StatusLine>> checked = status_lines(*cluster, command, profile);
    if (!checked) return report_failure(err, checked.status());
    const std::vector<StatusLine>& lines = *checked;
    bool all_reachable = true;
    for (const StatusLine& line : lines) all_reachable &= line.node.reachable;
    if (command.json) {
      out << status_json(cluster->name, profile ? profile_path : "", lines) << "\n";
    } else {
      if (redraw) out << "\x1b[H\x1b[2J" << fmt::format("{}  (every {:g} s; Ctrl-C stops)\n", utc_now(UtcFormat::kReadable), command.watch_s);
      out << fmt::format("{:<12} {:<22} {:<12} {:<8} {}\n", "node", "endpoint", "state", "load", "detail");
      for (const StatusLine& line : lines) {
        const emulation::NodeReachability& node = line.node;
        std::string profiled;
        if (profile && node.reachable) {
          profiled = line.profile_age_s ? fmt::format("; profiled {} ago", age_text(*line.profile_age_s)) : "; not in the profile";
          if (!line.changed.empty()) {
            profiled += fmt::format(", changed since ({}): tessera profile --node {}", join(line.changed, ", "), node.name);
          }
        }
        out << fmt::format("{:<12} {:<22} {:<12} {:<8} {}{}{}\n", node.name, node.endpoint, emulation::reach_name(node.reach),
                           load_text(node), node.detail, profiled,
                           node.local_pid != 0 ? fmt::format(" [local pid {}]", node.local_pid) : "");
      }
      if (!profile) out << fmt::format("no profile at {} (tessera profile CONFIG)\n", profile_path);
    }
    out.flush();
    if (command.watch_s <= 0.0) return all_reachable ? kExitOk : kExitRunFailed;
    // Sleep in short steps so Ctrl-C ends the watch at once.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(command.watch_s);
    while (std::chrono::steady_clock::now() < until) {
      if (command.interrupted != nullptr && command.interrupted->load()) return kExitInterrupted;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (command.interrupted != nullptr && command.interrupted->load()) return kExitInterrupted;
  }
}

Subcommand add_status_command(CLI::App& app) {
  auto command = std::make_shared<StatusCommand>();
  CLI::App* status = app.add_subcommand("status", "show whether each node of CONFIG answers, all checked at once");
  add_lifecycle_options(status, command->lifecycle);
  status->add_flag("--json", command->json, "print the nodes' states as one JSON document");
  status->add_option("--watch", command->watch_s, "redraw every SECONDS until Ctrl-C");
  status->add_option("--deadline-ms", command->deadline_ms, "how long each node may take to connect and authenticate")
      ->capture_default_str();
  status->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");
  return {status, [command](const Invocation& call) {
            command->interrupted = &call.stop_cleanly_on_interrupt();
            return command_status(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
