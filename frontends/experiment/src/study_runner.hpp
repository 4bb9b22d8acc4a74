// The one skeleton every study runs through. A kind of study (multiply, graph, expressions)
// provides what is its own: its clusters, the cells one repetition runs on each, how to run one
// cell, its CSV files, plots and report sections. run_study() does the rest the same way for
// all: the output folder, each cluster brought up, profiled and stopped again, the runs in order
// with a progress line and an ETA each, interruption, and report.md around the kind's sections.
// Internal to the study library. Not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "study_io.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::experiment::steps {

// What run_study needs to know of a study besides its runs.
struct StudyOutline {
  std::string name;         // names the output folder and the report
  std::string description;
  std::string source_path;
  uint32_t repeat = 3;      // the study file's; options.repeat overrides
  // Untimed passes over every cell before the timed repetitions (so caches are warm when timing
  // starts). run_cell numbers them first: repetitions 1..warmup are the warm-ups, warmup + 1 ..
  // warmup + repeat the timed ones; the kind tells them apart by outline().warmup.
  uint32_t warmup = 0;
  std::vector<std::string> cluster_paths;  // what StudyKind::open_cluster opens unless a kind says otherwise
  uint64_t required_capabilities = transport::kCapabilityGemm;  // of every node of those clusters
  // Every node must answer when a cluster is connected (ExperimentOptions::require_all, which
  // run_study copies here); false: the nodes that do not are left out with a warning line.
  bool require_all = session::SessionOptions{}.require_all;
  std::string output_subfolder;  // created inside the output folder before prepare(); empty: none
  // true: each repetition runs every cell once, so a slow spell of the shared machine hits all
  // alike; false: each cell's repetitions run back to back (a multiply study reuses its matrices).
  bool interleaved = true;
  StatusCode interrupted_code = StatusCode::kCancelled;  // the status an interrupted study ends with
  bool show_notices = true;  // the session's notices (a node dropped, ...) as progress lines
  std::string files_note;    // the closing "Files: ..." paragraph of report.md
};

// The outline's fields every study value has (name, description, source_path, repeat, and
// cluster_paths where the study names its cluster files); the kind sets the rest.
template <typename StudyT>
StudyOutline outline_of(const StudyT& study) {
  StudyOutline outline;
  outline.name = study.name;
  outline.description = study.description;
  outline.source_path = study.source_path;
  outline.repeat = study.repeat;
  if constexpr (requires { study.cluster_paths; }) outline.cluster_paths = study.cluster_paths;
  return outline;
}

// Counts finished runs and prints one progress line each: "[3/12] WHAT  ETA 1m05s".
class RunCounter {
 public:
  RunCounter(std::ostream& progress, std::size_t total);
  void finished(std::string_view what);
  std::size_t done() const { return done_; }

 private:
  std::ostream& progress_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// What one kind of study provides. Called in this order: prepare(); per cluster open_cluster(),
// use_cluster(), then run_cell() for every cell and repetition; write_tables(); draw_plots() when
// any run finished; report_body(). A failing call stops the runs; the files are written with
// what finished.
class StudyKind {
 public:
  explicit StudyKind(StudyOutline outline) : outline_(std::move(outline)) {}
  virtual ~StudyKind() = default;
  const StudyOutline& outline() const { return outline_; }
  // The command line's --require-all, which the study file does not say.
  void set_require_all(bool require_all) { outline_.require_all = require_all; }

  // Whatever the runs need before any cluster is up (inputs, derived cluster files in out_dir).
  virtual Status prepare(const std::string& out_dir, std::ostream& progress) = 0;
  // By default the clusters are the files outline().cluster_paths names.
  virtual std::size_t cluster_count() const { return outline_.cluster_paths.size(); }
  virtual Result<std::unique_ptr<StudyCluster>> open_cluster(std::size_t index, const emulation::LocalClusterOptions& local,
                                                             std::ostream& progress) {
    return StudyCluster::open(outline_.cluster_paths[index], local, outline_.required_capabilities,
                              outline_.require_all, progress);
  }
  // Records what the report states of the cluster (its profiled speeds, ...) before its runs.
  virtual Status use_cluster(StudyCluster& cluster, std::size_t index) = 0;
  virtual std::size_t cells() const = 0;  // runs per cluster and repetition
  // Runs cell `cell` (0 .. cells() - 1), keeps its record and calls counter.finished() once it
  // ran; a failure (or a run that failed verification) fails the study.
  virtual Status run_cell(StudyCluster& cluster, std::size_t cluster_index, std::size_t cell, uint32_t repetition,
                          const session::RunControl& control, RunCounter& counter) = 0;
  // Summarises the runs and writes the CSV files.
  virtual Status write_tables(const std::string& out_dir) = 0;
  virtual void draw_plots(const std::string& out_dir, Plots& plots) = 0;
  // report.md between the common header and the plots.
  virtual std::string report_body() const = 0;

 private:
  StudyOutline outline_;
};

// Runs the study `kind` describes; progress lines go to `progress`. Fails (after cleaning up) if a
// run fails or the study is interrupted; the files hold what finished.
Status run_study(StudyKind& kind, const ExperimentOptions& options, std::ostream& progress);

}  // namespace tessera::experiment::steps
