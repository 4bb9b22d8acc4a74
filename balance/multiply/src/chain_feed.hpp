// The coordinator's side of a chain (plan::Distribution::kChain): B's pieces go to the chain's
// head only, and every later member gets each piece from the member before it (the workers'
// chain forwarding, gemm/forward_codec.hpp), announced to us with STORED.
//
// set_up() sends FORWARD_SETUP from the tail to the head (a member admits its predecessor's peer
// link only once its own run is set up). A member that cannot link to its successor cuts the
// chain there: the successor heads a segment of its own, fed by the coordinator. During the run:
//  - a segment's head sends piece p only once every live member j hops after it has fewer than
//    `window` + min(j, `window`) pieces admitted that it has not finished (admitted()): pieces on
//    their way along the chain count too, so no member ever holds more than twice the credit
//    window of B, and the extra piece per hop keeps a long chain from waiting a hop per piece;
//  - a member whose feed breaks (a member before it lost, a forwarding link reported failed, or
//    no STORED within the deadline) gets the rest of B straight from the coordinator, so the
//    product is exact or refused as before.
// Members are positions along the chain; node indices are the plan's. Thread-safe: every node's
// streaming thread calls it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/gemm/client.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance::multiply {

class ChainFeed {
 public:
  // How each node's worker reaches each other node's, hosts[from][to] (plan order); empty: at
  // the nodes' own hosts.
  using PeerHosts = std::vector<std::vector<std::string>>;

  // Sets up plan.chain on `cluster` for the tile ids [first_tile_id, last_tile_id). Members that
  // lack kCapabilityForward are left out of the chain (fed directly); a setup that fails cuts the
  // chain as above (`notes` gets a line for each such decision). Null when fewer than two members remain: B then goes to
  // each node as in a star.
  static std::unique_ptr<ChainFeed> set_up(cluster::ClusterConnection& cluster, const plan::Plan& plan,
                                           const PeerHosts& peer_hosts, uint32_t first_tile_id,
                                           uint32_t last_tile_id, std::chrono::milliseconds timeout,
                                           std::vector<std::string>& notes);

  uint64_t run_token() const { return token_; }
  uint32_t first_tile_id() const { return first_; }
  uint32_t last_tile_id() const { return last_; }
  // The node's position along the chain, if it is a member.
  std::optional<std::size_t> position_of(std::size_t node) const;
  // Heads get B from the coordinator; the others from the member before them.
  bool is_head(std::size_t position) const { return members_[position].head; }
  // False once the member's feed broke: it takes the rest of B from the coordinator.
  bool fed(std::size_t position) const;

  // Head only: whether piece `piece` (0-based, k order) may enter the head's segment now.
  bool admitted(std::size_t position, uint64_t piece, uint32_t window) const;
  // Waits at most `span` for any change (jobs done, a member lost, a feed broken).
  void wait_for_change(std::chrono::milliseconds span) const;
  // Grows with every change: a member waiting for a piece restarts its patience when it moves.
  uint64_t progress() const;
  // The member finished `count` more jobs (one per piece).
  void jobs_done(std::size_t position, uint64_t count);
  // The member got `bytes` of a piece from the member before it: counted as forwarded by that one.
  void forwarded_to(std::size_t position, uint64_t bytes);
  // The member was lost: it stops counting for admission, and the members after it in its segment
  // lose their feed.
  void member_lost(std::size_t position);
  // The member's feed broke (the link into it failed, or a piece did not come in time); `why`
  // goes to the notes.
  void feed_broken(std::size_t position, const std::string& why);
  // The member reported that its link to its successor failed: the successor's feed broke.
  void link_failed(std::size_t position, const std::string& why);
  // Bytes each node forwarded to its successor (plan order).
  std::vector<uint64_t> forwarded_bytes(std::size_t nodes) const;
  // What changed the chain while it ran (set_up's own decisions are in its `notes`).
  std::vector<std::string> notes() const;
  // Tells every member the run is over (a FORWARD_SETUP with a fresh token and nothing to
  // forward): its forwarding stops and late pieces are refused. REQUIRES: the node's streaming
  // thread, nothing of the run on its wire but STORED and FORWARD_READY, which are skipped.
  Status end_for(gemm::GemmClient& client) const;
  // "coordinator -> desktop -> pi1 | coordinator -> pi2" for reports.
  std::string describe() const;

 private:
  struct Member {
    std::size_t node = 0;
    std::string name;
    bool head = false;
    bool alive = true;
    bool fed = true;
    uint64_t jobs_done = 0;
    uint64_t forwarded_bytes = 0;  // to the next member
  };
  bool admitted_locked(std::size_t position, uint64_t piece, uint32_t window) const;
  std::size_t segment_end(std::size_t position) const;

  ChainFeed() = default;

  std::vector<Member> members_;
  uint64_t token_ = 0;
  uint32_t first_ = 0, last_ = 0;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  uint64_t progress_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace tessera::balance::multiply
