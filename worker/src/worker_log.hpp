// The worker's log: one line per event on stderr, prefixed "tessera-worker: ", flushed at once so
// that `tessera up` and the tests see it while the process runs. Thread-safe (one write per line).
#pragma once

#include <cstdio>
#include <string_view>

#include <fmt/core.h>

namespace tessera::worker {

inline void log_line(std::string_view line) {
  fmt::print(stderr, "tessera-worker: {}\n", line);
  std::fflush(stderr);
}

}  // namespace tessera::worker
