#include "tessera/core/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tessera/core/strings.hpp"

extern char** environ;

namespace tessera {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A file descriptor closed when it goes out of scope.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read_end, write_end;
};

std::string errno_text(int error) { return std::strerror(error); }

Result<Pipe> make_pipe(const std::string& program) {
  int fds[2];
  // Close-on-exec, so that a child another thread forks meanwhile does not keep our pipes open.
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return internal_error("cannot run '" + program + "': cannot create a pipe: " + errno_text(errno));
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The file exec will run. Looked up here rather than with execvp in the child, because a PATH
// search allocates, which the child of a threaded program must not do.
Result<std::string> resolve_program(const std::string& program, bool search_path) {
  if (program.empty()) return invalid_argument("cannot run a program with an empty name");
  if (!search_path || program.find('/') != std::string::npos) return program;
  const char* path_variable = std::getenv("PATH");
  // glibc's execvp default when PATH is unset.
  const std::string search = path_variable != nullptr ? path_variable : "/bin:/usr/bin";
  std::size_t start = 0;
  while (true) {
    const std::size_t end = search.find(':', start);
    std::string directory = search.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (directory.empty()) directory = ".";  // an empty PATH entry means the current directory
    const std::string candidate = directory + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return not_found("cannot run '" + program + "': no such program in PATH (" + search + ")");
}

// What the child reports through the error pipe when a step before exec fails.
enum class ChildStep : int { kSession, kRedirect, kCgroup, kNamespace, kExec };
struct ChildReport {
  ChildStep step;
  int error;
};

// Everything the child needs, prepared before fork: between fork and exec it may only make
// async-signal-safe calls (no allocation, no locks).
struct ChildPlan {
  const char* executable = nullptr;
  char* const* argv = nullptr;
  int stdin_fd = -1;   // -1: inherit
  int stdout_fd = -1;  // -1: inherit
  int stderr_fd = -1;  // -1: inherit, unless stderr_to_stdout
  bool stderr_to_stdout = false;
  bool new_session = false;
  const char* cgroup_procs = nullptr;       // null: stay
  const char* network_namespace = nullptr;  // null: stay
  int error_fd = -1;
};

[[noreturn]] void child_fail(const ChildPlan& plan, ChildStep step) {
  const ChildReport report{step, errno};
  // A single write below PIPE_BUF is atomic; nothing more can be done if it fails.
  [[maybe_unused]] const ssize_t written = ::write(plan.error_fd, &report, sizeof report);
  ::_exit(127);
}

// dup2 that also works when `fd` already is `target` (dup2 would then keep close-on-exec set).
bool place_fd(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

// Writes the decimal pid into a buffer without allocating.
std::size_t format_pid(pid_t pid, char (&text)[24]) {
  char reversed[24];
  std::size_t length = 0;
  auto value = static_cast<unsigned long>(pid);
  do {
    reversed[length++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && length < sizeof reversed);
  for (std::size_t i = 0; i < length; ++i) text[i] = reversed[length - 1 - i];
  return length;
}

[[noreturn]] void run_child(const ChildPlan& plan) {
  if (plan.new_session && ::setsid() < 0) child_fail(plan, ChildStep::kSession);
  if (plan.stdout_fd >= 0 && !place_fd(plan.stdout_fd, STDOUT_FILENO)) child_fail(plan, ChildStep::kRedirect);
  if (plan.stderr_to_stdout) {
    if (::dup2(STDOUT_FILENO, STDERR_FILENO) != STDERR_FILENO) child_fail(plan, ChildStep::kRedirect);
  } else if (plan.stderr_fd >= 0 && !place_fd(plan.stderr_fd, STDERR_FILENO)) {
    child_fail(plan, ChildStep::kRedirect);
  }
  if (plan.stdin_fd >= 0 && !place_fd(plan.stdin_fd, STDIN_FILENO)) child_fail(plan, ChildStep::kRedirect);
  // The cgroup first, then the namespace, then exec: the program never runs unthrottled.
  if (plan.cgroup_procs != nullptr) {
    const int fd = ::open(plan.cgroup_procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) child_fail(plan, ChildStep::kCgroup);
    char text[24];
    const std::size_t length = format_pid(::getpid(), text);
    if (::write(fd, text, length) < 0) child_fail(plan, ChildStep::kCgroup);
    ::close(fd);
  }
  if (plan.network_namespace != nullptr) {
    const int fd = ::open(plan.network_namespace, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) child_fail(plan, ChildStep::kNamespace);
    ::close(fd);
  }
  ::execve(plan.executable, plan.argv, environ);
  child_fail(plan, ChildStep::kExec);
}

Status child_report_status(const ChildReport& report, const std::string& program, const std::string& executable,
                           const ProcessOptions& options) {
  std::string step;
  switch (report.step) {
    case ChildStep::kSession: step = "cannot start a new session for it"; break;
    case ChildStep::kRedirect: step = "cannot redirect its standard streams"; break;
    case ChildStep::kCgroup: step = "cannot join cgroup " + options.cgroup_dir; break;
    case ChildStep::kNamespace: step = "cannot enter network namespace " + options.network_namespace; break;
    case ChildStep::kExec: step = "cannot execute " + executable; break;
  }
  const std::string message = "cannot run '" + program + "': " + step + ": " + errno_text(report.error);
  if (report.step == ChildStep::kExec && report.error == ENOENT) return not_found(message);
  return internal_error(message);
}

ssize_t read_retrying(int fd, void* buffer, std::size_t size) {
  ssize_t count = 0;
  do {
    count = ::read(fd, buffer, size);
  } while (count < 0 && errno == EINTR);
  return count;
}

pid_t wait_retrying(pid_t pid, int* status, int flags) {
  pid_t reaped = 0;
  do {
    reaped = ::waitpid(pid, status, flags);
  } while (reaped < 0 && errno == EINTR);
  return reaped;
}

// A started child whose exec succeeded, with the read ends of its capture pipes.
struct StartedChild {
  pid_t pid = 0;
  UniqueFd stdout_pipe, stderr_pipe;
};

Result<StartedChild> start_child(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) return invalid_argument("cannot run a program: the command is empty");
  const std::string& program = argv.front();
  if (options.stdout_to.kind == OutputTarget::Kind::kSameAsStdout) {
    return invalid_argument("cannot run '" + program + "': same_as_stdout is for stderr only");
  }
  Result<std::string> executable = resolve_program(program, options.search_path);
  if (!executable) return executable.status();

  // Files and pipes are opened here, before fork, so that every failure has a message.
  UniqueFd null_input, stdout_fd, stderr_fd;
  StartedChild child;
  auto open_target = [&](const OutputTarget& target, UniqueFd& child_end, UniqueFd& capture_end) -> Status {
    switch (target.kind) {
      case OutputTarget::Kind::kInherit:
      case OutputTarget::Kind::kSameAsStdout: return Status::ok();
      case OutputTarget::Kind::kDiscard:
        child_end.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
        if (!child_end.valid()) return io_error("cannot run '" + program + "': cannot open /dev/null: " + errno_text(errno));
        return Status::ok();
      case OutputTarget::Kind::kAppendToFile:
        child_end.reset(::open(target.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
        if (!child_end.valid()) return io_error("cannot open " + target.path + ": " + errno_text(errno));
        return Status::ok();
      case OutputTarget::Kind::kCapture: {
        Result<Pipe> pipe = make_pipe(program);
        if (!pipe) return pipe.status();
        child_end = std::move(pipe->write_end);
        capture_end = std::move(pipe->read_end);
        // Non-blocking, so that output can be drained after the child exits even if a grandchild
        // still holds the pipe open.
        ::fcntl(capture_end.get(), F_SETFL, O_NONBLOCK);
        return Status::ok();
      }
    }
    return internal_error("unknown output target");
  };
  TESSERA_RETURN_IF_ERROR(open_target(options.stdout_to, stdout_fd, child.stdout_pipe));
  TESSERA_RETURN_IF_ERROR(open_target(options.stderr_to, stderr_fd, child.stderr_pipe));
  if (options.stdin_from_null) {
    null_input.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!null_input.valid()) return io_error("cannot run '" + program + "': cannot open /dev/null: " + errno_text(errno));
  }
  Result<Pipe> error_pipe = make_pipe(program);
  if (!error_pipe) return error_pipe.status();

  std::vector<std::string> arguments = argv;
  std::vector<char*> argv_pointers;
  for (std::string& argument : arguments) argv_pointers.push_back(argument.data());
  argv_pointers.push_back(nullptr);
  const std::string cgroup_procs = options.cgroup_dir.empty() ? "" : options.cgroup_dir + "/cgroup.procs";

  ChildPlan plan;
  plan.executable = executable->c_str();
  plan.argv = argv_pointers.data();
  plan.stdin_fd = null_input.get();
  plan.stdout_fd = stdout_fd.get();
  plan.stderr_fd = stderr_fd.get();
  plan.stderr_to_stdout = options.stderr_to.kind == OutputTarget::Kind::kSameAsStdout;
  plan.new_session = options.new_session;
  plan.cgroup_procs = cgroup_procs.empty() ? nullptr : cgroup_procs.c_str();
  plan.network_namespace = options.network_namespace.empty() ? nullptr : options.network_namespace.c_str();
  plan.error_fd = error_pipe->write_end.get();

  const pid_t pid = ::fork();
  if (pid < 0) return internal_error("cannot run '" + program + "': fork failed: " + errno_text(errno));
  if (pid == 0) run_child(plan);

  // The child's ends belong to the child now; closing ours lets EOF mean "the child is done".
  error_pipe->write_end.reset();
  stdout_fd.reset();
  stderr_fd.reset();
  null_input.reset();

  ChildReport report{};
  const ssize_t count = read_retrying(error_pipe->read_end.get(), &report, sizeof report);
  if (count == 0) {  // EOF: exec closed the close-on-exec pipe, the program runs
    child.pid = pid;
    return child;
  }
  // The child failed before exec (and has exited) or the pipe broke; reap it either way.
  int status = 0;
  if (count != static_cast<ssize_t>(sizeof report)) {
    const int read_error = errno;
    ::kill(pid, SIGKILL);
    wait_retrying(pid, &status, 0);
    return internal_error("cannot run '" + program + "': lost contact with the child before exec: " +
                          (count < 0 ? errno_text(read_error) : std::string("short report")));
  }
  wait_retrying(pid, &status, 0);
  return child_report_status(report, program, *executable, options);
}

// Reads what is available; false once the pipe reached EOF (or failed) and was closed.
bool drain(UniqueFd& pipe, std::string& into) {
  char buffer[4096];
  while (true) {
    const ssize_t count = read_retrying(pipe.get(), buffer, sizeof buffer);
    if (count > 0) {
      into.append(buffer, static_cast<std::size_t>(count));
      continue;
    }
    if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    pipe.reset();
    return false;
  }
}

void record_wait_status(int status, ProcessResult& result) {
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
}

// A descriptor that becomes readable when the child exits (Linux 5.3+), or -1 on older kernels,
// where the wait below falls back to checking every few milliseconds.
UniqueFd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return UniqueFd();
#endif
}

ProcessResult wait_for_child(StartedChild& child, std::optional<std::chrono::milliseconds> timeout) {
  constexpr std::chrono::milliseconds kFallbackTick{5};
  ProcessResult result;
  result.pid = child.pid;
  const UniqueFd pidfd = open_pidfd(child.pid);
  const bool has_deadline = timeout.has_value();
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout.value_or(std::chrono::milliseconds(0));
  int status = 0;
  while (true) {
    const pid_t reaped = wait_retrying(child.pid, &status, WNOHANG);
    if (reaped == child.pid || reaped < 0) {
      // Exited (or already reaped by a SIGCHLD=SIG_IGN disposition, status unknown). What it
      // wrote is in the pipes; a grandchild holding them open must not keep us here.
      if (reaped == child.pid) record_wait_status(status, result);
      if (child.stdout_pipe.valid()) drain(child.stdout_pipe, result.output);
      if (child.stderr_pipe.valid()) drain(child.stderr_pipe, result.error_output);
      return result;
    }
    const auto now = SteadyClock::now();
    if (has_deadline && now >= deadline) {
      ::kill(child.pid, SIGKILL);
      if (wait_retrying(child.pid, &status, 0) == child.pid) record_wait_status(status, result);
      result.timed_out = true;
      if (child.stdout_pipe.valid()) drain(child.stdout_pipe, result.output);
      if (child.stderr_pipe.valid()) drain(child.stderr_pipe, result.error_output);
      return result;
    }
    std::vector<pollfd> watched;
    if (child.stdout_pipe.valid()) watched.push_back({child.stdout_pipe.get(), POLLIN, 0});
    if (child.stderr_pipe.valid()) watched.push_back({child.stderr_pipe.get(), POLLIN, 0});
    if (pidfd.valid()) watched.push_back({pidfd.get(), POLLIN, 0});
    int wait_ms = pidfd.valid() ? -1 : static_cast<int>(kFallbackTick.count());
    if (has_deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      wait_ms = wait_ms < 0 ? static_cast<int>(left) : std::min(wait_ms, static_cast<int>(left));
    }
    if (::poll(watched.data(), watched.size(), wait_ms) < 0 && errno != EINTR) {
      // poll itself failing leaves only time to go by.
      ::usleep(static_cast<useconds_t>(kFallbackTick.count() * 1000));
    }
    if (child.stdout_pipe.valid()) drain(child.stdout_pipe, result.output);
    if (child.stderr_pipe.valid()) drain(child.stderr_pipe, result.error_output);
  }
}

std::string trim_trailing_space(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r' || text.back() == '\t')) {
    text.pop_back();
  }
  return text;
}

}  // namespace

std::string ProcessResult::describe() const {
  if (timed_out) return "killed at its deadline";
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  if (exit_code >= 0) return "exit " + std::to_string(exit_code);
  return "ended, status unknown";
}

std::string command_line(const std::vector<std::string>& argv) { return join(argv, " "); }

Result<ProcessResult> run_process(const std::vector<std::string>& argv, const ProcessOptions& options,
                                  std::optional<std::chrono::milliseconds> timeout) {
  Result<StartedChild> child = start_child(argv, options);
  if (!child) return child.status();
  return wait_for_child(*child, timeout);
}

Status run_checked(const std::vector<std::string>& argv, std::optional<std::chrono::milliseconds> timeout) {
  ProcessOptions options;
  options.stdout_to = OutputTarget::capture();
  options.stderr_to = OutputTarget::same_as_stdout();
  Result<ProcessResult> run = run_process(argv, options, timeout);
  if (!run) return run.status().with_context("`" + command_line(argv) + "` failed: ");
  if (run->succeeded()) return Status::ok();
  std::string output = trim_trailing_space(run->output);
  if (output.empty() || run->timed_out) output += (output.empty() ? "" : " ") + std::string("(") + run->describe() + ")";
  return internal_error("`" + command_line(argv) + "` failed: " + output);
}

Result<int> spawn_detached(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (options.stdout_to.kind == OutputTarget::Kind::kCapture || options.stderr_to.kind == OutputTarget::Kind::kCapture) {
    return invalid_argument("cannot capture the output of a detached process; send it to a file");
  }
  Result<StartedChild> child = start_child(argv, options);
  if (!child) return child.status();
  return static_cast<int>(child->pid);
}

}  // namespace tessera
