#include "tessera/balance/cluster/silent_node_watchdog.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::balance::cluster {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Records what the watchdog did; thread-safe (the watchdog calls from its own thread).
struct Fired {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, std::string>> calls;
  void add(std::size_t node, const std::string& reason) {
    std::lock_guard lock(mutex);
    calls.emplace_back(node, reason);
  }
  std::size_t count() {
    std::lock_guard lock(mutex);
    return calls.size();
  }
};

SilentNodeWatchdog::Options fixed_deadline(double seconds, Fired& fired) {
  SilentNodeWatchdog::Options options;
  options.period = 5ms;
  options.deadline_s = [seconds](std::size_t) { return seconds; };
  options.describe = [](const SilentNodeWatchdog::Silence& silence) {
    return "node " + std::to_string(silence.node) + " silent";
  };
  options.on_silent = [&fired](std::size_t node, const std::string& reason) { fired.add(node, reason); };
  return options;
}

// One node that owes from now on.
std::unique_ptr<SilentNodeWatchdog> one_node_owing(SilentNodeWatchdog::Options options) {
  auto watchdog = std::make_unique<SilentNodeWatchdog>(1, std::move(options));
  watchdog->begin_owing(0);
  return watchdog;
}

// Calls `talk` every 20 ms for `how_long`.
template <typename Talk>
void keep_talking_for(std::chrono::milliseconds how_long, Talk&& talk) {
  const auto until = Clock::now() + how_long;
  while (Clock::now() < until) {
    talk();
    std::this_thread::sleep_for(20ms);
  }
}

// Waits up to `limit` for `done`; generous, since the machine running the tests may be loaded.
template <typename Done>
bool eventually(Done&& done, std::chrono::milliseconds limit = 5000ms) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return done();
}

TEST(SilentNodeWatchdog, DeadlinePassedCallsTheActionOnceWithTheReason) {
  Fired fired;
  SilentNodeWatchdog watchdog(2, fixed_deadline(0.05, fired));
  watchdog.begin_owing(1);
  ASSERT_TRUE(eventually([&] { return fired.count() > 0; }));
  std::this_thread::sleep_for(100ms);  // many more checks: still once
  ASSERT_EQ(fired.count(), 1u);
  EXPECT_EQ(fired.calls[0].first, 1u);
  EXPECT_EQ(fired.calls[0].second, "node 1 silent");
  EXPECT_EQ(watchdog.silent_reason(1), "node 1 silent");
  EXPECT_TRUE(watchdog.found_silent(1));
  EXPECT_FALSE(watchdog.found_silent(0));
  EXPECT_FALSE(watchdog.retire(1));  // it was found silent first
  EXPECT_TRUE(watchdog.retire(0));
}

TEST(SilentNodeWatchdog, ReasonSaysHowLongItWasQuietAndItsDeadline) {
  SilentNodeWatchdog::Options options;
  options.period = 5ms;
  options.deadline_s = [](std::size_t) { return 0.02; };
  SilentNodeWatchdog::Silence seen;
  std::atomic<bool> called{false};
  options.describe = [&](const SilentNodeWatchdog::Silence& silence) {
    seen = silence;
    called = true;
    return std::string("quiet");
  };
  SilentNodeWatchdog watchdog(1, options);
  watchdog.begin_owing(0);
  ASSERT_TRUE(eventually([&] { return watchdog.found_silent(0); }));
  ASSERT_TRUE(called.load());
  EXPECT_EQ(seen.node, 0u);
  EXPECT_DOUBLE_EQ(seen.deadline_s, 0.02);
  EXPECT_GE(seen.quiet_s, 0.02);
}

TEST(SilentNodeWatchdog, ProgressPushesTheDeadlineForward) {
  Fired fired;
  SilentNodeWatchdog watchdog(1, fixed_deadline(0.3, fired));
  watchdog.begin_owing(0);
  // Progress every 20 ms for a second: more than three deadlines' worth of time, never silent.
  keep_talking_for(1s, [&] { watchdog.progress(0); });
  EXPECT_EQ(fired.count(), 0u);
  ASSERT_TRUE(eventually([&] { return fired.count() == 1; }));  // then silence
}

TEST(SilentNodeWatchdog, ACounterThatMovesIsProgress) {
  std::atomic<uint64_t> bytes{0};
  Fired fired;
  SilentNodeWatchdog::Options options = fixed_deadline(0.3, fired);
  options.progress_counter = [&bytes](std::size_t) { return bytes.load(); };
  const auto watchdog = one_node_owing(options);
  keep_talking_for(1s, [&] { ++bytes; });
  EXPECT_EQ(fired.count(), 0u);
  ASSERT_TRUE(eventually([&] { return fired.count() == 1; }));
}

TEST(SilentNodeWatchdog, ANodeOwingNothingIsNotTimedOut) {
  Fired fired;
  SilentNodeWatchdog watchdog(2, fixed_deadline(0.02, fired));
  watchdog.begin_owing(0, 3);
  watchdog.end_owing(0, 3);
  watchdog.begin_owing(1);
  watchdog.pause(1);  // waiting on something else
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(fired.count(), 0u);
  // Owing again starts its clock afresh, not from when it last owed.
  watchdog.begin_owing(0);
  ASSERT_TRUE(eventually([&] { return watchdog.found_silent(0); }));
  EXPECT_FALSE(watchdog.found_silent(1));
}

TEST(SilentNodeWatchdog, ARetiredNodeIsNotTimedOut) {
  Fired fired;
  SilentNodeWatchdog watchdog(1, fixed_deadline(0.02, fired));
  watchdog.begin_owing(0);
  EXPECT_TRUE(watchdog.retire(0));
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(fired.count(), 0u);
}

TEST(SilentNodeWatchdog, TheClockStartsWhenTheNodeBeginsToOwe) {
  Fired fired;
  SilentNodeWatchdog watchdog(1, fixed_deadline(0.3, fired));
  std::this_thread::sleep_for(400ms);  // longer than the deadline, owing nothing
  watchdog.begin_owing(0);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fired.count(), 0u);
  ASSERT_TRUE(eventually([&] { return fired.count() == 1; }));
}

TEST(SilentNodeWatchdog, ADeadlineMayFollowWhatIsOwed) {
  Fired fired;
  std::atomic<double> deadline{60.0};
  SilentNodeWatchdog::Options options = fixed_deadline(0.0, fired);
  options.deadline_s = [&deadline](std::size_t) { return deadline.load(); };
  const auto watchdog = one_node_owing(options);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fired.count(), 0u);
  deadline = 0.01;  // what it owes shrank
  ASSERT_TRUE(eventually([&] { return fired.count() == 1; }));
}

TEST(SilentNodeWatchdog, StoppingIsPrompt) {
  Fired fired;
  SilentNodeWatchdog::Options options = fixed_deadline(0.01, fired);
  options.period = std::chrono::hours(1);
  const auto start = Clock::now();
  {
    SilentNodeWatchdog watchdog(1, options);
    watchdog.begin_owing(0);
  }
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(fired.count(), 0u);
}

TEST(SilentNodeWatchdog, NothingIsFoundSilentAfterStop) {
  Fired fired;
  SilentNodeWatchdog watchdog(1, fixed_deadline(0.01, fired));
  watchdog.stop();
  watchdog.begin_owing(0);  // still accepted
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fired.count(), 0u);
  watchdog.stop();  // twice is fine
}

TEST(SilentNodeWatchdog, TheActionMayCallBackIntoTheWatchdog) {
  SilentNodeWatchdog* self = nullptr;
  std::atomic<int> actions{0};
  SilentNodeWatchdog::Options options;
  options.period = 5ms;
  options.deadline_s = [](std::size_t) { return 0.01; };
  options.on_silent = [&](std::size_t node, const std::string&) {
    self->retire(node);  // as the DAG runner's lose() does
    ++actions;
  };
  SilentNodeWatchdog watchdog(1, options);
  self = &watchdog;
  watchdog.begin_owing(0);
  ASSERT_TRUE(eventually([&] { return actions.load() == 1; }));
}

// Many threads report progress and owe work while the watchdog checks: no node that keeps
// talking is timed out, and once every node falls silent each is found exactly once.
TEST(SilentNodeWatchdog, ConcurrentReportsAreSafe) {
  constexpr std::size_t kNodes = 7;
  Fired fired;
  SilentNodeWatchdog watchdog(kNodes, fixed_deadline(2.0, fired));
  std::atomic<bool> talking{true};
  std::vector<std::jthread> reporters;
  for (std::size_t node = 0; node < kNodes; ++node) {
    for (int thread = 0; thread < 2; ++thread) {
      reporters.emplace_back([&, node] {
        while (talking.load()) {
          watchdog.begin_owing(node, 2);
          watchdog.progress(node);
          watchdog.end_owing(node);
          watchdog.pause(node);
          watchdog.resume(node);
          (void)watchdog.found_silent(node);
          std::this_thread::yield();
        }
      });
    }
  }
  std::this_thread::sleep_for(300ms);
  talking = false;
  reporters.clear();
  EXPECT_EQ(fired.count(), 0u);
  ASSERT_TRUE(eventually([&] { return fired.count() == kNodes; }));  // every node still owes
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.count(), kNodes);
  std::vector<bool> seen(kNodes, false);
  for (const auto& [node, reason] : fired.calls) {
    EXPECT_FALSE(seen[node]);
    seen[node] = true;
  }
}

}  // namespace
}  // namespace tessera::balance::cluster
