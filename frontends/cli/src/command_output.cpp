#include "command_output.hpp"

#include <unistd.h>

#include <ostream>

#include <fmt/format.h>

#include "tessera/cli/commands.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/emulation/local_cluster.hpp"

namespace tessera::cli {

const session::OptionSpelling& flag_spelling() {
  static const session::OptionSpelling spelling(session::OptionSpelling::Style::kFlag,
                                                {{"refill_threshold", "--refill"},
                                                 {"node_timeout_s", "--node-timeout"},
                                                 {"reference_size", "--probe-size"},
                                                 {"only_nodes", "--node"}});
  return spelling;
}

profile::ProfileProgress profile_progress_printer(std::ostream& err) {
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  return [&err, terminal](const std::string& node, const std::string& what, bool done) {
    if (done) {
      err << (terminal ? "\r\033[K" : "") << fmt::format("  {:<12} {}\n", node, what);
    } else if (terminal) {
      err << "\r\033[K" << fmt::format("  {:<12} measuring {} ...", node, what) << std::flush;
    }
  };
}

// Every error and every left-out warning passes through printable_message: the readers quote
// what they read from a file through printable() already, and this second pass (which leaves
// their \xNN as they are) catches any quoting site that was missed.
int report_failure(std::ostream& err, const Status& status) {
  err << "tessera: " << printable_message(status.message()) << "\n";
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidConfig:
      return kExitBadInput;
    case StatusCode::kVerificationFailed:
      return kExitVerificationFailed;
    // A worker that is busy or out of tile memory failed the run; the input itself may be fine.
    case StatusCode::kBusy:
    case StatusCode::kResourceExhausted:
    default:
      return kExitRunFailed;
  }
}

void print_left_out(std::ostream& err, const session::Session& session) {
  for (const cluster::LeftOutNode& node : session.left_out_at_start()) {
    err << "warning: " << printable_message(cluster::left_out_warning(node)) << "\n";
  }
}

Result<session::Session> open_command_session(std::ostream& err, const std::string& config_path,
                                              const std::string& run_dir, const std::string& profile_path,
                                              bool require_all, session::SessionOptions options) {
  Result<emulation::ReachableCluster> cluster = emulation::load_reachable_cluster(config_path, run_dir);
  if (!cluster) return cluster.status();
  print_warnings(err, cluster->warnings);
  options.profile_path = profile_path;
  options.require_all = require_all;
  Result<session::Session> session = session::Session::open(std::move(*cluster), options);
  if (session) print_left_out(err, *session);
  return session;
}

int report_interrupted(std::ostream& err) {
  err << "tessera: interrupted; the workers' sessions were closed, so they are free for the next run\n";
  return kExitInterrupted;
}

void print_warnings(std::ostream& err, const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) err << "warning: " << printable_message(warning) << "\n";
}

}  // namespace tessera::cli
