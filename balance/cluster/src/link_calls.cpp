#include "tessera/balance/cluster/link_calls.hpp"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "tessera/balance/cluster/silent_node_watchdog.hpp"

namespace tessera::balance::cluster {

using LinkCallClock = std::chrono::steady_clock;

uint64_t link_bytes(const NodeLink& link) {
  return link.connection ? link.connection->bytes_sent() + link.connection->bytes_received() : 0;
}

std::vector<CallOutcome> on_links(std::span<NodeLink* const> links, std::chrono::milliseconds silence,
                                  const std::atomic<bool>* cancel, const std::function<Status(std::size_t)>& call,
                                  std::optional<std::chrono::milliseconds> abort_after) {
  const std::size_t count = links.size();
  std::vector<CallOutcome> outcomes(count);
  std::vector<char> done(count, 0);
  std::size_t remaining = count;
  std::mutex mutex;
  std::condition_variable finished;
  // A call owes bytes while it runs; any byte moved either way is progress.
  SilentNodeWatchdog::Options watch;
  watch.period = std::chrono::milliseconds(20);
  watch.deadline_s = [seconds = std::chrono::duration<double>(silence).count()](std::size_t) { return seconds; };
  watch.progress_counter = [&links](std::size_t i) { return link_bytes(*links[i]); };
  watch.on_silent = [&links](std::size_t i, const std::string&) { links[i]->connection->shutdown(); };
  SilentNodeWatchdog watchdog(count, std::move(watch));
  for (std::size_t i = 0; i < count; ++i) {
    if (links[i]->connection) watchdog.begin_owing(i);
  }
  std::vector<std::jthread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      Status status = links[i]->connection ? call(i) : network_error("not connected");
      const std::lock_guard<std::mutex> lock(mutex);
      // Found silent before the call returned: the outcome says so (retire tells).
      outcomes[i].silent = !watchdog.retire(i);
      outcomes[i].status = std::move(status);
      done[i] = 1;
      --remaining;
      finished.notify_all();
    });
  }
  std::optional<LinkCallClock::time_point> abort_at;
  std::unique_lock<std::mutex> lock(mutex);
  while (remaining > 0) {
    finished.wait_for(lock, std::chrono::milliseconds(20));
    const bool cancelling = cancel != nullptr && cancel->load();
    const auto now = LinkCallClock::now();
    if (abort_after && !abort_at) {
      for (std::size_t i = 0; i < count; ++i) {
        if (done[i] != 0 && !outcomes[i].status.is_ok()) abort_at = now + *abort_after;
      }
    }
    const bool aborting = abort_at && now >= *abort_at;
    for (std::size_t i = 0; i < count; ++i) {
      if (done[i] != 0 || outcomes[i].aborted || !links[i]->connection) continue;
      if (cancelling) {
        // Cancelled, not silent: the watchdog lets it be.
        watchdog.retire(i);
        links[i]->connection->shutdown();
      } else if (aborting && watchdog.retire(i)) {
        outcomes[i].aborted = true;
        links[i]->connection->shutdown();
      }
    }
  }
  lock.unlock();
  threads.clear();
  return outcomes;
}

}  // namespace tessera::balance::cluster
