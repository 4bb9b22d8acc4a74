#include "tessera/balance/cli/commands.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <filesystem>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/balance/cli/progress_line.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/report/report.hpp"
#include "tessera/balance/run/verify.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/balance/study/experiment.hpp"
#include "tessera/balance/study/expression_study.hpp"
#include "tessera/balance/study/graph_study.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/core/time.hpp"

namespace tessera::balance::cli {

namespace {

int fail(std::ostream& err, const Status& status) { return report_failure(err, status); }

void print_profile(std::ostream& out, const profile::ClusterProfile& profile, const std::string& path) {
  const std::vector<double> powers = profile.relative_powers();
  out << fmt::format("{:<12} {:>9} {:>7} {:>8} {:>22} {:>10} {:>10} {:>10} {:>10}\n", "node", "GFLOP/s", "pw", "threads",
                     "speed curve (size:GF)", "latency", "when busy", "MB/s to", "MB/s from");
  for (std::size_t i = 0; i < profile.nodes.size(); ++i) {
    const profile::NodeProfile& node = profile.nodes[i];
    std::string curve;
    for (const model::SpeedPoint& point : node.speed) curve += fmt::format("{}{:g}:{:.0f}", curve.empty() ? "" : " ", point.size, point.gflops);
    if (curve.size() > 22) curve = fmt::format("{} points {:g}..{:g}", node.speed.size(), node.speed.front().size, node.speed.back().size);
    const std::string busy =
        node.link.busy_latency_s > 0.0 ? fmt::format("{:.3f}ms", node.link.busy_latency_s * 1e3) : std::string("-");
    out << fmt::format("{:<12} {:>9.2f} {:>7.4f} {:>8} {:>22} {:>8.3f}ms {:>10} {:>10.1f} {:>10.1f}\n", node.name,
                       node.gflops, powers[i], node.threads, curve, node.link.latency_s * 1e3, busy,
                       node.link.to_node_bytes_per_s / 1e6, node.link.from_node_bytes_per_s / 1e6);
  }
  out << fmt::format("coordinator sends {:.1f} MB/s to all nodes at once\n", profile.coordinator_send_bytes_per_s / 1e6);
  out << "saved " << path << "\n";
}

// Progress: on a terminal one line per node, rewritten in place; in a log only the final lines.
profile::ProfileProgress progress_printer(std::ostream& err) {
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  return [&err, terminal](const std::string& node, const std::string& what, bool done) {
    if (done) {
      err << (terminal ? "\r\033[K" : "") << fmt::format("  {:<12} {}\n", node, what);
    } else if (terminal) {
      err << "\r\033[K" << fmt::format("  {:<12} measuring {} ...", node, what) << std::flush;
    }
  };
}

struct Inputs {
  linalg::Matrix a, b;
};

// Doubles the multiply holds besides A and B: C, a second copy of B's pieces as the driver encodes
// them, and the copies verification makes (|A| and |B| for the rounding bound; the exact check
// also a reference C and its magnitude).
// Saturating: .npy shapes are bounded by their files, not by 2^20, and m x n could wrap.
uint64_t working_doubles(uint64_t m, uint64_t n, uint64_t k, const std::string& verify, bool count_inputs) {
  const auto add = [](uint64_t& total, uint64_t x, uint64_t y) {
    const uint64_t term = saturating_bytes(x, y, 1);
    total = total > UINT64_MAX - term ? UINT64_MAX : total + term;
  };
  uint64_t doubles = 0;
  add(doubles, m, n);
  add(doubles, k, n);
  if (count_inputs) {
    add(doubles, m, k);
    add(doubles, k, n);
  }
  if (verify == "freivalds" || verify == "exact") {
    add(doubles, m, k);
    add(doubles, k, n);
  }
  if (verify == "exact") {
    add(doubles, m, n);
    add(doubles, m, n);
  }
  return doubles;
}

// Refuses, before anything is allocated, a multiply whose matrices cannot fit in this machine's
// memory; names the first matrix that alone does not fit, or the total.
Status check_multiply_fits(uint64_t m, uint64_t n, uint64_t k, const std::string& verify, bool inputs_allocated,
                           const std::string& remedy) {
  if (!inputs_allocated) {
    TESSERA_RETURN_IF_ERROR(check_fits_in_memory(saturating_bytes(m, k, sizeof(double)), fmt::format("A {}x{}", m, k),
                                                 remedy));
    TESSERA_RETURN_IF_ERROR(check_fits_in_memory(saturating_bytes(k, n, sizeof(double)), fmt::format("B {}x{}", k, n),
                                                 remedy));
  }
  const uint64_t doubles = working_doubles(m, n, k, verify, !inputs_allocated);
  const std::string held = std::string(inputs_allocated ? "C" : "A, B, C") + ", a copy of B" +
                           (verify == "none" ? "" : " and the verification's copies") +
                           (inputs_allocated ? ", besides A and B already read" : "");
  return check_fits_in_memory(saturating_bytes(doubles, 1, sizeof(double)),
                              fmt::format("multiplying A {}x{} by B {}x{} ({})", m, k, k, n, held),
                              remedy + (verify == "none" ? "" : " or --verify none"));
}

// A NaN or infinity in an input is refused unless --allow-nonfinite: usually it is a bug
// upstream, and a product full of NaN is not what anyone meant to compute.
Status check_finite(const linalg::Matrix& matrix, std::string_view name, const std::string& path) {
  const std::optional<run::NonFiniteEntry> entry = run::first_nonfinite(matrix);
  if (!entry) return Status::ok();
  return invalid_argument(fmt::format("{}: {} (0-based [row][column]); fix the input, or pass --allow-nonfinite to "
                                      "multiply it anyway (verification then counts matching NaN/inf entries as "
                                      "equal)",
                                      path, run::describe_nonfinite(name, *entry)));
}

Result<Inputs> prepare_inputs(const MultiplyCommand& command) {
  Inputs inputs;
  if (command.a_path.empty() != command.b_path.empty()) {
    return invalid_argument("give both --a and --b, or neither (random inputs from --seed)");
  }
  if (!command.a_path.empty()) {
    Result<linalg::Matrix> a = linalg::read_npy(command.a_path);
    if (!a) return a.status();
    if (!command.allow_nonfinite) TESSERA_RETURN_IF_ERROR(check_finite(*a, "A", command.a_path));
    Result<linalg::Matrix> b = linalg::read_npy(command.b_path);
    if (!b) return b.status();
    if (!command.allow_nonfinite) TESSERA_RETURN_IF_ERROR(check_finite(*b, "B", command.b_path));
    if (a->cols != b->rows) {
      return invalid_argument(fmt::format("{} is {}x{} and {} is {}x{}: A's columns must equal B's rows",
                                          command.a_path, a->rows, a->cols, command.b_path, b->rows, b->cols));
    }
    const auto mismatch = [](const std::optional<uint64_t>& flag, uint64_t actual) {
      return flag.has_value() && *flag != actual;
    };
    if (mismatch(command.m, a->rows) || mismatch(command.k, a->cols) || mismatch(command.n, b->cols)) {
      return invalid_argument(fmt::format("--m/--n/--k disagree with the .npy shapes (A {}x{}, B {}x{}); drop them "
                                          "when giving --a/--b",
                                          a->rows, a->cols, b->rows, b->cols));
    }
    TESSERA_RETURN_IF_ERROR(check_multiply_fits(a->rows, b->cols, a->cols, command.verify, true,
                                                "; multiply smaller matrices"));
    inputs.a = std::move(*a);
    inputs.b = std::move(*b);
    return inputs;
  }
  if (!command.n && !command.m && !command.k) return invalid_argument("give --n N (or --m/--n/--k, or --a/--b)");
  const uint64_t n = command.n.value_or(command.m.value_or(command.k.value_or(0)));
  const uint64_t m = command.m.value_or(n);
  const uint64_t k = command.k.value_or(n);
  if (m == 0 || n == 0 || k == 0) return invalid_argument("matrix dimensions must be >= 1");
  constexpr uint64_t kMaxDim = 1u << 20;
  if (m > kMaxDim || n > kMaxDim || k > kMaxDim) {
    return invalid_argument(fmt::format("dimensions above {} are not supported", kMaxDim));
  }
  linalg::FillKind fill = linalg::FillKind::kUniform;
  if (command.fill == "integers") {
    fill = linalg::FillKind::kIntegers;
  } else if (command.fill != "uniform") {
    return invalid_argument(fmt::format("unknown --fill '{}'; use uniform or integers", command.fill));
  }
  TESSERA_RETURN_IF_ERROR(check_multiply_fits(m, n, k, command.verify, false, "; use a smaller --n (or --m/--k)"));
  inputs.a = linalg::random_matrix(m, k, command.seed, fill);
  inputs.b = linalg::random_matrix(k, n, command.seed + 1, fill);
  return inputs;
}

}  // namespace

int report_failure(std::ostream& err, const Status& status) {
  err << "tessera: " << status.message() << "\n";
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidConfig:
      return kExitBadInput;
    case StatusCode::kVerificationFailed:
      return kExitVerificationFailed;
    // A worker that is busy or out of tile memory failed the run; the input itself may be fine.
    case StatusCode::kBusy:
    case StatusCode::kResourceExhausted:
    default:
      return kExitRunFailed;
  }
}

int command_up(const LifecycleCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return fail(err, cluster.status());
  bool any_emulated = false;
  for (const cluster::NodeSpec& node : cluster->nodes) any_emulated |= node.emulate.has_value();
  if (command.local.no_emulation && any_emulated) {
    err << "WARNING: --no-emulation: the emulate: settings of " << command.config_path
        << " are IGNORED; every node runs UNTHROTTLED at this machine's full speed.\n";
  }
  for (const std::string& warning : local::secret_exposure_warnings(*cluster)) err << "warning: " << warning << "\n";
  Result<std::vector<local::NodeLifecycle>> nodes = local::local_cluster_up(*cluster, command.local);
  if (!nodes) return fail(err, nodes.status());
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    const local::NodeLifecycle& node = (*nodes)[i];
    out << fmt::format("{:<12} pid {:<8} {:<16} {}\n", node.name, node.pid, local::node_state_name(node.state),
                       node.detail);
  }
  out << fmt::format("cluster '{}' up: {} workers (logs in {}/{})\n", cluster->name, nodes->size(),
                     command.local.run_dir.empty() ? local::default_run_dir() : command.local.run_dir, cluster->name);
  return kExitOk;
}

int command_down(const LifecycleCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return fail(err, cluster.status());
  Result<std::vector<local::NodeLifecycle>> nodes = local::local_cluster_down(*cluster, command.local);
  if (!nodes) return fail(err, nodes.status());
  for (const local::NodeLifecycle& node : *nodes) {
    out << fmt::format("{:<12} {}{}\n", node.name, local::node_state_name(node.state),
                       node.pid != 0 ? fmt::format(" (pid {})", node.pid) : "");
  }
  return kExitOk;
}

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
  local::NodeReachability node;
  std::optional<double> profile_age_s;  // none: the node has no saved profile entry
  std::vector<std::string> changed;
};

std::vector<StatusLine> status_lines(const cluster::ClusterSpec& cluster, const StatusCommand& command,
                                     const std::optional<profile::ClusterProfile>& profile) {
  std::vector<StatusLine> lines;
  const auto now = std::chrono::system_clock::now();
  for (local::NodeReachability& node :
       local::cluster_status(cluster, command.lifecycle.local, std::chrono::milliseconds(command.deadline_ms))) {
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
std::string load_text(const local::NodeReachability& node) {
  const std::optional<double> load = node.load();
  if (!load) return "-";
  return node.hello->cores > 0 ? fmt::format("{:.2f}/{}", *load, node.hello->cores) : fmt::format("{:.2f}", *load);
}

std::string status_json(const std::string& cluster_name, const std::string& profile_path,
                        const std::vector<StatusLine>& lines) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const StatusLine& line : lines) {
    const local::NodeReachability& node = line.node;
    nlohmann::json entry = {{"name", node.name},
                            {"endpoint", node.endpoint},
                            {"state", local::reach_name(node.reach)},
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
  Result<cluster::ClusterSpec> cluster = local::load_reachable_cluster(command.lifecycle.config_path, command.lifecycle.local.run_dir);
  if (!cluster) return fail(err, cluster.status());
  if (command.deadline_ms < 50 || command.deadline_ms > 60000) {
    return fail(err, invalid_argument(fmt::format("--deadline-ms {} must be within 50..60000", command.deadline_ms)));
  }
  if (!(command.watch_s >= 0.0) || command.watch_s > 86400.0) {
    return fail(err, invalid_argument(fmt::format("--watch {} must be within 0..86400 seconds", command.watch_s)));
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
    const std::vector<StatusLine> lines = status_lines(*cluster, command, profile);
    bool all_reachable = true;
    for (const StatusLine& line : lines) all_reachable &= line.node.reachable;
    if (command.json) {
      out << status_json(cluster->name, profile ? profile_path : "", lines) << "\n";
    } else {
      if (redraw) out << "\x1b[H\x1b[2J" << fmt::format("{}  (every {:g} s; Ctrl-C stops)\n", utc_now(UtcFormat::kReadable), command.watch_s);
      out << fmt::format("{:<12} {:<22} {:<12} {:<8} {}\n", "node", "endpoint", "state", "load", "detail");
      for (const StatusLine& line : lines) {
        const local::NodeReachability& node = line.node;
        std::string profiled;
        if (profile && node.reachable) {
          profiled = line.profile_age_s ? fmt::format("; profiled {} ago", age_text(*line.profile_age_s)) : "; not in the profile";
          if (!line.changed.empty()) {
            profiled += fmt::format(", changed since ({}): tessera profile --node {}", join(line.changed, ", "), node.name);
          }
        }
        out << fmt::format("{:<12} {:<22} {:<12} {:<8} {}{}{}\n", node.name, node.endpoint, local::reach_name(node.reach),
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

int command_profile(const ProfileCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = local::load_reachable_cluster(command.config_path, command.run_dir);
  if (!cluster) return fail(err, cluster.status());
  if (command.reference_size < 16 || command.reference_size > 8192) {
    return fail(err, invalid_argument("--probe-size must be within 16..8192"));
  }
  for (const std::string& name : command.nodes) {
    if (cluster->find_node(name) < 0) {
      return fail(err, invalid_argument(fmt::format("--node {}: no such node in {}; nodes are {}", name,
                                                    command.config_path, join(cluster->nodes, ", ", &cluster::NodeSpec::name))));
    }
  }
  session::SessionOptions session_options;
  session_options.profile_path = command.profile_path;
  session_options.damaged_profile_is_error = false;
  const std::size_t node_count = cluster->nodes.size();
  const std::string cluster_name = cluster->name;
  Result<session::Session> session = session::Session::open(std::move(*cluster), session_options);
  if (!session) return fail(err, session.status());
  if (std::optional<Status> problem = session->ignored_profile_problem()) {
    err << "tessera: ignoring the saved profile: " << problem->message() << "\n";
  }

  profile::ProfileOptions options;
  options.quick = command.quick;
  options.refresh = command.refresh;
  options.only_nodes = command.nodes;
  options.reference_size = command.reference_size;
  options.window_seconds = command.window_seconds;
  err << fmt::format("profiling {} nodes of '{}' one at a time{}\n", node_count, cluster_name,
                     command.quick ? " (quick)" : "");
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> measured;
  Result<profile::ClusterProfile> profile = session->measure_profile(options, progress_printer(err), &measured);
  if (!profile) return fail(err, profile.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_profile(out, *profile, session->profile_path());
  out << fmt::format("measured {} of {} nodes in {:.1f} s{}\n", measured.size(), profile->nodes.size(), seconds,
                     measured.size() < profile->nodes.size() ? " (the others reused; --refresh re-measures all)" : "");
  return kExitOk;
}

namespace {

Result<uint64_t> dimension(const std::optional<uint64_t>& value, const char* flag) {
  if (!value) return invalid_argument(fmt::format("give {}", flag));
  if (*value == 0 || *value > (1u << 20)) return invalid_argument(fmt::format("{} must be within 1..1048576", flag));
  return *value;
}

}  // namespace

int command_model(const ModelCommand& command, std::ostream& out, std::ostream& err) {
  Result<cluster::ClusterSpec> cluster = cluster::load_cluster_spec(command.config_path);
  if (!cluster) return fail(err, cluster.status());
  const std::string path = command.profile_path.empty() ? profile::default_profile_path(command.config_path) : command.profile_path;
  Result<profile::ClusterProfile> profile = profile::load_profile(path);
  if (!profile) return fail(err, profile.status());
  Result<model::ClusterModel> model = profile::profile_model(*profile, *cluster, path);
  if (!model) return fail(err, model.status());
  Result<uint64_t> n = dimension(command.n ? command.n : command.m, "--n");
  if (!n) return fail(err, n.status());
  const uint64_t m = command.m.value_or(*n);
  const uint64_t k = command.k.value_or(*n);
  session::MultiplyOptions options;
  options.panel_width = command.panel_width;
  options.panels_in_flight = command.panels_in_flight;
  out << fmt::format("model of '{}' from {} (measured {})\n", cluster->name, path, profile->measured_at);
  for (plan::Policy policy : {plan::Policy::kEven, plan::Policy::kProportional, plan::Policy::kModel}) {
    options.policy = plan::default_choice(policy);
    Result<session::PlannedMultiply> planned = session::plan_policy(*cluster, *profile, path, m, *n, k, options);
    if (!planned) return fail(err, planned.status());
    for (const std::string& warning : planned->warnings) err << "warning: " << warning << "\n";
    const plan::Plan& plan = planned->plan;
    const model::Prediction prediction = model::predict(*model, plan);
    out << "\n" << plan.to_string();
    for (std::size_t i = 0; i < plan.shares.size(); ++i) {
      // The share of its cores a node keeps is said only where the model took some away.
      const double share = i < prediction.host_share.size() ? prediction.host_share[i] : 1.0;
      out << fmt::format("  {:<16} predicted finish {:.3f} s{}\n", plan.shares[i].node_name, prediction.finish_s[i],
                         model::host_share_reduced(share) ? fmt::format(" (keeping {:.0f}% of its cores on a shared host)", 100.0 * share)
                                       : "");
    }
    out << fmt::format("  predicted makespan {:.3f} s\n", prediction.makespan_s);
  }
  return kExitOk;
}

namespace {

// The flags of `tessera multiply` as the facade's options; fails naming the flag.
Result<session::MultiplyOptions> multiply_options(const MultiplyCommand& command, std::size_t node_count,
                                         const std::string& config_path) {
  Result<plan::Policy> policy = plan::parse_policy(command.policy);
  if (!policy) return policy.status();
  Result<run::VerifyMode> verify_mode = run::parse_verify_mode(command.verify);
  if (!verify_mode) return verify_mode.status();
  if (*policy != plan::Policy::kProportional && !command.weights.empty()) {
    return invalid_argument("--weights applies to --policy proportional only");
  }
  if (!command.weights.empty() && command.weights.size() != node_count) {
    return invalid_argument(fmt::format("--weights has {} values for {} nodes ({}); give one per node",
                                        command.weights.size(), node_count, config_path));
  }
  if (command.overlap != "on" && command.overlap != "off") {
    return invalid_argument(fmt::format("unknown --overlap '{}'; use on or off", command.overlap));
  }
  Result<partition::Layout> layout = partition::parse_layout(command.layout);
  if (!layout) return layout.status();
  TESSERA_RETURN_IF_ERROR(plan::check_layout(*policy, *layout));
  if (command.refill_threshold == 0 || command.refill_threshold > command.panels_in_flight) {
    return invalid_argument(fmt::format("--refill {} must be between 1 and --panels-in-flight {}",
                                        command.refill_threshold, command.panels_in_flight));
  }
  session::MultiplyOptions options;
  options.policy = plan::default_choice(*policy);
  if (auto* proportional = std::get_if<plan::ProportionalPolicy>(&options.policy)) proportional->weights = command.weights;
  if (auto* dynamic = std::get_if<plan::DynamicPolicy>(&options.policy)) dynamic->tile_rows = command.tile_rows;
  options.layout = *layout;
  options.panel_width = command.panel_width;
  options.panels_in_flight = command.overlap == "off" ? 1 : command.panels_in_flight;
  options.refill_threshold = command.overlap == "off" ? 1 : command.refill_threshold;
  options.verify = *verify_mode;
  options.verify_seed = command.seed;
  if (!(command.node_timeout_s >= 0.0) || command.node_timeout_s > 86400.0) {
    return invalid_argument(fmt::format("--node-timeout {} must be between 0 (derive it from the profile) and 86400 "
                                        "seconds", command.node_timeout_s));
  }
  options.node_timeout_s = command.node_timeout_s;
  return options;
}

}  // namespace

int command_multiply(const MultiplyCommand& command, std::ostream& out, std::ostream& err) {
  Result<ProgressMode> progress_mode = parse_progress_mode(command.progress);
  if (!progress_mode) return fail(err, progress_mode.status());
  Result<cluster::ClusterSpec> cluster = local::load_reachable_cluster(command.config_path, command.run_dir);
  if (!cluster) return fail(err, cluster.status());
  Result<session::MultiplyOptions> options = multiply_options(command, cluster->nodes.size(), cluster->source_path);
  if (!options) return fail(err, options.status());
  for (const std::string& warning : local::secret_exposure_warnings(*cluster)) err << "warning: " << warning << "\n";
  const auto interrupted = [&command] { return command.interrupted != nullptr && command.interrupted->load(); };
  const auto report_interrupted = [&err] {
    err << "tessera: interrupted; the workers' sessions were closed, so they are free for the next run\n";
    return kExitInterrupted;
  };
  Result<Inputs> inputs = prepare_inputs(command);
  if (!inputs) return fail(err, inputs.status());
  if (interrupted()) return report_interrupted();

  session::SessionOptions session_options;
  session_options.profile_path = command.profile_path;
  Result<session::Session> session = session::Session::open(std::move(*cluster), session_options);
  if (!session) return interrupted() ? report_interrupted() : fail(err, session.status());

  const Inputs& in = *inputs;
  linalg::Matrix c(in.a.rows, in.b.cols);
  ProgressPrinter progress(err, progress_wanted(*progress_mode, STDERR_FILENO), stderr_progress_options());
  // Credits arrive on the nodes' threads; atomics keep them off the printer's lock, which a
  // terminal that stopped reading could hold.
  std::vector<std::atomic<uint64_t>> jobs_done(session->cluster().nodes.size());
  session::RunControl control;
  control.cancel = command.interrupted;
  control.on_notice = [&progress](const std::string& notice) { progress.notice(notice); };
  control.on_profile_progress = progress_printer(err);
  control.on_run_start = [&progress, &jobs_done](const session::RunStart& start) {
    MultiplyProgress shape;
    for (std::size_t i = 0; i < start.plan.shares.size(); ++i) {
      NodeJobs node{start.plan.shares[i].node_name, 0, i < start.jobs.per_node.size() ? start.jobs.per_node[i] : 0,
                    std::nullopt, std::nullopt};
      if (start.forecast && i < start.forecast->finish_s.size()) node.predicted_s = start.forecast->finish_s[i];
      shape.nodes.push_back(std::move(node));
    }
    shape.total_jobs = start.jobs.total;
    if (start.forecast) shape.predicted_s = start.forecast->makespan_s;
    progress.start([&jobs_done, shape](double elapsed_s) mutable {
      std::vector<uint64_t> done;
      for (const std::atomic<uint64_t>& jobs : jobs_done) done.push_back(jobs.load());
      record_jobs(shape, done, elapsed_s);
      return multiply_progress_text(shape, elapsed_s);
    });
  };
  control.on_credit = [&jobs_done](std::size_t node, uint64_t done) {
    if (node < jobs_done.size()) jobs_done[node].store(done);
  };
  Result<session::MultiplyOutcome> outcome = session->multiply(in.a, in.b, c, *options, control);
  progress.stop();  // the line is gone before anything else is written
  if (interrupted()) {
    // The session shut its connections down when it saw the flag (the workers then end the
    // session and drop queued work); close() says BYE on any link still open. Idempotent.
    session->close();
    return report_interrupted();
  }
  if (!outcome) return fail(err, outcome.status());
  session->close();
  for (const std::string& warning : outcome->warnings) err << "warning: " << warning << "\n";
  const report::MultiplyReport& report = outcome->report;
  if (command.show_plan) out << report.plan.to_string() << "\n";
  out << report::format_report_table(report);

  if (!command.report_path.empty()) {
    if (Status written = report::write_report_json(command.report_path, report); !written) return fail(err, written);
    out << "report written to " << command.report_path << "\n";
  }
  if (!command.out_path.empty()) {
    if (Status written = linalg::write_npy(command.out_path, c); !written) return fail(err, written);
    out << "C written to " << command.out_path << "\n";
  }
  if (options->verify != run::VerifyMode::kNone && !report.verification.passed) {
    err << "tessera: verification FAILED: " << report.verification.detail << "\n";
    return kExitVerificationFailed;
  }
  return kExitOk;
}

int command_experiment(const ExperimentCommand& command, std::ostream& out, std::ostream& err) {
  study::ExperimentOptions options;
  options.out_dir = command.out_dir;
  options.repeat = command.repeat;
  options.run_dir = command.run_dir;
  options.command_line = command.command_line;
  options.interrupted = command.interrupted;
  Status status = Status::ok();
  const std::string workload = study::study_workload(command.study_path);
  if (workload == "graph") {
    Result<study::GraphStudy> study = study::load_graph_study(command.study_path);
    if (!study) return fail(err, study.status());
    status = study::run_graph_study(*study, options, out);
  } else if (workload == "expressions") {
    Result<study::ExpressionStudy> study = study::load_expression_study(command.study_path);
    if (!study) return fail(err, study.status());
    status = study::run_expression_study(*study, options, out);
  } else {
    Result<study::Study> study = study::load_study(command.study_path);
    if (!study) return fail(err, study.status());
    status = study::run_experiment(*study, options, out);
  }
  if (command.interrupted != nullptr && command.interrupted->load()) {
    err << "tessera: interrupted; every cluster the study started was stopped, partial results written\n";
    return kExitInterrupted;
  }
  if (!status) return fail(err, status);
  return kExitOk;
}

}  // namespace tessera::balance::cli
