// Worker services: what a tessera-worker does with an authenticated session's frames.
//
// A Service is a named set of message handlers plus the capability bit the worker advertises in
// HELLO while it hosts the service (GEMM, whose JOB also offers the expression and transpose
// bits, and graph). The WorkerServer builds a ServiceTable from its services once, at start: a
// session accepts, authenticates, then looks each frame's type up in the table and calls the
// handler. Types no service handles, apart from the session's own BYE and ERROR, end the session
// with ERROR. Handlers get the session's ServiceContext: the connection, the worker's tile store
// and compute pool, the session's counters (STATS) and the ways to end the session.
// Peer sessions: a service may also take frames from other workers (the graph service's deltas),
// on connections authenticated with the peer MAC label (transport::SessionRole::kPeer). A peer
// session runs beside the coordinator's session without claiming it, is admitted only while a
// service says so (admit_peer), and dispatches through the services' peer_handlers alone.
// Ownership: the server owns the table and its services for its lifetime; a ServiceContext lives
// as long as its session, which waits for the compute pool to go idle before it ends, so pool
// tasks may keep a reference to it. Thread-safety: handlers run on the session's connection
// thread, one at a time; the members of ServiceContext marked "any thread" may also be used from
// pool tasks. Each peer session has its own connection thread, so handlers of different sessions
// run concurrently: a service that shares state between them locks it. ServiceTable is immutable
// after build() and safe to share.
#pragma once

#include <any>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/gemm/codec.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/transport/protocol.hpp"
#include "tessera/worker/block_keeper.hpp"
#include "tessera/worker/compute_pool.hpp"
#include "tessera/worker/tile_store.hpp"

namespace tessera::worker {

// Payloads read whole into memory are at most this big unless a handler says otherwise: control
// frames are small (a JOB is gemm::kJobPayloadBytes), and a peer must not make the worker
// allocate a large buffer merely by claiming one.
inline constexpr uint64_t kMaxControlPayloadBytes = 64 * 1024;

// What a handler tells the session to do next.
enum class HandlerStep { kContinue, kEnd };

// The state of one authenticated session that handlers (and the pool tasks they submit) use.
class ServiceContext {
 public:
  // `secret` is the worker's shared secret; it and `blocks` (null: no block store) must outlive
  // the context.
  ServiceContext(transport::FrameConnection& connection, TileStore& store, ComputePool& pool,
                 const std::atomic<bool>& stopping, const std::string& secret, BlockKeeper* blocks = nullptr);
  // Runs every write queued with write_later first (or drops them once the connection is gone).
  ~ServiceContext();
  ServiceContext(const ServiceContext&) = delete;
  ServiceContext& operator=(const ServiceContext&) = delete;

  // Writing is thread-safe (any thread); reading belongs to the connection thread.
  transport::FrameConnection& connection() { return connection_; }
  TileStore& store() { return store_; }
  // The worker's block store, shared by its sessions; null when it has none (no --store).
  BlockKeeper* blocks() { return blocks_; }
  ComputePool& pool() { return pool_; }
  const transport::Limits& limits() const { return connection_.limits(); }
  const std::string& peer() const { return peer_; }
  // The cluster's shared secret, for connections a service opens itself (peer links).
  const std::string& secret() const { return secret_; }
  // Whether the session's link is encrypted; peer links a service opens match it.
  transport::WireMode wire() const { return connection_.wire(); }
  // The worker is shutting down or the coordinator has gone (its socket is closed: nobody waits
  // for the answer); a long-running handler should finish early. The socket is looked at no more
  // than every 50 ms, so a tight loop pays no system call per turn. Any thread.
  bool stopping() const;

  // --- The session's figures (STATS) ---
  // Takes the starting points STATS counts from. REQUIRES: connection thread, the pool idle.
  void start_counting();
  // Connection-thread CPU time that was compute (a GEMM probe runs its loop there), so STATS
  // counts it as compute rather than io. REQUIRES: connection thread.
  void add_connection_compute_cpu(double seconds);
  // One job finished; call before its CREDIT goes out so a STATS_REQUEST read after the CREDIT
  // includes it. Any thread.
  void count_finished_job() { jobs_finished_.fetch_add(1); }
  // The session's figures since start_counting(); see gemm::Stats. REQUIRES: connection thread.
  gemm::Stats stats() const;

  // --- Ending the session; each returns HandlerStep::kEnd for the handler to return ---
  // Logs, sends ERROR(code, message) answering request_id, and ends the session.
  HandlerStep fail(transport::ErrorCode code, const std::string& message, uint64_t request_id);
  // A read or write failed: a network failure ends the session quietly (the peer is gone); a
  // memory limit is answered with ERROR(kOutOfMemory), anything else with ERROR(kBadFrame).
  HandlerStep read_failed(const Status& status, uint64_t request_id);
  // Ends the session without an ERROR (BYE, the coordinator's own ERROR).
  HandlerStep end(std::string reason);
  const std::string& end_reason() const { return end_reason_; }

  // --- Replies written off the compute threads ---
  // Runs `write` on the session's writer thread after every write queued before it, so a compute
  // thread that finished a job starts the next one while the job's CREDIT and RESULT travel (a
  // RESULT written on the compute thread would hold it for as long as the coordinator takes to
  // read the tile). The writer's CPU time counts as io in STATS. Any thread.
  void write_later(std::function<void()> write);
  // Returns once every write queued before the call has run. Any thread but the writer.
  void flush_writes();

  // "tessera-worker: session with PEER: line" on stderr. Any thread.
  void log(std::string_view line) const;

  // What a service keeps about this session between frames (e.g. which run and part a peer link
  // belongs to); destroyed with the session, before its connection. Connection thread.
  std::any& service_state() { return service_state_; }

 private:
  transport::FrameConnection& connection_;
  TileStore& store_;
  ComputePool& pool_;
  BlockKeeper* blocks_;
  const std::atomic<bool>& stopping_;
  const std::string& secret_;
  std::string peer_;
  std::string end_reason_ = "peer closed the connection";
  // Figures at start_counting(); STATS reports the growth since.
  std::chrono::steady_clock::time_point started_;
  double connection_cpu_start_ = 0.0;
  ComputePool::Totals pool_start_;
  uint64_t bytes_received_start_ = 0;
  uint64_t bytes_sent_start_ = 0;
  double connection_compute_cpu_ = 0.0;
  std::atomic<uint64_t> jobs_finished_{0};
  // stopping()'s view of the socket: once gone, always gone; when to look again (steady ns).
  mutable std::atomic<bool> peer_gone_{false};
  mutable std::atomic<int64_t> next_peer_check_ns_{0};
  std::any service_state_;
  // The writer thread (started by the first write_later) and what it still has to write.
  std::mutex writes_mutex_;
  std::condition_variable writes_changed_;
  std::deque<std::function<void()>> writes_;
  bool write_running_ = false;
  bool writer_stop_ = false;
  std::thread writer_;
  std::atomic<int64_t> writer_cpu_ns_{0};  // since start_counting()
};

// How one message type is answered. Exactly one of on_message and on_stream is set.
struct MessageHandler {
  // Gets the frame's payload read whole (within max_payload_bytes), for the service to decode with
  // its own codec.
  using OnMessage =
      std::function<HandlerStep(ServiceContext&, const transport::FrameHeader&, std::span<const std::byte> payload)>;
  // Gets only the header and reads exactly header.payload_length bytes from the connection
  // itself (or ends the session): for bulk data that goes straight to its destination.
  using OnStream = std::function<HandlerStep(ServiceContext&, const transport::FrameHeader&)>;

  transport::MessageType type{};
  OnMessage on_message;
  OnStream on_stream;
  // on_message only: the largest payload accepted, checked against the header before anything is
  // read or allocated. nullptr: kMaxControlPayloadBytes.
  uint64_t (*max_payload_bytes)(const transport::Limits&) = nullptr;
  // on_message only, optional: whether a payload of `length` bytes fits the type's layout (its
  // codec's bounds), checked from the header alone before anything is read; a failure is answered
  // with ERROR(kBadFrame) and its message.
  Status (*check_length)(uint16_t type, uint64_t length, const transport::Limits&) = nullptr;
};

struct Service {
  std::string name;         // for logs and start-up, e.g. "gemm"
  uint64_t capability = 0;  // transport::kCapability* bit(s) advertised while hosted
  std::vector<MessageHandler> handlers;  // frames of the coordinator session
  // Frames of peer sessions (other workers). A type no service's peer handler takes ends the
  // peer session with ERROR. Empty: the service takes no peer links.
  std::vector<MessageHandler> peer_handlers = {};
  // REQUIRED with peer_handlers. Whether a peer link may open now: OK admits it; otherwise the
  // peer gets ERROR with the refusal's message (e.g. "no graph run here"). Any thread.
  std::function<Status()> admit_peer = {};
  // Called on the coordinator session's thread once that session has ended (BYE, ERROR, the
  // coordinator vanished, the worker stopping), before the tile store is cleared: a service that
  // keeps state beyond single frames frees it here. Unset: nothing to do.
  std::function<void()> on_session_end = {};
};

// The dispatch table: message type -> the handler of the one service that handles it.
class ServiceTable {
 public:
  // Fails with kInvalidArgument, naming the service, when a name is empty or repeated, two
  // services handle the same type, a handler claims a message the session itself owns (HELLO,
  // AUTH, AUTH_OK, ERROR, BYE) or an unknown type, or sets neither or both of its functions
  // (coordinator and peer handlers alike), or peer handlers come without admit_peer.
  static Result<ServiceTable> build(std::vector<Service> services);
  ServiceTable() = default;

  // The handler for `type`, or nullptr when no service handles it.
  const MessageHandler* find(uint16_t type) const;
  // The peer handler for `type`, or nullptr.
  const MessageHandler* find_peer(uint16_t type) const;
  // True when some service takes peer links at all (the worker then accepts the peer MAC label).
  bool takes_peers() const { return takes_peers_; }
  // OK when some service admits a peer link now; otherwise the first refusal, or "this worker
  // takes no peer links" when no service has peer handlers. Any thread.
  Status admit_peer() const;
  // Every service's on_session_end. Coordinator session thread.
  void end_session() const;
  // Union of the services' capability bits, as advertised in HELLO.
  uint64_t capabilities() const { return capabilities_; }
  const std::vector<Service>& services() const { return services_; }
  // "gemm (PROBE, STORE, JOB, RELEASE, STATS_REQUEST)"; "no services" when empty.
  std::string describe() const;

 private:
  struct Slot {
    bool used = false;
    std::size_t service = 0;
    std::size_t handler = 0;
  };
  using SlotTable = std::array<Slot, transport::kLastMessageType + 1>;
  static Status add_handlers(SlotTable& table, const std::vector<Service>& services, std::size_t service,
                             bool peer);
  static const MessageHandler* find_in(const SlotTable& table, const std::vector<Service>& services,
                                       uint16_t type, bool peer);
  std::vector<Service> services_;
  SlotTable by_type_{};
  SlotTable peer_by_type_{};
  bool takes_peers_ = false;
  uint64_t capabilities_ = 0;
};

}  // namespace tessera::worker
