#include "tessera/worker/thread_cpu.hpp"

#include <time.h>

namespace tessera::worker {

double thread_cpu_seconds() {
  timespec now{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return 0.0;
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace tessera::worker
