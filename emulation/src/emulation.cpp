#include "tessera/emulation/emulation.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/core/strings.hpp"
#include "tessera/core/subprocess.hpp"

namespace tessera::emulation {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kBenchmarkNetwork = (198u << 24) | (18u << 16);  // 198.18.0.0/15

uint32_t fnv1a(const std::string& text) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

std::string ipv4(uint32_t address) {
  return fmt::format("{}.{}.{}.{}", address >> 24, (address >> 16) & 0xff, (address >> 8) & 0xff, address & 0xff);
}

// ip and tc answer in milliseconds; the deadline only keeps a wedged one from hanging `up`/`down`.
constexpr std::chrono::seconds kCommandDeadline{30};

// Runs a program (no shell) and returns its stdout and stderr together; a program that cannot
// be started gives its reason as output and exit code -1, which callers treat as any failure.
ProcessResult run_program(const std::vector<std::string>& args) {
  ProcessOptions options;
  options.stdout_to = OutputTarget::capture();
  options.stderr_to = OutputTarget::same_as_stdout();
  Result<ProcessResult> run = run_process(args, options, kCommandDeadline);
  if (!run) {
    ProcessResult failed;
    failed.output = run.status().message();
    return failed;
  }
  while (!run->output.empty() && (run->output.back() == '\n' || run->output.back() == ' ')) run->output.pop_back();
  return std::move(*run);
}

Status run_step(const std::vector<std::string>& args) { return run_checked(args, kCommandDeadline); }

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  if (!file) return io_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  file << text;
  file.flush();
  if (!file) return io_error(fmt::format("cannot write '{}' to {}: {}", text, path, std::strerror(errno)));
  return Status::ok();
}

std::string forwarding_path(const std::string& device) { return "/proc/sys/net/ipv4/conf/" + device + "/forwarding"; }

bool program_exists(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    if (::access((std::string(dir) + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// The tbf qdisc that holds a device to `rate`.
Result<std::vector<std::string>> tbf_of(const std::string& rate, const std::string& whose) {
  const std::optional<double> bytes_per_second = cluster::rate_bytes_per_second(rate);
  if (!bytes_per_second) return invalid_config(fmt::format("{}: cannot read rate '{}'", whose, rate));
  // Veth hands tbf GSO packets of up to 64 KiB; a smaller bucket would drop them all.
  const auto burst = static_cast<uint64_t>(std::max(65536.0 + 1514.0, *bytes_per_second * 0.002));
  return std::vector<std::string>{"tbf", "rate", rate, "burst", std::to_string(burst), "latency", "50ms"};
}

Status shape_device(const std::string& netns, const std::string& device, const NodeEmulation& plan) {
  std::vector<std::string> tc = {"tc"};
  if (!netns.empty()) tc = {"tc", "-n", netns};
  auto with = [&](std::vector<std::string> rest) {
    std::vector<std::string> args = tc;
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  };
  Result<std::vector<std::string>> shaping = tbf_of(plan.rate, fmt::format("node '{}'", plan.node));
  if (!shaping) return shaping.status();
  const std::vector<std::string>& tbf = *shaping;

  if (plan.delay.empty() && plan.loss_percent == 0.0) {
    std::vector<std::string> args = {"qdisc", "add", "dev", device, "root"};
    args.insert(args.end(), tbf.begin(), tbf.end());
    return run_step(with(args));
  }
  std::vector<std::string> netem = {"qdisc", "add", "dev", device, "root", "handle", "1:", "netem"};
  if (!plan.delay.empty()) netem.insert(netem.end(), {"delay", plan.delay});
  if (plan.loss_percent > 0.0) netem.insert(netem.end(), {"loss", fmt::format("{}%", plan.loss_percent)});
  Status added = run_step(with(netem));
  if (!added) {
    return Status(added.code(),
                  fmt::format("node '{}': link delay/loss need the kernel's netem qdisc (CONFIG_NET_SCH_NETEM), "
                              "which this kernel lacks or refused ({}); remove delay/loss from the node's link "
                              "(rate alone works with tbf)",
                              plan.node, added.message()));
  }
  std::vector<std::string> child = {"qdisc", "add", "dev", device, "parent", "1:1", "handle", "10:"};
  child.insert(child.end(), tbf.begin(), tbf.end());
  return run_step(with(child));
}

bool device_exists(const std::string& device) { return !device.empty() && fs::exists("/sys/class/net/" + device); }

// The switch's uplink: two ifb devices held to its rate, one per direction. Made by the first
// member that needs them; a member's own link keeps its own tbf behind them.
Status ensure_uplink(const NodeEmulation& plan) {
  Result<std::vector<std::string>> tbf = tbf_of(plan.uplink_rate, "the switch's uplink");
  if (!tbf) return tbf.status();
  for (const std::string& device : {plan.uplink_to_nodes_ifb, plan.uplink_from_nodes_ifb}) {
    std::vector<std::vector<std::string>> steps;
    if (!device_exists(device)) {
      steps.push_back({"ip", "link", "add", device, "type", "ifb"});
      steps.push_back({"ip", "link", "set", device, "up"});
    }
    // Replaced, not added: a member restarted after the file changed the uplink's rate sets it.
    steps.push_back({"tc", "qdisc", "replace", "dev", device, "root"});
    steps.back().insert(steps.back().end(), tbf->begin(), tbf->end());
    for (const std::vector<std::string>& step : steps) {
      if (Status done = run_step(step); !done) {
        return done.with_context("the switch's uplink (needs the kernel's ifb device and tc's mirred action): ");
      }
    }
  }
  return Status::ok();
}

// Traffic between the member and the coordinator's host (the host end's own address, at either
// end of the packet) goes through the uplink's devices; traffic the host forwards between two
// members carries their addresses and does not, as a switch would not send it up.
Status attach_to_uplink(const NodeEmulation& plan) {
  const std::string host = plan.host_address + "/32";
  const std::vector<std::vector<std::string>> steps = {
      {"tc", "qdisc", "add", "dev", plan.host_veth, "clsact"},
      {"tc", "filter", "add", "dev", plan.host_veth, "egress", "protocol", "ip", "u32", "match", "ip", "src", host,
       "action", "mirred", "egress", "redirect", "dev", plan.uplink_to_nodes_ifb},
      {"tc", "filter", "add", "dev", plan.host_veth, "ingress", "protocol", "ip", "u32", "match", "ip", "dst", host,
       "action", "mirred", "egress", "redirect", "dev", plan.uplink_from_nodes_ifb},
  };
  for (const auto& step : steps) {
    if (Status done = run_step(step); !done) return done.with_context(fmt::format("node '{}': joining the switch: ", plan.node));
  }
  return Status::ok();
}

Status create_cgroup(const NodeEmulation& plan) {
  std::error_code error;
  fs::create_directories(plan.cgroup_path, error);
  if (error) return io_error(fmt::format("cannot create cgroup {}: {}", plan.cgroup_path, error.message()));
  const auto quota = static_cast<long>(std::lround(plan.cpu * plan.cpu_period_us));
  // The quota caps a node; its weight is what it gets when nodes compete for a core. With equal
  // weights, quarter-core nodes that all become runnable at the start of their periods take a
  // share of an uncapped node's core too and slow it, as three boards never slow a real desktop
  // beside them. Weights in proportion to the quotas give each node its quota while the machine
  // has the cores for the sum.
  const CgroupWeight weight = cgroup_weight(plan.cpu);
  if (fs::exists(plan.cgroup_path + "/cpu.cfs_quota_us")) {
    TESSERA_RETURN_IF_ERROR(write_text(plan.cgroup_path + "/cpu.cfs_period_us", std::to_string(plan.cpu_period_us)));
    TESSERA_RETURN_IF_ERROR(write_text(plan.cgroup_path + "/cpu.shares", std::to_string(weight.v1_shares)));
    return write_text(plan.cgroup_path + "/cpu.cfs_quota_us", std::to_string(quota));
  }
  TESSERA_RETURN_IF_ERROR(write_text(plan.cgroup_path + "/cpu.weight", std::to_string(weight.v2_weight)));
  return write_text(plan.cgroup_path + "/cpu.max", fmt::format("{} {}", quota, plan.cpu_period_us));
}

// cgroup v2 only distributes cpu to children whose parents enabled it.
Status enable_v2_cpu_controller(const std::string& root, const std::string& cgroup_path) {
  fs::path path = root;
  const fs::path relative = fs::path(cgroup_path).lexically_relative(root);
  for (const fs::path& part : relative) {
    TESSERA_RETURN_IF_ERROR(write_text((path / "cgroup.subtree_control").string(), "+cpu"));
    path /= part;
    std::error_code error;
    fs::create_directory(path, error);
  }
  return Status::ok();
}

std::vector<int> cgroup_members(const std::string& cgroup_path) {
  std::vector<int> pids;
  std::ifstream file(cgroup_path + "/cgroup.procs");
  for (int pid; file >> pid;) pids.push_back(pid);
  return pids;
}

std::vector<int> netns_members(const std::string& netns) {
  const ProcessResult result = run_program({"ip", "netns", "pids", netns});
  std::vector<int> pids;
  std::istringstream stream(result.output);
  for (int pid; stream >> pid;) pids.push_back(pid);
  return pids;
}

void kill_and_wait(const std::vector<int>& pids) {
  for (int pid : pids) ::kill(pid, SIGKILL);
  for (int pid : pids) {
    for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) {
      ::waitpid(pid, nullptr, WNOHANG);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace

EmulationSupport detect_emulation_support() {
  EmulationSupport support;
  support.is_root = ::geteuid() == 0;
  support.has_ip = program_exists("ip") && program_exists("tc");
  if (fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")) {
    support.cgroup = CgroupVersion::kV1;
    support.cgroup_root = "/sys/fs/cgroup/cpu";
  } else if (std::ifstream controllers("/sys/fs/cgroup/cgroup.controllers"); controllers) {
    std::string line;
    std::getline(controllers, line);
    if ((" " + line + " ").find(" cpu ") != std::string::npos) {
      support.cgroup = CgroupVersion::kV2;
      support.cgroup_root = "/sys/fs/cgroup";
    }
  }
  if (support.cgroup == CgroupVersion::kNone) {
    support.missing = "no cgroup cpu controller (neither v1 /sys/fs/cgroup/cpu nor v2 cpu in cgroup.controllers)";
  } else if (::access(support.cgroup_root.c_str(), W_OK) != 0) {
    support.missing = fmt::format("no write access to {} (run as root)", support.cgroup_root);
  }
  if (!support.is_root) {
    support.link_missing = "network namespaces and tc need root";
  } else if (!support.has_ip) {
    support.link_missing = "iproute2's ip and tc are not installed (apt-get install iproute2)";
  }
  return support;
}

CgroupWeight cgroup_weight(double cpu) {
  const double cores = std::isfinite(cpu) && cpu > 0.0 ? cpu : 1.0;
  CgroupWeight weight;
  weight.v1_shares = static_cast<uint64_t>(std::clamp(std::llround(1024.0 * cores), 2LL, 262144LL));
  weight.v2_weight = static_cast<uint64_t>(std::clamp(std::llround(100.0 * cores), 1LL, 10000LL));
  return weight;
}

NodeEmulation plan_node_emulation(const cluster::ClusterSpec& cluster, std::size_t node_index, const EmulationSupport& support) {
  const cluster::NodeSpec& node = cluster.nodes[node_index];
  NodeEmulation plan;
  plan.node = node.name;
  if (!node.emulate) return plan;
  const cluster::EmulationSpec& spec = *node.emulate;
  if (spec.cpu > 0.0) {
    plan.cpu = spec.cpu;
    plan.cpu_period_us = spec.cpu_period_us;
    plan.cgroup_path = fmt::format("{}/tessera/{}/{}", support.cgroup_root, cluster.name, node.name);
  }
  if (spec.has_link) {
    const uint32_t cluster_hash = fnv1a(cluster.name);
    // 128 groups of 256 /30 blocks fill 198.18.0.0/15; a cluster takes one group.
    const uint32_t block = (cluster_hash % 128) * 256 + static_cast<uint32_t>(node_index % 256);
    const uint32_t base = kBenchmarkNetwork + block * 4;
    plan.host_address = ipv4(base + 1);
    plan.node_address = ipv4(base + 2);
    plan.netns = fmt::format("tessera-{}-{}", cluster.name, node.name);
    const std::string stem = fmt::format("ts{:06x}{:02x}", cluster_hash & 0xffffff, node_index % 256);
    plan.host_veth = stem + "h";
    plan.node_veth = stem + "n";
    plan.rate = spec.link_rate;
    plan.delay = spec.link_delay;
    plan.loss_percent = spec.link_loss_percent;
    plan.host_forwarding = true;
    if (cluster.behind_switch(node_index)) {
      const std::string switch_stem = fmt::format("ts{:06x}", cluster_hash & 0xffffff);
      plan.uplink_rate = cluster.network_switch->uplink_rate;
      plan.uplink_to_nodes_ifb = switch_stem + "sd";
      plan.uplink_from_nodes_ifb = switch_stem + "su";
    }
  }
  return plan;
}

Status create_node_emulation(const NodeEmulation& plan) {
  auto undo_on_failure = [&](Status status) {
    if (!status.is_ok()) (void)remove_node_emulation(plan);
    return status;
  };
  if (!plan.cgroup_path.empty()) {
    const std::string root = plan.cgroup_path.substr(0, plan.cgroup_path.find("/tessera/"));
    if (!fs::exists(root + "/cpu.cfs_quota_us")) {
      if (Status enabled = enable_v2_cpu_controller(root, plan.cgroup_path); !enabled) return undo_on_failure(enabled);
    }
    if (Status created = create_cgroup(plan); !created) return undo_on_failure(created);
  }
  if (!plan.netns.empty()) {
    const std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", plan.netns},
        {"ip", "link", "add", plan.host_veth, "type", "veth", "peer", "name", plan.node_veth},
        {"ip", "link", "set", plan.node_veth, "netns", plan.netns},
        {"ip", "addr", "add", plan.host_address + "/30", "dev", plan.host_veth},
        {"ip", "link", "set", plan.host_veth, "up"},
        {"ip", "-n", plan.netns, "addr", "add", plan.node_address + "/30", "dev", plan.node_veth},
        {"ip", "-n", plan.netns, "link", "set", plan.node_veth, "up"},
        {"ip", "-n", plan.netns, "link", "set", "lo", "up"},
        // Peers of a graph run live behind the host: other namespaces and root-namespace workers.
        {"ip", "-n", plan.netns, "route", "add", "default", "via", plan.host_address},
    };
    for (const auto& step : steps) {
      if (Status done = run_step(step); !done) return undo_on_failure(done.with_context(fmt::format("node '{}': ", plan.node)));
    }
    // Packets from this namespace to another one are forwarded by the host; IPv4 decides that by
    // the interface they arrive on, so the host end alone is enough and nothing global changes.
    if (plan.host_forwarding) {
      if (Status enabled = write_text(forwarding_path(plan.host_veth), "1"); !enabled) {
        return undo_on_failure(enabled.with_context(fmt::format("node '{}': forwarding for peer traffic: ", plan.node)));
      }
    }
    // Shaping both ends limits both directions: the host end's egress is traffic to the node.
    if (Status shaped = shape_device("", plan.host_veth, plan); !shaped) return undo_on_failure(shaped);
    if (Status shaped = shape_device(plan.netns, plan.node_veth, plan); !shaped) return undo_on_failure(shaped);
    if (!plan.uplink_rate.empty()) {
      if (Status made = ensure_uplink(plan); !made) return undo_on_failure(made);
      if (Status attached = attach_to_uplink(plan); !attached) return undo_on_failure(attached);
    }
  }
  return Status::ok();
}

Status remove_uplink(const std::vector<NodeEmulation>& emulation) {
  std::vector<std::string> problems;
  for (const NodeEmulation& node : emulation) {
    for (const std::string& device : {node.uplink_to_nodes_ifb, node.uplink_from_nodes_ifb}) {
      if (!device_exists(device)) continue;
      const ProcessResult removed = run_program({"ip", "link", "del", device});
      if (!removed.succeeded() && device_exists(device)) {
        problems.push_back(fmt::format("`ip link del {}` failed: {}", device, removed.output));
      }
    }
  }
  if (problems.empty()) return Status::ok();
  return internal_error("the switch's uplink: teardown incomplete:\n  " + join(problems, "\n  "));
}

Status remove_node_emulation(const NodeEmulation& emulation) {
  std::vector<std::string> problems;
  // The setting goes with the device; undone explicitly all the same, before anything else.
  if (emulation.host_forwarding && !emulation.host_veth.empty() && fs::exists(forwarding_path(emulation.host_veth))) {
    if (Status disabled = write_text(forwarding_path(emulation.host_veth), "0"); !disabled) {
      problems.push_back(disabled.message());
    }
  }
  if (!emulation.netns.empty() && fs::exists("/run/netns/" + emulation.netns)) {
    kill_and_wait(netns_members(emulation.netns));
    if (Status removed = run_step({"ip", "netns", "del", emulation.netns}); !removed) problems.push_back(removed.message());
  }
  if (!emulation.host_veth.empty()) {
    // Deleting the namespace destroys the pair, asynchronously; give the kernel a moment before
    // deleting a half-built pair (one whose peer never moved into the namespace) ourselves.
    const std::string device = "/sys/class/net/" + emulation.host_veth;
    for (int attempt = 0; attempt < 100 && fs::exists(device); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fs::exists(device)) {
      const ProcessResult removed = run_program({"ip", "link", "del", emulation.host_veth});
      if (!removed.succeeded() && fs::exists(device)) {
        problems.push_back(fmt::format("`ip link del {}` failed: {}", emulation.host_veth, removed.output));
      }
    }
  }
  if (!emulation.cgroup_path.empty() && fs::exists(emulation.cgroup_path)) {
    kill_and_wait(cgroup_members(emulation.cgroup_path));
    std::error_code error;
    for (int attempt = 0; attempt < 50; ++attempt) {
      if (fs::remove(emulation.cgroup_path, error) || !fs::exists(emulation.cgroup_path)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (fs::exists(emulation.cgroup_path)) {
      problems.push_back(fmt::format("cannot remove cgroup {}: {}", emulation.cgroup_path, error.message()));
    } else {
      // Parents (tessera/<cluster>, tessera) go once empty; fs::remove fails harmlessly otherwise.
      const fs::path cluster_dir = fs::path(emulation.cgroup_path).parent_path();
      fs::remove(cluster_dir, error);
      fs::remove(cluster_dir.parent_path(), error);
    }
  }
  if (problems.empty()) return Status::ok();
  std::string message = fmt::format("node '{}': teardown incomplete:", emulation.node);
  for (const std::string& problem : problems) message += "\n  " + problem;
  return internal_error(message);
}

std::string emulation_state_path(const std::string& cluster_run_dir) { return cluster_run_dir + "/emulation.json"; }

Status save_emulation_state(const std::string& path, const std::vector<NodeEmulation>& nodes) {
  nlohmann::json document = {{"nodes", nlohmann::json::array()}};
  for (const NodeEmulation& node : nodes) {
    document["nodes"].push_back({{"node", node.node},
                                 {"cpu", node.cpu},
                                 {"cpu_period_us", node.cpu_period_us},
                                 {"cgroup_path", node.cgroup_path},
                                 {"netns", node.netns},
                                 {"host_veth", node.host_veth},
                                 {"node_veth", node.node_veth},
                                 {"host_address", node.host_address},
                                 {"node_address", node.node_address},
                                 {"rate", node.rate},
                                 {"delay", node.delay},
                                 {"loss_percent", node.loss_percent},
                                 {"host_forwarding", node.host_forwarding},
                                 {"uplink_rate", node.uplink_rate},
                                 {"uplink_to_nodes_ifb", node.uplink_to_nodes_ifb},
                                 {"uplink_from_nodes_ifb", node.uplink_from_nodes_ifb}});
  }
  const std::string temporary = path + ".tmp";
  TESSERA_RETURN_IF_ERROR(write_text(temporary, document.dump(2) + "\n"));
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) return io_error(fmt::format("cannot write {}: {}", path, error.message()));
  return Status::ok();
}

Result<std::vector<NodeEmulation>> load_emulation_state(const std::string& path) {
  std::vector<NodeEmulation> nodes;
  std::ifstream file(path);
  if (!file) return nodes;
  try {
    const nlohmann::json document = nlohmann::json::parse(file);
    for (const auto& entry : document.at("nodes")) {
      NodeEmulation node;
      node.node = entry.at("node").get<std::string>();
      node.cpu = entry.value("cpu", 0.0);
      // A state file from before the key existed was written with the kernel's period.
      node.cpu_period_us = entry.value("cpu_period_us", uint32_t{100000});
      node.cgroup_path = entry.value("cgroup_path", "");
      node.netns = entry.value("netns", "");
      node.host_veth = entry.value("host_veth", "");
      node.node_veth = entry.value("node_veth", "");
      node.host_address = entry.value("host_address", "");
      node.node_address = entry.value("node_address", "");
      node.rate = entry.value("rate", "");
      node.delay = entry.value("delay", "");
      node.loss_percent = entry.value("loss_percent", 0.0);
      node.host_forwarding = entry.value("host_forwarding", false);
      node.uplink_rate = entry.value("uplink_rate", "");
      node.uplink_to_nodes_ifb = entry.value("uplink_to_nodes_ifb", "");
      node.uplink_from_nodes_ifb = entry.value("uplink_from_nodes_ifb", "");
      nodes.push_back(std::move(node));
    }
  } catch (const nlohmann::json::exception& error) {
    return io_error(fmt::format("{} is damaged ({}); remove what it lists by hand, then delete it", path, error.what()));
  }
  return nodes;
}

void apply_emulated_endpoints(cluster::ClusterSpec& cluster, const std::string& cluster_run_dir) {
  Result<std::vector<NodeEmulation>> state = load_emulation_state(emulation_state_path(cluster_run_dir));
  if (state) apply_emulated_endpoints(cluster, *state);
}

void apply_emulated_endpoints(cluster::ClusterSpec& cluster, const std::vector<NodeEmulation>& state) {
  for (const NodeEmulation& emulation : state) {
    if (emulation.netns.empty()) continue;
    const int index = cluster.find_node(emulation.node);
    if (index >= 0) cluster.nodes[static_cast<std::size_t>(index)].host = emulation.node_address;
  }
}

bool has_namespaced_nodes(const std::vector<NodeEmulation>& state) {
  return std::any_of(state.begin(), state.end(), [](const NodeEmulation& node) { return !node.netns.empty(); });
}

std::vector<std::vector<std::string>> peer_hosts(const cluster::ClusterSpec& cluster, const std::vector<NodeEmulation>& state) {
  const std::size_t count = cluster.nodes.size();
  std::vector<const NodeEmulation*> emulation(count, nullptr);
  for (const NodeEmulation& node : state) {
    const int index = cluster.find_node(node.node);
    if (index >= 0 && !node.netns.empty()) emulation[static_cast<std::size_t>(index)] = &node;
  }
  std::vector<std::vector<std::string>> hosts(count, std::vector<std::string>(count));
  for (std::size_t receiver = 0; receiver < count; ++receiver) {
    for (std::size_t peer = 0; peer < count; ++peer) {
      if (emulation[peer] != nullptr) {
        hosts[receiver][peer] = emulation[peer]->node_address;
      } else if (emulation[receiver] != nullptr) {
        hosts[receiver][peer] = emulation[receiver]->host_address;
      } else {
        hosts[receiver][peer] = cluster.nodes[peer].host;
      }
    }
  }
  return hosts;
}

std::vector<std::string> leftover_emulation(const std::vector<NodeEmulation>& nodes) {
  std::vector<std::string> leftovers;
  for (const NodeEmulation& node : nodes) {
    if (!node.cgroup_path.empty() && fs::exists(node.cgroup_path)) leftovers.push_back("cgroup " + node.cgroup_path);
    if (!node.netns.empty() && fs::exists("/run/netns/" + node.netns)) leftovers.push_back("netns " + node.netns);
    if (!node.host_veth.empty() && fs::exists("/sys/class/net/" + node.host_veth)) leftovers.push_back("veth " + node.host_veth);
    for (const std::string& device : {node.uplink_to_nodes_ifb, node.uplink_from_nodes_ifb}) {
      const std::string entry = "ifb " + device;
      if (device_exists(device) && std::find(leftovers.begin(), leftovers.end(), entry) == leftovers.end()) leftovers.push_back(entry);
    }
  }
  return leftovers;
}

}  // namespace tessera::emulation
