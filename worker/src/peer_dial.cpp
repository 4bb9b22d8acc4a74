#include "peer_dial.hpp"

#include <algorithm>
#include <random>
#include <thread>

#include <fmt/format.h>

namespace tessera::worker {

namespace tp = tessera::transport;

namespace {

// The first pause; each next one doubles, up to kLongestPause. Jittered by up to half again, so
// diallers that were evicted together do not come back together.
constexpr std::chrono::milliseconds kFirstPause{10};
constexpr std::chrono::milliseconds kLongestPause{320};

std::chrono::milliseconds jittered(std::chrono::milliseconds pause) {
  thread_local std::minstd_rand random{std::random_device{}()};
  std::uniform_int_distribution<int64_t> extra(0, pause.count() / 2);
  return pause + std::chrono::milliseconds(extra(random));
}

}  // namespace

Result<PeerLink> dial_peer(const PeerDial& dial) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + dial.timeout;
  std::chrono::milliseconds pause = kFirstPause;
  for (int tries = 1;; ++tries) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const std::chrono::milliseconds budget = std::max(left, std::chrono::milliseconds(1));
    Result<std::unique_ptr<tp::FrameConnection>> connection =
        tp::FrameConnection::connect(dial.host, dial.port, budget, dial.limits);
    if (!connection) return connection.status();
    Result<tp::Hello> hello = tp::client_handshake(**connection, dial.secret, budget, tp::SessionRole::kPeer, dial.wire);
    if (hello) return PeerLink{std::move(*connection), *hello};
    // Closed mid-handshake: evicted from a crowd of diallers (or the worker is stopping, which
    // the next connect will say). Anything else is an answer, not a crowd.
    const bool crowded = hello.status().code() == StatusCode::kNetworkError;
    const auto resume = std::chrono::steady_clock::now() + jittered(pause);
    if (!crowded || resume >= deadline) {
      if (tries == 1) return hello.status();
      const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      return Status(hello.status().code(),
                    fmt::format("{} (after {} tries in {} ms)", hello.status().message(), tries, spent.count()));
    }
    std::this_thread::sleep_until(resume);
    pause = std::min(pause * 2, kLongestPause);
  }
}

}  // namespace tessera::worker
