// The `tessera` command line: every subcommand's flags, parsed, and the one subcommand named run.
// Each command's flags are defined in its own file beside its body (src/<command>_command.cpp);
// apps/tessera_main.cpp only calls run_command_line(). Installs SIGINT/SIGTERM handlers for the long commands
// (a first signal asks them to stop cleanly, a second exits at once). Not thread-safe; once per
// process.
#pragma once

namespace tessera::cli {

// Parses `argv` and runs the subcommand it names; returns the process exit code (commands.hpp).
// Bad flags print CLI11's message (escaped like every other) and return kExitBadInput; --help and
// --version print and return 0.
int run_command_line(int argc, char** argv);

}  // namespace tessera::cli
