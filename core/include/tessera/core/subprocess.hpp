// Child processes: the one place Tessera forks and execs (ip and tc for emulation, gnuplot for
// study plots, tessera-worker for local clusters).
//
// Programs run without a shell: argv[0] is the program, the rest its arguments, nothing is
// interpreted. Every step is checked: a program that cannot be found or started (fork, pipe,
// redirection, cgroup, namespace or exec failure) is a Status naming it and the step, reported
// by the child to the parent before exec, never a silent child that exits 127. Children inherit
// the environment and the current directory.
//
// run_process owns its child until it has been reaped: it returns only after the child exited or
// was killed at the deadline. spawn_detached hands the pid to the caller, who then owns reaping
// it (waitpid). The functions may be called from several threads at once; everything the child
// runs between fork and exec is async-signal-safe, so they are safe in threaded programs.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"

namespace tessera {

// Where a child's standard output or standard error goes.
struct OutputTarget {
  enum class Kind {
    kInherit,       // our own stream (the default)
    kDiscard,       // /dev/null
    kCapture,       // collected into ProcessResult (run_process only)
    kAppendToFile,  // `path`, created with mode 0644 when missing
    kSameAsStdout,  // stderr only: wherever stdout goes (2>&1)
  };
  Kind kind = Kind::kInherit;
  std::string path;  // kAppendToFile only

  static OutputTarget inherit() { return {}; }
  static OutputTarget discard() { return {Kind::kDiscard, {}}; }
  static OutputTarget capture() { return {Kind::kCapture, {}}; }
  static OutputTarget append_to_file(std::string file) { return {Kind::kAppendToFile, std::move(file)}; }
  static OutputTarget same_as_stdout() { return {Kind::kSameAsStdout, {}}; }
};

struct ProcessOptions {
  OutputTarget stdout_to;        // default: inherit
  OutputTarget stderr_to;        // default: inherit
  bool stdin_from_null = false;  // default: inherit our stdin
  // setsid(): the child leads a new session without a terminal, so it outlives us and a Ctrl-C
  // in our terminal does not reach it. Default off.
  bool new_session = false;
  // A cgroup directory the child writes itself into (cgroup.procs) before exec, so the program
  // never runs a moment outside it. Default "" (stay in ours).
  std::string cgroup_dir;
  // A network namespace file (/run/netns/NAME) the child enters before exec, after joining the
  // cgroup. Default "" (stay in ours).
  std::string network_namespace;
  // true (default): an argv[0] without '/' is looked up in $PATH, like a shell does. false: it is
  // executed as given, relative to the current directory.
  bool search_path = true;
};

struct ProcessResult {
  int pid = 0;
  int exit_code = -1;        // the exit status when the child exited; -1 when a signal ended it
  int signal = 0;            // the signal that ended it, 0 when it exited
  bool timed_out = false;    // the deadline passed and the child was killed (SIGKILL) and reaped
  std::string output;        // captured stdout, and stderr too when it goes to stdout
  std::string error_output;  // captured stderr

  bool succeeded() const { return exit_code == 0; }
  // "exit 3", "killed by signal 9", "killed at its deadline".
  std::string describe() const;
};

// The command as one line for messages: arguments separated by spaces, unquoted.
std::string command_line(const std::vector<std::string>& argv);

// Runs argv[0] and waits for it, reading captured output meanwhile. With a timeout the child is
// killed (SIGKILL) and reaped once it has run that long; result.timed_out says so. A non-zero exit
// is a result, not an error: the Status is non-OK only when the program could not be run at all
// (kNotFound when it does not exist, kIoError for a file redirection, kInternal otherwise).
// An empty argv, or stdout_to kSameAsStdout, is refused with kInvalidArgument.
Result<ProcessResult> run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {},
                                  std::optional<std::chrono::milliseconds> timeout = std::nullopt);

// run_process with stdout and stderr captured together, for commands whose failure is the
// caller's failure: OK on exit 0; otherwise kInternal "`COMMAND` failed: OUTPUT" (the output with
// trailing white space removed, or how the child ended when it printed nothing).
Status run_checked(const std::vector<std::string>& argv,
                   std::optional<std::chrono::milliseconds> timeout = std::nullopt);

// Starts argv[0] and returns its pid once it has been exec'ed, without waiting for it to end.
// The process keeps running after we exit; the caller owns reaping it (waitpid with WNOHANG) if
// it ends while we live. kCapture is refused (nobody would read the pipe).
Result<int> spawn_detached(const std::vector<std::string>& argv, const ProcessOptions& options);

}  // namespace tessera
