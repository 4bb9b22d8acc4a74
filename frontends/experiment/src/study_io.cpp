#include "study_io.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "tessera/emulation/emulation.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/core/subprocess.hpp"

namespace tessera::experiment {

const char* const kPlotHeader =
    "set terminal pngcairo size 960,540 font 'DejaVu Sans,11'\nset grid ytics\nset key below horizontal\n";

// gnuplot, run as a child process on a script file; a missing gnuplot is reported, not fatal.
// A plot of a study's few points takes well under a second; the deadline only stops a hang.
Status run_gnuplot(const std::string& script_path) {
  constexpr std::chrono::seconds kGnuplotDeadline{120};
  Result<ProcessResult> run = run_process({"gnuplot", script_path}, {}, kGnuplotDeadline);
  if (!run) {
    return internal_error(
        fmt::format("gnuplot failed on {}: {}; install gnuplot-nox", script_path, run.status().message()));
  }
  if (!run->succeeded()) {
    return internal_error(fmt::format("gnuplot failed on {} ({}); install gnuplot-nox", script_path, run->describe()));
  }
  return Status::ok();
}

std::string study_workload(const std::string& path) {
  Result<std::string> text = cluster::read_yaml_file(path, "study file");
  if (!text) return "multiply";
  std::string workload = "multiply";
  (void)cluster::read_yaml(*text, path, [&](const YAML::Node& root) {
    if (root.IsMap() && root["workload"] && root["workload"].IsScalar()) workload = root["workload"].Scalar();
  });
  return workload;
}

namespace steps {

Result<std::string> make_output_folder(const std::string& out_dir, const std::string& study_name,
                                       const std::string& subfolder) {
  const std::string folder = out_dir.empty() ? "experiments/results/" + study_name : out_dir;
  std::error_code error;
  std::filesystem::create_directories(subfolder.empty() ? folder : folder + "/" + subfolder, error);
  if (error) return io_error(fmt::format("cannot create {}: {}", folder, error.message()));
  return folder;
}

cluster::YamlMap study_keys(const YAML::Node& root, const StudyFileSchema& schema) {
  // A file of the default kind need not say its workload, so the key comes last in the list.
  std::vector<std::string> keys = {"study", "description", schema.one_cluster ? "cluster" : "clusters"};
  if (schema.workload_required) keys.insert(keys.begin() + 1, "workload");
  keys.insert(keys.end(), schema.own_keys.begin(), schema.own_keys.end());
  keys.emplace_back("repeat");
  if (!schema.workload_required) keys.emplace_back("workload");
  const int root_line = cluster::yaml_line(root, 1);
  if (!root.IsMap()) {
    cluster::fail_at(root_line, fmt::format("the study file holds {} at the top; {} is a mapping with keys {}",
                                            cluster::describe_yaml(root), schema.kind, join(keys, ", ")));
  }
  return cluster::YamlMap(root, root_line, std::move(keys), "the study");
}

StudyHeader read_study_header(const cluster::YamlMap& keys, const std::string& path, const StudyFileSchema& schema) {
  StudyHeader header;
  header.source_path = path;
  const std::optional<std::string> name = keys.text("study", schema.name_example);
  if (!name) keys.fail_missing("study", "NAME");
  if (name->find_first_not_of(kStudyNameCharacters) != std::string::npos) {
    cluster::fail_at(keys.find("study")->line,
                     fmt::format("study name {} has characters other than letters, digits, _ . -; it names the output "
                                 "folder, e.g. study: {}",
                                 cluster::single_quoted(*name), schema.name_example));
  }
  header.name = *name;
  header.description = keys.text_or_empty("description").value_or("");
  const std::optional<std::string> workload = keys.text("workload", schema.workload);
  if (!workload && schema.workload_required) keys.fail_missing("workload", schema.workload);
  if (workload && *workload != schema.workload) {
    cluster::fail_at(keys.find("workload")->line,
                     fmt::format("workload {} is not {}; write workload: {} (the workloads are multiply, the default, "
                                 "graph and expressions)",
                                 cluster::single_quoted(*workload), schema.kind, schema.workload));
  }
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (schema.one_cluster) {
    const std::optional<std::string> cluster = keys.text("cluster", "../configs/local-mixed.yaml");
    if (!cluster) keys.fail_missing("cluster", "PATH (a cluster file, relative to the study file)");
    header.cluster_paths.push_back((folder / *cluster).lexically_normal().string());
  } else {
    for (const std::string& cluster : text_list(keys, "clusters", "[../configs/local-mixed-lan.yaml]")) {
      header.cluster_paths.push_back((folder / cluster).lexically_normal().string());
    }
    if (header.cluster_paths.empty()) keys.fail_missing("clusters", "[../configs/local-mixed-lan.yaml]");
  }
  if (std::optional<uint64_t> repeat = keys.integer("repeat", 1, 1000, "3")) header.repeat = static_cast<uint32_t>(*repeat);
  return header;
}

std::string csv_number(double value) { return std::isfinite(value) ? fmt::format("{:.6g}", value) : ""; }

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::trunc);
  file << text;
  if (!file.flush()) return io_error(fmt::format("cannot write {}", path));
  return Status::ok();
}

void draw_plot(const std::string& out_dir, const std::string& stem, const std::string& data, const std::string& script,
               const std::string& caption, Plots& plots) {
  if (Status written = write_text_file(out_dir + "/" + stem + ".dat", data); !written) {
    plots.problems.push_back(written.message());
    return;
  }
  const std::string whole = fmt::format("{}set output '{}/{}.png'\n{}", kPlotHeader, out_dir, stem, script);
  if (Status written = write_text_file(out_dir + "/" + stem + ".gp", whole); !written) {
    plots.problems.push_back(written.message());
    return;
  }
  if (Status drawn = run_gnuplot(out_dir + "/" + stem + ".gp"); !drawn) {
    plots.problems.push_back(drawn.message());
    return;
  }
  plots.files.emplace_back(stem + ".png", caption);
}

std::string machine_facts() {
  utsname name{};
  ::uname(&name);
  std::string cpu_model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  const double memory_gib = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE)) / 1073741824.0;
  return fmt::format("{} {} ({}), {} online CPUs ({}), {:.1f} GiB memory", name.sysname, name.release, name.machine,
                     ::sysconf(_SC_NPROCESSORS_ONLN), cpu_model, memory_gib);
}

std::string emulation_description(const cluster::ClusterSpec& spec) {
  std::string out;
  for (const cluster::NodeSpec& node : spec.nodes) {
    std::string emulation = "unthrottled";
    if (node.emulate) {
      emulation.clear();
      if (node.emulate->cpu > 0.0) emulation += fmt::format("cpu {:g} core", node.emulate->cpu);
      if (node.emulate->has_link) {
        emulation += fmt::format("{}link {}", emulation.empty() ? "" : ", ", node.emulate->link_rate);
        if (!node.emulate->link_delay.empty()) emulation += " delay " + node.emulate->link_delay;
      }
    }
    out += fmt::format("{}{} ({}, {} thread{}): {}", out.empty() ? "" : "; ", node.name,
                       node.kind.empty() ? "-" : node.kind, node.threads, node.threads == 1 ? "" : "s", emulation);
  }
  return out;
}

std::string cluster_facts_line(const ClusterFacts& facts) {
  std::vector<std::string> speeds;
  for (std::size_t i = 0; i < facts.speeds.size(); ++i) {
    speeds.push_back(fmt::format("{} {:.1f}", facts.spec.nodes[i].name, facts.speeds[i]));
  }
  return fmt::format("Cluster `{}` (`{}`): {}; profiled GFLOP/s: {}", facts.spec.name, facts.path,
                     emulation_description(facts.spec), join(speeds, ", "));
}

std::string report_header(const std::string& name, const std::string& description, const std::string& source_path,
                          const std::string& command_line, const std::string& started_at, double seconds,
                          uint32_t repetitions, std::string_view repetition_note, bool complete) {
  std::string md = fmt::format("# Study: {}\n\n", name);
  if (!description.empty()) md += description + "\n\n";
  if (!complete) md += "**Incomplete: the study was interrupted or a run failed; the tables hold what finished.**\n\n";
  md += fmt::format("- Command: `{}`\n", command_line.empty() ? "tessera experiment " + source_path : command_line);
  md += fmt::format("- Started {} UTC, took {:.0f} s; {} repetitions per combination{}\n", started_at, seconds,
                    repetitions, repetition_note);
  md += fmt::format("- Machine: {}\n", machine_facts());
  return md;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<long>(std::lround(seconds));
  return total >= 60 ? fmt::format("{}m{:02}s", total / 60, total % 60) : fmt::format("{}s", total);
}

namespace {

// Brings `spec`'s cluster up unless it already runs; returns whether this call started it (and
// so the study may stop it); `label` names it in progress lines. A running cluster is recognised
// where it really listens: nodes with shaped links answer at the namespace addresses `tessera up`
// recorded in the run directory, not at the config's loopback addresses, so asking the config
// would miss a cluster the user started and then stop it at the end of the study.
Result<bool> ensure_up(const cluster::ClusterSpec& spec, const std::string& label, const emulation::LocalClusterOptions& local,
                       std::ostream& progress) {
  cluster::ClusterSpec recorded = spec;
  emulation::apply_emulated_endpoints(recorded, emulation::cluster_run_dir(recorded, local));
  Result<std::vector<emulation::NodeReachability>> status = emulation::cluster_status(recorded, local);
  if (!status) return status.status();
  bool all_reachable = true;
  for (const emulation::NodeReachability& node : *status) all_reachable &= node.reachable;
  if (all_reachable) {
    progress << fmt::format("using the running cluster '{}'\n", spec.name);
    return false;
  }
  Result<std::vector<emulation::NodeLifecycle>> up = emulation::local_cluster_up(spec, local);
  if (!up) return up.status();
  // Workers the user started (recorded pids that are alive) are never ours to stop, even when
  // some node did not answer above and up had to start the others.
  std::vector<std::string> kept;
  for (const emulation::NodeLifecycle& node : *up) {
    if (node.state == emulation::NodeState::kAlreadyRunning) kept.push_back(node.name);
  }
  if (!kept.empty()) {
    progress << fmt::format("cluster '{}' was already running ({}); the study uses it and leaves it running\n",
                            spec.name, join(kept, ", "));
    return false;
  }
  progress << fmt::format("started cluster '{}' ({})\n", spec.name, label);
  return true;
}

}  // namespace

Result<std::unique_ptr<StudyCluster>> StudyCluster::open(const std::string& path, const emulation::LocalClusterOptions& local,
                                                         uint64_t required_capabilities, bool require_all,
                                                         std::ostream& progress) {
  Result<cluster::ClusterSpec> spec = cluster::load_cluster_spec(path);
  if (!spec) return spec.status();
  const std::string label = spec->name;
  return open(std::move(*spec), path, label, local, required_capabilities, require_all, progress);
}

Result<std::unique_ptr<StudyCluster>> StudyCluster::open(cluster::ClusterSpec spec, const std::string& path,
                                                         const std::string& label, const emulation::LocalClusterOptions& local,
                                                         uint64_t required_capabilities, bool require_all,
                                                         std::ostream& progress) {
  std::unique_ptr<StudyCluster> cluster(new StudyCluster(std::move(spec), local, progress));
  Result<bool> started = ensure_up(cluster->spec_, label, local, progress);
  if (!started) return started.status();
  cluster->started_ = *started;
  // From here the destructor stops what was started, whatever fails next.
  Result<emulation::ReachableCluster> reachable = emulation::load_reachable_cluster(path, local.run_dir);
  if (!reachable) return reachable.status();
  cluster->reachable_ = reachable->spec;
  session::SessionOptions session_options;
  session_options.damaged_profile_is_error = false;
  session_options.connect.required_capabilities = required_capabilities;
  session_options.require_all = require_all;
  Result<session::Session> session = session::Session::open(std::move(*reachable), session_options);
  if (!session) return session.status();
  for (const cluster::LeftOutNode& node : session->left_out_at_start()) {
    progress << "warning: " << cluster::left_out_warning(node) << "\n";
  }
  // The study's runs, tables and report describe the nodes that answered.
  cluster->reachable_ = session->cluster();
  cluster->taking_part_ = cluster->spec_;
  std::erase_if(cluster->taking_part_.nodes, [&](const cluster::NodeSpec& node) {
    return cluster->reachable_.find_node(node.name) < 0;
  });
  cluster->session_.emplace(std::move(*session));
  progress << fmt::format("profiling '{}'\n", cluster->spec_.name);
  Result<profile::ClusterProfile> profile = cluster->session_->measure_profile(profile::ProfileOptions{});
  if (!profile) return profile.status();
  cluster->profile_ = std::move(*profile);
  return cluster;
}

StudyCluster::~StudyCluster() {
  if (session_) session_->close();
  if (started_) {
    (void)emulation::local_cluster_down(spec_, local_);
    progress_ << fmt::format("stopped cluster '{}'\n", spec_.name);
  }
}

std::vector<double> StudyCluster::speeds() const {
  std::vector<double> speeds;
  for (const cluster::NodeSpec& node : reachable_.nodes) {
    const profile::NodeProfile* measured = profile_.find(node.name);
    speeds.push_back(measured != nullptr ? measured->gflops : 0.0);
  }
  return speeds;
}

}  // namespace steps
}  // namespace tessera::experiment
