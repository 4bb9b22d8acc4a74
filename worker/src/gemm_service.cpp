// CPU accounting of the service's work, GEMM and ADD_SCALED jobs alike (reported in STATS; see
// ServiceContext::stats()):
//  - io: the connection thread's CPU time (socket reads, frame decoding, job validation, tile
//    bookkeeping), except a GEMM probe's operand setup and loop, which is compute; plus the CPU
//    time job completions spend encoding and writing CREDIT/RESULT on a pool thread, measured
//    around those writes and declared with ComputePool::count_as_io.
//  - compute: the pool threads' CPU time in GEMM and sum strips and in the rest of each completion
//    (releasing tiles), plus the probe setup above.
// Both come from per-thread CPU clocks (CLOCK_THREAD_CPUTIME_ID), so time spent blocked on the
// network or waiting for work counts as neither.
#include "tessera/worker/gemm_service.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <array>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <asio.hpp>
#include <fmt/core.h>

#include "tessera/gemm/forward_codec.hpp"
#include "tessera/gemm/wire_io.hpp"
#include "tessera/worker/thread_cpu.hpp"

#include "chain_forwarding.hpp"
#include "gemm_probe.hpp"

#ifdef TESSERA_FAULT_HOOKS
#include <signal.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "tessera/worker/fault_hooks.hpp"
#endif

namespace tessera::worker {

namespace tp = tessera::transport;

#ifdef TESSERA_FAULT_HOOKS
namespace {
FaultHooks g_fault_hooks;
std::atomic<bool> g_result_fault_used{false};
std::atomic<uint64_t> g_stores_received{0};
}  // namespace

void set_fault_hooks(const FaultHooks& hooks) { g_fault_hooks = hooks; }
const FaultHooks& fault_hooks() { return g_fault_hooks; }
#endif

namespace {

// Sends a RESULT of tile `tile_id` whose values are `data` (rows x cols): the CRC pass reads the
// memory the gathered write sends right after, so the check value is of the bytes as sent.
void write_result(tp::FrameConnection& connection, const gemm::Job& job, uint32_t tile_id, uint32_t rows, uint32_t cols,
                  double compute_seconds, std::span<const double> data, uint64_t request_id) {
  const gemm::TilePrefix prefix{tile_id, rows, cols, gemm::tile_crc32c(data)};
  const auto result_prefix = gemm::encode_result_prefix(job.job_id, compute_seconds, prefix);
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(tp::MessageType::kResult);
  header.request_id = request_id;
#ifdef TESSERA_FAULT_HOOKS
  const FaultHooks& hooks = fault_hooks();
  const std::optional<uint64_t> cut_after = hooks.die_after_result_bytes ? hooks.die_after_result_bytes
                                                                         : hooks.stop_after_result_bytes;
  if ((cut_after || hooks.corrupt_first_result) && !g_result_fault_used.exchange(true)) {
    std::vector<double> sent(data.begin(), data.end());
    if (hooks.corrupt_first_result) {
      std::byte& victim = reinterpret_cast<std::byte*>(sent.data())[data.size_bytes() / 2];
      victim ^= std::byte{0x10};
    }
    std::size_t data_bytes = data.size_bytes();
    if (cut_after) data_bytes = static_cast<std::size_t>(std::min<uint64_t>(*cut_after, data_bytes));
    header.payload_length = gemm::result_payload_bytes(prefix);
    const auto header_bytes = tp::encode_header(header);
    const std::array<asio::const_buffer, 3> parts{asio::buffer(header_bytes), asio::buffer(result_prefix),
                                                  asio::buffer(sent.data(), data_bytes)};
    (void)connection.write_buffers(parts);
    if (hooks.die_after_result_bytes) ::raise(SIGKILL);
    if (hooks.stop_after_result_bytes) {
      ::raise(SIGSTOP);
      // Continued: the RESULT is cut short for good, so the connection cannot carry more frames.
      connection.shutdown();
    }
    return;
  }
#endif
  const std::array<asio::const_buffer, 2> parts{asio::buffer(result_prefix), asio::buffer(data.data(), data.size_bytes())};
  (void)connection.write_frame(header, parts);
}

// The largest RESULT sent from a copy on the writer thread. Copying a larger tile (fresh pages,
// then the memcpy) costs its compute thread about what writing it does, so a multiply's large
// blocks of C gain nothing from a copy (scripts/bench-two-workers.sh measures it). The expression
// DAG's tiles (256..1024 square: 0.5..8 MB) travel while the next job runs.
constexpr std::size_t kLargestCopiedResult = std::size_t{8} << 20;

// [first, first + count) lies inside [0, extent).
bool inside(uint32_t first, uint32_t count, uint32_t extent) {
  return static_cast<uint64_t>(first) + count <= extent;
}

// A job's tiles, held from the moment the JOB is accepted until its completion has run, so a
// STORE replacing or a RELEASE dropping one of the ids meanwhile cannot free memory in use.
struct JobTiles {
  std::shared_ptr<Tile> a;
  std::shared_ptr<Tile> b;
  std::shared_ptr<Tile> c;
};

// The bookkeeping after an accepted JOB's computation, on the pool thread that finished it:
// charges the time to C, releases what the flags say, counts the job, then sends the CREDIT (and
// RESULT). The session outlives it: it waits for the pool to go idle before it ends.
void complete_job(ServiceContext& context, const gemm::Job& job, uint64_t request_id, JobTiles& tiles,
                  double seconds) {
  tiles.c->add_compute_seconds(seconds);
  TileStore& store = context.store();
  if ((job.flags & gemm::kJobReleaseA) != 0) store.release_if_same(job.a_tile, tiles.a.get());
  if ((job.flags & gemm::kJobReleaseB) != 0) store.release_if_same(job.b_tile, tiles.b.get());
  // Drop our references before the CREDIT: the coordinator may answer it with a STORE that
  // needs the released memory under the cap.
  tiles.a.reset();
  tiles.b.reset();
  context.count_finished_job();
  // Copying C and writing are communication even though they run on a pool thread: their CPU
  // time moves to io.
  const double write_cpu_start = thread_cpu_seconds();
  tp::FrameConnection& connection = context.connection();
#ifdef TESSERA_FAULT_HOOKS
  if (const std::optional<uint32_t> delay = fault_hooks().delay_credits_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(*delay));
  }
#endif
  const Tile& c = *tiles.c;
  const bool send_result = (job.flags & gemm::kJobSendResult) != 0;
  // The CREDIT and RESULT go out on the session's writer thread, the RESULT from a copy of C
  // (charged to the store's cap) so that a later job may write C while it travels. A failed write
  // means the peer is gone; the session's reader notices and ends the session.
  std::shared_ptr<Tile> copy;
  if (send_result && c.bytes() <= kLargestCopiedResult) {
    Result<std::shared_ptr<Tile>> scratch = context.store().allocate_scratch(c.rows(), c.cols(), /*zero_fill=*/false);
    if (scratch) {
      copy = std::move(*scratch);
      std::memcpy(copy->data(), c.data(), c.bytes());
    }
  }
  if (!send_result || copy) {
    context.write_later([&connection, job, request_id, seconds, copy, id = c.id(), rows = c.rows(), cols = c.cols(),
                         compute_seconds = c.compute_seconds()] {
      (void)gemm::write_message(connection, gemm::Credit{job.job_id, 1, seconds}, request_id);
      if (copy) write_result(connection, job, id, rows, cols, compute_seconds, {copy->data(), copy->size()}, request_id);
    });
  } else {
    // A large tile, or no memory for a copy: what is queued goes first, then this job's replies
    // from C itself.
    context.flush_writes();
    (void)gemm::write_message(connection, gemm::Credit{job.job_id, 1, seconds}, request_id);
    write_result(connection, job, c.id(), c.rows(), c.cols(), c.compute_seconds(), {c.data(), c.size()}, request_id);
  }
  ComputePool::count_as_io(thread_cpu_seconds() - write_cpu_start);
}

// One accepted JOB on the compute pool: its arithmetic in row strips (Strips: GemmRowStrips for
// GEMM_ACCUMULATE, AddScaledRowStrips for ADD_SCALED), then complete_job. complete() runs before
// the next job starts and copies C for its RESULT.
template <typename Strips, typename Task>
class TileJob final : public Strips {
 public:
  TileJob(const Task& task, ServiceContext& context, const gemm::Job& job, uint64_t request_id, JobTiles tiles)
      : Strips(task), context_(context), job_(job), request_id_(request_id), tiles_(std::move(tiles)) {}
  void complete(double seconds) override { complete_job(context_, job_, request_id_, tiles_, seconds); }

 private:
  ServiceContext& context_;
  gemm::Job job_;
  uint64_t request_id_;
  JobTiles tiles_;
};
using GemmJob = TileJob<GemmRowStrips, GemmTask>;
using AddScaledJob = TileJob<AddScaledRowStrips, AddScaledTask>;

// Where a STORE comes from. The coordinator's JOBs follow its STOREs on the same connection, so
// its tile may be listed while it fills; a peer's arrives beside the coordinator's frames, so it
// is listed only once whole (a JOB must never find half a tile under its id).
enum class StoreSource { kCoordinator, kPeer };

// Reads a STORE into the store: the tile, or null with the session's answer to the failure in
// `failed`. A tile the chain forwards goes on to the next node chunk by chunk as it arrives.
std::shared_ptr<Tile> receive_store(ServiceContext& context, const tp::FrameHeader& header, ChainForwarding& forwarding,
                                    StoreSource source, HandlerStep& failed) {
  // The prefix is read on its own so the matrix data can go straight into tile memory.
  if (header.payload_length < gemm::kTilePrefixSize) {
    failed = context.fail(tp::ErrorCode::kBadFrame,
                          fmt::format("STORE payload of {} bytes is shorter than its {}-byte tile prefix",
                                      header.payload_length, gemm::kTilePrefixSize),
                          header.request_id);
    return nullptr;
  }
  tp::FrameConnection& connection = context.connection();
  std::array<std::byte, gemm::kTilePrefixSize> prefix_bytes{};
  const Status prefix_read = connection.read_exact(prefix_bytes);
  if (!prefix_read.is_ok()) {
    failed = context.read_failed(prefix_read, header.request_id);
    return nullptr;
  }
  auto prefix = gemm::decode_store_prefix(prefix_bytes, header.payload_length, gemm::limits_for(context.limits()));
  if (!prefix.is_ok()) {
    failed = context.fail(tp::ErrorCode::kBadFrame, prefix.status().message(), header.request_id);
    return nullptr;
  }

  const bool from_peer = source == StoreSource::kPeer;
  auto tile = from_peer ? context.store().reserve_unlisted(prefix->tile_id, prefix->rows, prefix->cols)
                        : context.store().reserve(prefix->tile_id, prefix->rows, prefix->cols, /*zero_fill=*/false);
  if (!tile.is_ok()) {
    const bool over_cap = tile.status().code() == StatusCode::kResourceExhausted;
    failed = context.fail(over_cap ? tp::ErrorCode::kOutOfMemory : tp::ErrorCode::kBadFrame,
                          "STORE " + tile.status().message(), header.request_id);
    return nullptr;
  }
  // The tile's memory was charged to the cap before it was allocated, and its pages fill as the
  // data arrives (it is not zero-filled), so a STORE that claims more than it sends holds
  // address space within the cap, not memory.
  const std::shared_ptr<ChainForwarding::Incoming> forwarded = forwarding.begin_tile(*tile, prefix->data_crc32c);
  const Result<uint32_t> crc = connection.read_checksummed((*tile)->raw_bytes(), [&](std::size_t bytes) {
    if (forwarded) forwarding.arrived(*forwarded, bytes);
  });
  if (forwarded) forwarding.finish_tile(*forwarded, crc.is_ok() && *crc == prefix->data_crc32c);
  if (!crc.is_ok()) {
    context.store().release_if_same(prefix->tile_id, tile->get());
    failed = context.read_failed(crc.status(), header.request_id);
    return nullptr;
  }
  if (*crc != prefix->data_crc32c) {
    // Never keep damaged data under the id: a JOB naming it would compute with it.
    context.store().release_if_same(prefix->tile_id, tile->get());
    failed = context.fail(tp::ErrorCode::kCorrupt, gemm::tile_crc_mismatch("STORE", *prefix, *crc).message(),
                          header.request_id);
    return nullptr;
  }
  if (from_peer) context.store().publish(*tile);
  return std::move(tile).value();
}

HandlerStep handle_store(ServiceContext& context, const tp::FrameHeader& header, ChainForwarding& forwarding) {
  HandlerStep failed = HandlerStep::kEnd;
  const std::shared_ptr<Tile> tile = receive_store(context, header, forwarding, StoreSource::kCoordinator, failed);
  if (tile == nullptr) return failed;
  // Keeping is best-effort: a worker without a store files the tile and keeps nothing.
  if ((header.flags & gemm::kStoreKeep) != 0 && context.blocks() != nullptr) context.blocks()->keep(tile);
#ifdef TESSERA_FAULT_HOOKS
  if (const auto limit = fault_hooks().close_after_stores; limit && ++g_stores_received >= *limit) {
    context.connection().shutdown();
    return context.end("fault hook: closing the connection after " + std::to_string(*limit) + " STOREs");
  }
#endif
  return HandlerStep::kContinue;
}

// The session's answer to a payload that could not be read: a malformed one is a BAD_FRAME ERROR,
// a broken or timed-out connection ends the session as any failed read does.
HandlerStep refuse_unreadable(ServiceContext& context, const Status& problem, uint64_t request_id) {
  return problem.code() == StatusCode::kProtocolError ? context.fail(tp::ErrorCode::kBadFrame, problem.message(), request_id)
                                                      : context.read_failed(problem, request_id);
}

// FORWARD_SETUP read and decoded; anything else under that type ends the session.
std::optional<gemm::ForwardSetup> read_forward_setup(ServiceContext& context, const tp::FrameHeader& header,
                                                   HandlerStep& failed) {
  Result<gemm::ForwardMessage> message = gemm::read_forward_payload(context.connection(), header);
  if (!message) {
    failed = refuse_unreadable(context, message.status(), header.request_id);
    return std::nullopt;
  }
  return std::get<gemm::ForwardSetup>(std::move(*message));
}

// How long FORWARD_SETUP waits for the next node's link: a handshake on a LAN takes milliseconds;
// a node that has not answered by then is left out of the chain (the coordinator feeds it).
constexpr std::chrono::milliseconds kNextNodeTimeout{5000};

HandlerStep handle_forward_setup(ServiceContext& context, const tp::FrameHeader& header, ChainForwarding& forwarding) {
  HandlerStep failed = HandlerStep::kEnd;
  const std::optional<gemm::ForwardSetup> setup = read_forward_setup(context, header, failed);
  if (!setup) return failed;
  const gemm::ForwardReady ready = forwarding.setup(context, *setup, kNextNodeTimeout);
  const Status written = gemm::write_forward_message(context.connection(), ready, header.request_id);
  if (!written.is_ok()) return context.read_failed(written, header.request_id);
  return HandlerStep::kContinue;
}

// A peer link's first frame names the run its STOREs belong to (kept as the session's state).
HandlerStep handle_peer_forward_setup(ServiceContext& context, const tp::FrameHeader& header,
                                      const ChainForwarding& forwarding) {
  HandlerStep failed = HandlerStep::kEnd;
  const std::optional<gemm::ForwardSetup> setup = read_forward_setup(context, header, failed);
  if (!setup) return failed;
  if (context.service_state().has_value()) {
    return context.fail(tp::ErrorCode::kBadFrame, "a second FORWARD_SETUP on one peer link", header.request_id);
  }
  if (!setup->next_host.empty()) {
    return context.fail(tp::ErrorCode::kBadFrame, "a peer link's FORWARD_SETUP names no next node", header.request_id);
  }
  if (const Status accepted = forwarding.accept_peer(setup->run_token); !accepted.is_ok()) {
    return context.fail(tp::ErrorCode::kBadFrame, accepted.message(), header.request_id);
  }
  context.service_state() = setup->run_token;
  const Status written =
      gemm::write_forward_message(context.connection(), gemm::ForwardReady{setup->run_token, true, ""}, header.request_id);
  if (!written.is_ok()) return context.read_failed(written, header.request_id);
  return HandlerStep::kContinue;
}

HandlerStep handle_peer_store(ServiceContext& context, const tp::FrameHeader& header, ChainForwarding& forwarding) {
  const uint64_t* run_token = std::any_cast<uint64_t>(&context.service_state());
  if (run_token == nullptr) {
    return context.fail(tp::ErrorCode::kBadFrame, "STORE on a peer link before its FORWARD_SETUP", header.request_id);
  }
  if (const Status current = forwarding.accept_peer(*run_token); !current.is_ok()) {
    return context.fail(tp::ErrorCode::kBadFrame, current.message(), header.request_id);
  }
  HandlerStep failed = HandlerStep::kEnd;
  const std::shared_ptr<Tile> tile = receive_store(context, header, forwarding, StoreSource::kPeer, failed);
  if (tile == nullptr) return failed;
  if (const Status filed = forwarding.stored_by_peer(*run_token, tile); !filed.is_ok()) {
    context.store().release_if_same(tile->id(), tile.get());
    return context.fail(tp::ErrorCode::kBadFrame, filed.message(), header.request_id);
  }
  return HandlerStep::kContinue;
}

// A SEND_TILE in the compute pool's order: tasks run one at a time in submission order, so its
// completion comes after every job sent before it, and the tile then holds their result.
class SendAfterJobs final : public PoolTask {
 public:
  SendAfterJobs(ChainForwarding& forwarding, gemm::SendTile send, std::shared_ptr<Tile> tile)
      : forwarding_(forwarding), send_(std::move(send)), tile_(std::move(tile)) {}
  std::size_t part_count(std::size_t) const override { return 1; }
  void run_part(std::size_t, std::size_t) override {}
  void complete(double) override { forwarding_.send_to_peer(send_.run_token, std::move(tile_), send_.host, send_.port); }

 private:
  ChainForwarding& forwarding_;
  gemm::SendTile send_;
  std::shared_ptr<Tile> tile_;
};

HandlerStep handle_send_tile(ServiceContext& context, const tp::FrameHeader& header, ChainForwarding& forwarding) {
  Result<gemm::ForwardMessage> message = gemm::read_forward_payload(context.connection(), header);
  if (!message) {
    return refuse_unreadable(context, message.status(), header.request_id);
  }
  gemm::SendTile send = std::get<gemm::SendTile>(std::move(*message));
  // The tile is in the store now if it is ever to be: a JOB creating it, or its STORE, came first.
  std::shared_ptr<Tile> tile = context.store().find(send.tile_id);
  if (!tile) {
    return context.fail(tp::ErrorCode::kNoSuchTile, fmt::format("SEND_TILE: tile {} is not stored", send.tile_id),
                        header.request_id);
  }
  context.pool().submit(std::make_unique<SendAfterJobs>(forwarding, std::move(send), std::move(tile)));
  return HandlerStep::kContinue;
}

HandlerStep handle_job(ServiceContext& context, const gemm::Job& job, uint64_t request_id) {
  auto bad = [&](tp::ErrorCode code, const std::string& why) {
    return context.fail(code, fmt::format("job {}: {}", job.job_id, why), request_id);
  };
  const bool add_scaled = job.op == gemm::JobOp::kAddScaled;
  const bool transpose_a = (job.flags & gemm::kJobTransposeA) != 0;
  const bool transpose_b = (job.flags & gemm::kJobTransposeB) != 0;
  if (job.op != gemm::JobOp::kGemmAccumulate && !add_scaled) {
    return bad(tp::ErrorCode::kBadJob, fmt::format("unknown op {}", static_cast<uint32_t>(job.op)));
  }
  if ((job.flags & ~gemm::kJobKnownFlags) != 0) {
    return bad(tp::ErrorCode::kBadJob, fmt::format("unknown flag bits {:#x}", job.flags & ~gemm::kJobKnownFlags));
  }
  if (add_scaled) {
    if (job.m == 0 || job.n == 0 || job.k != 0) {
      return bad(tp::ErrorCode::kBadJob,
                 fmt::format("ADD_SCALED needs m, n >= 1 and k = 0 (got {} x {}, k {})", job.m, job.n, job.k));
    }
    if (transpose_b) return bad(tp::ErrorCode::kBadJob, "ADD_SCALED takes no transpose_b flag (B holds its scalar)");
  } else if (job.m == 0 || job.n == 0 || job.k == 0) {
    return bad(tp::ErrorCode::kBadJob,
               fmt::format("m, n and k must be >= 1 (got {} x {} x {})", job.m, job.n, job.k));
  }
  if (job.c_tile == job.a_tile || job.c_tile == job.b_tile) {
    // The row strips would read what other strips are writing.
    return bad(tp::ErrorCode::kBadJob, fmt::format("c_tile {} must differ from a_tile {} and b_tile {}",
                                                   job.c_tile, job.a_tile, job.b_tile));
  }
  TileStore& store = context.store();
  JobTiles tiles{store.find(job.a_tile), store.find(job.b_tile), nullptr};
  if (!tiles.a) return bad(tp::ErrorCode::kNoSuchTile, fmt::format("a_tile {} is not stored", job.a_tile));
  if (!tiles.b) return bad(tp::ErrorCode::kNoSuchTile, fmt::format("b_tile {} is not stored", job.b_tile));
  // op(A) is m x k for a product, m x n (C's shape) for a scaled sum; A's block as stored is its
  // transpose when the job reads A^T. Likewise B's block is k x n, or n x k for B^T.
  const uint32_t a_inner = add_scaled ? job.n : job.k;
  const uint32_t a_rows = transpose_a ? a_inner : job.m;
  const uint32_t a_cols = transpose_a ? job.m : a_inner;
  if (!inside(job.a_row, a_rows, tiles.a->rows()) || !inside(job.a_col, a_cols, tiles.a->cols())) {
    return bad(tp::ErrorCode::kBadJob,
               fmt::format("A rows {}+{}, cols {}+{}{} lie outside a_tile {} ({} x {})", job.a_row, a_rows,
                           job.a_col, a_cols, transpose_a ? " (read transposed)" : "", job.a_tile,
                           tiles.a->rows(), tiles.a->cols()));
  }
  if (add_scaled) {
    if (!inside(job.b_row, 1, tiles.b->rows()) || !inside(job.b_col, 1, tiles.b->cols())) {
      return bad(tp::ErrorCode::kBadJob, fmt::format("scalar at row {}, col {} lies outside b_tile {} ({} x {})",
                                                     job.b_row, job.b_col, job.b_tile, tiles.b->rows(),
                                                     tiles.b->cols()));
    }
  } else {
    const uint32_t b_rows = transpose_b ? job.n : job.k;
    const uint32_t b_cols = transpose_b ? job.k : job.n;
    if (!inside(job.b_row, b_rows, tiles.b->rows()) || !inside(job.b_col, b_cols, tiles.b->cols())) {
      return bad(tp::ErrorCode::kBadJob,
                 fmt::format("B rows {}+{}, cols {}+{}{} lie outside b_tile {} ({} x {})", job.b_row, b_rows,
                             job.b_col, b_cols, transpose_b ? " (read transposed)" : "", job.b_tile,
                             tiles.b->rows(), tiles.b->cols()));
    }
  }
  const bool create = (job.flags & gemm::kJobCreateOutput) != 0;
  const uint32_t c_rows = create ? job.c_rows : 0;
  const uint32_t c_cols = create ? job.c_cols : 0;
  if (create) {
    const uint32_t max_dim = gemm::limits_for(context.limits()).max_tile_dim;
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
  // A job that creates its output and covers all of it writes C = A * B (or C = s * A): no
  // zero-fill first (a zero-fill here would run on the connection thread and touch every page
  // twice).
  const bool overwrite = create && job.c_row == 0 && job.c_col == 0 && job.m == c_rows && job.n == c_cols;
  if (create) {
    auto created = store.reserve(job.c_tile, c_rows, c_cols, /*zero_fill=*/!overwrite);
    if (!created.is_ok()) return bad(tp::ErrorCode::kOutOfMemory, created.status().message());
    tiles.c = std::move(created).value();
  }

  const std::size_t lda = tiles.a->cols();
  const double* a = tiles.a->data() + static_cast<std::size_t>(job.a_row) * lda + job.a_col;
  const std::size_t ldc = tiles.c->cols();
  double* c = tiles.c->data() + static_cast<std::size_t>(job.c_row) * ldc + job.c_col;
  if (add_scaled) {
    AddScaledTask task;
    task.overwrite = overwrite;
    task.transpose_a = transpose_a;
    task.m = job.m;
    task.n = job.n;
    task.scale = tiles.b->data() + static_cast<std::size_t>(job.b_row) * tiles.b->cols() + job.b_col;
    task.a = a;
    task.lda = lda;
    task.c = c;
    task.ldc = ldc;
    context.pool().submit(std::make_unique<AddScaledJob>(task, context, job, request_id, std::move(tiles)));
    return HandlerStep::kContinue;
  }
  GemmTask task;
  task.overwrite = overwrite;
  task.transpose_a = transpose_a;
  task.transpose_b = transpose_b;
  task.m = job.m;
  task.n = job.n;
  task.k = job.k;
  task.lda = lda;
  task.a = a;
  task.ldb = tiles.b->cols();
  task.b = tiles.b->data() + static_cast<std::size_t>(job.b_row) * task.ldb + job.b_col;
  task.ldc = ldc;
  task.c = c;
  context.pool().submit(std::make_unique<GemmJob>(task, context, job, request_id, std::move(tiles)));
  return HandlerStep::kContinue;
}

HandlerStep handle_release(ServiceContext& context, const gemm::Release& release, uint64_t) {
  // Releasing an id that is not stored is harmless: the goal (it is gone) already holds.
  for (uint32_t id : release.tile_ids) context.store().release(id);
  return HandlerStep::kContinue;
}

HandlerStep handle_stats_request(ServiceContext& context, const gemm::StatsRequest&, uint64_t request_id) {
  const Status written = gemm::write_message(context.connection(), context.stats(), request_id);
  if (!written.is_ok()) return context.read_failed(written, request_id);
  return HandlerStep::kContinue;
}

// A block store message read and decoded, of the type the handler takes; null with the session's
// answer in `failed` otherwise (also for a worker without a store, which does not offer them).
template <typename Message>
std::optional<Message> read_block_request(ServiceContext& context, const tp::FrameHeader& header, HandlerStep& failed) {
  if (context.blocks() == nullptr) {
    failed = context.fail(tp::ErrorCode::kBadFrame,
                          tp::message_type_name(header.type) + ": this worker has no block store (start it with --store DIR)",
                          header.request_id);
    return std::nullopt;
  }
  Result<gemm::BlockMessage> message = gemm::read_block_payload(context.connection(), header);
  if (!message) {
    failed = refuse_unreadable(context, message.status(), header.request_id);
    return std::nullopt;
  }
  if (!std::holds_alternative<Message>(*message)) {
    failed = context.fail(tp::ErrorCode::kBadFrame,
                          tp::message_type_name(header.type) + " is an answer, not a request", header.request_id);
    return std::nullopt;
  }
  return std::get<Message>(std::move(*message));
}

HandlerStep handle_block_query(ServiceContext& context, const tp::FrameHeader& header) {
  HandlerStep failed = HandlerStep::kEnd;
  const std::optional<gemm::BlockQuery> query = read_block_request<gemm::BlockQuery>(context, header, failed);
  if (!query) return failed;
  gemm::BlockHeld held;
  held.held.reserve(query->keys.size());
  for (const tp::BlockKey& key : query->keys) held.held.push_back(context.blocks()->holds(key));
  const Status written = gemm::write_block_message(context.connection(), held, header.request_id);
  if (!written.is_ok()) return context.read_failed(written, header.request_id);
  return HandlerStep::kContinue;
}

// Each block is charged to the tile memory cap before its file is read (past the cap: ERROR
// OUT_OF_MEMORY, as for a STORE), read into the tile and checked; one that does not load leaves
// its id empty.
HandlerStep handle_block_load(ServiceContext& context, const tp::FrameHeader& header) {
  HandlerStep failed = HandlerStep::kEnd;
  const std::optional<gemm::BlockLoad> load = read_block_request<gemm::BlockLoad>(context, header, failed);
  if (!load) return failed;
  gemm::BlockLoaded loaded;
  loaded.loaded.reserve(load->blocks.size());
  for (const gemm::BlockToLoad& block : load->blocks) {
    if (!context.blocks()->holds(block.key)) {
      loaded.loaded.push_back(false);
      continue;
    }
    auto tile = context.store().reserve(block.tile_id, block.rows, block.cols, /*zero_fill=*/false);
    if (!tile.is_ok()) {
      const bool over_cap = tile.status().code() == StatusCode::kResourceExhausted;
      return context.fail(over_cap ? tp::ErrorCode::kOutOfMemory : tp::ErrorCode::kBadFrame,
                          "BLOCK_LOAD " + tile.status().message(), header.request_id);
    }
    const bool filed = context.blocks()->load_into(block.key, block.rows, block.cols, (*tile)->values());
    if (!filed) context.store().release_if_same(block.tile_id, tile->get());
    loaded.loaded.push_back(filed);
  }
  const Status written = gemm::write_block_message(context.connection(), loaded, header.request_id);
  if (!written.is_ok()) return context.read_failed(written, header.request_id);
  return HandlerStep::kContinue;
}

// A handler of a message read whole and decoded by the GEMM codec; a payload the codec refuses is
// answered with `refusal` (kBadJob for a JOB whose op, flags or extents are wrong).
template <typename Message>
MessageHandler decoded(tp::MessageType type, HandlerStep (*handle)(ServiceContext&, const Message&, uint64_t),
                       tp::ErrorCode refusal = tp::ErrorCode::kBadFrame) {
  MessageHandler handler;
  handler.type = type;
  handler.on_message = [handle, refusal](ServiceContext& context, const tp::FrameHeader& header,
                                         std::span<const std::byte> payload) {
    Result<gemm::GemmMessage> message = gemm::decode_gemm_payload(header.type, payload, gemm::limits_for(context.limits()));
    if (!message) return context.fail(refusal, message.status().message(), header.request_id);
    return handle(context, std::get<Message>(*message), header.request_id);
  };
  handler.check_length = [](uint16_t frame_type, uint64_t length, const tp::Limits& limits) {
    return gemm::check_gemm_payload_length(frame_type, length, gemm::limits_for(limits));
  };
  return handler;
}

// A handler that reads its frame itself and shares the service's chain forwarding.
template <typename Handle>
MessageHandler with_forwarding(tp::MessageType type, const std::shared_ptr<ChainForwarding>& forwarding, Handle handle) {
  MessageHandler handler;
  handler.type = type;
  handler.on_stream = [forwarding, handle](ServiceContext& context, const tp::FrameHeader& header) {
    return handle(context, header, *forwarding);
  };
  return handler;
}

}  // namespace

Service gemm_service() {
  Service service;
  service.name = "gemm";
  // JOB's ADD_SCALED op is what kCapabilityExpression promises; it shares STORE and the job queue.
  // kCapabilityTransposedJobs promises JOB's transpose flags, on both ops; kCapabilityForward the
  // chain's FORWARD_SETUP and the peer links that carry B's pieces.
  // kCapabilityTileSend: SEND_TILE, a stored tile sent to another worker over a peer link.
  service.capability = tp::kCapabilityGemm | tp::kCapabilityExpression | tp::kCapabilityTransposedJobs |
                       tp::kCapabilityForward | tp::kCapabilityTileSend;
  const auto forwarding = std::make_shared<ChainForwarding>();
  MessageHandler store = with_forwarding(tp::MessageType::kStore, forwarding, handle_store);
  MessageHandler forward_setup = with_forwarding(tp::MessageType::kForwardSetup, forwarding, handle_forward_setup);
  MessageHandler send_tile = with_forwarding(tp::MessageType::kSendTile, forwarding, handle_send_tile);

  // The codec already checks a JOB's op, flags and extents; those failures are bad jobs.
  MessageHandler job = decoded(tp::MessageType::kJob, handle_job, tp::ErrorCode::kBadJob);

  MessageHandler release = decoded(tp::MessageType::kRelease, handle_release);
  release.max_payload_bytes = [](const tp::Limits& limits) {
    return gemm::release_payload_bytes(gemm::limits_for(limits).max_release_tiles);
  };

  MessageHandler probe;
  probe.type = tp::MessageType::kProbe;
  probe.on_stream = handle_probe;

  MessageHandler stats = decoded(tp::MessageType::kStatsRequest, handle_stats_request);

  // Hosted always; offered in HELLO (kCapabilityBlockStore) only by a worker with a store.
  MessageHandler block_query;
  block_query.type = tp::MessageType::kBlockQuery;
  block_query.on_stream = handle_block_query;
  MessageHandler block_load;
  block_load.type = tp::MessageType::kBlockLoad;
  block_load.on_stream = handle_block_load;

  service.handlers = {std::move(probe), std::move(store),         std::move(job),           std::move(release),
                      std::move(stats), std::move(forward_setup), std::move(send_tile),
                      std::move(block_query),  std::move(block_load)};

  service.peer_handlers = {with_forwarding(tp::MessageType::kForwardSetup, forwarding, handle_peer_forward_setup),
                           with_forwarding(tp::MessageType::kStore, forwarding, handle_peer_store)};
  service.admit_peer = [forwarding] { return forwarding->admit_peer(); };
  service.on_session_end = [forwarding] { forwarding->end_session(); };
  return service;
}

}  // namespace tessera::worker
