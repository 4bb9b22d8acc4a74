#include "tessera/transport/dial.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include "client_handshake.hpp"

namespace tessera::transport {

namespace {

// The first pause; each next one doubles, up to kLongestPause. Jittered by up to half again.
constexpr std::chrono::milliseconds kFirstPause{10};
constexpr std::chrono::milliseconds kLongestPause{320};
// A worker answering THROTTLED is alive and says a place will free: the dial may go on that long
// past its own timeout (the worker's line of held answers moves through in under half a minute).
constexpr std::chrono::milliseconds kLongestThrottledDial{60000};

std::chrono::milliseconds jittered(std::chrono::milliseconds pause) {
  thread_local std::minstd_rand random{std::random_device{}()};
  std::uniform_int_distribution<int64_t> extra(0, pause.count() / 2);
  return pause + std::chrono::milliseconds(extra(random));
}

}  // namespace

Result<DialedWorker> dial_worker(const Dial& dial, DialStage* failed_at) {
  if (failed_at != nullptr) *failed_at = DialStage::kHandshake;
  const auto start = std::chrono::steady_clock::now();
  auto deadline = start + dial.timeout;
  std::chrono::milliseconds pause = kFirstPause;
  for (int tries = 1;; ++tries) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const std::chrono::milliseconds budget = std::max(left, std::chrono::milliseconds(1));
    Result<std::unique_ptr<FrameConnection>> connection = FrameConnection::connect(dial.host, dial.port, budget, dial.limits);
    if (!connection) {
      if (failed_at != nullptr) *failed_at = DialStage::kConnect;
      return connection.status();
    }
    bool throttled = false;
    Result<Hello> hello =
        client_handshake_noting_throttle(**connection, dial.secret, budget, dial.role, dial.wire, throttled);
    if (hello) return DialedWorker{std::move(*connection), *hello};
    // Closed mid-handshake: evicted from a crowd of diallers (or the worker is stopping, which the
    // next connect will say). Anything else but THROTTLED is an answer, not a crowd.
    const bool again = throttled || hello.status().code() == StatusCode::kNetworkError;
    if (throttled) deadline = std::max(deadline, start + kLongestThrottledDial);
    const auto resume = std::chrono::steady_clock::now() + jittered(pause);
    if (!again || resume >= deadline) {
      if (tries == 1) return hello.status();
      const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      return Status(hello.status().code(), hello.status().message() + " (after " + std::to_string(tries) + " tries in " +
                                               std::to_string(spent.count()) + " ms)");
    }
    std::this_thread::sleep_until(resume);
    pause = std::min(pause * 2, kLongestPause);
  }
}

}  // namespace tessera::transport
