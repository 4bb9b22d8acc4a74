// How each `tessera` subcommand puts its flags on the command line beside its body: one add_*
// function in each command's file, called by cli::run_command_line (cli.cpp) before the command line is parsed.
// Each returns the subcommand's CLI11 app (parsed when `*app` is true) and what run_command_line() calls then.
// Internal to the CLI library. Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/cli/commands.hpp"

namespace tessera::cli {

// What a subcommand gets when it runs.
struct Invocation {
  std::ostream& out;
  std::ostream& err;
  std::string command_line;  // as typed ("tessera experiment ..."), for a study's record
  // Long commands call this before they start: from then on the first Ctrl-C (or TERM) sets the
  // flag it returns, which the command watches to stop cleanly (sessions closed, clusters
  // stopped); a second one exits at once.
  const std::atomic<bool>& (*stop_cleanly_on_interrupt)();
};

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(const Invocation&)> run;
};

// --n, --m, --k as given, before they fill a command's sizes (an absent --m or --k follows --n).
struct MatrixSizeFlags {
  uint64_t m = 0, n = 0, k = 0;
};

// The help of --require-all, the same on every command that connects. Its default, leaving out
// nodes that do not answer, is session::SessionOptions::require_all's.
inline constexpr const char* kRequireAllHelp =
    "fail unless every node answers at the start (default: leave out, with a warning, nodes that are unreachable "
    "or refuse, and run on the others)";

// The config positional and --run-dir, shared by up, down and status.
void add_lifecycle_options(CLI::App* sub, LifecycleCommand& lifecycle);

std::vector<Subcommand> add_lifecycle_commands(CLI::App& app);  // up, down
Subcommand add_status_command(CLI::App& app);
Subcommand add_profile_command(CLI::App& app);
Subcommand add_model_command(CLI::App& app);
Subcommand add_multiply_command(CLI::App& app);
Subcommand add_eval_command(CLI::App& app);
Subcommand add_iterate_command(CLI::App& app);
Subcommand add_graph_command(CLI::App& app);
Subcommand add_partition_command(CLI::App& app);
Subcommand add_experiment_command(CLI::App& app);
Subcommand add_keygen_command(CLI::App& app);

}  // namespace tessera::cli
