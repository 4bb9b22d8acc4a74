// What several `tessera` subcommands share and no caller outside balance/cli needs: the profile
// measurement's progress lines (the CLI's option spelling, which tests read too, is declared in
// commands.hpp). Private to the library (not under include/). Not thread-safe.
#pragma once

#include <iosfwd>

#include "tessera/balance/profile/profile.hpp"

namespace tessera::balance::cli {

// Progress of a profile measurement: on a terminal one line per node, rewritten in place; in a
// log only each node's final line. Writes to `err`, which must outlive the returned function.
profile::ProfileProgress profile_progress_printer(std::ostream& err);

}  // namespace tessera::balance::cli
