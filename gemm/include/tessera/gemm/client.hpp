// GemmClient: the coordinator's one client of a worker's GEMM service, over one authenticated
// connection. The multiply, the expression DAG runner and the profiler's probes send every STORE,
// JOB, RELEASE, PROBE, STATS_REQUEST and forwarding message through it and read every CREDIT,
// RESULT, PROBE_RESULT, STATS and forwarding answer through it, so no frame of the GEMM service is
// built anywhere else on the coordinator. It also keeps what the node owes: the jobs sent whose
// CREDIT has not come back, and the results asked for that have not arrived, which is what a
// credit window and a silent-node deadline are made of.
//
// Ownership: it uses the caller's connection (which must outlive it) and owns nothing else; tile
// data is sent straight from the caller's memory and RESULTs are read straight into it.
// Thread-safety: the sending methods may be called from any thread (the connection serialises
// whole frames); the reading methods from one thread at a time; the counters from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <variant>

#include "tessera/core/status.hpp"
#include "tessera/gemm/block_codec.hpp"
#include "tessera/gemm/codec.hpp"
#include "tessera/gemm/forward_codec.hpp"
#include "tessera/transport/frame_connection.hpp"

namespace tessera::gemm {

// A STORE encoded once, to be written to several nodes from the same buffers (B's pieces): the
// frame header and the tile prefix, and the data where it lies.
struct EncodedStore {
  std::array<std::byte, transport::kHeaderSize> header{};
  std::array<std::byte, kTilePrefixSize> prefix{};
  std::span<const double> data;
  uint64_t bytes() const { return data.size_bytes(); }
};
// A random token naming one forwarding run on the workers (ForwardSetup::run_token).
uint64_t new_forward_token();

// The STORE of `data` (rows x cols doubles, row-major) under `tile_id`; its CRC is computed here.
EncodedStore encode_store(uint32_t tile_id, uint32_t rows, uint32_t cols, std::span<const double> data);

class GemmClient {
 public:
  // A RESULT's prefix as next() returns it; its data is read with read_result().
  struct ResultHeader {
    uint64_t job_id = 0;
    double compute_seconds = 0.0;
    TilePrefix tile;
    uint64_t bytes() const { return uint64_t{tile.rows} * tile.cols * sizeof(double); }
  };
  // What came from the worker.
  using Reply = std::variant<Credit, ResultHeader, ForwardMessage, Stats, ProbeResult>;

  explicit GemmClient(transport::FrameConnection& connection);
  GemmClient(const GemmClient&) = delete;
  GemmClient& operator=(const GemmClient&) = delete;

  transport::FrameConnection& connection() const { return connection_; }

  // --- Tiles (any thread) ---
  // A STORE of rows x cols doubles from `data` (contiguous, row-major) under `tile_id`. `crc`: the
  // data's CRC32C when the caller knows it already (a tile it sent before), else computed here.
  Status store(uint32_t tile_id, uint32_t rows, uint32_t cols, const double* data,
               std::optional<uint32_t> crc = std::nullopt);
  // A STORE of a block whose rows lie `row_stride` doubles apart in the caller's memory (a block
  // of a larger matrix), each row gathered into the write: nothing is copied. `crc` is the block's
  // CRC32C, row after row (the caller computes it once for all the nodes it sends the block to).
  // `keep`: ask the worker to keep it in its block store too (kStoreKeep; kCapabilityBlockStore).
  Status store_rows(uint32_t tile_id, uint32_t rows, uint32_t cols, const double* first_row, std::size_t row_stride,
                    uint32_t crc, bool keep = false);
  // A STORE encoded once (encode_store), written from its buffers.
  Status store(const EncodedStore& tile);
  // RELEASE of `tile_ids`, in as many frames as the limit on ids per frame needs; none for none.
  Status release(std::span<const uint32_t> tile_ids);

  // --- The block store (kCapabilityBlockStore; one thread, nothing else owed) ---
  // Which of `keys` the worker holds, one flag each, in as many BLOCK_QUERYs as the bound on
  // keys per message needs.
  Result<std::vector<bool>> query_blocks(std::span<const transport::BlockKey> keys);
  // Files the blocks the worker holds as tiles (BLOCK_LOAD), one flag each: true filed under its
  // tile id, false not held there (to be STOREd). The worker's ERROR (out of tile memory) is the
  // failure.
  Result<std::vector<bool>> load_blocks(std::span<const BlockToLoad> blocks);
  // load_blocks in two halves, so that a caller can ask for the next blocks while the worker loads
  // the first: BLOCK_LOADs written, and their answers read (`count` flags, the blocks of the
  // send_block_load calls since the last read, in order).
  Status send_block_load(std::span<const BlockToLoad> blocks);
  Result<std::vector<bool>> read_blocks_loaded(std::size_t count);

  // --- Jobs (any thread) ---
  // A JOB, with its job id as the frame's request id. It is owed until its CREDIT comes back, and
  // with kJobSendResult its RESULT too.
  Status job(const Job& job);

  // --- Other requests (any thread) ---
  // STATS_REQUEST; its STATS is read with next() (a chain member may announce pieces before it).
  Status request_stats();
  // FORWARD_SETUP or SEND_TILE (forward_codec.hpp); their answers come through next().
  Status forward(const ForwardMessage& message);
  // FORWARD_SETUP and its FORWARD_READY read at once, skipping what the worker may still send of a
  // run before it (STORED, SENT, an unsolicited FORWARD_READY of another token).
  Result<ForwardReady> set_up_forwarding(const ForwardSetup& setup);
  // Ends the worker's forwarding run `token` (a FORWARD_SETUP with a fresh token and nothing to
  // forward): its forwarding and sends stop, its peer links close, late pieces are refused, and what
  // it still sent of the run is read and dropped.
  Status end_forwarding(uint64_t token);
  // PROBE alone; its PROBE_RESULT is read with next() (the busy-latency probe reads it among the
  // CREDITs of the jobs that keep the node busy).
  Status send_probe(const Probe& probe);
  // PROBE, and its PROBE_RESULT read at once: nothing else of the worker's may come first.
  Result<ProbeResult> probe(const Probe& probe);
  // STATS_REQUEST and its STATS read at once, likewise.
  Result<Stats> stats();

  // --- Replies (one thread) ---
  // The next frame from the worker, whose type must be one of `expected` (CREDIT, RESULT,
  // PROBE_RESULT, STATS, STORED, FORWARD_READY, SENT). A CREDIT takes its jobs off what is owed; a
  // RESULT comes as its prefix, checked, with its data still to read (read_result). Failures: the
  // worker's ERROR as its Status, another type named (transport::read_reply_header), a payload the
  // codec refuses, the connection's own.
  Result<Reply> next(std::initializer_list<MessageType> expected);
  // The data of the RESULT next() just returned, into `out` (exactly its rows x cols doubles),
  // checked against its CRC32C; the result is then no longer owed. On failure `out` holds an
  // unknown part of the data and must not be used.
  Status read_result(const ResultHeader& result, std::span<double> out);

  // --- What the node owes (any thread) ---
  uint64_t jobs_sent() const { return jobs_sent_.load(); }
  uint64_t jobs_credited() const { return jobs_credited_.load(); }
  uint64_t jobs_owed() const { return jobs_sent() - jobs_credited(); }
  uint64_t results_owed() const { return results_asked_.load() - results_received_.load(); }
  // Whether anything is owed: a CREDIT or a RESULT is still to come.
  bool owes() const { return jobs_owed() > 0 || results_owed() > 0; }

 private:
  transport::FrameConnection& connection_;
  const Limits limits_;
  std::atomic<uint64_t> jobs_sent_{0};
  std::atomic<uint64_t> jobs_credited_{0};
  std::atomic<uint64_t> results_asked_{0};
  std::atomic<uint64_t> results_received_{0};
};

}  // namespace tessera::gemm
