#include "tessera/worker/worker_server.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <condition_variable>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <asio.hpp>
#include <fmt/core.h>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/compute_pool.hpp"
#include "tessera/worker/gemm_service.hpp"
#include "tessera/worker/graph_probe.hpp"
#include "tessera/worker/graph_service.hpp"
#include "tessera/worker/service.hpp"
#include "tessera/worker/tile_store.hpp"
#include "worker_log.hpp"
#ifdef TESSERA_FAULT_HOOKS
#include "tessera/worker/fault_hooks.hpp"
#endif

namespace tessera::worker {

namespace tp = tessera::transport;
using asio::ip::tcp;

namespace {

// Pause before accepting again after accept() itself fails (out of file descriptors): doubles
// from the first to the last while failures go on, so the acceptor neither spins nor sleeps
// long once finished connections have given descriptors back.
constexpr auto kAcceptRetryFirst = std::chrono::milliseconds(50);
constexpr auto kAcceptRetryLast = std::chrono::milliseconds(1000);
// How long a coordinator that authenticated waits for a session that is only cleaning up (its
// peer said BYE) before it is told the worker is busy.
constexpr auto kClaimWait = std::chrono::seconds(10);
// How often a waiting session looks whether another coordinator asked it to yield: the newcomer
// waits about this long for the worker, and an idle session wakes this often.
constexpr auto kYieldPoll = std::chrono::milliseconds(100);
// How long an answer may wait in line for a held place (AuthThrottle) before it is refused: the
// line is bounded so that it moves through in under half a minute, so this is only reached when
// places free more slowly than they should. How often it looks whether its turn has come.
constexpr auto kLongestWaitInLine = std::chrono::seconds(45);
constexpr auto kLinePoll = std::chrono::milliseconds(20);
// An authenticated peer that stops sending half-way through a frame for this long is gone. 60 s:
// the previous default idle bound, long enough for a stalled Wi-Fi link to recover.
constexpr auto kFrameStallTimeout = std::chrono::milliseconds(60000);

std::string seconds_text(std::chrono::milliseconds span) {
  return span.count() % 1000 == 0 ? fmt::format("{} s", span.count() / 1000)
                                  : fmt::format("{:.1f} s", static_cast<double>(span.count()) / 1000.0);
}

// At most one line per second per source address and kind of line: a peer that opens
// connections in a loop (a scanner, a wrong secret retried) must not flood the worker's log, and
// a port check's line must not hide the wrong secret that follows it. Thread-safe.
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

}  // namespace

NodeFacts read_node_facts() {
  NodeFacts facts;
  struct utsname names {};
  if (::uname(&names) == 0) {
    facts.arch = names.machine;
    facts.hostname = names.nodename;
  }
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  facts.cores = cpus < 1 ? 1u : static_cast<uint32_t>(cpus);
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    facts.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  return facts;
}

std::optional<uint32_t> read_load_milli() {
  double averages[1] = {0.0};
  if (::getloadavg(averages, 1) != 1 || !(averages[0] >= 0.0)) return std::nullopt;
  return static_cast<uint32_t>(std::min(std::lround(averages[0] * 1000.0), long{UINT32_MAX}));
}

std::string worker_version() { return TESSERA_VERSION; }

std::vector<Service> default_services() {
  std::vector<Service> services;
  services.push_back(gemm_service());
  services.push_back(graph_service());
  services.push_back(graph_probe_service());
#ifdef TESSERA_FAULT_HOOKS
  // The test twin can play a worker that hosts fewer services (one without graph, say).
  if (const std::vector<std::string>& only = fault_hooks().services; !only.empty()) {
    std::erase_if(services, [&](const Service& service) {
      return std::find(only.begin(), only.end(), service.name) == only.end();
    });
  }
#endif
  return services;
}

namespace {

// The one coordinator session the worker serves at a time. Connections handshake concurrently
// (so a port check or a stalled peer cannot lock the real coordinator out), and only an
// authenticated connection claims the slot. The session marks its activity here, so a refusal
// can say how long it has been idle and a newcomer can ask an idle one to yield. Thread-safe.
class SessionSlot {
 public:
  using Clock = std::chrono::steady_clock;

  // Who holds the slot and for how long its session has been idle.
  struct Holder {
    std::string peer;
    Clock::duration idle{};
  };

  // The holder of an authenticated, still-running session, if any.
  std::optional<Holder> busy_with() const {
    std::lock_guard lock(mutex_);
    if (active_ && !closing_) return Holder{peer_, idle_locked()};
    return std::nullopt;
  }

  // The session had a frame, or work of it progressed: its idle clock restarts. Called for every
  // frame, so it takes no lock.
  void touch() { last_activity_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  // The session is handling a frame (a GEMM probe can take seconds in its handler): it is not idle
  // meanwhile, whatever its clock says. Called around every handler, so it takes no lock.
  void set_in_frame(bool in_frame) { in_frame_.store(in_frame, std::memory_order_relaxed); }

  // True once another coordinator has asked this session to yield (see claim()).
  bool yield_requested() const { return yield_requested_.load(std::memory_order_relaxed); }

  // Claims the slot for `peer`. Waits (at most kClaimWait) for a session that has hung up and is
  // only cleaning up (a coordinator reconnecting right after an ERROR should not be refused), or
  // for one idle for at least `idle_timeout` (not 0) to yield. Returns the holder when the slot
  // cannot be claimed, or a holder with an empty peer if the worker is stopping.
  std::optional<Holder> claim(const std::string& peer, std::chrono::milliseconds idle_timeout) {
    std::unique_lock lock(mutex_);
    const bool asked = active_ && !closing_ && idle_timeout.count() > 0 && idle_locked() >= idle_timeout;
    if (asked) yield_requested_ = true;
    changed_.wait_for(lock, kClaimWait, [this] {
      if (stopping_ || !active_) return true;
      return !closing_ && !yield_requested_;  // a running session that was not asked to yield
    });
    if (stopping_) return Holder{};
    if (active_) {
      if (asked) yield_requested_ = false;  // it did not yield in time; keep it undisturbed
      return Holder{peer_, idle_locked()};
    }
    active_ = true;
    closing_ = false;
    yield_requested_ = false;
    peer_ = peer;
    touch();
    return std::nullopt;
  }

  void mark_closing() {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }

  void release() {
    {
      std::lock_guard lock(mutex_);
      active_ = false;
      closing_ = false;
      yield_requested_ = false;
    }
    changed_.notify_all();
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
  }

 private:
  Clock::duration idle_locked() const {
    if (in_frame_.load(std::memory_order_relaxed)) return Clock::duration::zero();
    const Clock::duration since = Clock::now().time_since_epoch() -
                                  Clock::duration(last_activity_ns_.load(std::memory_order_relaxed));
    return std::max(since, Clock::duration::zero());
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool active_ = false;
  bool closing_ = false;
  bool stopping_ = false;
  std::atomic<bool> yield_requested_{false};
  std::atomic<Clock::rep> last_activity_ns_{0};
  std::atomic<bool> in_frame_{false};
  std::string peer_;
};

// The text of a BUSY refusal: whose session holds the worker and how long it has been idle, so
// the coordinator refused knows whether waiting is worth it.
std::string busy_text(const SessionSlot::Holder& holder, std::chrono::milliseconds idle_timeout) {
  const double idle_s = std::chrono::duration<double>(holder.idle).count();
  std::string text = fmt::format("worker busy with a session from {}, idle for {:.1f} s", holder.peer, idle_s);
  if (idle_timeout.count() > 0) {
    text += fmt::format(" (a session idle for {} yields to the next coordinator)", seconds_text(idle_timeout));
  }
  return text;
}

// What a session needs from the server; Impl adds the acceptor and the connection threads.
struct ServerCore {
  ServerCore(const WorkerOptions& options, const NodeFacts& facts, ServiceTable services)
      : options_(options),
        facts_(facts),
        services_(std::move(services)),
        store_(options.tile_memory_cap),
        pool_(options.threads),
        auth_throttle_(options.auth_throttle) {}

  WorkerOptions options_;  // threads and tile_memory_cap already resolved
  NodeFacts facts_;
  const ServiceTable services_;
  asio::io_context io_;
  TileStore store_;
  ComputePool pool_;
  SessionSlot slot_;
  LogLimiter unauthenticated_log_;  // lines about connections that have not authenticated
  AuthThrottle auth_throttle_;      // per-address holds of answers after failed authentications
  std::atomic<bool> stopping_{false};
};

}  // namespace

struct WorkerServer::Impl : ServerCore {
  Impl(const WorkerOptions& options, const NodeFacts& facts, ServiceTable services)
      : ServerCore(options, facts, std::move(services)), acceptor_(io_) {}

  ~Impl() {
    stop();
    join_connections(/*all=*/true);
  }

  Status listen(const std::string& host, uint16_t port);
  void run();
  void stop();

  // A connection's lifecycle as the acceptor sees it. Written under connections_mutex_ except
  // `finished`, which the connection's own thread sets last.
  struct ConnectionState {
    std::atomic<bool> finished{false};
    // Its answer to the challenge has arrived: it no longer takes a handshake slot and is never
    // evicted (it may be held by the auth throttle, which newer connections must not cut short).
    bool answered = false;
    bool evicted = false;        // shut down to make room for a newer connection
  };

  void accept_next();
  void on_accept_failed(const std::error_code& ec);
  void on_accept(tcp::socket socket);
  // Makes room for a connection from `source`: evicts the oldest unauthenticated connection of
  // that source, or else of all, when their bound is reached. REQUIRES: connections_mutex_ held.
  void evict_for(const std::string& source);
  void serve_connection(const std::shared_ptr<tp::FrameConnection>& connection,
                        const std::shared_ptr<ConnectionState>& state);
  // The handshake's on_answer for a connection from `source`: takes it out of the handshake slots
  // (failing if it was evicted before its answer came), holds the answer for as long as the auth
  // throttle says (on the connection's own thread), then counts the verdict. A refusal (too many
  // answers from `source` held already, or the worker stopping) is written as ERROR here.
  Status answer_arrived(tp::FrameConnection& connection, ConnectionState& state, const std::string& source,
                        bool mac_right);
  // Joins connection threads that have finished (all of them when `all`), which closes their
  // sockets: a peer that hung up must not leave its socket in CLOSE-WAIT.
  void join_connections(bool all);

  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_{io_};
  std::chrono::milliseconds accept_retry_delay_{0};  // 0 while accept() succeeds
  uint64_t accept_failures_ = 0;                     // since the last success, for the log
  uint16_t port_ = 0;
  std::string endpoint_;  // "host:port" for messages

  struct ConnectionThread {
    std::shared_ptr<tp::FrameConnection> connection;
    std::shared_ptr<ConnectionState> state;
    std::string source;  // the peer's address: the unit of the per-source bound
    std::thread thread;
  };
  std::mutex connections_mutex_;
  std::vector<ConnectionThread> connections_;
};

namespace {

// One connection: accept (done by the server), authenticate, then dispatch every frame through
// the service table until BYE, an error, or the peer leaves. A coordinator session uses the
// services' handlers and holds the server's session slot; a peer session (another worker, see
// service.hpp) uses their peer handlers and holds nothing. Runs on its connection thread; pool
// tasks the services submit run on pool threads and only write frames.
class Session {
 public:
  Session(ServerCore& server, std::shared_ptr<tp::FrameConnection> connection)
      : server_(server),
        connection_(std::move(connection)),
        context_(*connection_, server.store_, server.pool_, server.stopping_, server.options_.secret) {}

  // Sends HELLO (with the services' capabilities) and checks the AUTH of a coordinator, or of a
  // peer worker when a service takes peer links; false (logged) if it fails or times out.
  // `on_answer` is the handshake hook between the MAC check and the verdict (ServerHandshakeHooks).
  bool handshake(const std::function<Status(bool mac_right)>& on_answer);
  // Why handshake() failed.
  const Status& last_failure() const { return last_failure_; }
  // Who authenticated. REQUIRES: handshake() succeeded.
  tp::SessionRole role() const { return role_; }
  // REQUIRES: handshake() succeeded as the coordinator and the session slot is ours. Returns when
  // the session ended and the pool and store are clean again.
  void serve();
  // REQUIRES: handshake() succeeded as a peer. Returns when the peer link ended (the peer left,
  // sent something no peer handler takes, or a service closed the link when its run ended).
  void serve_peer();

 private:
  SessionStep serve_frame();
  SessionStep serve_peer_frame();
  // Waits for the next frame's first byte: false when the session was idle for the idle timeout.
  bool wait_for_frame();
  // Reads a whole frame for a handler that wants it decoded, within the handler's size bound.
  SessionStep deliver_decoded(const MessageHandler& handler, const tp::FrameHeader& header);
  // BYE and ERROR, which the session answers whatever services it hosts; anything else no
  // service handles is refused.
  SessionStep handle_unrouted(const tp::FrameHeader& header);
  SessionStep handle_bye(uint64_t request_id);
  void close();

  ServerCore& server_;
  std::shared_ptr<tp::FrameConnection> connection_;
  SessionContext context_;
  Status last_failure_;
  tp::SessionRole role_ = tp::SessionRole::kCoordinator;
};

void Session::serve() {
  // The pool is idle here (the previous session's close() waited for it), so its totals grow
  // only with this session's work from now on.
  context_.start_counting();
  log_line(fmt::format("session with {} started ({})", context_.peer(), connection_->wire_description()));
  while (!server_.stopping_ && serve_frame() == SessionStep::kContinue) {
  }
  if (server_.stopping_) context_.end("worker stopping");
  close();
  const tp::Stats totals = context_.stats();
  const double cpu = totals.io_cpu_seconds + totals.compute_cpu_seconds;
  const std::string io_share =
      totals.compute_cpu_seconds > 0.0 ? fmt::format(", {:.1f}% io", 100.0 * totals.io_cpu_seconds / cpu) : "";
  log_line(fmt::format("session with {} ended: {} ({} jobs, {} bytes in, {} bytes out in {:.3f} s; CPU io {:.4f} s, "
                       "compute {:.4f} s{})",
                       context_.peer(), context_.end_reason(), totals.jobs, totals.bytes_received,
                       totals.bytes_sent, totals.session_seconds, totals.io_cpu_seconds,
                       totals.compute_cpu_seconds, io_share));
}

bool Session::handshake(const std::function<Status(bool mac_right)>& on_answer) {
  tp::Hello hello;
  hello.worker_version = worker_version();
  hello.arch = server_.facts_.arch;
  hello.hostname = server_.facts_.hostname;
  hello.cores = server_.facts_.cores;
  hello.threads = server_.pool_.threads();
  hello.memory_bytes = server_.facts_.memory_bytes;
  hello.tile_memory_cap = server_.store_.cap_bytes();
  hello.capabilities = server_.services_.capabilities() | tp::kCapabilityTls;
  hello.load_milli = read_load_milli();
  hello.challenge = tp::random_challenge();

  // A deadline on the whole first frame, not an idle bound: a peer trickling a byte at a time
  // must not keep its slot either.
  connection_->set_read_deadline(server_.options_.handshake_timeout);
  // Only a worker hosting a service with peer handlers accepts the peer label at all.
  tp::ServerHandshakeHooks hooks;
  hooks.on_answer = on_answer;
  Result<tp::SessionRole> role = tp::SessionRole::kCoordinator;
  if (server_.services_.takes_peers()) {
    role = tp::server_handshake_any_role(*connection_, hello, server_.options_.secret, server_.options_.wire, hooks);
  } else if (Status status = tp::server_handshake(*connection_, hello, server_.options_.secret, server_.options_.wire,
                                                  hooks);
             !status.is_ok()) {
    role = std::move(status);
  }
  connection_->clear_read_deadline();
  if (!role.is_ok()) {
    last_failure_ = role.status();
    return false;
  }
  role_ = *role;
  // From here on, a read that gets no byte for kFrameStallTimeout ends the session (a coordinator
  // that stopped half-way through a frame). Not the idle timeout: that one only decides when an
  // idle session yields, and a slow link may pause mid-frame for longer than it.
  connection_->set_read_timeout(kFrameStallTimeout);
  return true;
}

bool Session::wait_for_frame() {
  // The coordinator legitimately says nothing while it waits for jobs it queued here, so work in
  // the pool (queued, running, or finished since the last look) counts as activity; a session
  // silent while nothing of it progresses is idle, and ends only when another coordinator asks
  // for the worker (SessionSlot::claim). The wait is sliced so such a request is seen soon.
  uint64_t jobs_seen = server_.pool_.totals().jobs;
  for (;;) {
    if (connection_->wait_readable(kYieldPoll)) {
      server_.slot_.touch();
      return true;
    }
    const uint64_t jobs = server_.pool_.totals().jobs;
    if (jobs != jobs_seen || server_.pool_.busy()) {
      jobs_seen = jobs;
      server_.slot_.touch();
      continue;
    }
    if (server_.slot_.yield_requested() || server_.stopping_) return false;
  }
}

SessionStep Session::serve_frame() {
  if (!wait_for_frame()) {
    if (server_.stopping_) return context_.end("worker stopping");
    return context_.end(fmt::format("idle: no frame from {} for {} or more while no work of it was in progress, "
                                    "and another coordinator asked for the worker",
                                    context_.peer(), seconds_text(server_.options_.idle_timeout)));
  }
  auto header = connection_->read_header();
  if (!header.is_ok()) return context_.read_failed(header.status(), 0);
  const MessageHandler* handler = server_.services_.find(header->type);
  // A long frame (a big STORE on a slow link, a probe) is activity until its handler returns.
  server_.slot_.set_in_frame(true);
  const SessionStep step = handler == nullptr        ? handle_unrouted(*header)
                           : handler->on_stream ? handler->on_stream(context_, *header)
                                                : deliver_decoded(*handler, *header);
  server_.slot_.set_in_frame(false);
  server_.slot_.touch();
  return step;
}

SessionStep Session::deliver_decoded(const MessageHandler& handler, const tp::FrameHeader& header) {
  const uint64_t max_payload =
      handler.max_payload_bytes != nullptr ? handler.max_payload_bytes(context_.limits()) : kMaxControlPayloadBytes;
  if (header.payload_length > max_payload) {
    return context_.fail(tp::ErrorCode::kBadFrame,
                         fmt::format("{} payload of {} bytes exceeds the {}-byte limit for that message",
                                     tp::message_type_name(header.type), header.payload_length, max_payload),
                         header.request_id);
  }
  auto frame = connection_->read_payload(header);
  if (!frame.is_ok()) {
    if (frame.status().code() == StatusCode::kProtocolError) {
      return context_.fail(handler.decode_failure, frame.status().message(), header.request_id);
    }
    return context_.read_failed(frame.status(), header.request_id);
  }
  return handler.on_message(context_, *frame);
}

SessionStep Session::handle_unrouted(const tp::FrameHeader& header) {
  const auto type = static_cast<tp::MessageType>(header.type);
  if (type != tp::MessageType::kBye && type != tp::MessageType::kError) {
    // The payload is never read: nothing here would use it.
    const uint64_t capability = tp::capability_of_message(header.type);
    const std::string missing =
        capability != 0 && (server_.services_.capabilities() & capability) == 0
            ? fmt::format("; {} belongs to the {} service, which this worker does not host",
                          tp::message_type_name(header.type), tp::capability_names(capability))
            : "";
    return context_.fail(tp::ErrorCode::kBadFrame,
                         fmt::format("unexpected {} from the coordinator: no service of this worker handles it "
                                     "(services: {}){}",
                                     tp::message_type_name(header.type), server_.services_.describe(), missing),
                         header.request_id);
  }
  if (header.payload_length > kMaxControlPayloadBytes) {
    return context_.fail(tp::ErrorCode::kBadFrame,
                         fmt::format("{} payload of {} bytes exceeds the {}-byte limit for that message",
                                     tp::message_type_name(header.type), header.payload_length,
                                     kMaxControlPayloadBytes),
                         header.request_id);
  }
  auto frame = connection_->read_payload(header);
  if (!frame.is_ok()) return context_.read_failed(frame.status(), header.request_id);
  if (const auto* error = std::get_if<tp::Error>(&frame->message)) {
    return context_.end(fmt::format("coordinator sent ERROR {}: {}", static_cast<uint32_t>(error->code),
                                    error->message));
  }
  return handle_bye(header.request_id);
}

SessionStep Session::handle_bye(uint64_t request_id) {
  // From here the session is ending: a coordinator that reconnects at once waits for the slot
  // instead of being refused as busy.
  server_.slot_.mark_closing();
  // Queued tasks still send their replies (CREDITs, RESULTs): BYE is an orderly end, not an abort.
  server_.pool_.wait_idle();
  context_.flush_writes();
  (void)connection_->write_message(tp::Bye{}, request_id);
  return context_.end("BYE");
}

void Session::close() {
  server_.slot_.mark_closing();
  server_.pool_.cancel_pending();
  // Shut down first: a completion or the writer blocked writing to a peer that stopped reading
  // then returns.
  connection_->shutdown();
  server_.pool_.wait_idle();
  context_.flush_writes();
  // Services free what they held for the coordinator (a graph run, its peer links) before the
  // next coordinator can claim the slot.
  server_.services_.end_session();
  server_.store_.clear();
}

void Session::serve_peer() {
  // A peer link is quiet for as long as its run has nothing to send (converged, or between sync
  // steps): it ends with its run (the service closes it), not by an idle bound.
  connection_->set_read_timeout(std::chrono::milliseconds(0));
  log_line(fmt::format("peer link from {} opened ({})", context_.peer(), connection_->wire_description()));
  while (!server_.stopping_ && serve_peer_frame() == SessionStep::kContinue) {
  }
  if (server_.stopping_) context_.end("worker stopping");
  connection_->shutdown();
  log_line(fmt::format("peer link from {} closed: {} ({} bytes in)", context_.peer(), context_.end_reason(),
                       connection_->bytes_received()));
}

SessionStep Session::serve_peer_frame() {
  auto header = connection_->read_header();
  if (!header.is_ok()) return context_.read_failed(header.status(), 0);
  const MessageHandler* handler = server_.services_.find_peer(header->type);
  if (handler == nullptr) {
    return context_.fail(tp::ErrorCode::kBadFrame,
                         fmt::format("unexpected {} on a peer link: a peer worker may send only what a service takes "
                                     "from peers (services: {})",
                                     tp::message_type_name(header->type), server_.services_.describe()),
                         header->request_id);
  }
  if (handler->on_stream) return handler->on_stream(context_, *header);
  return deliver_decoded(*handler, *header);
}

}  // namespace

Status WorkerServer::Impl::listen(const std::string& host, uint16_t port) {
  endpoint_ = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                  : fmt::format("{}:{}", host, port);
  std::error_code ec;
  tcp::resolver resolver(io_);
  auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return network_error(fmt::format("cannot listen on {}: cannot resolve host \"{}\": {}", endpoint_, host,
                                     ec ? ec.message() : "no addresses"));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  auto failed = [&](const char* step) {
    return network_error(fmt::format("cannot listen on {}: {}: {}", endpoint_, step, ec.message()));
  };
  if (acceptor_.open(endpoint.protocol(), ec); ec) return failed("socket");
  // Lets a restarted worker bind while connections of its previous run sit in TIME_WAIT.
  if (acceptor_.set_option(tcp::acceptor::reuse_address(true), ec); ec) return failed("SO_REUSEADDR");
  if (acceptor_.bind(endpoint, ec); ec) return failed("bind");
  if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec) return failed("listen");
  port_ = acceptor_.local_endpoint(ec).port();
  if (ec) return failed("getsockname");
  return Status::ok();
}

void WorkerServer::Impl::run() {
  accept_next();
  io_.run();
  join_connections(/*all=*/true);
}

void WorkerServer::Impl::stop() {
  stopping_ = true;
  slot_.stop();
  {
    std::lock_guard lock(connections_mutex_);
    for (auto& entry : connections_) entry.connection->shutdown();
  }
  io_.stop();
}

void WorkerServer::Impl::join_connections(bool all) {
  std::vector<ConnectionThread> finished;
  {
    std::lock_guard lock(connections_mutex_);
    // Stable: connections_ stays in accept order, which eviction relies on to find the oldest.
    const auto running_end = std::stable_partition(connections_.begin(), connections_.end(),
                                            [all](const ConnectionThread& entry) { return !all && !entry.state->finished; });
    std::move(running_end, connections_.end(), std::back_inserter(finished));
    connections_.erase(running_end, connections_.end());
  }
  for (auto& entry : finished) {
    // Taking the whole list may race with stop() walking it, so shut down here as well: a
    // connection thread blocked in a read would otherwise never be joined.
    if (all) entry.connection->shutdown();
    entry.thread.join();
  }
  // `finished` goes out of scope here: the last references to those connections, so their
  // sockets close now.
}

void WorkerServer::Impl::accept_next() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      on_accept_failed(ec);
      return;
    }
    if (accept_failures_ > 0) {
      log_line(fmt::format("accepting on {} again after {} failed attempts", endpoint_, accept_failures_));
    }
    accept_failures_ = 0;
    accept_retry_delay_ = std::chrono::milliseconds(0);
    on_accept(std::move(socket));
    accept_next();
  });
}

void WorkerServer::Impl::on_accept_failed(const std::error_code& ec) {
  // Out of descriptors (EMFILE, ENFILE) or a transient error: give back what finished
  // connections hold, then try again after a pause that grows while the failures go on. The
  // connection that could not be accepted waits in the listen backlog meanwhile.
  join_connections(/*all=*/false);
  accept_retry_delay_ = accept_retry_delay_.count() == 0 ? kAcceptRetryFirst
                                                         : std::min(accept_retry_delay_ * 2, kAcceptRetryLast);
  // One line when the trouble starts, then one each time the pause has reached its longest.
  if (accept_failures_++ == 0 || accept_retry_delay_ == kAcceptRetryLast) {
    std::size_t open = 0;
    {
      std::lock_guard lock(connections_mutex_);
      open = connections_.size();
    }
    log_line(fmt::format("accept on {} failed: {} ({} connections open); retrying in {} ms", endpoint_, ec.message(),
                         open, accept_retry_delay_.count()));
  }
  accept_retry_.expires_after(accept_retry_delay_);
  accept_retry_.async_wait([this](std::error_code wait_ec) {
    if (!wait_ec && !stopping_) accept_next();
  });
}

void WorkerServer::Impl::evict_for(const std::string& source) {
  const auto handshaking = [](const ConnectionThread& entry) {
    return !entry.state->answered && !entry.state->evicted && !entry.state->finished;
  };
  std::size_t total = 0;
  std::size_t from_source = 0;
  ConnectionThread* oldest = nullptr;             // connections_ is in accept order
  ConnectionThread* oldest_from_source = nullptr;
  for (ConnectionThread& entry : connections_) {
    if (!handshaking(entry)) continue;
    ++total;
    if (oldest == nullptr) oldest = &entry;
    if (entry.source == source) {
      ++from_source;
      if (oldest_from_source == nullptr) oldest_from_source = &entry;
    }
  }
  ConnectionThread* victim = nullptr;
  std::string why;
  if (from_source >= std::max<std::size_t>(options_.max_handshaking_per_source, 1)) {
    victim = oldest_from_source;
    why = fmt::format("{} connections from {} were handshaking", from_source, source);
  } else if (total >= std::max<std::size_t>(options_.max_handshaking, 1)) {
    victim = oldest;
    why = fmt::format("{} connections were handshaking", total);
  }
  if (victim == nullptr) return;
  victim->state->evicted = true;
  victim->connection->shutdown();  // its thread's read fails and it ends
  unauthenticated_log_.log(victim->source, "evicted", fmt::format("connection from {} evicted before it authenticated: {}; "
                                                       "the newest connection gets the slot",
                                                       victim->connection->peer(), why));
}

void WorkerServer::Impl::on_accept(tcp::socket socket) {
  std::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // CREDITs are small and latency-bound
  // A coordinator that vanished without a FIN would otherwise hold the session slot forever.
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  auto connection = std::make_shared<tp::FrameConnection>(std::move(socket), options_.limits);

  join_connections(/*all=*/false);
  auto holder = slot_.busy_with();
  // While a service takes peer links (a graph run is loaded), a newcomer may be one of the run's
  // peer workers: it handshakes, and only if it then turns out to be a coordinator is it refused
  // as busy (serve_connection).
  if (holder && services_.takes_peers() && services_.admit_peer().is_ok()) holder.reset();
  // A session idle past the idle timeout yields to a coordinator that authenticates, so the
  // newcomer handshakes (only a holder of the secret can make a session yield).
  if (holder && options_.idle_timeout.count() > 0 && holder->idle >= options_.idle_timeout) holder.reset();
  if (holder) {
    // The peer is part of the text on purpose: `tessera status` shows who holds the worker.
    const std::string refusal = busy_text(*holder, options_.idle_timeout);
    unauthenticated_log_.log(connection->peer_host(), "busy",
                             fmt::format("connection from {} refused: {}", connection->peer(), refusal));
    // A fresh socket's send buffer is empty, so this small write does not block the acceptor.
    connection->write_error(tp::ErrorCode::kBusy, refusal);
    connection->shutdown();
    return;
  }
  auto state = std::make_shared<ConnectionState>();
  std::lock_guard lock(connections_mutex_);
  evict_for(connection->peer_host());
  try {
    connections_.push_back(ConnectionThread{connection, state, connection->peer_host(),
                                            std::thread([this, connection, state] {
                                              serve_connection(connection, state);
                                              state->finished = true;
                                              // Reap at once rather than at the next accept: the
                                              // socket of a peer that left must close now.
                                              asio::post(io_, [this] { join_connections(/*all=*/false); });
                                            })});
  } catch (const std::system_error& e) {
    log_line(fmt::format("connection from {} refused: cannot start its thread: {}", connection->peer(), e.what()));
    connection->write_error(tp::ErrorCode::kBusy, "worker cannot take another connection now");
    connection->shutdown();
    return;
  }
  // stop() sets stopping_ before it walks connections_, so a connection it missed is seen here.
  if (stopping_) connection->shutdown();
}

Status WorkerServer::Impl::answer_arrived(tp::FrameConnection& connection, ConnectionState& state,
                                          const std::string& source, bool mac_right) {
  {
    std::lock_guard lock(connections_mutex_);
    if (state.evicted) {
      return network_error("its connection was closed before its answer was read (too many connections were "
                           "handshaking)");
    }
    state.answered = true;
  }
  using Kind = AuthThrottle::Hold::Kind;
  const auto milliseconds = [](std::chrono::steady_clock::duration span) {
    return static_cast<uint32_t>(std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(span).count(),
                                                      0, INT32_MAX));
  };
  const auto throttled = [&](std::string refusal) {
    unauthenticated_log_.log(source, "throttled", fmt::format("connection from {} refused: {}", connection.peer(), refusal));
    connection.write_error(tp::ErrorCode::kThrottled, refusal);
    return Status(StatusCode::kBusy, std::move(refusal));
  };
  const AuthThrottle::Hold hold = auth_throttle_.hold(source, /*wrong=*/!mac_right, std::chrono::steady_clock::now());
  if (hold.kind == Kind::kNow) return Status::ok();
  // Its MAC was computed, but from here on nothing depends on it until the verdict goes out.
  if (hold.kind == Kind::kRefused) {
    return throttled(fmt::format("{} answers from {} are waiting after failed authentications from that address "
                                 "(someone there is using a wrong secret); this connection's answer was not "
                                 "checked; try again in {:.1f} s",
                                 hold.queued, source, std::chrono::duration<double>(hold.retry_after).count()));
  }
  std::chrono::steady_clock::duration wait = hold.wait;
  if (hold.kind == Kind::kQueued) {
    // In line for a place: the client is told, and told again each second, when to expect its
    // verdict, so that it waits instead of giving up; a client that leaves gives its turn back.
    const auto given_up = std::chrono::steady_clock::now() + kLongestWaitInLine;
    auto next_notice = std::chrono::steady_clock::now();
    std::size_t ahead = hold.ahead;
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (std::optional<std::chrono::steady_clock::duration> started = auth_throttle_.start(source, hold.ticket, now, &ahead)) {
        wait = *started;
        break;
      }
      if (stopping_ || connection.peer_closed() || now >= given_up) {
        auth_throttle_.abandon(source, hold.ticket);
        if (stopping_) return network_error("the worker is stopping");
        if (now >= given_up) return throttled(fmt::format("its answer waited {} s in line for a place after failed "
                                                          "authentications from {}; try again",
                                                          kLongestWaitInLine.count() / 1000, source));
        return network_error("the client left while its answer waited in line");
      }
      if (now >= next_notice) {
        (void)tp::write_held(connection, {milliseconds(hold.wait), static_cast<uint32_t>(ahead)});
        next_notice = now + std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(kLinePoll);
    }
  }
  unauthenticated_log_.log(
      source, "throttled",
      fmt::format("connection from {}: its answer is held {} ms before the verdict: failed authentications from {}",
                  connection.peer(), milliseconds(wait), source));
  (void)tp::write_held(connection, {milliseconds(wait), 0});
  // Sliced so that stop() ends the hold early; nothing else may (the hold is what a guess costs).
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!stopping_ && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(deadline - std::chrono::steady_clock::now(), kYieldPoll));
  }
  auth_throttle_.release(source, /*wrong=*/!mac_right, std::chrono::steady_clock::now());
  if (stopping_) return network_error("the worker is stopping");
  return Status::ok();
}

void WorkerServer::Impl::serve_connection(const std::shared_ptr<tp::FrameConnection>& connection,
                                          const std::shared_ptr<ConnectionState>& state) {
  Session session(*this, connection);
  const std::string source = connection->peer_host();
  // Once its answer has arrived a connection leaves the handshake slots, so no newcomer evicts it
  // while it is held or after AUTH_OK; one evicted before that gets no answer (its dialler tries
  // again). A wrong MAC is counted there too, before its ERROR goes out.
  const auto on_answer = [this, &connection, &state, &source](bool mac_right) {
    return answer_arrived(*connection, *state, source, mac_right);
  };
  const bool authenticated = !stopping_ && session.handshake(on_answer);
  bool evicted = false;
  {
    std::lock_guard lock(connections_mutex_);
    evicted = state->evicted;
  }
  if (!authenticated || evicted) {
    // An evicted connection was logged when it was evicted.
    if (!evicted && !stopping_) {
      const Status& failure = session.last_failure();
      unauthenticated_log_.log(connection->peer_host(),
                               failure.code() == StatusCode::kAuthFailed ? "auth" : "handshake",
                               fmt::format("connection from {} refused: {}", connection->peer(), failure.to_string()));
    }
    connection->shutdown();
    return;
  }
  if (session.role() == tp::SessionRole::kPeer) {
    // Peers never hold the session slot: they serve the coordinator's run beside its session.
    if (Status admitted = services_.admit_peer(); !admitted.is_ok()) {
      log_line(fmt::format("peer link from {} refused: {}", connection->peer(), admitted.message()));
      connection->write_error(tp::ErrorCode::kBadFrame, admitted.message());
      connection->shutdown();
      return;
    }
    session.serve_peer();
    return;
  }
  if (auto holder = slot_.claim(connection->peer(), options_.idle_timeout)) {
    if (!holder->peer.empty()) {
      // Two coordinators authenticated at the same moment (the first one keeps the worker), or
      // the session was asked to yield but did not end within kClaimWait.
      const std::string refusal = busy_text(*holder, options_.idle_timeout);
      log_line(fmt::format("connection from {} refused: {}", connection->peer(), refusal));
      connection->write_error(tp::ErrorCode::kBusy, refusal);
    }
    connection->shutdown();
    return;
  }
  session.serve();
  slot_.release();
}

WorkerServer::WorkerServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorkerServer::~WorkerServer() = default;

Result<std::unique_ptr<WorkerServer>> WorkerServer::start(const WorkerOptions& options) {
  return start(options, default_services());
}

Result<std::unique_ptr<WorkerServer>> WorkerServer::start(const WorkerOptions& options, std::vector<Service> services) {
  if (options.secret.empty()) {
    return invalid_argument("the shared secret is empty; give the worker the coordinator's secret");
  }
  Result<ServiceTable> table = ServiceTable::build(std::move(services));
  if (!table) return table.status();
  const NodeFacts facts = read_node_facts();
  WorkerOptions resolved = options;
  if (resolved.threads == 0) resolved.threads = facts.cores;
  if (resolved.tile_memory_cap == 0) resolved.tile_memory_cap = facts.memory_bytes / 2;
  auto impl = std::make_unique<Impl>(resolved, facts, std::move(*table));
  TESSERA_RETURN_IF_ERROR(impl->listen(options.listen_host, options.port));
  return std::unique_ptr<WorkerServer>(new WorkerServer(std::move(impl)));
}

uint16_t WorkerServer::port() const { return impl_->port_; }
const ServiceTable& WorkerServer::services() const { return impl_->services_; }
void WorkerServer::run() { impl_->run(); }
void WorkerServer::stop() { impl_->stop(); }

}  // namespace tessera::worker
