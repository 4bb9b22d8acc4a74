// The GEMM service's part in a chain (plan::Distribution::kChain): B's pieces reach this worker
// from the coordinator (the chain's head) or from the previous node over a peer link, and it
// forwards each to the next node while its own jobs run on it, so the coordinator sends B once.
//
// One ChainForwarding per worker, shared by the GEMM service's handlers. The coordinator's
// FORWARD_SETUP starts a run (the token, the tile ids to forward, the next node): the worker opens
// the peer link to the next node at once and answers FORWARD_READY saying whether it is up. A peer
// link belongs to the run whose token its first frame (FORWARD_SETUP without a next node) names;
// the next node answers it with FORWARD_READY (or ERROR, why not) before any tile is sent.
// A tile of the run's range that arrives, from the coordinator or a peer, is queued for the next
// node as soon as its prefix is in (once per id and run: a piece sent again to redo a lost node's
// rows here is not passed on), and forwarded cut-through: each chunk goes on as it arrives
// (the STORE's prefix carries the CRC of the data, so the next node checks the same bytes), so a
// hop costs a chunk's transfer time, not a whole piece's. One that arrives from a peer is also
// announced to the coordinator with STORED once it is whole, and the coordinator sends jobs on it
// only then. Tiles are shared: one queued here stays alive (and charged to the tile memory cap)
// until it has been written, whatever the store does with its id meanwhile. A tile whose own
// arrival fails half-way cannot be finished downstream: the link to the next node is closed and
// reported like any failure of it.
// When the link to the next node fails, the worker tells the coordinator with an unsolicited
// FORWARD_READY (linked 0, the reason) and drops what it had queued: the coordinator then feeds
// the nodes after it itself.
// A run also carries SEND_TILEs (expression tiles going from the worker that computed them to the
// workers that read them): send_to_peer() queues the tile for the run's sending thread, which
// opens a peer link to each destination on first use (the same FORWARD_SETUP / FORWARD_READY
// greeting), keeps it for the run, writes the tile as a STORE and answers the coordinator SENT,
// delivered or why not (a failed link is closed; the next send to that node tries a new one).
// The run ends with the coordinator's session (end_session) or its next FORWARD_SETUP.
// Thread-safe: the coordinator's and the peers' connection threads call it concurrently; one
// forwarding thread per run writes to the next node, one sending thread to the SEND_TILE peers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "tessera/core/status.hpp"
#include "tessera/gemm/forward_codec.hpp"
#include "tessera/worker/service.hpp"
#include "tessera/worker/tile_store.hpp"

namespace tessera::worker {

class ChainForwarding {
 public:
  // A tile on its way through this worker. Its fields are guarded by the ChainForwarding's mutex.
  struct Incoming {
    std::shared_ptr<Tile> tile;
    uint32_t data_crc32c = 0;
    std::size_t arrived = 0;  // bytes of data in the tile's memory
    bool finished = false;
    bool ok = false;
  };

  ChainForwarding() = default;
  ~ChainForwarding();
  ChainForwarding(const ChainForwarding&) = delete;
  ChainForwarding& operator=(const ChainForwarding&) = delete;

  // FORWARD_SETUP from the coordinator of `coordinator`'s session: ends the previous run, starts
  // this one and links to its next node (within `timeout`). The answer to send back.
  gemm::ForwardReady setup(ServiceContext& coordinator, const gemm::ForwardSetup& setup,
                                std::chrono::milliseconds timeout);
  // A tile whose data is about to arrive (from the coordinator or a peer of the current run),
  // with the CRC its STORE announced. When it is in the run's range and the next node is linked,
  // it is queued for forwarding and the returned handle reports its progress; else null.
  std::shared_ptr<Incoming> begin_tile(const std::shared_ptr<Tile>& tile, uint32_t data_crc32c);
  // The first `bytes` of the tile's data are in its memory.
  void arrived(Incoming& incoming, std::size_t bytes);
  // The tile arrived whole and checked (ok), or its arrival failed.
  void finish_tile(Incoming& incoming, bool ok);
  // A peer link's FORWARD_SETUP: OK when it names the current run.
  Status accept_peer(uint64_t run_token) const;
  // A tile a peer of run `run_token` forwarded was filed whole: STORED to the coordinator. Fails
  // when that run is no longer current or the tile is outside its range (the peer link then ends).
  Status stored_by_peer(uint64_t run_token, const std::shared_ptr<Tile>& tile);
  // Whether peer links are admitted now (a run is set up).
  Status admit_peer() const;
  // SEND_TILE of the coordinator session `coordinator`, once the jobs before it are done (the
  // caller runs this in the compute pool's order, so `tile` holds their result): `tile` goes to
  // host:port over a peer link of run `run_token`, and SENT follows. A token that is not the
  // current run's is answered SENT undelivered at once.
  void send_to_peer(uint64_t run_token, std::shared_ptr<Tile> tile, const std::string& host, uint16_t port);
  // The coordinator's session ended: the run, its link and its queue go.
  void end_session();

 private:
  bool in_range(uint32_t tile_id) const { return tile_id >= first_ && tile_id < last_; }
  // OK when `run_token` names the run set up by a coordinator session still open. REQUIRES: mutex_.
  Status current_run_locked(uint64_t run_token) const;
  // Queues `message` on the coordinator session's writer, if it is still open. REQUIRES: mutex_.
  void tell_coordinator_locked(const gemm::ForwardMessage& message);
  void forward_loop();
  void send_loop();
  // A peer link of the current run to host:port, greeted and taken (FORWARD_READY), within `timeout`.
  Result<std::unique_ptr<transport::FrameConnection>> open_peer_link(const std::string& host, uint16_t port,
                                                                     std::chrono::milliseconds timeout) const;
  // Writes one tile to the next node as its data arrives. REQUIRES: the forwarding thread.
  Status forward(transport::FrameConnection& next, Incoming& incoming);
  // REQUIRES: mutex_ not held. Stops the forwarding thread and closes the link.
  void stop_run();

  mutable std::mutex mutex_;
  std::condition_variable queue_changed_;
  bool active_ = false;
  uint64_t token_ = 0;
  uint32_t first_ = 0, last_ = 0;
  ServiceContext* coordinator_ = nullptr;  // the session that set the run up; null once it ended
  std::unique_ptr<transport::FrameConnection> next_;
  std::string next_name_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<Incoming>> queue_;
  std::unordered_set<uint32_t> queued_ids_;  // this run's tiles already queued once
  std::thread forwarder_;
  uint64_t tiles_forwarded_ = 0, bytes_forwarded_ = 0;
  // What open_peer_link needs of the coordinator's session, copied at setup: a peer link is
  // opened on the sending thread, which must not reach into a session that may be ending.
  std::string secret_;
  transport::Limits limits_;
  transport::WireMode wire_{};
  // SEND_TILEs waiting for the sending thread, and its links ("host:port" -> link).
  struct PeerSend {
    std::shared_ptr<Tile> tile;
    std::string host;
    uint16_t port = 0;
  };
  std::deque<PeerSend> sends_;
  std::map<std::string, std::unique_ptr<transport::FrameConnection>> peer_links_;
  std::thread sender_;
  uint64_t tiles_sent_ = 0, bytes_sent_ = 0;
};

}  // namespace tessera::worker
