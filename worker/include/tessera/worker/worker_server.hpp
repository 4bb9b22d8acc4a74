// WorkerServer: the tessera-worker daemon as a library, a host of services.
//
// Listens on a TCP endpoint and serves one authenticated coordinator session at a time (a second
// concurrent connection gets ERROR(kBusy), saying whose session it is and how long that session
// has been idle, and is closed); it stays up between sessions. A session
// accepts, authenticates (HELLO advertises the union of the hosted services' capability bits),
// then dispatches every frame through the table built from the services (see service.hpp): the
// default set is the GEMM service (gemm_service.hpp: STORE, JOB, RELEASE, PROBE, STATS_REQUEST)
// and the graph service (graph_service.hpp: GRAPH_*).
// BYE and ERROR are the session's own; a type no service handles gets ERROR(kBadFrame). A bad
// frame gets ERROR with a reason and the session ends; the server never crashes on input.
// Peer sessions: while a service admits them (the graph service: while a run is loaded), other
// workers authenticated with the peer MAC label get sessions of their own beside the
// coordinator's, one connection thread each, dispatched to the services' peer handlers; a
// coordinator that connects meanwhile still handshakes and is then refused as busy. Peer
// sessions have the handshake timeout but no idle timeout: the service closes them when its run
// ends.
// The server owns its tile store, compute pool and services; the store is emptied when a session
// ends. start() and stop() are thread-safe; run() blocks the calling thread until stop().
//
// No peer can hold the worker: connections handshake concurrently, each must send AUTH within
// handshake_timeout, and when max_handshaking are handshaking (or max_handshaking_per_source
// from one address) a newcomer evicts the oldest one that has not answered yet (of that address)
// instead of being refused, so silent connections cannot lock the real coordinator out. A
// connection that has answered leaves those slots. Repeated failed authentications from one
// address make the worker hold each later answer from it, right or wrong, before the verdict
// (auth_throttle.hpp): never queued behind another, so a guesser beside a coordinator delays it
// by one hold at most. An authenticated session that has sent nothing for idle_timeout while the
// worker has no work of it in progress yields the worker to the next coordinator that
// authenticates. Finished connections are closed and joined as they end; when accept() runs out
// of file descriptors the server backs off and serves again once descriptors are free. Lines
// about unauthenticated connections are rate-limited per source address.
#pragma once

#include <chrono>
#include <filesystem>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/worker/auth_throttle.hpp"
#include "tessera/worker/service.hpp"

namespace tessera::worker {

struct WorkerOptions {
  std::string listen_host = "0.0.0.0";
  uint16_t port = 7070;            // 0 picks a free port (see WorkerServer::port())
  uint32_t threads = 0;            // compute threads; 0 = online CPUs
  std::string secret;              // shared secret; REQUIRED non-empty
  // kPlain (default): serve plain and encrypted clients alike, as each asks; kEncrypted: refuse a
  // client that does not switch to TLS (transport/tls.hpp).
  transport::WireMode wire = transport::WireMode::kPlain;
  uint64_t tile_memory_cap = 0;    // bytes the tile store may hold; 0 = half of physical memory
  transport::Limits limits;        // frame limits (max_payload_bytes is also capped by the store)
  // An unauthenticated connection must have sent AUTH this long after it was accepted. A
  // coordinator answers HELLO within a round trip, so 5 s is generous even for a Pi on Wi-Fi,
  // and short enough that a port scan or a stalled peer frees its slot soon.
  std::chrono::milliseconds handshake_timeout{5000};
  // An authenticated session from which no frame came for this long, while none of its work was
  // queued or running here, is ended as soon as another coordinator authenticates (it yields the
  // worker); until then it is kept, however long, since it costs nobody else anything. 10 s: a
  // coordinator in a run talks at least once per finished job (GEMM) or per 100 ms (graph polls),
  // while a lone coordinator may be quiet on one link for much longer (profiling the other nodes
  // one at a time, partitioning), which must not cost it the node. 0 = never yield.
  std::chrono::milliseconds idle_timeout{10000};
  // Connections that have not answered the challenge yet, in total and from one source address.
  // A newcomer beyond either bound evicts the oldest such connection (from that address), so one
  // address holds at most half the slots and the newest connection always gets its chance.
  std::size_t max_handshaking = 16;
  std::size_t max_handshaking_per_source = 8;
  // The block store's folder (--store): resident blocks a coordinator asks to keep are written
  // there and found again by later sessions, also after a restart (block_store.hpp). Empty: no
  // block store, and HELLO does not offer kCapabilityBlockStore.
  std::filesystem::path store_dir;
  uint64_t store_bytes = 0;  // its bound on disk; 0 with a folder: 8 GiB
  // Failed authentications from one address beyond a few make the worker hold its next answers
  // before their verdict (on their own threads; other addresses and the accept loop never wait).
  AuthThrottleOptions auth_throttle;
};

// Facts the worker reports in HELLO.
struct NodeFacts {
  std::string arch;
  std::string hostname;
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
};
NodeFacts read_node_facts();
// The host's 1-minute load average x 1000 (getloadavg(3)), read afresh for every HELLO so that
// `tessera status` shows the load now; none when the system does not report it.
std::optional<uint32_t> read_load_milli();

class WorkerServer {
 public:
  // Binds and listens, hosting default_services(). Failure: kNetworkError naming the endpoint
  // (address in use, bad host), kInvalidArgument for an empty secret.
  static Result<std::unique_ptr<WorkerServer>> start(const WorkerOptions& options);
  // The same with the given services (tests; workers hosting a chosen set). Also fails with
  // kInvalidArgument when the services conflict (see ServiceTable::build).
  static Result<std::unique_ptr<WorkerServer>> start(const WorkerOptions& options, std::vector<Service> services);
  ~WorkerServer();

  uint16_t port() const;  // the bound port
  const ServiceTable& services() const;
  // What HELLO offers: the services' bits and kCapabilityBlockStore with a store (TLS aside).
  uint64_t capabilities() const;
  void run();             // serves until stop()
  void stop();            // any thread; run() returns soon after

 private:
  struct Impl;
  explicit WorkerServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Version string reported in HELLO and by --version.
std::string worker_version();

// The services a tessera-worker hosts: GEMM and graph (the test twin: those its fault hooks name).
std::vector<Service> default_services();

}  // namespace tessera::worker
