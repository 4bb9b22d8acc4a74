// What every study shares (multiply studies in multiply_study.cpp, graph studies in
// graph_study.cpp, expression studies in expression_study.cpp, all run by study_runner.hpp):
// reading study files and their common keys, bringing a local cluster up for a study, writing
// files, gnuplot, and the facts every report states. Internal to the study library. Not
// thread-safe (writes files, runs children).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/cluster/strict_yaml.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/experiment/study.hpp"  // run_gnuplot, kPlotHeader: defined in study_io.cpp
#include "tessera/core/status.hpp"

namespace tessera::experiment::steps {


// A study's name names its output folder.
inline constexpr char kStudyNameCharacters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";

// How one kind of study spells the keys every study file has, and the keys it adds.
struct StudyFileSchema {
  std::string_view kind{};           // "a study", "a graph study": names the kind in messages
  std::string_view workload{};       // what `workload:` must say: "multiply", "graph", "expressions"
  std::string_view name_example{};   // for `study: NAME`, e.g. "balanced-vs-even"
  std::vector<std::string> own_keys{};  // the kind's keys besides the common ones
  bool workload_required = true;     // false only for the default kind, multiply
  bool one_cluster = false;          // `cluster: PATH` (multiply) instead of `clusters: [PATH, ...]`
};

// The common keys' values: study (checked against kStudyNameCharacters), description, workload
// (checked), cluster or clusters (resolved against the study file's folder) and repeat.
struct StudyHeader {
  std::string name;
  std::string description;
  std::string source_path;
  std::vector<std::string> cluster_paths;  // one when schema.one_cluster
  std::optional<uint32_t> repeat;          // absent: the kind's default
};

// The study file's top level as a map of the common keys and schema.own_keys; fails (fail_at) when
// it is not a mapping or holds another key.
cluster::YamlMap study_keys(const YAML::Node& root, const StudyFileSchema& schema);
// Reads the common keys; fails (fail_at) on the first problem, at its line.
StudyHeader read_study_header(const cluster::YamlMap& keys, const std::string& path, const StudyFileSchema& schema);
// Reads the common keys into a study value with members name, description, source_path and repeat;
// returns the cluster paths for the kind to keep as it names them.
template <typename StudyT>
std::vector<std::string> read_study_header_into(StudyT& study, const cluster::YamlMap& keys, const std::string& path,
                                                const StudyFileSchema& schema) {
  StudyHeader header = read_study_header(keys, path, schema);
  study.name = std::move(header.name);
  study.description = std::move(header.description);
  study.source_path = std::move(header.source_path);
  if (header.repeat) study.repeat = *header.repeat;
  return std::move(header.cluster_paths);
}

// The texts of list `key` ("the study"'s), each checked at its own line; empty when absent.
inline std::vector<std::string> text_list(const cluster::YamlMap& keys, std::string_view key, std::string_view example) {
  std::vector<std::string> out;
  if (std::optional<std::vector<cluster::YamlMap::Entry>> items = keys.list(key, example)) {
    for (const cluster::YamlMap::Entry& item : *items) out.push_back(cluster::yaml_text(item.value, item.line, key, "the study", example));
  }
  return out;
}
// Calls parse(text) for every item of list `key`, failing at the item's line with its message.
template <typename T, typename Parse>
std::vector<T> parsed_list(const cluster::YamlMap& keys, std::string_view key, std::string_view example, Parse parse) {
  std::vector<T> out;
  if (std::optional<std::vector<cluster::YamlMap::Entry>> items = keys.list(key, example)) {
    for (const cluster::YamlMap::Entry& item : *items) {
      Result<T> value = parse(cluster::yaml_text(item.value, item.line, key, "the study", example));
      if (!value) cluster::fail_at(item.line, value.status().message());
      out.push_back(*value);
    }
  }
  return out;
}

// A ratio for a report's table, "-" when it is not a number (a missing or failed group).
inline std::string ratio_text(double value) { return std::isfinite(value) ? fmt::format("{:.2f}", value) : "-"; }

// Whether the signal handler asked the study to stop.
inline bool interrupted(const ExperimentOptions& options) {
  return options.interrupted != nullptr && options.interrupted->load();
}

// REQUIRES: `values` is not empty.
inline double minimum(const std::vector<double>& values) { return *std::min_element(values.begin(), values.end()); }
inline double maximum(const std::vector<double>& values) { return *std::max_element(values.begin(), values.end()); }

// A CSV cell: the number with 6 significant digits, empty when not finite.
std::string csv_number(double value);
Status write_text_file(const std::string& path, const std::string& text);
// Files drawn for report.md, and the plots that could not be drawn (and why).
struct Plots {
  std::vector<std::pair<std::string, std::string>> files;  // (file, caption)
  std::vector<std::string> problems;
};
// Writes OUT_DIR/STEM.dat and STEM.gp (kPlotHeader, the output OUT_DIR/STEM.png, then `script`)
// and runs gnuplot on the script; adds STEM.png with `caption` to plots.files, or what went wrong
// to plots.problems.
void draw_plot(const std::string& out_dir, const std::string& stem, const std::string& data, const std::string& script,
               const std::string& caption, Plots& plots);
// What a report says of each cluster a study ran on.
struct ClusterFacts {
  std::string path;
  cluster::ClusterSpec spec;
  std::vector<double> speeds;  // profiled GFLOP/s, cluster order
};
// "Cluster `NAME` (`PATH`): EMULATION; profiled GFLOP/s: a 1.0, b 2.0", without a line end.
std::string cluster_facts_line(const ClusterFacts& facts);
// "Linux 6.1 (x86_64), 2 online CPUs (model), 23.4 GiB memory"
std::string machine_facts();
// "desktop (desktop, 1 thread): cpu 1 core; pi1 (pi, 1 thread): cpu 0.25 core, link 100mbit"
std::string emulation_description(const cluster::ClusterSpec& spec);
// The opening of every report.md: title, description, an "Incomplete" warning unless `complete`,
// the command (or `tessera experiment SOURCE`), start time, duration, repetitions (followed by
// `repetition_note`, e.g. ", interleaved") and the machine.
std::string report_header(const std::string& name, const std::string& description, const std::string& source_path,
                          const std::string& command_line, const std::string& started_at, double seconds,
                          uint32_t repetitions, std::string_view repetition_note, bool complete);
// "42s", "3m05s"
std::string format_duration(double seconds);
// Reads a study file with the strict YAML reader and hands its root to `parse` (which throws
// YamlError through fail_at on a problem; the result then carries file and line).
template <typename StudyT, typename Parse>
Result<StudyT> load_study_file(const std::string& path, Parse&& parse) {
  if (!std::filesystem::exists(path)) return io_error(fmt::format("study file {} not found", path));
  Result<std::string> text = cluster::read_yaml_file(path, "study file");
  if (!text) return text.status();
  StudyT study;
  TESSERA_RETURN_IF_ERROR(cluster::read_yaml(*text, path, [&](const YAML::Node& root) { study = parse(root, path); }));
  return study;
}
// The study's output folder (options.out_dir, or experiments/results/NAME), created with
// `subfolder` inside when given; kIoError naming it when it cannot be.
Result<std::string> make_output_folder(const std::string& out_dir, const std::string& study_name,
                                       const std::string& subfolder = "");

// One cluster of a study: loaded from its file, brought up unless it runs, connected (every node
// offering `required_capabilities`; a node that does not answer is left out with a "warning: node
// 'NAME' left out: ..." line on `progress`, or fails the study with `require_all`) and profiled
// afresh ("profiling 'NAME'" on `progress`); spec(), reachable() and speeds() then hold the nodes
// taking part. When
// destroyed it closes the session and stops the cluster if this object started it ("stopped
// cluster 'NAME'"), whether the study got through it or not. Not thread-safe.
class StudyCluster {
 public:
  static Result<std::unique_ptr<StudyCluster>> open(const std::string& path, const emulation::LocalClusterOptions& local,
                                                    uint64_t required_capabilities, bool require_all,
                                                    std::ostream& progress);
  // The same for a spec already in hand, whose file is at `path` (a variant the study derived and
  // wrote); `label` names it in the "started cluster" line.
  static Result<std::unique_ptr<StudyCluster>> open(cluster::ClusterSpec spec, const std::string& path,
                                                    const std::string& label, const emulation::LocalClusterOptions& local,
                                                    uint64_t required_capabilities, bool require_all,
                                                    std::ostream& progress);
  ~StudyCluster();
  StudyCluster(const StudyCluster&) = delete;
  StudyCluster& operator=(const StudyCluster&) = delete;

  const cluster::ClusterSpec& spec() const { return taking_part_; }     // as the file says, less nodes left out
  const cluster::ClusterSpec& reachable() const { return reachable_; }  // endpoints as the coordinator reaches them
  session::Session& session() { return *session_; }
  const profile::ClusterProfile& profile() const { return profile_; }
  // Profiled GFLOP/s per node, cluster order.
  std::vector<double> speeds() const;

 private:
  StudyCluster(cluster::ClusterSpec spec, emulation::LocalClusterOptions local, std::ostream& progress)
      : spec_(std::move(spec)), local_(std::move(local)), progress_(progress) {}
  cluster::ClusterSpec spec_;  // as the file says: what is stopped at the end
  cluster::ClusterSpec taking_part_;
  cluster::ClusterSpec reachable_;
  emulation::LocalClusterOptions local_;
  std::ostream& progress_;
  bool started_ = false;
  std::optional<session::Session> session_;
  profile::ClusterProfile profile_;
};

}  // namespace tessera::experiment::steps
