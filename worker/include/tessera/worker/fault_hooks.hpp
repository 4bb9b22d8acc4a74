// Deterministic faults for tests, compiled only into the test twin of the daemon
// (tessera-worker-faulty, built from the same sources with TESSERA_FAULT_HOOKS); the shipped
// tessera-worker has none of this code. They let integration tests make a worker die in the
// middle of a RESULT, send a damaged RESULT or drop the connection after some STOREs, at exactly
// the point a test names, instead of racing a kill against the run; hold its graph deltas back
// on their way to the peers (the "in flight" case of async termination); or host fewer services
// (a real worker without the graph service); or slow every GEMM job down by a fixed delay.
//
// The hooks are process-wide: set them once, before WorkerServer::start(); after that they are
// only read (thread-safe). Counters ("first RESULT", "STOREs received") count over the process's
// lifetime, across sessions.
#pragma once

#ifdef TESSERA_FAULT_HOOKS

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::worker {

struct FaultHooks {
  // Raise SIGKILL on this process once this many data bytes of its first RESULT are written
  // (0: right after the RESULT's header and prefix). Unset: never.
  std::optional<uint64_t> die_after_result_bytes;
  // Raise SIGSTOP on this process at the same point (its job's CREDIT is already sent): a node
  // frozen mid-RESULT, whose socket stays open. Whoever started it continues or kills it.
  std::optional<uint64_t> stop_after_result_bytes;
  // Flip one data byte of the first RESULT as it is sent; its CRC stays that of the true data.
  bool corrupt_first_result = false;
  // Close the connection (ending the session) once this many STOREs have been read whole.
  std::optional<uint64_t> close_after_stores;
  // Graph service: every GRAPH_DELTAS batch to a peer is written this many ms after the engine
  // handed it over (and counted it sent), by a writer thread, so the engine goes on and the
  // batch sits in flight meanwhile. Unset: written at once.
  std::optional<uint32_t> delay_deltas_ms;
  // GEMM service: every CREDIT is written this many ms after its job finished, the pool thread
  // waiting meanwhile, so a run lasts at least its jobs x this however fast the machine is (a
  // long run for progress lines without a large multiply). Unset: at once.
  std::optional<uint32_t> delay_credits_ms;
  // GEMM probe: its first block sleeps this many ms inside its timing, as a node crowded out or
  // throttled right at the probe's start would. Unset: no stall.
  std::optional<uint32_t> stall_probe_ms;
  // Host only the services of these names (Service::name: "gemm", "graph"); empty: all of them.
  std::vector<std::string> services;
};

void set_fault_hooks(const FaultHooks& hooks);
const FaultHooks& fault_hooks();

}  // namespace tessera::worker

#endif  // TESSERA_FAULT_HOOKS
