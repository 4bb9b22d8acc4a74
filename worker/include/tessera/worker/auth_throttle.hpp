// AuthThrottle: slows down guessing the cluster secret from one address without keeping out a
// coordinator that knows it. Each source address may fail authentication (a wrong MAC) a few
// times freely; after that every answer to a challenge from that address, right or wrong, is
// held before the worker says whether it was right, the hold doubling with each further failure
// up to a cap. Holding right answers too is what makes the hold a limit: were a right answer let
// through at once, a guesser would read a wrong guess from the silence after it and never wait.
//
// What bounds a guesser opening many connections is the number of answers held at once per
// address: 32 holds of 3.2 s are 10 guesses a second. Answers beyond those wait in line, first
// come first served, for a place; a coordinator behind the address therefore waits for the
// answers ahead of it (at most the line's length, a few seconds per 32 of them) and one hold,
// however fast the guesser opens new connections, which all join the line behind it. Only past
// the line's length is a connection refused as throttled, before its answer is looked at.
//
// A held answer's failure is counted when its verdict is released, not when the MAC is checked:
// a count a guesser could see change (through the next hold's length) before its own verdict came
// would tell it the verdict. An answer let through at once is counted at once, so that answers
// arriving together from a fresh address get no more than the free failures between them.
// Successes do not forget failures (a coordinator that logs in often would otherwise reset a
// guesser beside it); a quiet period without failures does.
//
// Pure bookkeeping: the caller passes the time (tests inject it) and does the holding and the
// waiting on the connection's own thread, asking start() whether a waiting answer's turn has
// come. Memory is bounded: at most max_sources addresses are tracked; the one whose last failure
// is oldest, among those holding and queueing nothing, is forgotten first. Thread-safe (one
// mutex); values only, nothing is retained from the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace tessera::worker {

struct AuthThrottleOptions {
  // Failures from one address before any hold: a coordinator with a stale secret retried by hand
  // is never slowed.
  uint32_t free_failures = 3;
  // The hold after the first failure beyond the free ones; doubles with each further failure.
  std::chrono::milliseconds first_delay{50};
  // The longest hold: 3.2 s (50 ms doubled six times) keeps a guesser that waits for its answers
  // at under one guess per 3 s.
  std::chrono::milliseconds max_delay{3200};
  // An address without a failure for this long starts afresh.
  std::chrono::milliseconds forget_after{60000};
  // Answers held at once from one address: a guesser opening connections in parallel gets at most
  // this many guesses per hold (32 per 3.2 s, 10 a second).
  std::size_t max_held_per_source = 32;
  // Answers waiting in line for a place, from one address: a coordinator behind that address gets
  // in past up to this many (224 / 32 holds of 3.2 s, 22 s at the longest) before it is refused.
  std::size_t max_queued_per_source = 224;
  // Answers held, and waiting, at once from all addresses: each is a connection thread.
  std::size_t max_held = 256;
  std::size_t max_queued = 768;
  // Addresses tracked at once; beyond it the one whose last failure is oldest is forgotten.
  std::size_t max_sources = 4096;
};

class AuthThrottle {
 public:
  using Clock = std::chrono::steady_clock;

  // What an answer (AUTH) from `source` must do before its verdict is sent.
  struct Hold {
    enum class Kind {
      kNow,      // the verdict goes out at once (the answer is counted already)
      kHeld,     // hold the verdict `wait`, then release()
      kQueued,   // wait in line (`ticket`) until start() gives it a place, or abandon()
      kRefused,  // refused without looking at the answer: the line is full
    };
    Kind kind = Kind::kNow;
    Clock::duration wait{};      // kHeld: the hold; kQueued: an estimate of the wait for a place
    uint64_t ticket = 0;         // kQueued
    std::size_t ahead = 0;       // kQueued: answers from `source` held or waiting before it
    // kRefused: when the line is likely to have room again, and how long it is.
    Clock::duration retry_after{};
    std::size_t queued = 0;
  };
  explicit AuthThrottle(AuthThrottleOptions options = {});

  // An answer from `source` at `now` whose MAC was `wrong` (or not). kNow counts it here; kHeld
  // reserves a held place for it, which release() gives back; kQueued puts it in line.
  Hold hold(const std::string& source, bool wrong, Clock::time_point now);

  // A waiting answer asks at `now` whether its turn has come: when it is first in line and a place
  // is free it takes the place and gets its hold (then release() as for kHeld); otherwise nothing,
  // and `ahead` (when given) receives the answers still before it.
  std::optional<Clock::duration> start(const std::string& source, uint64_t ticket, Clock::time_point now,
                                       std::size_t* ahead = nullptr);
  // A waiting answer leaves the line without a place (its peer left, the worker stops).
  void abandon(const std::string& source, uint64_t ticket);

  // The verdict on an answer held (kHeld, or started) goes out at `now`: its place is free, and
  // `wrong` counts a failure.
  void release(const std::string& source, bool wrong, Clock::time_point now);

  // The hold that `failures` consecutive failures impose: zero up to free_failures, then
  // first_delay doubling per failure, at most max_delay.
  Clock::duration delay_after(uint32_t failures) const;
  // Addresses tracked now (tests check the bound).
  std::size_t tracked() const;

 private:
  struct Entry {
    uint32_t failures = 0;
    Clock::time_point last_failure{};
    std::size_t held = 0;               // answers from this address held now
    Clock::time_point last_hold_end{};  // when the longest of them ends
    std::deque<uint64_t> line;          // tickets of the answers waiting for a place, oldest first
  };
  bool busy(const Entry& entry) const { return entry.held > 0 || !entry.line.empty(); }
  // The entry's failures still count at `now`. REQUIRES: mutex_ held.
  bool remembered(const Entry& entry, Clock::time_point now) const;
  bool place_free(const Entry& entry) const;
  // Takes a held place for an answer from `entry` at `now`; returns its hold. REQUIRES: mutex_ held.
  Clock::duration take_place(Entry& entry, Clock::time_point now);
  // One more failure of `source` at `now`. REQUIRES: mutex_ held.
  void count_failure(const std::string& source, Clock::time_point now);
  // Forgets entries quiet for forget_after that hold and queue nothing, then the oldest of those
  // until there is room for one more. REQUIRES: mutex_ held.
  void make_room(Clock::time_point now);

  const AuthThrottleOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> sources_;
  std::size_t held_ = 0;    // answers held now, from all addresses
  std::size_t queued_ = 0;  // answers waiting for a place, from all addresses
  uint64_t next_ticket_ = 1;
};

}  // namespace tessera::worker
