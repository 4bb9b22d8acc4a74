// The throttle of failed authentications, on an injected clock: free failures, the doubling delay
// and its cap, attempts spaced per address, refusal past the cap, forgetting after a success or a
// quiet period, other addresses untouched, and the bound on the addresses tracked.
#include "tessera/worker/auth_throttle.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::worker {
namespace {

using Clock = AuthThrottle::Clock;
using std::chrono::milliseconds;

constexpr Clock::time_point kStart{std::chrono::hours(1)};

void fail_times(AuthThrottle& throttle, const std::string& source, int count, Clock::time_point at) {
  for (int i = 0; i < count; ++i) throttle.record_failure(source, at);
}

TEST(AuthThrottle, TheDelayDoublesFrom50MsAfterThreeFreeFailuresUpToTheCap) {
  const AuthThrottle throttle;
  EXPECT_EQ(throttle.delay_after(0), Clock::duration::zero());
  EXPECT_EQ(throttle.delay_after(3), Clock::duration::zero());
  EXPECT_EQ(throttle.delay_after(4), milliseconds(50));
  EXPECT_EQ(throttle.delay_after(5), milliseconds(100));
  EXPECT_EQ(throttle.delay_after(10), milliseconds(3200));
  EXPECT_EQ(throttle.delay_after(11), milliseconds(3200));
  EXPECT_EQ(throttle.delay_after(UINT32_MAX), milliseconds(3200));
}

TEST(AuthThrottle, ThreeFailuresCostNothingTheFourthDelaysTheNextAttempt) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 3, kStart);
  EXPECT_EQ(throttle.admit("10.0.0.9", kStart).wait, Clock::duration::zero());
  throttle.record_failure("10.0.0.9", kStart);
  const AuthThrottle::Admission next = throttle.admit("10.0.0.9", kStart);
  EXPECT_FALSE(next.refused);
  EXPECT_EQ(next.wait, milliseconds(50));
  // Later than the delay: no wait.
  EXPECT_EQ(throttle.admit("10.0.0.9", kStart + milliseconds(500)).wait, Clock::duration::zero());
}

TEST(AuthThrottle, ParallelAttemptsAreSpacedOneDelayApartAndRefusedPastTheCap) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 10, kStart);  // delay 3.2 s
  const AuthThrottle::Admission first = throttle.admit("10.0.0.9", kStart);
  EXPECT_FALSE(first.refused);
  EXPECT_EQ(first.wait, milliseconds(3200));
  const AuthThrottle::Admission second = throttle.admit("10.0.0.9", kStart);
  EXPECT_TRUE(second.refused) << "a second queued attempt would wait 6.4 s";
  EXPECT_EQ(second.retry_after, milliseconds(6400));
  const AuthThrottle::Admission later = throttle.admit("10.0.0.9", kStart + milliseconds(3200));
  EXPECT_FALSE(later.refused);
  EXPECT_EQ(later.wait, milliseconds(3200));
}

TEST(AuthThrottle, OtherAddressesAreNeverDelayed) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 20, kStart);
  for (const char* other : {"10.0.0.10", "127.0.0.1", "::1"}) {
    const AuthThrottle::Admission admission = throttle.admit(other, kStart);
    EXPECT_FALSE(admission.refused) << other;
    EXPECT_EQ(admission.wait, Clock::duration::zero()) << other;
  }
}

TEST(AuthThrottle, ASuccessOrAQuietMinuteForgetsTheAddress) {
  AuthThrottle throttle;
  fail_times(throttle, "10.0.0.9", 6, kStart);
  throttle.record_success("10.0.0.9");
  EXPECT_EQ(throttle.admit("10.0.0.9", kStart).wait, Clock::duration::zero());
  EXPECT_EQ(throttle.tracked(), 0u);

  fail_times(throttle, "10.0.0.9", 6, kStart);
  // 59 s later the count still stands: the 7th failure makes the next attempt wait 400 ms.
  const Clock::time_point seventh = kStart + milliseconds(59000);
  throttle.record_failure("10.0.0.9", seventh);
  EXPECT_EQ(throttle.admit("10.0.0.9", seventh).wait, milliseconds(400));
  const Clock::time_point quiet = seventh + milliseconds(60000);
  EXPECT_EQ(throttle.admit("10.0.0.9", quiet).wait, Clock::duration::zero());
  // And the count starts afresh: three more failures are free again.
  fail_times(throttle, "10.0.0.9", 3, quiet);
  EXPECT_EQ(throttle.admit("10.0.0.9", quiet).wait, Clock::duration::zero());
}

TEST(AuthThrottle, TheTableIsCappedByForgettingTheOldest) {
  AuthThrottleOptions options;
  options.max_sources = 8;
  AuthThrottle throttle(options);
  for (int i = 0; i < 20; ++i) {
    fail_times(throttle, "10.0.1." + std::to_string(i), 5, kStart + milliseconds(i));
    EXPECT_LE(throttle.tracked(), 8u);
  }
  // The newest addresses are still throttled, the oldest were forgotten.
  EXPECT_GT(throttle.admit("10.0.1.19", kStart + milliseconds(20)).wait, Clock::duration::zero());
  EXPECT_EQ(throttle.admit("10.0.1.0", kStart + milliseconds(20)).wait, Clock::duration::zero());
}

}  // namespace
}  // namespace tessera::worker
