// The `tessera` subcommands as library functions: each takes its parsed options, prints what a
// user reads to `out` (results) and `err` (progress, warnings, errors), and returns the process
// exit code. apps/tessera_main.cpp only parses flags and calls these. Each command is implemented
// in its own file (src/<command>_command.cpp); graph, eval, partition and keygen also have their
// own header.
//
// Exit codes: 0 success; 1 the run failed (network, worker, I/O, an input larger than this
// machine's memory); 2 bad input (flags, YAML, .npy, NaN in an input); 3 the product failed
// verification; 130 interrupted (Ctrl-C). Not thread-safe (writes to the given streams).
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/settings.hpp"
#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"

namespace tessera::cli {

// The coordinator libraries the commands call, by their short names.
namespace cluster = balance::cluster;
namespace expr = balance::expr;
namespace graphs = balance::graphs;
namespace model = balance::model;
namespace plan = balance::plan;
namespace profile = balance::profile;
namespace multiply = balance::multiply;
namespace session = balance::session;

inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitVerificationFailed = 3;
inline constexpr int kExitInterrupted = 130;

// Prints "tessera: <message>" to `err` and returns the exit code for the status's kind, the one
// mapping every subcommand uses. The message is printed through core's printable_message: no
// control byte but newline, no invalid UTF-8, whatever a reader let through.
int report_failure(std::ostream& err, const Status& status);

// How the CLI names an option of session/settings.hpp in a message: `--panels-in-flight 4`, the
// flags whose names differ from their field (`--refill`, `--node-timeout`) renamed. Thread-safe.
const session::OptionSpelling& flag_spelling();

struct LifecycleCommand {
  std::string config_path;
  emulation::LocalClusterOptions local;
};
int command_up(const LifecycleCommand& command, std::ostream& out, std::ostream& err);
int command_down(const LifecycleCommand& command, std::ostream& out, std::ostream& err);
// `tessera status CONFIG [--json] [--watch SECONDS] [--deadline-ms MS] [--profile FILE]`: every
// node checked at once (cluster_status), a header and one line each: state (reachable, BUSY with
// whose session, REFUSED with why, UNREACHABLE with why), the host's load ("0.42/2": 1-minute load
// average / cores; "-" when unknown), the worker's version, architecture, threads, cores and
// memory, and against the saved profile its age and what changed since (threads, cores, memory,
// architecture, version: a changed node wants `tessera profile --node NAME`). --json prints the
// same as one JSON document (load a number, null when unknown); --watch redraws it every SECONDS
// (in place on a terminal) until interrupted. Exit 0 when every node is reachable, 1 otherwise.
struct StatusCommand {
  LifecycleCommand lifecycle;
  std::string profile_path;  // empty: next to the config
  bool json = false;
  double watch_s = 0.0;      // 0: once
  uint32_t deadline_ms = 2000;
  const std::atomic<bool>* interrupted = nullptr;
};
int command_status(const StatusCommand& command, std::ostream& out, std::ostream& err);

struct ProfileCommand {
  std::string config_path;
  std::string run_dir;       // where `tessera up` recorded emulated endpoints; empty: default
  std::string profile_path;  // empty: next to the config
  // --refresh, --quick, --node (only_nodes), --probe-size (reference_size), --window-seconds:
  // what Python's Cluster.profile takes too, with the same defaults and checks
  // (session::check_profile_options).
  profile::ProfileOptions measure;
  // --require-all: every node must answer at the start, or the command fails naming those that
  // did not; by default they are left out with a warning (session::SessionOptions::require_all).
  bool require_all = session::SessionOptions{}.require_all;
};
int command_profile(const ProfileCommand& command, std::ostream& out, std::ostream& err);

// `tessera model`: the plan and predicted finish times of every policy, without running anything.
struct ModelCommand {
  std::string config_path;
  std::string profile_path;  // empty: next to the config
  std::optional<uint64_t> m, n, k;
  uint64_t panel_width = session::MultiplyOptions{}.panel_width;
  uint32_t panels_in_flight = session::MultiplyOptions{}.panels_in_flight;
  // The model policy's forecast for the first 1, 2, 4, ... nodes of the file (and all), one line
  // each, instead of every policy's plan for all of them.
  bool scale = false;
};
int command_model(const ModelCommand& command, std::ostream& out, std::ostream& err);

struct MultiplyCommand {
  std::string config_path;
  std::string run_dir;              // where `tessera up` recorded emulated endpoints; empty: default
  std::optional<uint64_t> m, n, k;  // n alone makes square matrices
  // --policy, --weights, --seed (also the random inputs'), --verify, --panel-width,
  // --panels-in-flight, --refill, --layout, --distribution, --tile-rows, --node-timeout, --allow-nonfinite: the
  // options Python's Cluster.multiply takes too, with their defaults (session/settings.hpp).
  session::MultiplySettings settings;
  std::string profile_path;         // empty: next to the config
  std::string fill = "uniform";     // uniform | integers
  std::string report_path;
  std::string a_path, b_path, out_path;
  // --overlap on|off, the CLI's spelling of settings.overlap (which it replaces).
  std::string overlap = session::MultiplySettings{}.overlap ? "on" : "off";
  bool show_plan = false;
  // --require-all: every node must answer at the start, or the command fails naming those that
  // did not; by default they are left out with a warning (session::SessionOptions::require_all).
  bool require_all = session::SessionOptions{}.require_all;
  // Set by the caller's signal handler (Ctrl-C, TERM): the run stops, the workers' sessions are
  // closed at once so the next multiply finds them free, and the command exits 130.
  const std::atomic<bool>* interrupted = nullptr;
  // --progress auto|always|never: a progress line on stderr (jobs done per node, ETA) redrawn in
  // place while the run lasts over a second; auto: only when stderr is a terminal, so pipes, files
  // and logs get exactly the output they got before (progress_line.hpp).
  std::string progress = "auto";
};
// Also exit 130 (kExitInterrupted) when `interrupted` was set.
int command_multiply(const MultiplyCommand& command, std::ostream& out, std::ostream& err);

// `tessera experiment`: replays a study (experiment.hpp). options.interrupted is set by the
// caller's signal handler; the run then stops, cleans up and exits 130.
struct ExperimentCommand {
  std::string study_path;
  // --out (out_dir), --repeat, --run-dir, the command line for report.md, and the interrupt flag.
  experiment::ExperimentOptions options;
};
int command_experiment(const ExperimentCommand& command, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
