// What every study runner shares (multiply studies in experiment.cpp, graph studies in
// graph_study.cpp): bringing a local cluster up for a study, writing files, gnuplot, and the
// facts every report states. Internal to the study library. Not thread-safe (writes files, runs
// children).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tessera/balance/cluster/cluster_spec.hpp"
#include "tessera/balance/local/local_cluster.hpp"
#include "tessera/balance/study/experiment.hpp"  // run_gnuplot, kPlotHeader: defined in study_support.cpp
#include "tessera/core/status.hpp"

namespace tessera::balance::study_support {

using balance::kPlotHeader;
using balance::run_gnuplot;

// A CSV cell: the number with 6 significant digits, empty when not finite.
std::string csv_number(double value);
Status write_text_file(const std::string& path, const std::string& text);
// Files drawn for report.md, and the plots that could not be drawn (and why).
struct Plots {
  std::vector<std::pair<std::string, std::string>> files;  // (file, caption)
  std::vector<std::string> problems;
};
// "Linux 6.1 (x86_64), 2 online CPUs (model), 23.4 GiB memory"
std::string machine_facts();
// "desktop (desktop, 1 thread): cpu 1 core; pi1 (pi, 1 thread): cpu 0.25 core, link 100mbit"
std::string emulation_description(const ClusterSpec& spec);
// "42s", "3m05s"
std::string format_duration(double seconds);
// Brings `spec`'s cluster up unless it already runs; returns whether this call started it (and so
// the study may stop it). `label` names it in progress lines.
Result<bool> ensure_up(const ClusterSpec& spec, const std::string& label, const LocalClusterOptions& local,
                       std::ostream& progress);

}  // namespace tessera::balance::study_support
