// The throttle of failed authentications, on an injected clock: free failures, the doubling hold
// and its cap, right and wrong answers held alike, holds that start with their own answer, the
// bound on answers held at once per address and in all, the line beyond them (first come first
// served, bounded, left by those who give up), failures counted at their verdict, successes that
// forget nothing, a quiet minute that does, other addresses untouched, and the bound on the
// addresses tracked.
#include "tessera/worker/auth_throttle.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::worker {
namespace {

using Clock = AuthThrottle::Clock;
using Kind = AuthThrottle::Hold::Kind;
using std::chrono::milliseconds;

constexpr Clock::time_point kStart{std::chrono::hours(1)};

// `count` wrong answers from `source` at `at`, each held as the throttle says and released at once
// (what a guesser waiting for each verdict costs the table, without the waiting).
void fail_times(AuthThrottle& throttle, const std::string& source, int count, Clock::time_point at) {
  for (int i = 0; i < count; ++i) {
    const AuthThrottle::Hold hold = throttle.hold(source, /*wrong=*/true, at);
    ASSERT_TRUE(hold.kind == Kind::kNow || hold.kind == Kind::kHeld) << i;
    if (hold.kind == Kind::kHeld) throttle.release(source, /*wrong=*/true, at);
  }
}

TEST(AuthThrottle, TheHoldDoublesFrom50MsAfterThreeFreeFailuresUpToTheCap) {
  const AuthThrottle throttle;
  EXPECT_EQ(throttle.delay_after(0), Clock::duration::zero());
  EXPECT_EQ(throttle.delay_after(3), Clock::duration::zero());
  EXPECT_EQ(throttle.delay_after(4), milliseconds(50));
  EXPECT_EQ(throttle.delay_after(5), milliseconds(100));
  EXPECT_EQ(throttle.delay_after(10), milliseconds(3200));
  EXPECT_EQ(throttle.delay_after(11), milliseconds(3200));
  EXPECT_EQ(throttle.delay_after(UINT32_MAX), milliseconds(3200));
}

TEST(AuthThrottle, ThreeFailuresCostNothingTheFourthHoldsEveryNextAnswerRightOrWrong) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 3, kStart);
  EXPECT_EQ(throttle.hold("10.0.0.9", /*wrong=*/true, kStart).kind, Kind::kNow);
  // The fourth failure: the next answer is held 50 ms, whatever it turns out to be.
  const AuthThrottle::Hold right = throttle.hold("10.0.0.9", /*wrong=*/false, kStart);
  EXPECT_EQ(right.kind, Kind::kHeld);
  EXPECT_EQ(right.wait, milliseconds(50));
  throttle.release("10.0.0.9", /*wrong=*/false, kStart + milliseconds(50));
  EXPECT_EQ(throttle.hold("10.0.0.9", /*wrong=*/false, kStart + milliseconds(60)).wait, milliseconds(50))
      << "a right answer forgot the failures";
}

TEST(AuthThrottle, HoldsStartWhenTheirOwnAnswerArrivesAndNeverQueueWhilePlacesAreFree) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 10, kStart);  // hold 3.2 s
  for (int i = 0; i < 20; ++i) {
    const AuthThrottle::Hold hold = throttle.hold("10.0.0.9", /*wrong=*/i % 2 == 0, kStart + milliseconds(i));
    ASSERT_EQ(hold.kind, Kind::kHeld) << i;
    EXPECT_EQ(hold.wait, milliseconds(3200)) << i;
  }
}

TEST(AuthThrottle, PastTheHeldPlacesAnswersWaitInLineFirstComeFirstServed) {
  AuthThrottleOptions options;
  options.max_held_per_source = 2;
  options.max_queued_per_source = 3;
  AuthThrottle throttle(options);
  fail_times(throttle, "10.0.0.9", 10, kStart);
  ASSERT_EQ(throttle.hold("10.0.0.9", true, kStart).kind, Kind::kHeld);
  ASSERT_EQ(throttle.hold("10.0.0.9", true, kStart).kind, Kind::kHeld);
  const AuthThrottle::Hold first = throttle.hold("10.0.0.9", true, kStart + milliseconds(1));
  const AuthThrottle::Hold coordinator = throttle.hold("10.0.0.9", false, kStart + milliseconds(2));
  const AuthThrottle::Hold third = throttle.hold("10.0.0.9", true, kStart + milliseconds(3));
  ASSERT_EQ(first.kind, Kind::kQueued);
  ASSERT_EQ(coordinator.kind, Kind::kQueued);
  ASSERT_EQ(third.kind, Kind::kQueued);
  EXPECT_EQ(first.ahead, 2u);
  EXPECT_EQ(coordinator.ahead, 3u);
  EXPECT_EQ(third.ahead, 4u);
  // A fourth in line is one too many: refused, before its answer plays any part.
  const AuthThrottle::Hold refused = throttle.hold("10.0.0.9", false, kStart + milliseconds(4));
  EXPECT_EQ(refused.kind, Kind::kRefused);
  EXPECT_EQ(refused.queued, 3u);
  EXPECT_EQ(refused.retry_after, milliseconds(3200));
  // No place free: nobody starts.
  std::size_t ahead = 0;
  EXPECT_FALSE(throttle.start("10.0.0.9", coordinator.ticket, kStart + milliseconds(100), &ahead));
  EXPECT_EQ(ahead, 3u);
  // One hold ends: the first in line takes the place, not the coordinator behind it.
  throttle.release("10.0.0.9", true, kStart + milliseconds(3200));
  EXPECT_FALSE(throttle.start("10.0.0.9", coordinator.ticket, kStart + milliseconds(3201)));
  EXPECT_EQ(throttle.start("10.0.0.9", first.ticket, kStart + milliseconds(3202)), milliseconds(3200));
  // New guesses join the line behind the coordinator, however many come.
  EXPECT_EQ(throttle.hold("10.0.0.9", true, kStart + milliseconds(3203)).kind, Kind::kQueued);
  throttle.release("10.0.0.9", true, kStart + milliseconds(3204));
  EXPECT_EQ(throttle.start("10.0.0.9", coordinator.ticket, kStart + milliseconds(3205)), milliseconds(3200));
}

TEST(AuthThrottle, AnAnswerThatLeavesTheLineGivesItsTurnToTheNext) {
  AuthThrottleOptions options;
  options.max_held_per_source = 1;
  AuthThrottle throttle(options);
  fail_times(throttle, "10.0.0.9", 10, kStart);
  ASSERT_EQ(throttle.hold("10.0.0.9", true, kStart).kind, Kind::kHeld);
  const AuthThrottle::Hold gone = throttle.hold("10.0.0.9", true, kStart);
  const AuthThrottle::Hold next = throttle.hold("10.0.0.9", false, kStart);
  throttle.abandon("10.0.0.9", gone.ticket);
  throttle.release("10.0.0.9", true, kStart + milliseconds(3200));
  EXPECT_FALSE(throttle.start("10.0.0.9", gone.ticket, kStart + milliseconds(3200)));
  EXPECT_TRUE(throttle.start("10.0.0.9", next.ticket, kStart + milliseconds(3200)));
}

TEST(AuthThrottle, AnswersHeldAndWaitingInAllAreBounded) {
  AuthThrottleOptions options;
  options.max_held = 2;
  options.max_queued = 1;
  AuthThrottle throttle(options);
  const std::vector<std::string> sources = {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"};
  for (const std::string& source : sources) fail_times(throttle, source, 4, kStart);
  EXPECT_EQ(throttle.hold(sources[0], false, kStart).kind, Kind::kHeld);
  EXPECT_EQ(throttle.hold(sources[1], false, kStart).kind, Kind::kHeld);
  EXPECT_EQ(throttle.hold(sources[2], false, kStart).kind, Kind::kQueued);
  EXPECT_EQ(throttle.hold(sources[3], false, kStart).kind, Kind::kRefused);
}

TEST(AuthThrottle, FailuresCountWhenTheirVerdictGoesOutNotWhenTheyAreChecked) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 4, kStart);  // the next answers are held 50 ms
  const AuthThrottle::Hold guess = throttle.hold("10.0.0.9", /*wrong=*/true, kStart);
  ASSERT_EQ(guess.wait, milliseconds(50));
  // While the guess is held, its verdict unknown to its sender, another answer's hold must not
  // tell whether it was wrong.
  EXPECT_EQ(throttle.hold("10.0.0.9", false, kStart + milliseconds(10)).wait, milliseconds(50));
  throttle.release("10.0.0.9", /*wrong=*/true, kStart + milliseconds(50));
  EXPECT_EQ(throttle.hold("10.0.0.9", false, kStart + milliseconds(60)).wait, milliseconds(100));
}

TEST(AuthThrottle, AnswersArrivingTogetherFromAFreshAddressGetOnlyTheFreeFailuresAtOnce) {
  AuthThrottle throttle;
  int at_once = 0;
  for (int i = 0; i < 10; ++i) {
    const AuthThrottle::Hold hold = throttle.hold("10.0.0.9", /*wrong=*/true, kStart);
    ASSERT_NE(hold.kind, Kind::kRefused);
    if (hold.kind == Kind::kNow) ++at_once;
  }
  EXPECT_EQ(at_once, 4) << "three free failures and the fourth, after which every answer is held";
}

TEST(AuthThrottle, OtherAddressesAreNeverDelayed) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 20, kStart);
  for (const char* other : {"10.0.0.10", "127.0.0.1", "::1"}) {
    EXPECT_EQ(throttle.hold(other, false, kStart).kind, Kind::kNow) << other;
  }
}

TEST(AuthThrottle, SuccessesForgetNothingAQuietMinuteForgetsTheAddress) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 6, kStart);
  // A coordinator logging in beside the guesser: its successes leave the count where it is.
  for (int i = 0; i < 5; ++i) {
    const AuthThrottle::Hold hold = throttle.hold("10.0.0.9", false, kStart);
    EXPECT_EQ(hold.wait, milliseconds(200));
    throttle.release("10.0.0.9", /*wrong=*/false, kStart);
  }
  // 59 s later the count still stands: the 7th failure makes the next answer wait 400 ms.
  const Clock::time_point seventh = kStart + milliseconds(59000);
  fail_times(throttle, "10.0.0.9", 1, seventh);
  EXPECT_EQ(throttle.hold("10.0.0.9", false, seventh).wait, milliseconds(400));
  throttle.release("10.0.0.9", /*wrong=*/false, seventh);
  const Clock::time_point quiet = seventh + milliseconds(60000);
  EXPECT_EQ(throttle.hold("10.0.0.9", false, quiet).kind, Kind::kNow);
  EXPECT_EQ(throttle.tracked(), 0u);
  // And the count starts afresh: three more failures are free again.
  fail_times(throttle, "10.0.0.9", 3, quiet);
  EXPECT_EQ(throttle.hold("10.0.0.9", false, quiet).kind, Kind::kNow);
}

TEST(AuthThrottle, TheTableIsCappedByForgettingTheOldestThatHoldsNothing) {
  AuthThrottleOptions options;
  options.max_sources = 8;
  AuthThrottle throttle(options);
  // The first address keeps an answer held: it must stay, or its place would never be given back.
  fail_times(throttle, "10.0.1.0", 5, kStart);
  ASSERT_EQ(throttle.hold("10.0.1.0", false, kStart).kind, Kind::kHeld);
  for (int i = 1; i < 20; ++i) {
    fail_times(throttle, "10.0.1." + std::to_string(i), 5, kStart + milliseconds(i));
    EXPECT_LE(throttle.tracked(), 8u);
  }
  // The newest addresses are still throttled, the oldest that held nothing were forgotten.
  EXPECT_EQ(throttle.hold("10.0.1.19", false, kStart + milliseconds(20)).kind, Kind::kHeld);
  EXPECT_EQ(throttle.hold("10.0.1.1", false, kStart + milliseconds(20)).kind, Kind::kNow);
  EXPECT_EQ(throttle.hold("10.0.1.0", false, kStart + milliseconds(20)).kind, Kind::kHeld);
}

}  // namespace
}  // namespace tessera::worker
