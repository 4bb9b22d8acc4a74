// What every study shares, whatever its workload: the options the runner takes (output folder,
// repetitions, how to stop early), the reading of a study file's workload, and gnuplot for plots.
// The studies: multiply_study.hpp (`tessera experiment` on a multiply study, the default),
// graph_study.hpp, expression_study.hpp. Values and free functions; run_gnuplot starts a child
// process and is safe to call from several threads on different scripts.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "tessera/balance/session/session.hpp"
#include "tessera/core/status.hpp"

namespace tessera::experiment {

// The coordinator libraries a study drives, by their short names.
namespace cluster = balance::cluster;
namespace expr = balance::expr;
namespace graphs = balance::graphs;
namespace plan = balance::plan;
namespace profile = balance::profile;
namespace multiply = balance::multiply;
namespace session = balance::session;

struct ExperimentOptions {
  std::string out_dir;                  // empty: experiments/results/<study>
  std::optional<uint32_t> repeat;       // overrides the study's
  std::string run_dir;                  // for `tessera up`; empty: default
  std::string command_line;             // recorded in report.md
  const std::atomic<bool>* interrupted = nullptr;  // set by a signal handler to stop early
  // --require-all: every node of every cluster must answer when the study connects; by default a
  // node that does not is left out with a warning line and the study runs on the others.
  bool require_all = session::SessionOptions{}.require_all;
};

// gnuplot as a child process on a script file (bounded by a deadline), for the studies' plots and
// other commands' (tessera graph --trace-png). Fails (kInternal) naming the script and the Debian
// package when gnuplot is missing or fails; callers report that as a warning, not a failure.
Status run_gnuplot(const std::string& script_path);
// The terminal and style every Tessera plot starts with (PNG, 960 x 540).
extern const char* const kPlotHeader;

// What the file's top level says in `workload:` ("graph", "expressions"), else "multiply" (also
// when the file cannot be read or parsed: the study's loader then reports that properly).
std::string study_workload(const std::string& path);

}  // namespace tessera::experiment
