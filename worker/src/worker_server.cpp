#include "tessera/worker/worker_server.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <asio.hpp>
#include <fmt/core.h>

#include "tessera/transport/auth.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/compute_pool.hpp"
#include "tessera/worker/thread_cpu.hpp"
#include "tessera/worker/tile_store.hpp"

namespace tessera::worker {

namespace tp = tessera::transport;
using asio::ip::tcp;

namespace {

// An unauthenticated peer must not hold the single session slot by saying nothing.
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// Pause before accepting again after accept() itself fails (e.g. out of file descriptors), so
// the acceptor does not spin.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
// Control frames (JOB is 72 bytes, ERROR at most ~4 KiB) are read whole into memory; this bound
// keeps a peer from making us allocate a huge buffer for one of them.
constexpr uint64_t kMaxControlPayload = 64 * 1024;
// PROBE: u8 kind | pad[3] | u32 size | f64 min_seconds | u32 echo_length, then the echo.
constexpr uint64_t kProbeFixedBytes = 20;
// Connections allowed to be handshaking at once; more get ERROR(kBusy). Each costs a thread for
// at most kHandshakeTimeout.
constexpr std::size_t kMaxConnections = 16;

// [first, first + count) lies inside [0, extent).
bool inside(uint32_t first, uint32_t count, uint32_t extent) {
  return static_cast<uint64_t>(first) + count <= extent;
}

void log_line(const std::string& line) {
  fmt::print(stderr, "tessera-worker: {}\n", line);
  std::fflush(stderr);
}

// A job's tiles, held from the moment the JOB is accepted until its completion has run, so a
// STORE replacing or a RELEASE dropping one of the ids meanwhile cannot free memory in use.
struct JobTiles {
  std::shared_ptr<Tile> a;
  std::shared_ptr<Tile> b;
  std::shared_ptr<Tile> c;
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

std::string worker_version() { return TESSERA_VERSION; }

namespace {

// The one coordinator session the worker serves at a time. Connections handshake concurrently
// (so a port check or a stalled peer cannot lock the real coordinator out), and only an
// authenticated connection claims the slot. Thread-safe.
class SessionSlot {
 public:
  // The peer an authenticated, still-running session belongs to, if any.
  std::optional<std::string> busy_with() const {
    std::lock_guard lock(mutex_);
    if (active_ && !closing_) return peer_;
    return std::nullopt;
  }

  // Claims the slot for `peer`; waits out a session that has hung up and is only cleaning up (a
  // coordinator reconnecting right after an ERROR should not be refused). Returns the peer of
  // the session that holds the slot when it cannot be claimed, or "" if the worker is stopping.
  std::optional<std::string> claim(const std::string& peer) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return stopping_ || !(active_ && closing_); });
    if (stopping_) return std::string();
    if (active_) return peer_;
    active_ = true;
    closing_ = false;
    peer_ = peer;
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
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool active_ = false;
  bool closing_ = false;
  bool stopping_ = false;
  std::string peer_;
};

// What a session needs from the server; Impl adds the acceptor and the connection threads.
struct ServerCore {
  ServerCore(const WorkerOptions& options, const NodeFacts& facts)
      : options_(options), facts_(facts), store_(options.tile_memory_cap), pool_(options.threads) {}

  WorkerOptions options_;  // threads and tile_memory_cap already resolved
  NodeFacts facts_;
  asio::io_context io_;
  TileStore store_;
  ComputePool pool_;
  SessionSlot slot_;
  std::atomic<bool> stopping_{false};
};

}  // namespace

struct WorkerServer::Impl : ServerCore {
  Impl(const WorkerOptions& options, const NodeFacts& facts) : ServerCore(options, facts), acceptor_(io_) {}

  ~Impl() {
    stop();
    join_connections(/*all=*/true);
  }

  Status listen(const std::string& host, uint16_t port);
  void run();
  void stop();

  void accept_next();
  void on_accept(tcp::socket socket);
  void serve_connection(const std::shared_ptr<tp::FrameConnection>& connection);
  // Joins connection threads that have finished (all of them when `all`).
  void join_connections(bool all);

  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_{io_};
  uint16_t port_ = 0;
  std::string endpoint_;  // "host:port" for messages

  struct ConnectionThread {
    std::shared_ptr<tp::FrameConnection> connection;
    std::shared_ptr<std::atomic<bool>> finished;
    std::thread thread;
  };
  std::mutex connections_mutex_;
  std::vector<ConnectionThread> connections_;
};

namespace {

// One coordinator connection: handshake, then (holding the session slot) frames until BYE, an
// error, or the peer leaves. Runs on its connection thread; job completions run on pool threads
// and only write frames.
//
// CPU accounting (reported in STATS, counted from the start of serve()):
//  - io: all CPU time of the connection thread (socket reads and writes, frame decoding, job
//    validation, tile bookkeeping), except a GEMM probe's operand setup and loop, which is
//    compute; plus the CPU time job completions spend encoding and writing CREDIT/RESULT on a pool
//    thread, measured around those writes and declared with ComputePool::count_as_io.
//  - compute: the pool threads' CPU time in GEMM strips and in the rest of each completion
//    (releasing tiles), plus the probe setup above.
// Both come from per-thread CPU clocks (CLOCK_THREAD_CPUTIME_ID), so time spent blocked on the
// network or waiting for work counts as neither.
class Session {
 public:
  Session(ServerCore& server, std::shared_ptr<tp::FrameConnection> connection)
      : server_(server), connection_(std::move(connection)), peer_(connection_->peer()) {}

  // Sends HELLO and checks the coordinator's AUTH; false (logged) if it fails or times out.
  bool handshake();
  // REQUIRES: handshake() succeeded and the session slot is ours. Returns when the session ended
  // and the pool and store are clean again.
  void serve();

 private:
  // Each handler returns false when the session must end.
  bool serve_frame();
  bool handle_store(const tp::FrameHeader& header);
  bool handle_job(const tp::Job& job, uint64_t request_id);
  bool handle_probe(tp::Probe& probe, uint64_t request_id);
  bool handle_bye(uint64_t request_id);
  bool handle_stats(uint64_t request_id);
  // The session's figures so far. REQUIRES: called on the connection thread.
  tp::Stats stats() const;
  // Ends the session because of a network failure or a protocol error noticed while reading.
  bool read_failed(const Status& status, uint64_t request_id);
  // Logs, sends ERROR, ends the session.
  bool fail(tp::ErrorCode code, const std::string& message, uint64_t request_id);
  void finish_job(const tp::Job& job, uint64_t request_id, double seconds, JobTiles& tiles);
  void close();

  ServerCore& server_;
  std::shared_ptr<tp::FrameConnection> connection_;
  std::string peer_;
  std::string end_reason_ = "peer closed the connection";
  // Figures at the start of serve(); STATS reports the growth since.
  std::chrono::steady_clock::time_point started_;
  double connection_cpu_start_ = 0.0;
  ComputePool::Totals pool_start_;
  uint64_t bytes_received_start_ = 0;
  uint64_t bytes_sent_start_ = 0;
  // Connection-thread CPU time that was compute (GEMM probes); only the connection thread touches it.
  double connection_compute_cpu_ = 0.0;
  std::atomic<uint64_t> jobs_finished_{0};  // counted by completions before their CREDIT
};

void Session::serve() {
  // The pool is idle here (the previous session's close() waited for it), so its totals grow
  // only with this session's work from now on.
  started_ = std::chrono::steady_clock::now();
  connection_cpu_start_ = thread_cpu_seconds();
  pool_start_ = server_.pool_.totals();
  bytes_received_start_ = connection_->bytes_received();
  bytes_sent_start_ = connection_->bytes_sent();
  log_line(fmt::format("session with {} started", peer_));
  while (!server_.stopping_ && serve_frame()) {
  }
  if (server_.stopping_) end_reason_ = "worker stopping";
  close();
  const tp::Stats totals = stats();
  const double cpu = totals.io_cpu_seconds + totals.compute_cpu_seconds;
  const std::string io_share =
      totals.compute_cpu_seconds > 0.0 ? fmt::format(", {:.1f}% io", 100.0 * totals.io_cpu_seconds / cpu) : "";
  log_line(fmt::format("session with {} ended: {} ({} jobs, {} bytes in, {} bytes out in {:.3f} s; CPU io {:.4f} s, "
                       "compute {:.4f} s{})",
                       peer_, end_reason_, totals.jobs, totals.bytes_received, totals.bytes_sent,
                       totals.session_seconds, totals.io_cpu_seconds, totals.compute_cpu_seconds, io_share));
}

tp::Stats Session::stats() const {
  const ComputePool::Totals pool = server_.pool_.totals();
  tp::Stats out;
  out.session_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const double connection_cpu = thread_cpu_seconds() - connection_cpu_start_;
  out.io_cpu_seconds = std::max(connection_cpu - connection_compute_cpu_, 0.0) +
                       (pool.io_cpu_seconds - pool_start_.io_cpu_seconds);
  out.compute_cpu_seconds =
      connection_compute_cpu_ + (pool.compute_cpu_seconds - pool_start_.compute_cpu_seconds);
  out.compute_wall_seconds = pool.wall_seconds - pool_start_.wall_seconds;
  out.jobs = jobs_finished_.load();
  out.bytes_received = connection_->bytes_received() - bytes_received_start_;
  out.bytes_sent = connection_->bytes_sent() - bytes_sent_start_;
  // The codec refuses negative values; clamping keeps a clock oddity from making the reply undecodable.
  for (double* value : {&out.session_seconds, &out.io_cpu_seconds, &out.compute_cpu_seconds,
                        &out.compute_wall_seconds}) {
    *value = std::max(*value, 0.0);
  }
  return out;
}

bool Session::handle_stats(uint64_t request_id) {
  const Status written = connection_->write_message(stats(), request_id);
  if (!written.is_ok()) return read_failed(written, request_id);
  return true;
}

bool Session::handshake() {
  tp::Hello hello;
  hello.worker_version = worker_version();
  hello.arch = server_.facts_.arch;
  hello.hostname = server_.facts_.hostname;
  hello.cores = server_.facts_.cores;
  hello.threads = server_.pool_.threads();
  hello.memory_bytes = server_.facts_.memory_bytes;
  hello.tile_memory_cap = server_.store_.cap_bytes();
  hello.challenge = tp::random_challenge();

  // The watchdog lives on the acceptor's io_context; every touch of the timer is posted there so
  // it is only ever used from that thread.
  auto timer = std::make_shared<asio::steady_timer>(server_.io_);
  asio::post(server_.io_, [timer, connection = connection_] {
    timer->expires_after(kHandshakeTimeout);
    timer->async_wait([connection](std::error_code ec) {
      if (!ec) connection->shutdown();
    });
  });
  const Status status = tp::server_handshake(*connection_, hello, server_.options_.secret);
  asio::post(server_.io_, [timer] { timer->cancel(); });
  if (!status.is_ok()) {
    log_line(fmt::format("connection from {} refused: {}", peer_, status.to_string()));
    return false;
  }
  return true;
}

bool Session::serve_frame() {
  auto header = connection_->read_header();
  if (!header.is_ok()) return read_failed(header.status(), 0);
  const uint64_t request_id = header->request_id;
  const auto type = static_cast<tp::MessageType>(header->type);
  if (type == tp::MessageType::kStore) return handle_store(*header);

  const tp::Limits& limits = connection_->limits();
  uint64_t max_payload = kMaxControlPayload;
  if (type == tp::MessageType::kProbe) max_payload = kProbeFixedBytes + limits.max_echo_bytes;
  if (type == tp::MessageType::kRelease) max_payload = 4 + 4ull * limits.max_release_tiles;
  if (header->payload_length > max_payload) {
    return fail(tp::ErrorCode::kBadFrame,
                fmt::format("{} payload of {} bytes exceeds the {}-byte limit for that message",
                            tp::message_type_name(header->type), header->payload_length, max_payload),
                request_id);
  }
  auto frame = connection_->read_payload(*header);
  if (!frame.is_ok()) {
    // The codec already checks a JOB's op, flags and extents; those failures are bad jobs.
    if (type == tp::MessageType::kJob && frame.status().code() == StatusCode::kProtocolError) {
      return fail(tp::ErrorCode::kBadJob, frame.status().message(), request_id);
    }
    return read_failed(frame.status(), request_id);
  }

  tp::Message& message = frame->message;
  if (auto* job = std::get_if<tp::Job>(&message)) return handle_job(*job, request_id);
  if (auto* probe = std::get_if<tp::Probe>(&message)) return handle_probe(*probe, request_id);
  if (auto* release = std::get_if<tp::Release>(&message)) {
    // Releasing an id that is not stored is harmless: the goal (it is gone) already holds.
    for (uint32_t id : release->tile_ids) server_.store_.release(id);
    return true;
  }
  if (std::holds_alternative<tp::Bye>(message)) return handle_bye(request_id);
  if (std::holds_alternative<tp::StatsRequest>(message)) return handle_stats(request_id);
  if (auto* error = std::get_if<tp::Error>(&message)) {
    end_reason_ = fmt::format("coordinator sent ERROR {}: {}", static_cast<uint32_t>(error->code),
                              error->message);
    return false;
  }
  return fail(tp::ErrorCode::kBadFrame,
              fmt::format("unexpected {} from the coordinator", tp::message_type_name(header->type)),
              request_id);
}

bool Session::read_failed(const Status& status, uint64_t request_id) {
  if (status.code() == StatusCode::kNetworkError) {
    end_reason_ = status.message();
    return false;
  }
  if (status.code() == StatusCode::kResourceExhausted) {
    return fail(tp::ErrorCode::kOutOfMemory, status.message(), request_id);
  }
  return fail(tp::ErrorCode::kBadFrame, status.message(), request_id);
}

bool Session::fail(tp::ErrorCode code, const std::string& message, uint64_t request_id) {
  log_line(fmt::format("session with {}: sending ERROR {}: {}", peer_, static_cast<uint32_t>(code), message));
  connection_->write_error(code, message, request_id);
  end_reason_ = "error: " + message;
  return false;
}

bool Session::handle_store(const tp::FrameHeader& header) {
  // The prefix is read on its own so the matrix data can go straight into tile memory.
  if (header.payload_length < tp::kTilePrefixSize) {
    return fail(tp::ErrorCode::kBadFrame,
                fmt::format("STORE payload of {} bytes is shorter than its {}-byte tile prefix",
                            header.payload_length, tp::kTilePrefixSize),
                header.request_id);
  }
  std::array<std::byte, tp::kTilePrefixSize> prefix_bytes{};
  const Status prefix_read = connection_->read_exact(prefix_bytes);
  if (!prefix_read.is_ok()) return read_failed(prefix_read, header.request_id);
  auto prefix = tp::decode_store_prefix(prefix_bytes, header.payload_length, connection_->limits());
  if (!prefix.is_ok()) return fail(tp::ErrorCode::kBadFrame, prefix.status().message(), header.request_id);

  auto tile = server_.store_.reserve(prefix->tile_id, prefix->rows, prefix->cols, /*zero_fill=*/false);
  if (!tile.is_ok()) {
    const bool over_cap = tile.status().code() == StatusCode::kResourceExhausted;
    return fail(over_cap ? tp::ErrorCode::kOutOfMemory : tp::ErrorCode::kBadFrame,
                "STORE " + tile.status().message(), header.request_id);
  }
  const Status data_read = connection_->read_exact((*tile)->raw_bytes());
  if (!data_read.is_ok()) return read_failed(data_read, header.request_id);
  return true;
}

bool Session::handle_job(const tp::Job& job, uint64_t request_id) {
  auto bad = [&](tp::ErrorCode code, const std::string& why) {
    return fail(code, fmt::format("job {}: {}", job.job_id, why), request_id);
  };
  if (job.op != tp::JobOp::kGemmAccumulate) {
    return bad(tp::ErrorCode::kBadJob, fmt::format("unknown op {}", static_cast<uint32_t>(job.op)));
  }
  if ((job.flags & ~tp::kJobKnownFlags) != 0) {
    return bad(tp::ErrorCode::kBadJob, fmt::format("unknown flag bits {:#x}", job.flags & ~tp::kJobKnownFlags));
  }
  if (job.m == 0 || job.n == 0 || job.k == 0) {
    return bad(tp::ErrorCode::kBadJob,
               fmt::format("m, n and k must be >= 1 (got {} x {} x {})", job.m, job.n, job.k));
  }
  if (job.c_tile == job.a_tile || job.c_tile == job.b_tile) {
    // The row strips would read what other strips are writing.
    return bad(tp::ErrorCode::kBadJob, fmt::format("c_tile {} must differ from a_tile {} and b_tile {}",
                                                   job.c_tile, job.a_tile, job.b_tile));
  }
  TileStore& store = server_.store_;
  JobTiles tiles{store.find(job.a_tile), store.find(job.b_tile), nullptr};
  if (!tiles.a) return bad(tp::ErrorCode::kNoSuchTile, fmt::format("a_tile {} is not stored", job.a_tile));
  if (!tiles.b) return bad(tp::ErrorCode::kNoSuchTile, fmt::format("b_tile {} is not stored", job.b_tile));
  if (!inside(job.a_row, job.m, tiles.a->rows()) || !inside(job.a_col, job.k, tiles.a->cols())) {
    return bad(tp::ErrorCode::kBadJob,
               fmt::format("A rows {}+{}, cols {}+{} lie outside a_tile {} ({} x {})", job.a_row, job.m,
                           job.a_col, job.k, job.a_tile, tiles.a->rows(), tiles.a->cols()));
  }
  if (!inside(job.b_row, job.k, tiles.b->rows()) || !inside(job.b_col, job.n, tiles.b->cols())) {
    return bad(tp::ErrorCode::kBadJob,
               fmt::format("B rows {}+{}, cols {}+{} lie outside b_tile {} ({} x {})", job.b_row, job.k,
                           job.b_col, job.n, job.b_tile, tiles.b->rows(), tiles.b->cols()));
  }
  const bool create = (job.flags & tp::kJobCreateOutput) != 0;
  const uint32_t c_rows = create ? job.c_rows : 0;
  const uint32_t c_cols = create ? job.c_cols : 0;
  if (create) {
    const uint32_t max_dim = connection_->limits().max_tile_dim;
    if (c_rows == 0 || c_cols == 0 || c_rows > max_dim || c_cols > max_dim) {
      return bad(tp::ErrorCode::kBadJob, fmt::format("output tile {} x {} must have dimensions in 1..{}",
                                                     c_rows, c_cols, max_dim));
    }
  } else {
    tiles.c = store.find(job.c_tile);
    if (!tiles.c) return bad(tp::ErrorCode::kNoSuchTile, fmt::format("c_tile {} is not stored", job.c_tile));
  }
  const uint32_t c_extent_rows = create ? c_rows : tiles.c->rows();
  const uint32_t c_extent_cols = create ? c_cols : tiles.c->cols();
  if (!inside(job.c_row, job.m, c_extent_rows) || !inside(job.c_col, job.n, c_extent_cols)) {
    return bad(tp::ErrorCode::kBadJob,
               fmt::format("C rows {}+{}, cols {}+{} lie outside c_tile {} ({} x {})", job.c_row, job.m,
                           job.c_col, job.n, job.c_tile, c_extent_rows, c_extent_cols));
  }
  // A job that creates its output and covers all of it writes C = A * B: no zero-fill first
  // (a zero-fill here would run on the connection thread and touch every page twice).
  const bool overwrite = create && job.c_row == 0 && job.c_col == 0 && job.m == c_rows && job.n == c_cols;
  if (create) {
    auto created = store.reserve(job.c_tile, c_rows, c_cols, /*zero_fill=*/!overwrite);
    if (!created.is_ok()) return bad(tp::ErrorCode::kOutOfMemory, created.status().message());
    tiles.c = std::move(created).value();
  }

  GemmTask task;
  task.overwrite = overwrite;
  task.m = job.m;
  task.n = job.n;
  task.k = job.k;
  task.lda = tiles.a->cols();
  task.a = tiles.a->data() + static_cast<std::size_t>(job.a_row) * task.lda + job.a_col;
  task.ldb = tiles.b->cols();
  task.b = tiles.b->data() + static_cast<std::size_t>(job.b_row) * task.ldb + job.b_col;
  task.ldc = tiles.c->cols();
  task.c = tiles.c->data() + static_cast<std::size_t>(job.c_row) * task.ldc + job.c_col;
  server_.pool_.submit(task, [this, job, request_id, tiles = std::move(tiles)](double seconds) mutable {
    finish_job(job, request_id, seconds, tiles);
  });
  return true;
}

// Runs on a pool thread, before the next job starts (so C is stable while RESULT sends it).
void Session::finish_job(const tp::Job& job, uint64_t request_id, double seconds, JobTiles& tiles) {
  tiles.c->add_compute_seconds(seconds);
  TileStore& store = server_.store_;
  if ((job.flags & tp::kJobReleaseA) != 0) store.release_if_same(job.a_tile, tiles.a.get());
  if ((job.flags & tp::kJobReleaseB) != 0) store.release_if_same(job.b_tile, tiles.b.get());
  // Drop our references before the CREDIT: the coordinator may answer it with a STORE that needs
  // the released memory under the cap.
  tiles.a.reset();
  tiles.b.reset();
  // Counted before the CREDIT goes out, so a STATS_REQUEST sent after reading it includes the job.
  jobs_finished_.fetch_add(1);
  // Writing is communication even though it runs on a pool thread: its CPU time moves to io.
  const double write_cpu_start = thread_cpu_seconds();
  // A failed write means the peer is gone; the session's reader notices and ends the session.
  (void)connection_->write_message(tp::Credit{job.job_id, 1, seconds}, request_id);
  if ((job.flags & tp::kJobSendResult) != 0) {
    const tp::TilePrefix prefix{tiles.c->id(), tiles.c->rows(), tiles.c->cols()};
    const auto result_prefix = tp::encode_result_prefix(job.job_id, tiles.c->compute_seconds(), prefix);
    const std::array<asio::const_buffer, 2> parts{asio::buffer(result_prefix),
                                                  asio::buffer(tiles.c->data(), tiles.c->bytes())};
    tp::FrameHeader header;
    header.type = static_cast<uint16_t>(tp::MessageType::kResult);
    header.request_id = request_id;
    (void)connection_->write_frame(header, parts);
  }
  ComputePool::count_as_io(thread_cpu_seconds() - write_cpu_start);
}

bool Session::handle_probe(tp::Probe& probe, uint64_t request_id) {
  tp::ProbeResult result;
  result.kind = probe.kind;
  if (probe.kind == tp::ProbeKind::kEcho) {
    result.echo = std::move(probe.echo);
    const Status written = connection_->write_message(result, request_id);
    if (!written.is_ok()) return read_failed(written, request_id);
    return true;
  }
  const uint32_t size = probe.size;
  if (size == 0) return fail(tp::ErrorCode::kBadFrame, "GEMM probe of size 0", request_id);
  // Setting up and driving the probe is compute work, although this thread does it.
  const double probe_cpu_start = thread_cpu_seconds();
  TileStore& store = server_.store_;
  auto a = store.allocate_scratch(size, size);
  auto b = a.is_ok() ? store.allocate_scratch(size, size) : a;
  auto c = b.is_ok() ? store.allocate_scratch(size, size) : b;
  if (!c.is_ok()) {
    return fail(tp::ErrorCode::kOutOfMemory,
                fmt::format("GEMM probe of size {}: {}", size, c.status().message()), request_id);
  }
  // Values keep the accumulating C far from overflow and away from denormals, which run slowly.
  std::fill_n((*a)->data(), (*a)->size(), 0.5);
  std::fill_n((*b)->data(), (*b)->size(), 0.25);
  GemmTask task{size, size, size, (*a)->data(), size, (*b)->data(), size, (*c)->data(), size};
  uint32_t repetitions = 0;
  double seconds = 0.0;
  // Wall time over the whole loop, not the sum of job times: under a CPU quota the process is
  // often throttled between two jobs, and a sum of job times would hide exactly the slowness
  // the probe exists to measure (a quarter core measured 0.3-0.5 of a core that way).
  // Untimed warm-up of one CPU-quota period: a node that idled before the probe has a full
  // quota slice banked, and spending it inside the timed window measured a quarter core up to
  // 20% fast. The warm-up also brings the operands into cache.
  constexpr double kWarmUpSeconds = 0.1;
  const auto warm_up_start = std::chrono::steady_clock::now();
  while (!server_.stopping_ &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_up_start).count() < kWarmUpSeconds) {
    (void)server_.pool_.run(task);
  }
  const auto probe_start = std::chrono::steady_clock::now();
  do {
    (void)server_.pool_.run(task);
    ++repetitions;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - probe_start).count();
  } while (seconds < probe.min_seconds && !server_.stopping_ &&
           repetitions < std::numeric_limits<uint32_t>::max());
  result.size = size;
  result.repetitions = repetitions;
  result.seconds = seconds;
  const double flops = 2.0 * size * static_cast<double>(size) * size * repetitions;
  result.gflops = seconds > 0.0 ? flops / seconds / 1e9 : 0.0;
  connection_compute_cpu_ += std::max(thread_cpu_seconds() - probe_cpu_start, 0.0);
  log_line(fmt::format("session with {}: GEMM probe {} x {}: {} reps in {:.3f} s, {:.2f} GFLOP/s", peer_,
                       size, size, repetitions, seconds, result.gflops));
  const Status written = connection_->write_message(result, request_id);
  if (!written.is_ok()) return read_failed(written, request_id);
  return true;
}

bool Session::handle_bye(uint64_t request_id) {
  // From here the session is ending: a coordinator that reconnects at once waits for the slot
  // instead of being refused as busy.
  server_.slot_.mark_closing();
  // Queued jobs still send their CREDITs and RESULTs: BYE is an orderly end, not an abort.
  server_.pool_.wait_idle();
  (void)connection_->write_message(tp::Bye{}, request_id);
  end_reason_ = "BYE";
  return false;
}

void Session::close() {
  server_.slot_.mark_closing();
  server_.pool_.cancel_pending();
  // Shut down first: a completion blocked writing to a peer that stopped reading then returns.
  connection_->shutdown();
  server_.pool_.wait_idle();
  server_.store_.clear();
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
    const auto running_end = std::partition(connections_.begin(), connections_.end(),
                                            [all](const ConnectionThread& entry) { return !all && !*entry.finished; });
    std::move(running_end, connections_.end(), std::back_inserter(finished));
    connections_.erase(running_end, connections_.end());
  }
  for (auto& entry : finished) {
    // Taking the whole list may race with stop() walking it, so shut down here as well: a
    // connection thread blocked in a read would otherwise never be joined.
    if (all) entry.connection->shutdown();
    entry.thread.join();
  }
}

void WorkerServer::Impl::accept_next() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      log_line(fmt::format("accept on {} failed: {}; retrying", endpoint_, ec.message()));
      accept_retry_.expires_after(kAcceptRetryDelay);
      accept_retry_.async_wait([this](std::error_code wait_ec) {
        if (!wait_ec) accept_next();
      });
      return;
    }
    on_accept(std::move(socket));
    accept_next();
  });
}

void WorkerServer::Impl::on_accept(tcp::socket socket) {
  std::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // CREDITs are small and latency-bound
  // A coordinator that vanished without a FIN would otherwise hold the session slot forever.
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  auto connection = std::make_shared<tp::FrameConnection>(std::move(socket), options_.limits);

  join_connections(/*all=*/false);
  std::optional<std::string> refusal;
  if (auto active_peer = slot_.busy_with()) {
    refusal = "worker busy with a session from " + *active_peer;
  } else {
    std::lock_guard lock(connections_mutex_);
    if (connections_.size() >= kMaxConnections) {
      refusal = fmt::format("worker busy: {} connections are already handshaking", connections_.size());
    }
  }
  if (refusal) {
    log_line(fmt::format("connection from {} refused: {}", connection->peer(), *refusal));
    // A fresh socket's send buffer is empty, so this small write does not block the acceptor.
    connection->write_error(tp::ErrorCode::kBusy, *refusal);
    connection->shutdown();
    return;
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lock(connections_mutex_);
  connections_.push_back(ConnectionThread{connection, finished, std::thread([this, connection, finished] {
                                            serve_connection(connection);
                                            *finished = true;
                                          })});
  // stop() sets stopping_ before it walks connections_, so a connection it missed is seen here.
  if (stopping_) connection->shutdown();
}

void WorkerServer::Impl::serve_connection(const std::shared_ptr<tp::FrameConnection>& connection) {
  Session session(*this, connection);
  if (stopping_ || !session.handshake()) {
    connection->shutdown();
    return;
  }
  if (auto holder = slot_.claim(connection->peer())) {
    if (!holder->empty()) {
      // Two coordinators authenticated at the same moment; the first one keeps the worker.
      log_line(fmt::format("connection from {} refused: busy with a session from {}", connection->peer(), *holder));
      connection->write_error(tp::ErrorCode::kBusy, "worker busy with a session from " + *holder);
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
  if (options.secret.empty()) {
    return invalid_argument("the shared secret is empty; give the worker the coordinator's secret");
  }
  const NodeFacts facts = read_node_facts();
  WorkerOptions resolved = options;
  if (resolved.threads == 0) resolved.threads = facts.cores;
  if (resolved.tile_memory_cap == 0) resolved.tile_memory_cap = facts.memory_bytes / 2;
  auto impl = std::make_unique<Impl>(resolved, facts);
  TESSERA_RETURN_IF_ERROR(impl->listen(options.listen_host, options.port));
  return std::unique_ptr<WorkerServer>(new WorkerServer(std::move(impl)));
}

uint16_t WorkerServer::port() const { return impl_->port_; }
void WorkerServer::run() { impl_->run(); }
void WorkerServer::stop() { impl_->stop(); }

}  // namespace tessera::worker
