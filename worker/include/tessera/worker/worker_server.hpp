// WorkerServer: the tessera-worker daemon as a library.
//
// Listens on a TCP endpoint and serves one authenticated coordinator session at a time (a second
// concurrent connection gets ERROR(kBusy) and is closed); it stays up between sessions. Within a
// session: STORE puts a tile in a memory-capped store, JOB queues C += A*B on the compute pool
// (jobs run in arrival order; each is split over the pool's threads by rows of C, so accumulation
// is in place and needs no locks), each finished job returns a CREDIT, and kJobSendResult returns
// the output tile as RESULT straight from tile memory. PROBE measures GEMM speed or echoes bytes.
// STATS_REQUEST returns the session's figures so far: CPU time spent on communication (frame I/O
// and decoding, including CREDIT/RESULT writes made from compute threads) and on compute, compute
// wall time, jobs finished, and bytes in and out (see tessera::transport::Stats).
// A bad frame gets ERROR with a reason and the session ends; the server never crashes on input.
// start() and stop() are thread-safe; run() blocks the calling thread until stop().
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"

namespace tessera::worker {

struct WorkerOptions {
  std::string listen_host = "0.0.0.0";
  uint16_t port = 7070;            // 0 picks a free port (see WorkerServer::port())
  uint32_t threads = 0;            // compute threads; 0 = online CPUs
  std::string secret;              // shared secret; REQUIRED non-empty
  uint64_t tile_memory_cap = 0;    // bytes the tile store may hold; 0 = half of physical memory
  transport::Limits limits;        // frame limits (max_payload_bytes is also capped by the store)
};

// Facts the worker reports in HELLO.
struct NodeFacts {
  std::string arch;
  std::string hostname;
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
};
NodeFacts read_node_facts();

class WorkerServer {
 public:
  // Binds and listens. Failure: kNetworkError naming the endpoint (address in use, bad host),
  // kInvalidArgument for an empty secret.
  static Result<std::unique_ptr<WorkerServer>> start(const WorkerOptions& options);
  ~WorkerServer();

  uint16_t port() const;  // the bound port
  void run();             // serves until stop()
  void stop();            // any thread; run() returns soon after

 private:
  struct Impl;
  explicit WorkerServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Version string reported in HELLO and by --version.
std::string worker_version();

}  // namespace tessera::worker
