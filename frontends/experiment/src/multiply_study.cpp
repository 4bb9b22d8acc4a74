// The multiply study (multiply_study.hpp): variants of one cluster x sizes x credit windows x
// policies, each run repeated back to back, and its tables, plots and report sections. The
// loop, the cluster's lifecycle and report.md's frame are the study runner's (study_runner.hpp).
#include "tessera/experiment/multiply_study.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <ostream>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "study_runner.hpp"
#include "study_io.hpp"
#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/core/stats.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::experiment {

namespace fs = std::filesystem;

namespace {

using namespace steps;

// ---------------------------------------------------------------------------------------------
// Study file

const StudyFileSchema kMultiplyStudySchema{
    .kind = "a study",
    .workload = "multiply",
    .name_example = "balanced-vs-even",
    .own_keys = {"policies", "sizes", "overlap", "panels_in_flight", "node_counts", "sweep", "verify"},
    .workload_required = false,
    .one_cluster = true};

const std::vector<std::string> kSweepKeys = {"kind", "cpu"};

// Throws YamlError (fail_at) on the first problem; load_study returns it with file and line.
Study parse_study(const YAML::Node& root, const std::string& path) {
  const cluster::YamlMap keys = study_keys(root, kMultiplyStudySchema);
  Study study;
  study.cluster_path = read_study_header_into(study, keys, path, kMultiplyStudySchema).front();

  const std::optional<std::vector<cluster::YamlMap::Entry>> policies = keys.list("policies", "[even, proportional, model]");
  if (!policies) keys.fail_missing("policies", "[even, proportional, model]");
  for (const cluster::YamlMap::Entry& policy : *policies) {
    const std::string text = cluster::yaml_text(policy.value, policy.line, "policies", "the study", "[even, proportional]");
    Result<StudyPolicy> parsed = parse_study_policy(text);
    if (!parsed) cluster::fail_at(policy.line, parsed.status().message());
    study.policies.push_back(*parsed);
  }
  std::optional<std::vector<uint64_t>> sizes = keys.integer_list("sizes", 1, 1 << 16, "[2048, 4096]");
  if (!sizes) keys.fail_missing("sizes", "[2048, 4096]");
  study.sizes = std::move(*sizes);
  if (std::optional<std::vector<cluster::YamlMap::Entry>> overlap = keys.list("overlap", "[on, off]")) {
    study.windows.clear();
    for (const cluster::YamlMap::Entry& mode : *overlap) {
      // YAML 1.1 reads a bare on/off as a boolean; accept both spellings.
      const std::string text = mode.value.IsScalar() ? mode.value.Scalar() : cluster::describe_yaml(mode.value);
      if (text == "on" || text == "true") {
        study.windows.push_back(4);
      } else if (text == "off" || text == "false") {
        study.windows.push_back(1);
      } else {
        cluster::fail_at(mode.line, fmt::format("overlap {} unknown; use on or off, e.g. overlap: [on, off]", cluster::single_quoted(text)));
      }
    }
  }
  if (const cluster::YamlMap::Entry* windows_entry = keys.find("panels_in_flight")) {
    if (keys.has("overlap")) {
      cluster::fail_at(windows_entry->line, "give overlap or panels_in_flight, not both (off = 1 panel in flight)");
    }
    const std::optional<std::vector<uint64_t>> windows = keys.integer_list("panels_in_flight", 1, 1024, "[1, 4, 40]");
    study.windows.assign(windows->begin(), windows->end());
  }
  if (std::optional<std::vector<uint64_t>> counts = keys.integer_list("node_counts", 1, 256, "[1, 2, 3, 4]")) {
    study.node_counts.assign(counts->begin(), counts->end());
  }
  if (const cluster::YamlMap::Entry* sweep = keys.find("sweep")) {
    if (!sweep->value.IsMap()) {
      cluster::fail_at(sweep->line, fmt::format("sweep is {}; sweep must be a mapping, e.g. sweep: {{kind: pi, cpu: [1.0, 0.5]}}",
                                       cluster::describe_yaml(sweep->value)));
    }
    const cluster::YamlMap fields(sweep->value, sweep->line, kSweepKeys, "sweep");
    CpuSweep parsed;
    const std::optional<std::string> kind = fields.text("kind", "pi");
    if (!kind) fields.fail_missing("kind", "LABEL (a node kind of the cluster, e.g. kind: pi)");
    parsed.kind = *kind;
    std::optional<std::vector<double>> cpu =
        fields.number_list("cpu", cluster::NumberRange{0.0, 64.0, false, true}, "[1.0, 0.5, 0.25]");
    if (!cpu) fields.fail_missing("cpu", "[1.0, 0.5, 0.25]");
    parsed.cpu = std::move(*cpu);
    study.sweep = parsed;
  }
  if (std::optional<std::string> verify = keys.text("verify", "freivalds")) {
    if (Result<multiply::VerifyMode> mode = multiply::parse_verify_mode(*verify); !mode) {
      cluster::fail_at(keys.find("verify")->line, mode.status().message());
    }
    study.verify = *verify;
  }
  return study;
}

// ---------------------------------------------------------------------------------------------
// Variants of the cluster

struct Variant {
  std::string label;        // "all nodes", "nodes=2", "pi cpu=0.25"
  std::string config_path;  // the base file, or a derived one in the output folder
  cluster::ClusterSpec spec;
  uint32_t node_count = 0;
  std::optional<double> sweep_cpu;
  std::vector<double> gflops;  // profiled reference rates, cluster order (for the ideal bounds)
};

std::string format_number(double value) { return fmt::format("{:g}", value); }

Status write_cluster_yaml(const std::string& path, const cluster::ClusterSpec& spec) {
  YAML::Emitter out;
  out << YAML::Comment("Derived by `tessera experiment` from " + spec.source_path);
  out << YAML::BeginMap << YAML::Key << "cluster" << YAML::Value << spec.name;
  if (!spec.secret_file.empty()) {
    out << YAML::Key << "secret_file" << YAML::Value << fs::absolute(spec.secret_file).string();
  } else {
    out << YAML::Key << "secret" << YAML::Value << spec.secret;
  }
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const cluster::NodeSpec& node : spec.nodes) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << node.name;
    out << YAML::Key << "host" << YAML::Value << node.host;
    out << YAML::Key << "port" << YAML::Value << node.port;
    out << YAML::Key << "threads" << YAML::Value << node.threads;
    if (!node.kind.empty()) out << YAML::Key << "kind" << YAML::Value << node.kind;
    if (node.emulate) {
      out << YAML::Key << "emulate" << YAML::Value << YAML::BeginMap;
      if (node.emulate->cpu > 0.0) out << YAML::Key << "cpu" << YAML::Value << node.emulate->cpu;
      if (node.emulate->has_link) {
        out << YAML::Key << "link" << YAML::Value << YAML::BeginMap;
        out << YAML::Key << "rate" << YAML::Value << node.emulate->link_rate;
        if (!node.emulate->link_delay.empty()) out << YAML::Key << "delay" << YAML::Value << node.emulate->link_delay;
        if (node.emulate->link_loss_percent > 0.0) {
          out << YAML::Key << "loss" << YAML::Value << node.emulate->link_loss_percent;
        }
        out << YAML::EndMap;
      }
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  std::ofstream file(path, std::ios::trunc);
  file << out.c_str() << "\n";
  if (!file.flush()) return io_error(fmt::format("cannot write {}", path));
  return Status::ok();
}

Result<std::vector<Variant>> make_variants(const Study& study, const cluster::ClusterSpec& base, const std::string& out_dir) {
  std::vector<uint32_t> counts = study.node_counts;
  if (counts.empty()) counts.push_back(static_cast<uint32_t>(base.nodes.size()));
  std::vector<std::optional<double>> cpus;
  if (study.sweep) {
    for (double cpu : study.sweep->cpu) cpus.emplace_back(cpu);
  } else {
    cpus.emplace_back(std::nullopt);
  }
  std::vector<Variant> variants;
  for (uint32_t count : counts) {
    if (count > base.nodes.size()) {
      return invalid_config(fmt::format("{}: node_counts asks for {} nodes but {} has {}", study.source_path, count,
                                        base.source_path, base.nodes.size()));
    }
    for (const std::optional<double>& cpu : cpus) {
      Variant variant;
      variant.spec = base;
      variant.node_count = count;
      variant.sweep_cpu = cpu;
      const bool derived = count != base.nodes.size() || cpu.has_value();
      if (!derived) {
        variant.label = "all nodes";
        variant.config_path = base.source_path;
        variants.push_back(std::move(variant));
        continue;
      }
      variant.spec.nodes.resize(count);
      std::string suffix;
      if (count != base.nodes.size()) {
        suffix += fmt::format("-n{}", count);
        variant.label = fmt::format("nodes={}", count);
      }
      if (cpu) {
        bool matched = false;
        for (cluster::NodeSpec& node : variant.spec.nodes) {
          if (node.kind != study.sweep->kind) continue;
          matched = true;
          if (!node.emulate) node.emulate = cluster::EmulationSpec{};
          node.emulate->cpu = *cpu;
        }
        if (!matched) {
          return invalid_config(fmt::format("{}: sweep kind '{}' matches no node of {}", study.source_path,
                                            study.sweep->kind, base.source_path));
        }
        suffix += fmt::format("-{}-cpu{}", study.sweep->kind, format_number(*cpu));
        variant.label += fmt::format("{}{} cpu={}", variant.label.empty() ? "" : ", ", study.sweep->kind,
                                     format_number(*cpu));
      }
      variant.spec.name = base.name + suffix;
      variant.config_path = out_dir + "/clusters/" + variant.spec.name + ".yaml";
      variant.spec.source_path = variant.config_path;
      variants.push_back(std::move(variant));
    }
  }
  return variants;
}

// ---------------------------------------------------------------------------------------------
// Records and statistics

struct RunRecord {
  std::string variant;
  std::string cluster;
  uint32_t node_count = 0;
  std::optional<double> sweep_cpu;
  StudyPolicy policy;
  uint32_t window = true;
  uint64_t n = 0;
  uint32_t repetition = 0;
  multiply::MultiplyReport report;
};

struct GroupKey {
  std::size_t variant_index = 0;
  uint32_t window = true;
  uint64_t n = 0;
  StudyPolicy policy;
  auto operator<=>(const GroupKey&) const = default;
};

struct GroupStats {
  std::vector<const RunRecord*> runs;
  double makespan_median = 0, makespan_min = 0, makespan_max = 0;
  double predicted_median = 0, error_median = 0, gflops_median = 0, imbalance_median = 0;
  bool all_verified = true;
  const RunRecord* median_run = nullptr;
};

// One panel in flight means the next panel is sent only after the previous job is done: no
// overlap of communication with computation (Tinetti's SeqMsg).
std::string overlap_name(uint32_t window) { return window <= 1 ? "off" : "on"; }
std::string window_label(uint32_t window) {
  return window <= 1 ? "overlap off" : fmt::format("{} panels in flight", window);
}

std::map<GroupKey, GroupStats> summarise(const std::vector<RunRecord>& records,
                                         const std::vector<Variant>& variants) {
  std::map<GroupKey, GroupStats> groups;
  for (const RunRecord& record : records) {
    std::size_t index = 0;
    while (index < variants.size() && variants[index].label != record.variant) ++index;
    groups[{index, record.window, record.n, record.policy}].runs.push_back(&record);
  }
  for (auto& [key, stats] : groups) {
    std::vector<double> makespans, predicted, errors, gflops, imbalance;
    for (const RunRecord* run : stats.runs) {
      makespans.push_back(run->report.run.makespan_s);
      if (run->report.prediction) predicted.push_back(run->report.prediction->makespan_s);
      if (auto error = run->report.prediction_error()) errors.push_back(*error);
      gflops.push_back(run->report.run.gflops);
      imbalance.push_back(run->report.run.imbalance);
      stats.all_verified &= run->report.verification.mode == multiply::VerifyMode::kNone || run->report.verification.passed;
    }
    stats.makespan_median = median(makespans);
    stats.makespan_min = *std::min_element(makespans.begin(), makespans.end());
    stats.makespan_max = *std::max_element(makespans.begin(), makespans.end());
    stats.predicted_median = median(predicted);
    stats.error_median = median(errors);
    stats.gflops_median = median(gflops);
    stats.imbalance_median = median(imbalance);
    // The run closest to the median makespan stands for the group in the timeline plot.
    stats.median_run = *std::min_element(stats.runs.begin(), stats.runs.end(), [&](const RunRecord* a, const RunRecord* b) {
      return std::fabs(a->report.run.makespan_s - stats.makespan_median) <
             std::fabs(b->report.run.makespan_s - stats.makespan_median);
    });
  }
  return groups;
}

// Ideal ratios from the profiled speeds: the balanced bound (no communication) against the even
// split, and the aggregate speed against the first (fastest-first) node.
double ideal_even_to_balanced(const std::vector<double>& gflops) {
  if (gflops.empty()) return std::nan("");
  const double total = std::accumulate(gflops.begin(), gflops.end(), 0.0);
  const double slowest = *std::min_element(gflops.begin(), gflops.end());
  return total / (static_cast<double>(gflops.size()) * slowest);
}
double ideal_speedup_over_first(const std::vector<double>& gflops) {
  if (gflops.empty() || !(gflops.front() > 0.0)) return std::nan("");
  return std::accumulate(gflops.begin(), gflops.end(), 0.0) / gflops.front();
}

// ---------------------------------------------------------------------------------------------
// Output files

// "-" where a ratio has no data (a study without the even split).
std::string csv_optional(const std::optional<double>& value) { return value ? csv_number(*value) : ""; }


Status write_results(const std::string& out_dir, const Study& study, const std::vector<RunRecord>& records) {
  std::string results =
      "study,variant,cluster,nodes,sweep_cpu,policy,overlap,n,repetition,makespan_s,gflops,imbalance,"
      "predicted_makespan_s,prediction_error,verified,panel_width,panels_in_flight,worker_comm_cpu_share\n";
  std::string nodes =
      "study,variant,policy,overlap,n,repetition,node,kind,rows,weight,bytes_to_node,bytes_from_node,compute_s,comm_s,"
      "idle_s,finish_s,predicted_finish_s,worker_io_cpu_s,worker_compute_cpu_s\n";
  for (const RunRecord& record : records) {
    const multiply::MultiplyReport& report = record.report;
    const bool checked = report.verification.mode != multiply::VerifyMode::kNone;
    results += fmt::format("{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", study.name, record.variant,
                           record.cluster, record.node_count, csv_optional(record.sweep_cpu),
                           record.policy.name(), overlap_name(record.window), record.n, record.repetition,
                           csv_number(report.run.makespan_s), csv_number(report.run.gflops),
                           csv_number(report.run.imbalance),
                           report.prediction ? csv_number(report.prediction->makespan_s) : "",
                           csv_optional(report.prediction_error()),
                           checked ? (report.verification.passed ? "true" : "false") : "", report.plan.panel_width,
                           report.plan.panels_in_flight, csv_optional(report.run.worker_comm_share()));
    for (std::size_t i = 0; i < report.run.nodes.size(); ++i) {
      const multiply::NodeRunStats& node = report.run.nodes[i];
      const std::string kind = i < report.nodes.size() ? report.nodes[i].kind : "";
      const std::string predicted =
          report.prediction && i < report.prediction->finish_s.size() ? csv_number(report.prediction->finish_s[i]) : "";
      nodes += fmt::format("{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", study.name, record.variant,
                           record.policy.name(), overlap_name(record.window), record.n, record.repetition,
                           node.name, kind, node.rows, csv_number(node.weight), node.bytes_to_node,
                           node.bytes_from_node, csv_number(node.compute_s), csv_number(node.comm_s),
                           csv_number(node.idle_s), csv_number(node.finish_s), predicted,
                           csv_number(node.worker_io_cpu_s), csv_number(node.worker_compute_cpu_s));
    }
  }
  TESSERA_RETURN_IF_ERROR(write_text_file(out_dir + "/results.csv", results));
  return write_text_file(out_dir + "/nodes.csv", nodes);
}

double even_median(const std::map<GroupKey, GroupStats>& groups, const GroupKey& key) {
  GroupKey even = key;
  even.policy = kEvenRows;
  auto found = groups.find(even);
  return found == groups.end() ? std::nan("") : found->second.makespan_median;
}

Status write_summary(const std::string& out_dir, const Study& study, const std::vector<Variant>& variants,
                     const std::map<GroupKey, GroupStats>& groups) {
  std::string csv =
      "study,variant,nodes,sweep_cpu,policy,overlap,panels_in_flight,n,runs,makespan_median_s,makespan_min_s,makespan_max_s,"
      "predicted_median_s,prediction_error_median,gflops_median,imbalance_median,even_over_policy,"
      "ideal_even_over_balanced,all_verified\n";
  for (const auto& [key, stats] : groups) {
    const Variant& variant = variants[key.variant_index];
    csv += fmt::format("{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", study.name, variant.label,
                       variant.node_count, csv_optional(variant.sweep_cpu), key.policy.name(),
                       overlap_name(key.window), key.window, key.n, stats.runs.size(), csv_number(stats.makespan_median),
                       csv_number(stats.makespan_min), csv_number(stats.makespan_max),
                       csv_number(stats.predicted_median), csv_number(stats.error_median),
                       csv_number(stats.gflops_median), csv_number(stats.imbalance_median),
                       csv_number(even_median(groups, key) / stats.makespan_median),
                       csv_number(ideal_even_to_balanced(variant.gflops)), stats.all_verified ? "true" : "false");
  }
  return write_text_file(out_dir + "/summary.csv", csv);
}




void plot_makespans(const std::string& out_dir, const Study& study, const std::vector<Variant>& variants,
                    const std::map<GroupKey, GroupStats>& groups, Plots& plots) {
  std::string data = "# group";
  for (const StudyPolicy& policy : study.policies) data += fmt::format(" {}_median {}_min {}_max", policy.name(), policy.name(), policy.name());
  data += "\n";
  std::set<std::tuple<std::size_t, uint32_t, uint64_t>> rows;
  for (const auto& [key, stats] : groups) rows.insert({key.variant_index, key.window, key.n});
  for (const auto& [variant_index, window, n] : rows) {
    std::string label = fmt::format("n={}", n);
    if (variants.size() > 1) label = variants[variant_index].label + ", " + label;
    if (study.windows.size() > 1) label += ", " + window_label(window);
    data += "\"" + label + "\"";
    for (const StudyPolicy& policy : study.policies) {
      auto found = groups.find({variant_index, window, n, policy});
      if (found == groups.end()) {
        data += " NaN NaN NaN";
      } else {
        data += fmt::format(" {} {} {}", csv_number(found->second.makespan_median), csv_number(found->second.makespan_min),
                            csv_number(found->second.makespan_max));
      }
    }
    data += "\n";
  }
  std::string script = fmt::format("set title \"{}: makespan per policy (median of runs, bars min..max)\"\n", study.name);
  script += "set ylabel 'makespan (s)'\nset logscale y\nset style data histograms\n"
            "set style histogram errorbars gap 2 lw 1\nset style fill solid 0.8 border -1\nset boxwidth 0.9\n"
            "set xtics rotate by -20\nset yrange [*:*]\n";
  script += "plot ";
  for (std::size_t i = 0; i < study.policies.size(); ++i) {
    script += fmt::format("{}'{}/makespan.dat' using {}:{}:{}:xtic(1) title '{}'", i == 0 ? "" : ", ", out_dir, 2 + 3 * i,
                          3 + 3 * i, 4 + 3 * i, study.policies[i].name());
  }
  script += "\n";
  draw_plot(out_dir, "makespan", data, script,
            "Makespan per policy; bars span the fastest and slowest run.", plots);
}

// Per node of one run: time computing, time receiving/waiting before its last result was in,
// and time idle after it finished until the slowest node finished. The three add up to the
// makespan.
void plot_timeline(const std::string& out_dir, const Study& study, const std::vector<Variant>& variants,
                   const std::map<GroupKey, GroupStats>& groups, Plots& plots) {
  if (groups.empty()) return;
  const uint64_t n = *std::max_element(study.sizes.begin(), study.sizes.end());
  const uint32_t window = study.windows.front();
  const std::size_t variant_index = variants.size() - 1;
  auto find = [&](const StudyPolicy& policy) -> const GroupStats* {
    auto found = groups.find({variant_index, window, n, policy});
    return found == groups.end() ? nullptr : &found->second;
  };
  std::vector<std::pair<StudyPolicy, const GroupStats*>> shown;
  if (const GroupStats* even = find(kEvenRows)) shown.push_back({kEvenRows, even});
  const GroupStats* best = nullptr;
  StudyPolicy best_policy = kEvenRows;
  for (const StudyPolicy& policy : study.policies) {
    if (policy == kEvenRows) continue;
    const GroupStats* stats = find(policy);
    if (stats && (!best || stats->makespan_median < best->makespan_median)) {
      best = stats;
      best_policy = policy;
    }
  }
  if (best) shown.push_back({best_policy, best});
  if (shown.empty()) return;
  std::string compared;  // "even against model", or the one policy shown
  for (const auto& [policy, stats] : shown) compared += (compared.empty() ? "" : " against ") + policy.name();
  std::string data = "# label compute waiting idle_after\n";
  for (const auto& [policy, stats] : shown) {
    const multiply::MultiplyRun& run = stats->median_run->report.run;
    for (const multiply::NodeRunStats& node : run.nodes) {
      const double compute = std::min(node.compute_s, node.finish_s);
      const double waiting = std::max(0.0, node.finish_s - compute);
      const double after = std::max(0.0, run.makespan_s - node.finish_s);
      data += fmt::format("\"{}: {}\" {} {} {}\n", policy.name(), node.name, csv_number(compute),
                          csv_number(waiting), csv_number(after));
    }
  }
  std::string script = fmt::format("set title \"{}: where each node's time went, {} (n={}, {}, median run)\"\n", study.name,
                        compared, n, variants[variant_index].label);
  script += "set ylabel 'seconds'\nset style data histograms\nset style histogram rowstacked\n"
            "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -30\n";
  script += fmt::format("plot '{0}/timeline.dat' using 2:xtic(1) title 'computing', '' using 3 title "
                        "'receiving or waiting for data', '' using 4 title 'idle until every node was released'\n",
                        out_dir);
  const std::string what = best && shown.size() == 2
                               ? fmt::format("even split against the best other policy ({})", best_policy.name())
                               : compared;
  draw_plot(out_dir, "timeline", data, script, fmt::format("Per-node time of the median run at n={}: {}.", n, what),
            plots);
}

// Speedup against the first variant (one node, or the lowest node count) with the ideal bound.
void plot_scaling(const std::string& out_dir, const Study& study, const std::vector<Variant>& variants,
                  const std::map<GroupKey, GroupStats>& groups, Plots& plots) {
  if (study.node_counts.size() < 2) return;
  const uint64_t n = *std::max_element(study.sizes.begin(), study.sizes.end());
  std::string data = "# nodes ideal";
  std::vector<std::pair<StudyPolicy, uint32_t>> series;
  for (uint32_t window : study.windows) {
    for (const StudyPolicy& policy : study.policies) {
      series.push_back({policy, window});
      data += fmt::format(" {}_{}", policy.name(), overlap_name(window));
    }
  }
  data += "\n";
  for (std::size_t v = 0; v < variants.size(); ++v) {
    data += fmt::format("{} {}", variants[v].node_count, csv_number(ideal_speedup_over_first(variants[v].gflops)));
    for (const auto& [policy, window] : series) {
      auto base = groups.find({0, window, n, policy});
      auto here = groups.find({v, window, n, policy});
      const double speedup = base != groups.end() && here != groups.end()
                                 ? base->second.makespan_median / here->second.makespan_median
                                 : std::nan("");
      data += fmt::format(" {}", std::isfinite(speedup) ? csv_number(speedup) : std::string("NaN"));
    }
    data += "\n";
  }
  std::string script = fmt::format("set title \"{}: speedup over {} node(s) alone (n={})\"\n", study.name,
                        variants.front().node_count, n);
  script += "set xlabel 'nodes'\nset ylabel 'speedup'\nset xtics 1\nset key inside left top\n";
  script += fmt::format("plot '{}/scaling.dat' using 1:2 with linespoints dt 2 lw 2 title 'ideal (sum of measured speeds)'",
                        out_dir);
  for (std::size_t i = 0; i < series.size(); ++i) {
    script += fmt::format(", '' using 1:{} with linespoints lw 2 title '{}, {}'", 3 + i,
                          series[i].first.name(), window_label(series[i].second));
  }
  script += "\n";
  draw_plot(out_dir, "scaling", data, script,
            "Speedup over the smallest node set, nodes added in cluster order, with the "
            "ideal bound (sum of the nodes' measured speeds over the first node's).", plots);
}

// Even/balanced makespan ratio along the CPU sweep, with the ideal ratio.
void plot_sweep(const std::string& out_dir, const Study& study, const std::vector<Variant>& variants,
                const std::map<GroupKey, GroupStats>& groups, Plots& plots) {
  if (!study.sweep || study.sweep->cpu.size() < 2) return;
  const uint64_t n = *std::max_element(study.sizes.begin(), study.sizes.end());
  const uint32_t window = study.windows.front();
  std::vector<StudyPolicy> balanced;
  for (const StudyPolicy& policy : study.policies) {
    if (policy != kEvenRows) balanced.push_back(policy);
  }
  std::string data = "# cpu ideal";
  for (const StudyPolicy& policy : balanced) data += fmt::format(" {}", policy.name());
  data += "\n";
  for (std::size_t v = 0; v < variants.size(); ++v) {
    if (!variants[v].sweep_cpu) continue;
    data += fmt::format("{} {}", csv_number(*variants[v].sweep_cpu), csv_number(ideal_even_to_balanced(variants[v].gflops)));
    for (const StudyPolicy& policy : balanced) {
      auto here = groups.find({v, window, n, policy});
      const double ratio = here != groups.end() ? even_median(groups, here->first) / here->second.makespan_median
                                                : std::nan("");
      data += " " + (std::isfinite(ratio) ? csv_number(ratio) : std::string("NaN"));
    }
    data += "\n";
  }
  std::string script = fmt::format("set title \"{}: even / balanced makespan as the {} nodes slow down (n={})\"\n", study.name,
                        study.sweep->kind, n);
  script += fmt::format("set xlabel 'CPU quota of each {} node (cores)'\nset ylabel 'even makespan / balanced makespan'\n"
                        "set logscale x 2\nset key inside left top\n",
                        study.sweep->kind);
  script += fmt::format("plot '{}/sweep.dat' using 1:2 with linespoints dt 2 lw 2 title 'ideal (sum of speeds / (p x slowest))'",
                        out_dir);
  for (std::size_t i = 0; i < balanced.size(); ++i) {
    script += fmt::format(", '' using 1:{} with linespoints lw 2 title '{}'", 3 + i, balanced[i].name());
  }
  script += "\n";
  draw_plot(out_dir, "sweep", data, script,
            "How much balancing buys as the slow nodes get slower, against the ideal "
            "ratio computed from the profiled speeds.", plots);
}

std::string multiply_study_report(const Study& study, const std::vector<Variant>& variants,
                                  const std::map<GroupKey, GroupStats>& groups) {
  std::string md = fmt::format("- Cluster file: `{}`\n", study.cluster_path);
  for (const Variant& variant : variants) {
    md += fmt::format("- Variant *{}* (`{}`): {}\n", variant.label, variant.spec.name, emulation_description(variant.spec));
  }
  md += "\nRatios are the claim: absolute times come from workers emulated on one small machine "
        "(CPU quotas, shaped links), and only their relations carry over to real hardware. "
        "`even / policy` is the even split's median makespan over this policy's; `ideal` is the "
        "same ratio with no communication, from the profiled speeds (sum of speeds over node "
        "count times the slowest). `error` is the median |predicted - measured| / measured makespan.\n\n";
  md += "| variant | n | overlap (panels in flight) | policy | runs | makespan median (min..max) s | predicted s | error | GFLOP/s | imbalance | even / policy | ideal | verified |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [key, stats] : groups) {
    const Variant& variant = variants[key.variant_index];
    // Runs without a forecast (2D/3D layouts) show "-" rather than NaN.
    const bool forecast = std::isfinite(stats.predicted_median);
    md += fmt::format("| {} | {} | {} | {} | {} | {:.3f} ({:.3f}..{:.3f}) | {} | {} | {:.2f} | {:.3f} | {} | {:.2f} | {} |\n",
                      variant.label, key.n, fmt::format("{} ({})", overlap_name(key.window), key.window),
                      key.policy.name(), stats.runs.size(),
                      stats.makespan_median, stats.makespan_min, stats.makespan_max,
                      forecast ? fmt::format("{:.3f}", stats.predicted_median) : "-",
                      forecast ? fmt::format("{:.1f}%", stats.error_median * 100.0) : "-", stats.gflops_median, stats.imbalance_median,
                      ratio_text(even_median(groups, key) / stats.makespan_median), ideal_even_to_balanced(variant.gflops),
                      stats.all_verified ? "all" : "NOT ALL");
  }
  if (study.node_counts.size() > 1) {
    md += "\n### Scale-out\n\n| nodes | policy | overlap (panels in flight) | makespan s | improvement over " +
          std::to_string(variants.front().node_count) + " node(s) | ideal |\n|---|---|---|---|---|---|\n";
    const uint64_t n = *std::max_element(study.sizes.begin(), study.sizes.end());
    for (uint32_t window : study.windows) {
      for (const StudyPolicy& policy : study.policies) {
        auto base = groups.find({0, window, n, policy});
        for (std::size_t v = 0; v < variants.size(); ++v) {
          auto here = groups.find({v, window, n, policy});
          if (base == groups.end() || here == groups.end()) continue;
          md += fmt::format("| {} | {} | {} | {:.3f} | {:.2f}x | {:.2f}x |\n", variants[v].node_count, policy.name(),
                            fmt::format("{} ({})", overlap_name(window), window), here->second.makespan_median,
                            base->second.makespan_median / here->second.makespan_median,
                            ideal_speedup_over_first(variants[v].gflops));
        }
      }
    }
  }
  return md;
}

// The multiply study as the study runner runs it: each variant of the cluster is one of its
// clusters; each cell one size, credit window and policy, its repetitions back to back (the
// matrices of a size are made once).
class MultiplyStudyKind final : public StudyKind {
 public:
  MultiplyStudyKind(const Study& study, StudyOutline outline, const ExperimentOptions& options)
      : StudyKind(std::move(outline)),
        study_(study),
        options_(options) {}

  Status prepare(const std::string& out_dir, std::ostream&) override {
    Result<multiply::VerifyMode> verify_mode = multiply::parse_verify_mode(study_.verify);
    if (!verify_mode) return verify_mode.status();
    verify_mode_ = *verify_mode;
    Result<cluster::ClusterSpec> base = cluster::load_cluster_spec(study_.cluster_path);
    if (!base) return base.status();
    Result<std::vector<Variant>> variants = make_variants(study_, *base, out_dir);
    if (!variants) return variants.status();
    variants_ = std::move(*variants);
    for (const Variant& variant : variants_) {
      if (variant.config_path != base->source_path) TESSERA_RETURN_IF_ERROR(write_cluster_yaml(variant.config_path, variant.spec));
    }
    return Status::ok();
  }

  // The clusters are the variants, derived from the study's one cluster file in prepare().
  std::size_t cluster_count() const override { return variants_.size(); }

  Result<std::unique_ptr<StudyCluster>> open_cluster(std::size_t index, const emulation::LocalClusterOptions& local,
                                                     std::ostream& progress) override {
    const Variant& variant = variants_[index];
    return StudyCluster::open(variant.spec, variant.config_path, variant.label, local, outline().required_capabilities,
                              outline().require_all, progress);
  }

  Status use_cluster(StudyCluster& cluster, std::size_t index) override {
    variants_[index].gflops = cluster.speeds();
    return Status::ok();
  }

  std::size_t cells() const override { return study_.sizes.size() * study_.windows.size() * study_.policies.size(); }

  Status run_cell(StudyCluster& cluster, std::size_t index, std::size_t cell, uint32_t repetition,
                  const session::RunControl& control, RunCounter& counter) override {
    const std::size_t per_size = study_.windows.size() * study_.policies.size();
    const uint64_t n = study_.sizes[cell / per_size];
    const uint32_t window = study_.windows[cell % per_size / study_.policies.size()];
    const StudyPolicy& policy = study_.policies[cell % study_.policies.size()];
    if (!matrices_ || matrices_->n != n) matrices_.emplace(n);
    const Variant& variant = variants_[index];
    session::MultiplyOptions multiply;
    multiply.policy = plan::default_choice(policy.policy);
    multiply.layout = policy.layout;
    multiply.distribution = policy.distribution;
    multiply.panels_in_flight = window;
    multiply.verify = verify_mode_;
    multiply.verify_seed = repetition;
    Result<session::MultiplyOutcome> run =
        cluster.session().multiply(matrices_->a, matrices_->b, matrices_->c, multiply, control);
    if (!run) return interrupted(options_) ? Status(StatusCode::kInternal, "interrupted") : run.status();
    RunRecord record{variant.label, variant.spec.name, variant.node_count, variant.sweep_cpu, policy, window,
                     n, repetition, std::move(run->report)};
    counter.finished(fmt::format(
        "{} n={} {} {} #{}: {:.3f} s ({}){}", variant.label, n, window_label(window), policy.name(), repetition,
        record.report.run.makespan_s,
        record.report.prediction ? fmt::format("predicted {:.3f} s", record.report.prediction->makespan_s)
                                 : std::string("no forecast"),
        record.report.verification.passed || verify_mode_ == multiply::VerifyMode::kNone ? "" : " NOT VERIFIED"));
    records_.push_back(std::move(record));
    return Status::ok();
  }

  Status write_tables(const std::string& out_dir) override {
    groups_ = summarise(records_, variants_);
    TESSERA_RETURN_IF_ERROR(write_results(out_dir, study_, records_));
    return write_summary(out_dir, study_, variants_, groups_);
  }

  void draw_plots(const std::string& out_dir, Plots& plots) override {
    plot_makespans(out_dir, study_, variants_, groups_, plots);
    plot_timeline(out_dir, study_, variants_, groups_, plots);
    plot_scaling(out_dir, study_, variants_, groups_, plots);
    plot_sweep(out_dir, study_, variants_, groups_, plots);
  }

  std::string report_body() const override { return multiply_study_report(study_, variants_, groups_); }

 private:
  // A and B of one size (the same seeds for every run, so every policy multiplies the same
  // matrices), and C to hold the product.
  struct SizeMatrices {
    explicit SizeMatrices(uint64_t size)
        : n(size), a(linalg::random_matrix(size, size, 1)), b(linalg::random_matrix(size, size, 2)), c(size, size) {}
    uint64_t n;
    linalg::Matrix a, b, c;
  };

  const Study& study_;
  const ExperimentOptions& options_;
  multiply::VerifyMode verify_mode_{};
  std::vector<Variant> variants_;
  std::optional<SizeMatrices> matrices_;
  std::vector<RunRecord> records_;
  std::map<GroupKey, GroupStats> groups_;
};


}  // namespace

std::string StudyPolicy::name() const {
  if (distribution) return fmt::format("{}/{}", plan::policy_name(policy), plan::distribution_name(*distribution));
  if (layout == partition::Layout::kRows) return std::string(plan::policy_name(policy));
  return fmt::format("{}/{}", plan::policy_name(policy), partition::layout_name(layout));
}

Result<StudyPolicy> parse_study_policy(std::string_view text) {
  const std::size_t slash = text.find('/');
  StudyPolicy parsed;
  Result<plan::Policy> policy = plan::parse_policy(text.substr(0, slash));
  if (!policy) return policy.status();
  parsed.policy = *policy;
  if (slash != std::string_view::npos && plan::parse_distribution(text.substr(slash + 1)).is_ok()) {
    // Rows with B sent to each node (star) or forwarded along the nodes (chain).
    parsed.distribution = *plan::parse_distribution(text.substr(slash + 1));
    if (parsed.distribution == plan::Distribution::kChain && parsed.policy == plan::Policy::kDynamic) {
      return invalid_argument(fmt::format("'{}': the dynamic policy has no fixed rows to chain; use a static policy", text));
    }
  } else if (slash != std::string_view::npos) {
    Result<partition::Layout> layout = partition::parse_layout(text.substr(slash + 1));
    if (!layout) return layout.status();
    parsed.layout = *layout;
    TESSERA_RETURN_IF_ERROR(plan::check_layout(parsed.policy, parsed.layout).with_context(fmt::format("'{}': ", text)));
  }
  return parsed;
}

Result<Study> load_study(const std::string& path) { return load_study_file<Study>(path, parse_study); }

Status run_experiment(const Study& study, const ExperimentOptions& options, std::ostream& progress) {
  StudyOutline outline = outline_of(study);
  outline.output_subfolder = "clusters";  // the variants' derived cluster files
  outline.interleaved = false;
  outline.interrupted_code = StatusCode::kInternal;
  outline.show_notices = false;
  outline.files_note = "Files: `results.csv` (one row per run), `nodes.csv` (one row per node and run), "
                       "`summary.csv` (median, min, max per combination), the plots' data (`*.dat`) and gnuplot "
                       "scripts (`*.gp`).\n";
  MultiplyStudyKind kind(study, std::move(outline), options);
  return run_study(kind, options, progress);
}

}  // namespace tessera::experiment
