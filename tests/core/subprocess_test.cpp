#include "tessera/core/subprocess.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

using namespace std::chrono_literals;

void expect_has(const std::string& text, const std::string& phrase) {
  EXPECT_NE(text.find(phrase), std::string::npos) << "missing \"" << phrase << "\" in: " << text;
}

// True once `pid` is no process of ours at all: exited and reaped, not a zombie.
bool is_gone(int pid) {
  if (::kill(pid, 0) == 0) return false;
  return errno == ESRCH;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera-core-" + std::to_string(::getpid()) + "-" + name)).string();
}

TEST(RunProcess, ReportsExitCodes) {
  Result<ProcessResult> ok = run_process({"true"});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->exit_code, 0);
  EXPECT_TRUE(ok->succeeded());
  EXPECT_GT(ok->pid, 0);
  EXPECT_TRUE(is_gone(ok->pid)) << "the child must be reaped";

  Result<ProcessResult> failed = run_process({"false"});
  ASSERT_TRUE(failed.is_ok()) << failed.status().to_string();
  EXPECT_EQ(failed->exit_code, 1);
  EXPECT_FALSE(failed->succeeded());
  EXPECT_EQ(failed->describe(), "exit 1");

  Result<ProcessResult> three = run_process({"sh", "-c", "exit 3"});
  ASSERT_TRUE(three.is_ok());
  EXPECT_EQ(three->exit_code, 3);

  Result<ProcessResult> killed = run_process({"sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(killed.is_ok());
  EXPECT_EQ(killed->signal, SIGTERM);
  EXPECT_EQ(killed->exit_code, -1);
  EXPECT_EQ(killed->describe(), "killed by signal " + std::to_string(SIGTERM));
}

TEST(RunProcess, MissingProgramIsAnErrorNamingIt) {
  Result<ProcessResult> missing = run_process({"tessera-no-such-program", "--flag"});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  expect_has(missing.status().message(), "'tessera-no-such-program'");

  // With a path the lookup is exec's own; its failure comes back from the child.
  Result<ProcessResult> by_path = run_process({"/nonexistent/tessera-worker"});
  ASSERT_FALSE(by_path.is_ok());
  EXPECT_EQ(by_path.status().code(), StatusCode::kNotFound);
  expect_has(by_path.status().message(), "cannot run '/nonexistent/tessera-worker'");
  expect_has(by_path.status().message(), "No such file or directory");

  // Without PATH search a bare name is a file in the current directory.
  ProcessOptions no_search;
  no_search.search_path = false;
  Result<ProcessResult> bare = run_process({"true"}, no_search);
  ASSERT_FALSE(bare.is_ok());
  expect_has(bare.status().message(), "cannot execute true");

  Result<ProcessResult> empty = run_process({});
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
}

TEST(RunProcess, NotExecutableIsAnErrorNamingIt) {
  const std::string path = temp_path("not-executable.sh");
  std::ofstream(path) << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  Result<ProcessResult> run = run_process({path});
  ASSERT_FALSE(run.is_ok());
  expect_has(run.status().message(), "cannot run '" + path + "'");
  expect_has(run.status().message(), "Permission denied");
  std::filesystem::remove(path);
}

TEST(RunProcess, CapturesStdoutAndStderrApartOrTogether) {
  ProcessOptions apart;
  apart.stdout_to = OutputTarget::capture();
  apart.stderr_to = OutputTarget::capture();
  Result<ProcessResult> run = run_process({"sh", "-c", "echo out; echo err >&2; echo more"}, apart);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run->output, "out\nmore\n");
  EXPECT_EQ(run->error_output, "err\n");

  ProcessOptions together;
  together.stdout_to = OutputTarget::capture();
  together.stderr_to = OutputTarget::same_as_stdout();
  run = run_process({"sh", "-c", "echo out; echo err >&2"}, together);
  ASSERT_TRUE(run.is_ok());
  EXPECT_EQ(run->output, "out\nerr\n");
  EXPECT_EQ(run->error_output, "");
}

TEST(RunProcess, CapturesMoreThanAPipeHolds) {
  ProcessOptions options;
  options.stdout_to = OutputTarget::capture();
  // 1 MiB: sixteen times a pipe's buffer, so the child blocks unless we read while it runs.
  Result<ProcessResult> run = run_process({"head", "-c", "1048576", "/dev/zero"}, options, 10s);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_FALSE(run->timed_out);
  EXPECT_EQ(run->exit_code, 0);
  EXPECT_EQ(run->output.size(), 1048576u);
}

TEST(RunProcess, AppendsToFilesAndDiscards) {
  const std::string path = temp_path("append.log");
  std::filesystem::remove(path);
  ProcessOptions options;
  options.stdout_to = OutputTarget::append_to_file(path);
  options.stderr_to = OutputTarget::discard();
  ASSERT_TRUE(run_process({"sh", "-c", "echo first; echo hidden >&2"}, options).is_ok());
  ASSERT_TRUE(run_process({"sh", "-c", "echo second"}, options).is_ok());
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  EXPECT_EQ(content.str(), "first\nsecond\n");
  std::filesystem::remove(path);

  ProcessOptions unwritable;
  unwritable.stdout_to = OutputTarget::append_to_file("/nonexistent-dir/out.log");
  Result<ProcessResult> refused = run_process({"true"}, unwritable);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kIoError);
  expect_has(refused.status().message(), "/nonexistent-dir/out.log");
}

TEST(RunProcess, InheritsTheEnvironmentAndCanReadNothing) {
  ASSERT_EQ(::setenv("TESSERA_SUBPROCESS_TEST", "inherited value", 1), 0);
  ProcessOptions options;
  options.stdout_to = OutputTarget::capture();
  options.stdin_from_null = true;
  Result<ProcessResult> run =
      run_process({"sh", "-c", "printf '%s|' \"$TESSERA_SUBPROCESS_TEST\"; readlink /proc/self/fd/0"}, options);
  ::unsetenv("TESSERA_SUBPROCESS_TEST");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run->output, "inherited value|/dev/null\n");
}

TEST(RunProcess, DeadlineKillsAndReapsTheChild) {
  const auto start = std::chrono::steady_clock::now();
  Result<ProcessResult> run = run_process({"sleep", "30"}, {}, 200ms);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_TRUE(run->timed_out);
  EXPECT_EQ(run->signal, SIGKILL);
  EXPECT_FALSE(run->succeeded());
  EXPECT_EQ(run->describe(), "killed at its deadline");
  EXPECT_GE(elapsed, 200ms);
  EXPECT_LT(elapsed, 10s);
  EXPECT_TRUE(is_gone(run->pid)) << "pid " << run->pid << " still exists";
  EXPECT_EQ(::waitpid(run->pid, nullptr, WNOHANG), -1) << "already reaped, so not our child any more";
}

TEST(RunProcess, DeadlineAlsoStopsAChildThatKeepsWriting) {
  ProcessOptions options;
  options.stdout_to = OutputTarget::capture();
  Result<ProcessResult> run = run_process({"sh", "-c", "while :; do echo tick; sleep 0.01; done"}, options, 300ms);
  ASSERT_TRUE(run.is_ok());
  EXPECT_TRUE(run->timed_out);
  expect_has(run->output, "tick\n");
  EXPECT_TRUE(is_gone(run->pid));
}

TEST(RunProcess, ADeadlineNotReachedChangesNothing) {
  Result<ProcessResult> run = run_process({"true"}, {}, 30s);
  ASSERT_TRUE(run.is_ok());
  EXPECT_FALSE(run->timed_out);
  EXPECT_EQ(run->exit_code, 0);
}

TEST(RunProcess, ChildSideFailuresNameTheStep) {
  ProcessOptions in_cgroup;
  in_cgroup.cgroup_dir = "/nonexistent/tessera/cgroup";
  Result<ProcessResult> cgroup = run_process({"true"}, in_cgroup);
  ASSERT_FALSE(cgroup.is_ok());
  expect_has(cgroup.status().message(), "cannot run 'true': cannot join cgroup /nonexistent/tessera/cgroup: ");

  ProcessOptions in_namespace;
  in_namespace.network_namespace = "/run/netns/tessera-no-such-namespace";
  Result<ProcessResult> netns = run_process({"true"}, in_namespace);
  ASSERT_FALSE(netns.is_ok());
  expect_has(netns.status().message(), "cannot enter network namespace /run/netns/tessera-no-such-namespace");
}

TEST(RunChecked, OkOnSuccessAndTheCommandWithItsOutputOnFailure) {
  EXPECT_TRUE(run_checked({"true"}).is_ok());
  Status failed = run_checked({"sh", "-c", "echo 'RTNETLINK answers: File exists' >&2; exit 2"});
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_EQ(failed.message(),
            "`sh -c echo 'RTNETLINK answers: File exists' >&2; exit 2` failed: RTNETLINK answers: File exists");

  Status silent = run_checked({"false"});
  EXPECT_EQ(silent.message(), "`false` failed: (exit 1)");

  Status missing = run_checked({"tessera-no-such-program", "x"});
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  expect_has(missing.message(), "`tessera-no-such-program x` failed: cannot run 'tessera-no-such-program'");

  Status slow = run_checked({"sleep", "30"}, 100ms);
  expect_has(slow.message(), "(killed at its deadline)");
}

TEST(SpawnDetached, ReturnsTheRunningPidInItsOwnSession) {
  const std::string log = temp_path("detached.log");
  std::filesystem::remove(log);
  ProcessOptions options;
  options.new_session = true;
  options.stdin_from_null = true;
  options.stdout_to = OutputTarget::append_to_file(log);
  options.stderr_to = OutputTarget::same_as_stdout();
  Result<int> pid = spawn_detached({"sh", "-c", "echo started; echo to-stderr >&2; exec sleep 30"}, options);
  ASSERT_TRUE(pid.is_ok()) << pid.status().to_string();
  EXPECT_EQ(::kill(*pid, 0), 0) << "the process must keep running";
  EXPECT_EQ(::getsid(*pid), *pid) << "leads its own session";
  for (int i = 0; i < 200; ++i) {
    std::ifstream file(log);
    std::stringstream content;
    content << file.rdbuf();
    if (content.str() == "started\nto-stderr\n") break;
    std::this_thread::sleep_for(10ms);
  }
  std::ifstream file(log);
  std::stringstream content;
  content << file.rdbuf();
  EXPECT_EQ(content.str(), "started\nto-stderr\n");

  // The caller owns it: stop and reap it by pid.
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  int status = 0;
  EXPECT_EQ(::waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(is_gone(*pid));
  std::filesystem::remove(log);
}

TEST(SpawnDetached, RefusesWhatItCannotDo) {
  Result<int> missing = spawn_detached({"/nonexistent/tessera-worker", "--listen", "127.0.0.1:1"}, {});
  ASSERT_FALSE(missing.is_ok());
  expect_has(missing.status().message(), "cannot run '/nonexistent/tessera-worker'");

  ProcessOptions capture;
  capture.stdout_to = OutputTarget::capture();
  Result<int> refused = spawn_detached({"true"}, capture);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);

  ProcessOptions in_cgroup;
  in_cgroup.cgroup_dir = "/nonexistent/tessera/cgroup";
  Result<int> cgroup = spawn_detached({"sleep", "30"}, in_cgroup);
  ASSERT_FALSE(cgroup.is_ok());
  expect_has(cgroup.status().message(), "cannot join cgroup /nonexistent/tessera/cgroup");
}

// Several threads running children at once: each gets its own output and exit code.
TEST(RunProcess, ConcurrentRunsDoNotMixUp) {
  std::vector<std::string> outputs(8);
  std::vector<int> codes(8, -1);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        ProcessOptions options;
        options.stdout_to = OutputTarget::capture();
        Result<ProcessResult> run =
            run_process({"sh", "-c", "echo " + std::to_string(i) + "; exit " + std::to_string(i)}, options, 30s);
        if (run) {
          outputs[static_cast<std::size_t>(i)] = run->output;
          codes[static_cast<std::size_t>(i)] = run->exit_code;
        }
      });
    }
  }
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(outputs[static_cast<std::size_t>(i)], std::to_string(i) + "\n");
    EXPECT_EQ(codes[static_cast<std::size_t>(i)], i);
  }
}

}  // namespace
}  // namespace tessera
