// tessera: the coordinator's command line (frontends/cli: every subcommand's flags and body).
//
// Nothing escapes main as an exception: a std::bad_alloc or any other std::exception that slips
// past the library's checks ends in one sentence and exit 1, never in std::terminate's abort.
#include <exception>
#include <iostream>
#include <new>

#include "tessera/cli/cli.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/core/strings.hpp"

int main(int argc, char** argv) {
  try {
    return tessera::cli::run_command_line(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "tessera: out of memory; the inputs (or --n) are larger than this machine can hold, or other "
                 "programs use the memory. Try smaller matrices\n";
  } catch (const std::exception& error) {
    // what() may quote input (a library's exception text), so it is escaped like report_failure's.
    std::cerr << "tessera: internal error: " << tessera::printable_message(error.what())
              << "; please report it with the command you ran\n";
  } catch (...) {
    std::cerr << "tessera: internal error (unknown exception); please report it with the command you ran\n";
  }
  return tessera::cli::kExitRunFailed;
}
