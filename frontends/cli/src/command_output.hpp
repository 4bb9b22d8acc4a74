// What several `tessera` subcommands share and no caller outside the CLI library needs: the profile
// measurement's progress lines, the warnings for nodes left out at the start (the CLI's option spelling, which tests read too, is declared in
// commands.hpp). Private to the library (not under include/). Not thread-safe.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/cli/commands.hpp"

namespace tessera::cli {

// Progress of a profile measurement: on a terminal one line per node, rewritten in place; in a
// log only each node's final line. Writes to `err`, which must outlive the returned function.
profile::ProfileProgress profile_progress_printer(std::ostream& err);

// One "warning: node 'pi2' left out: REASON" line per node `session` left out at the start, printed
// before the run so that whoever waits knows at once which nodes share the work.
void print_left_out(std::ostream& err, const session::Session& session);

// The session a command runs on: the cluster file as this machine reaches it, its warnings and the
// nodes left out at the start printed to `err`, `options` with the profile path and require_all
// set from the command's flags. The failure, for report_failure, names the file or the nodes.
Result<session::Session> open_command_session(std::ostream& err, const std::string& config_path,
                                              const std::string& run_dir, const std::string& profile_path,
                                              bool require_all, session::SessionOptions options = {});

// "tessera: interrupted; the workers' sessions were closed, ..." and kExitInterrupted: how a
// command that was interrupted ends.
int report_interrupted(std::ostream& err);

// One "warning: ..." line each, before the run (the cluster file's exposed secret, say).
void print_warnings(std::ostream& err, const std::vector<std::string>& warnings);

}  // namespace tessera::cli
