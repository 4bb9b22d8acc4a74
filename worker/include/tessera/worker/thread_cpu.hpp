// Per-thread CPU clocks, for the worker's split of its CPU time into communication and compute.
//
// thread_cpu_seconds() reads the calling thread's CLOCK_THREAD_CPUTIME_ID: CPU time the thread has
// used (user + system), not time it spent blocked on a socket or a condition variable. No state is
// kept; every function is thread-safe.
#pragma once

namespace tessera::worker {

// CPU seconds the calling thread has used since it started. Returns 0 if the clock cannot be read
// (it can on Linux and every POSIX system with thread CPU clocks).
double thread_cpu_seconds();

}  // namespace tessera::worker
