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
#include "connection_handler.hpp"
#include "server_core.hpp"
#include "worker_log.hpp"
#ifdef TESSERA_FAULT_HOOKS
#include "tessera/worker/fault_hooks.hpp"
#include "tessera/gemm/wire_io.hpp"
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
// How long an answer may wait in line for a held place (AuthThrottle) before it is refused: the
// line is bounded so that it moves through in under half a minute, so this is only reached when
// places free more slowly than they should. How often it looks whether its turn has come.
constexpr auto kLongestWaitInLine = std::chrono::seconds(45);
constexpr auto kLinePoll = std::chrono::milliseconds(20);

}  // namespace

struct WorkerServer::Impl : ServerCore {
  Impl(const WorkerOptions& options, const NodeFacts& facts, ServiceTable services, std::unique_ptr<BlockKeeper> blocks)
      : ServerCore(options, facts, std::move(services), std::move(blocks)), acceptor_(io_) {}

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
  ConnectionHandler session(*this, connection);
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
  std::unique_ptr<BlockKeeper> blocks;
  if (!resolved.store_dir.empty()) {
    if (resolved.store_bytes == 0) resolved.store_bytes = uint64_t{8} << 30;
    Result<std::unique_ptr<BlockStore>> store =
        BlockStore::open(BlockStoreOptions{0, resolved.store_dir, resolved.store_bytes, resolved.secret});
    if (!store) return store.status();
    const BlockStoreStats found = (*store)->stats();
    log_line(fmt::format("block store {}: {} bytes of blocks found, bound {} bytes", (*store)->folder().string(),
                         found.disk_bytes, resolved.store_bytes));
    blocks = std::make_unique<BlockKeeper>(std::move(*store), [](const std::string& note) { log_line(note); });
  }
  auto impl = std::make_unique<Impl>(resolved, facts, std::move(*table), std::move(blocks));
  TESSERA_RETURN_IF_ERROR(impl->listen(options.listen_host, options.port));
  return std::unique_ptr<WorkerServer>(new WorkerServer(std::move(impl)));
}

uint16_t WorkerServer::port() const { return impl_->port_; }
const ServiceTable& WorkerServer::services() const { return impl_->services_; }
uint64_t WorkerServer::capabilities() const { return impl_->capabilities(); }
void WorkerServer::run() { impl_->run(); }
void WorkerServer::stop() { impl_->stop(); }

}  // namespace tessera::worker
