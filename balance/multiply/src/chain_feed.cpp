#include "chain_feed.hpp"


#include <algorithm>

#include <fmt/format.h>

#include "tessera/gemm/forward_codec.hpp"
#include "tessera/transport/request.hpp"

namespace tessera::balance::multiply {

namespace tp = tessera::transport;

std::unique_ptr<ChainFeed> ChainFeed::set_up(cluster::ClusterConnection& cluster, const plan::Plan& plan,
                                             const PeerHosts& peer_hosts, uint32_t first_tile_id,
                                             uint32_t last_tile_id, std::chrono::milliseconds timeout,
                                             std::vector<std::string>& notes) {
  std::unique_ptr<ChainFeed> feed(new ChainFeed());
  feed->token_ = gemm::new_forward_token();
  feed->first_ = first_tile_id;
  feed->last_ = last_tile_id;
  for (uint32_t node : plan.chain) {
    const cluster::NodeLink& link = cluster.links()[node];
    if ((link.hello.capabilities & tp::kCapabilityForward) == 0) {
      notes.push_back(fmt::format("{} gets B from the coordinator: its worker does not forward (it offers {})",
                                  link.spec.name, tp::capability_names(link.hello.capabilities)));
      continue;
    }
    feed->members_.push_back(Member{node, link.spec.name});
  }
  // Each group of columns is a chain of its own (the 2d layout's; the rows layout has one): its
  // first member is a head the coordinator feeds (also when the group's first node was left out).
  const std::vector<std::size_t> heads = plan::chain_heads(plan);
  const auto group_of = [&](std::size_t node) {
    const auto position = static_cast<std::size_t>(std::find(plan.chain.begin(), plan.chain.end(), node) - plan.chain.begin());
    return static_cast<std::size_t>(std::upper_bound(heads.begin(), heads.end(), position) - heads.begin());
  };
  for (std::size_t m = 0; m < feed->members_.size(); ++m) {
    feed->members_[m].head = m == 0 || group_of(feed->members_[m].node) != group_of(feed->members_[m - 1].node);
  }
  // From the tail: each member links to the one after it, which must already be set up.
  std::vector<Member>& members = feed->members_;
  for (std::size_t p = members.size(); p-- > 0;) {
    cluster::NodeLink& link = cluster.links()[members[p].node];
    gemm::ForwardSetup setup{feed->token_, first_tile_id, last_tile_id, "", 0};
    const bool has_next = p + 1 < members.size() && !members[p + 1].head;
    if (has_next) {
      const std::size_t next = members[p + 1].node;
      const cluster::NodeLink& next_link = cluster.links()[next];
      setup.next_host = cluster::peer_host(peer_hosts, members[p].node, next, next_link.spec.host);
      setup.next_port = next_link.spec.port;
    }
    link.connection->set_read_deadline(timeout);
    Result<gemm::ForwardReady> ready = gemm::GemmClient(*link.connection).set_up_forwarding(setup);
    link.connection->clear_read_deadline();
    if (!ready) {
      // The member itself failed: the run will find it lost; B goes to it directly meanwhile.
      notes.push_back(fmt::format("{} gets B from the coordinator: setting up forwarding failed: {}", link.spec.name,
                                  ready.status().message()));
      if (p + 1 < members.size()) members[p + 1].head = true;
      members.erase(members.begin() + static_cast<std::ptrdiff_t>(p));
      continue;
    }
    if (!ready->linked && has_next) {
      notes.push_back(fmt::format("{0} does not forward to {1} (the coordinator feeds {1}): {2}", members[p].name,
                                  members[p + 1].name, ready->reason));
      members[p + 1].head = true;
    }
  }
  if (!members.empty()) members.front().head = true;
  // A member alone in its segment is fed directly anyway.
  if (members.size() < 2 || std::all_of(members.begin(), members.end(), [](const Member& m) { return m.head; })) {
    if (!plan.chain.empty()) notes.push_back("no two nodes could form a chain: B goes to each node from the coordinator");
    return nullptr;
  }
  return feed;
}

std::optional<std::size_t> ChainFeed::position_of(std::size_t node) const {
  for (std::size_t p = 0; p < members_.size(); ++p) {
    if (members_[p].node == node) return p;
  }
  return std::nullopt;
}

bool ChainFeed::fed(std::size_t position) const {
  std::lock_guard lock(mutex_);
  return members_[position].fed;
}

std::size_t ChainFeed::segment_end(std::size_t position) const {
  std::size_t end = position + 1;
  while (end < members_.size() && !members_[end].head) ++end;
  return end;
}

bool ChainFeed::admitted_locked(std::size_t position, uint64_t piece, uint32_t window) const {
  for (std::size_t p = position + 1; p < segment_end(position); ++p) {
    const Member& member = members_[p];
    if (!member.alive || !member.fed) continue;
    // One more piece per hop from the head, up to twice the window: pieces on their way to a far
    // member count against its window, and without them the chain would wait a hop per piece.
    const uint64_t hops = std::min<uint64_t>(p - position, window);
    if (piece >= member.jobs_done + window + hops) return false;
  }
  return true;
}

bool ChainFeed::admitted(std::size_t position, uint64_t piece, uint32_t window) const {
  std::lock_guard lock(mutex_);
  return admitted_locked(position, piece, window);
}

void ChainFeed::wait_for_change(std::chrono::milliseconds span) const {
  std::unique_lock lock(mutex_);
  const uint64_t seen = progress_;
  changed_.wait_for(lock, span, [&] { return progress_ != seen; });
}

uint64_t ChainFeed::progress() const {
  std::lock_guard lock(mutex_);
  return progress_;
}

void ChainFeed::jobs_done(std::size_t position, uint64_t count) {
  {
    std::lock_guard lock(mutex_);
    members_[position].jobs_done += count;
    ++progress_;
  }
  changed_.notify_all();
}

void ChainFeed::link_failed(std::size_t position, const std::string& why) {
  if (position + 1 >= members_.size() || members_[position + 1].head) return;
  feed_broken(position + 1, why);
}

void ChainFeed::forwarded_to(std::size_t position, uint64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    if (position > 0) members_[position - 1].forwarded_bytes += bytes;
    ++progress_;
  }
  changed_.notify_all();
}

void ChainFeed::member_lost(std::size_t position) {
  {
    std::lock_guard lock(mutex_);
    members_[position].alive = false;
    ++progress_;
    for (std::size_t p = position + 1; p < segment_end(position); ++p) {
      if (members_[p].fed) {
        members_[p].fed = false;
        notes_.push_back(fmt::format("{} lost its feed with {}: the coordinator sent it the rest of B", members_[p].name,
                                     members_[position].name));
      }
    }
  }
  changed_.notify_all();
}

void ChainFeed::feed_broken(std::size_t position, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    // The member and those after it in its segment, which get pieces only through it.
    members_[position].fed = false;
    for (std::size_t p = position + 1; p < segment_end(position); ++p) members_[p].fed = false;
    ++progress_;
    notes_.push_back(why);
  }
  changed_.notify_all();
}

std::vector<uint64_t> ChainFeed::forwarded_bytes(std::size_t nodes) const {
  std::lock_guard lock(mutex_);
  std::vector<uint64_t> bytes(nodes, 0);
  for (const Member& member : members_) {
    if (member.node < nodes) bytes[member.node] = member.forwarded_bytes;
  }
  return bytes;
}

std::vector<std::string> ChainFeed::notes() const {
  std::lock_guard lock(mutex_);
  return notes_;
}

std::string ChainFeed::describe() const {
  std::string text;
  for (const Member& member : members_) {
    text += member.head ? (text.empty() ? "coordinator -> " : " | coordinator -> ") : " -> ";
    text += member.name;
  }
  return text;
}

Status ChainFeed::end_for(gemm::GemmClient& client) const { return client.end_forwarding(token_); }

}  // namespace tessera::balance::multiply
