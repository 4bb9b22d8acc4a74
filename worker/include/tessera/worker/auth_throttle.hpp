// AuthThrottle: slows down guessing the cluster secret from one address. Each source address
// may fail authentication (a wrong MAC) a few times freely; after that every new connection from
// it waits before its handshake starts, the wait doubling with each further failure up to a cap,
// and attempts from that address are spaced one wait apart (so opening many connections at once
// does not multiply the rate). A success, or a quiet period without failures, forgets the
// address. Other addresses are never delayed.
//
// Pure bookkeeping: the caller passes the time (tests inject it) and does the waiting on the
// connection's own thread, never on the accept loop. Memory is bounded: at most max_sources
// addresses are tracked, the one whose last failure is oldest is forgotten first.
// Thread-safe (one mutex); values only, nothing is retained from the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace tessera::worker {

struct AuthThrottleOptions {
  // Failures from one address before any delay: a coordinator with a stale secret retried by
  // hand is never slowed.
  uint32_t free_failures = 3;
  // The wait after the first failure beyond the free ones; doubles with each further failure.
  std::chrono::milliseconds first_delay{50};
  // The longest wait: 3.2 s (50 ms doubled six times) keeps a throttled address at under one
  // guess per 3 s, and stays below the coordinator's 5 s bound on reading HELLO, so a correct
  // coordinator behind the same address (a NAT) still gets in, only later.
  std::chrono::milliseconds max_delay{3200};
  // An address without a failure for this long starts afresh.
  std::chrono::milliseconds forget_after{60000};
  // Addresses tracked at once; beyond it the one whose last failure is oldest is forgotten.
  std::size_t max_sources = 4096;
};

class AuthThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AuthThrottle(AuthThrottleOptions options = {});

  // What a new connection from `source` arriving at `now` must do before its handshake.
  struct Admission {
    Clock::duration wait{};  // wait this long first (zero: start at once)
    // Refused without a handshake: the attempts from this address already queued reach past
    // max_delay. retry_after says when the address may try again.
    bool refused = false;
    Clock::duration retry_after{};
  };
  // Reserves the connection's turn: a later admit() from the same source is placed one delay
  // after this one.
  Admission admit(const std::string& source, Clock::time_point now);

  // A connection from `source` failed authentication (wrong MAC) at `now`.
  void record_failure(const std::string& source, Clock::time_point now);
  // A connection from `source` authenticated: the address is forgotten.
  void record_success(const std::string& source);

  // The wait that `failures` consecutive failures impose: zero up to free_failures, then
  // first_delay doubling per failure, at most max_delay.
  Clock::duration delay_after(uint32_t failures) const;
  // Addresses tracked now (tests check the bound).
  std::size_t tracked() const;

 private:
  struct Entry {
    uint32_t failures = 0;
    Clock::time_point last_failure{};
    Clock::time_point next_start{};  // the earliest a new handshake from this address may start
  };
  // Forgets entries quiet for forget_after, then the oldest until there is room for one more.
  // REQUIRES: mutex_ held.
  void make_room(Clock::time_point now);

  const AuthThrottleOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> sources_;
};

}  // namespace tessera::worker
