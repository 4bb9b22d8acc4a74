// LogLimiter: at most one line per second per source address and kind of line, with the count
// of those suppressed, for the worker's lines about connections that have not authenticated. A
// peer that opens connections in a loop (a scanner, a wrong secret retried) must not flood the
// worker's log, and a port check's line must not hide the wrong secret that follows it. Memory is
// bounded (addresses quiet for a minute are forgotten first). Thread-safe (one mutex). Internal
// to the worker library.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "worker_log.hpp"

namespace tessera::worker {

class LogLimiter {
 public:
  void log(const std::string& source, std::string_view kind, const std::string& line) {
    const auto now = std::chrono::steady_clock::now();
    std::size_t suppressed = 0;
    {
      std::lock_guard lock(mutex_);
      if (sources_.size() > kMaxSources) forget_quiet(now);
      Entry& entry = sources_[source + " " + std::string(kind)];
      if (entry.last_line != std::chrono::steady_clock::time_point{} && now - entry.last_line < kPeriod) {
        ++entry.suppressed;
        return;
      }
      suppressed = entry.suppressed;
      entry.suppressed = 0;
      entry.last_line = now;
    }
    log_line(suppressed == 0 ? line
                             : fmt::format("{} ({} similar lines about {} suppressed)", line, suppressed, source));
  }

 private:
  static constexpr auto kPeriod = std::chrono::seconds(1);
  static constexpr std::size_t kMaxSources = 4096;  // bounds the memory a spoofing peer can cost
  struct Entry {
    std::chrono::steady_clock::time_point last_line{};
    std::size_t suppressed = 0;
  };
  void forget_quiet(std::chrono::steady_clock::time_point now) {
    std::erase_if(sources_, [now](const auto& item) { return now - item.second.last_line > std::chrono::seconds(60); });
    // Still too many: forgetting costs at most one extra line per source, memory is the bound.
    if (sources_.size() > kMaxSources) sources_.clear();
  }
  std::mutex mutex_;
  std::map<std::string, Entry> sources_;
};

}  // namespace tessera::worker
