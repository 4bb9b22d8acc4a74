#include "tessera/cli/cli.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "subcommands.hpp"
#include "tessera/core/strings.hpp"

namespace tessera::cli {

namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

// The first Ctrl-C asks the command to stop cleanly; a second one means "now": only
// async-signal-safe calls here.
extern "C" void on_interrupt(int) {
  if (g_interrupted.exchange(true)) ::_exit(kExitInterrupted);
}

const std::atomic<bool>& stop_cleanly_on_interrupt() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return g_interrupted;
}

}  // namespace

int run_command_line(int argc, char** argv) {
  CLI::App app{"tessera: balanced matrix multiplication on a mixed cluster"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);

  std::vector<Subcommand> subcommands = add_lifecycle_commands(app);
  for (Subcommand (*add)(CLI::App&) :
       {add_status_command, add_profile_command, add_model_command, add_multiply_command, add_eval_command, add_iterate_command,
        add_experiment_command, add_partition_command, add_graph_command, add_keygen_command}) {
    subcommands.push_back(add(app));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // CLI11's messages quote the arguments as given (a file name can hold any byte), so its
    // error text is escaped like every other message; help goes to stdout as it is.
    std::ostringstream message;
    const int code = app.exit(error, std::cout, message);
    std::cerr << printable_message(message.str());
    return code == 0 ? 0 : kExitBadInput;
  }
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i == 0 ? "tessera" : std::string(" ") + argv[i]);
  const Invocation call{std::cout, std::cerr, command_line, stop_cleanly_on_interrupt};
  for (const Subcommand& subcommand : subcommands) {
    if (*subcommand.app) return subcommand.run(call);
  }
  return kExitBadInput;
}

}  // namespace tessera::cli
