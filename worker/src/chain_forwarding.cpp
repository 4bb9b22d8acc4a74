#include "chain_forwarding.hpp"

#include "tessera/transport/dial.hpp"

#include "tessera/transport/request.hpp"
#include "tessera/gemm/wire_io.hpp"

#include <array>
#include <utility>

#include <asio.hpp>

#include <fmt/format.h>

namespace tessera::worker {

namespace tp = tessera::transport;

namespace {

Status await_peer_ready(tp::FrameConnection& connection, uint64_t run_token, std::chrono::milliseconds timeout) {
  connection.set_read_deadline(timeout);
  Result<tp::FrameHeader> header = tp::read_reply_header(connection, {tp::MessageType::kForwardReady});
  Result<gemm::ForwardMessage> reply = header ? gemm::read_forward_payload(connection, *header) : header.status();
  connection.clear_read_deadline();
  if (!reply) return reply.status();
  const auto* ready = std::get_if<gemm::ForwardReady>(&*reply);
  if (ready == nullptr || !ready->linked || ready->run_token != run_token) {
    return protocol_error(fmt::format("it did not take the link for run {}", run_token));
  }
  return Status::ok();
}

}  // namespace

ChainForwarding::~ChainForwarding() { stop_run(); }

gemm::ForwardReady ChainForwarding::setup(ServiceContext& coordinator, const gemm::ForwardSetup& setup,
                                        std::chrono::milliseconds timeout) {
  stop_run();
  gemm::ForwardReady ready{setup.run_token, false, ""};
  const std::string next_name = fmt::format("{}:{}", setup.next_host, setup.next_port);
  {
    std::lock_guard lock(mutex_);
    active_ = true;
    token_ = setup.run_token;
    first_ = setup.first_tile_id;
    last_ = setup.last_tile_id;
    coordinator_ = &coordinator;
    secret_ = coordinator.secret();
    limits_ = coordinator.limits();
    wire_ = coordinator.wire();
    stopping_ = false;
    tiles_forwarded_ = bytes_forwarded_ = 0;
    tiles_sent_ = bytes_sent_ = 0;
    queued_ids_.clear();
  }
  if (setup.next_host.empty()) {
    ready.linked = true;  // the chain's tail, or a run of tile sends only: nothing to link
    return ready;
  }
  // The next node admits our peer link only once its own FORWARD_SETUP has come: the coordinator
  // sets the chain up from its tail.
  Result<std::unique_ptr<tp::FrameConnection>> connection = open_peer_link(setup.next_host, setup.next_port, timeout);
  if (!connection) {
    ready.reason = fmt::format("cannot link to the next node {}: {}", next_name, connection.status().message());
    coordinator.log(ready.reason);
    return ready;
  }
  {
    std::lock_guard lock(mutex_);
    next_ = std::move(*connection);
    next_name_ = next_name;
    forwarder_ = std::thread([this] { forward_loop(); });
  }
  ready.linked = true;
  return ready;
}

Result<std::unique_ptr<tp::FrameConnection>> ChainForwarding::open_peer_link(const std::string& host, uint16_t port,
                                                                              std::chrono::milliseconds timeout) const {
  std::string secret;
  tp::Limits limits;
  tp::WireMode wire{};
  uint64_t token = 0;
  {
    std::lock_guard lock(mutex_);
    secret = secret_;
    limits = limits_;
    wire = wire_;
    token = token_;
  }
  Result<tp::DialedWorker> link = tp::dial_worker(tp::Dial{host, port, secret, tp::SessionRole::kPeer, wire, limits, timeout});
  if (!link) return link.status();
  if ((link->hello.capabilities & tp::kCapabilityForward) == 0) {
    return invalid_config("it does not take forwarded tiles (it offers " +
                          tp::capability_names(link->hello.capabilities) + ")");
  }
  TESSERA_RETURN_IF_ERROR(gemm::write_forward_message(*link->connection, gemm::ForwardSetup{token, 0, 0, "", 0}));
  // The peer answers FORWARD_READY once it has taken the link for this run, or ERROR saying why
  // not (no run there, another run): only then is the link known to carry tiles.
  TESSERA_RETURN_IF_ERROR(await_peer_ready(*link->connection, token, timeout));
  return std::move(link->connection);
}

std::shared_ptr<ChainForwarding::Incoming> ChainForwarding::begin_tile(const std::shared_ptr<Tile>& tile,
                                                                      uint32_t data_crc32c) {
  std::lock_guard lock(mutex_);
  if (!active_ || next_ == nullptr || stopping_ || !in_range(tile->id())) return nullptr;
  // Each piece goes on once: the coordinator sends a piece again only to redo a lost node's rows
  // here, and the next node gets its own copy for that.
  if (!queued_ids_.insert(tile->id()).second) return nullptr;
  auto incoming = std::make_shared<Incoming>();
  incoming->tile = tile;
  incoming->data_crc32c = data_crc32c;
  queue_.push_back(incoming);
  queue_changed_.notify_all();
  return incoming;
}

void ChainForwarding::arrived(Incoming& incoming, std::size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    incoming.arrived = bytes;
  }
  queue_changed_.notify_all();
}

void ChainForwarding::finish_tile(Incoming& incoming, bool ok) {
  {
    std::lock_guard lock(mutex_);
    incoming.finished = true;
    incoming.ok = ok;
  }
  queue_changed_.notify_all();
}

Status ChainForwarding::current_run_locked(uint64_t run_token) const {
  if (active_ && run_token == token_ && coordinator_ != nullptr) return Status::ok();
  return not_found(fmt::format("forwarding run {} is not this worker's current run", run_token));
}

Status ChainForwarding::accept_peer(uint64_t run_token) const {
  std::lock_guard lock(mutex_);
  return current_run_locked(run_token);
}

Status ChainForwarding::stored_by_peer(uint64_t run_token, const std::shared_ptr<Tile>& tile) {
  std::lock_guard lock(mutex_);
  TESSERA_RETURN_IF_ERROR(current_run_locked(run_token));
  if (!in_range(tile->id())) {
    return invalid_argument(fmt::format("tile {} lies outside the run's forwarded ids [{}, {})", tile->id(), first_, last_));
  }
  tell_coordinator_locked(gemm::Stored{run_token, tile->id()});
  return Status::ok();
}

void ChainForwarding::tell_coordinator_locked(const gemm::ForwardMessage& message) {
  if (coordinator_ == nullptr) return;
  ServiceContext* coordinator = coordinator_;
  // The coordinator's writer thread sends it after anything queued before; the context outlives
  // the write (end_session, which clears coordinator_, runs before the session's writes are dropped).
  coordinator->write_later([coordinator, message] { (void)gemm::write_forward_message(coordinator->connection(), message); });
}

Status ChainForwarding::admit_peer() const {
  std::lock_guard lock(mutex_);
  if (active_) return Status::ok();
  return not_found("no forwarding run on this worker");
}

Status ChainForwarding::forward(tp::FrameConnection& next, Incoming& incoming) {
  const Tile& tile = *incoming.tile;
  const gemm::TilePrefix prefix{tile.id(), tile.rows(), tile.cols(), incoming.data_crc32c};
  const auto header_bytes = gemm::encode_store_header(prefix);
  const auto prefix_bytes = gemm::encode_store_prefix(prefix);
  const std::array<asio::const_buffer, 2> head{asio::buffer(header_bytes), asio::buffer(prefix_bytes)};
  TESSERA_RETURN_IF_ERROR(next.write_buffers(head));
  const auto* data = reinterpret_cast<const std::byte*>(tile.data());
  std::size_t written = 0;
  while (written < tile.bytes()) {
    std::size_t ready = 0;
    {
      std::unique_lock lock(mutex_);
      queue_changed_.wait(lock, [&] { return stopping_ || incoming.arrived > written || incoming.finished; });
      if (stopping_) return cancelled("forwarding stopped");
      if (incoming.finished && !incoming.ok) {
        return io_error(fmt::format("tile {} did not arrive whole here, so it cannot be forwarded", tile.id()));
      }
      ready = incoming.arrived;
    }
    // The bytes below `ready` are written and no longer change: the receiving thread writes
    // only beyond them.
    const std::array<asio::const_buffer, 1> part{asio::buffer(data + written, ready - written)};
    TESSERA_RETURN_IF_ERROR(next.write_buffers(part));
    written = ready;
  }
  return Status::ok();
}

void ChainForwarding::forward_loop() {
  for (;;) {
    std::shared_ptr<Incoming> incoming;
    tp::FrameConnection* next = nullptr;
    {
      std::unique_lock lock(mutex_);
      queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      incoming = std::move(queue_.front());
      queue_.pop_front();
      next = next_.get();
    }
    const Status written = forward(*next, *incoming);
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (written.is_ok()) {
      ++tiles_forwarded_;
      bytes_forwarded_ += incoming->tile->bytes();
      continue;
    }
    // The next node is gone or refused the tile, or a tile broke off half-way here: say so, so
    // the coordinator feeds the nodes after this one itself, and stop forwarding for this run.
    queue_.clear();
    next_->shutdown();
    const gemm::ForwardReady broken{token_, false,
                                  fmt::format("the link to the next node {} failed after {} tiles: {}", next_name_,
                                              tiles_forwarded_, written.message())};
    if (coordinator_ != nullptr) coordinator_->log(broken.reason);
    tell_coordinator_locked(broken);
    return;
  }
}

void ChainForwarding::send_to_peer(uint64_t run_token, std::shared_ptr<Tile> tile, const std::string& host,
                                   uint16_t port) {
  std::lock_guard lock(mutex_);
  if (const Status current = current_run_locked(run_token); !current.is_ok() || stopping_) {
    tell_coordinator_locked(gemm::Sent{run_token, tile->id(), false,
                                     fmt::format("tile {} was not sent to {}:{}: {}", tile->id(), host, port,
                                                 current.is_ok() ? "the run is ending" : current.message())});
    return;
  }
  sends_.push_back(PeerSend{std::move(tile), host, port});
  if (!sender_.joinable()) sender_ = std::thread([this] { send_loop(); });
  queue_changed_.notify_all();
}

// How long opening a peer link for a SEND_TILE may take: as for the chain's next node.
constexpr std::chrono::milliseconds kPeerLinkTimeout{5000};

void ChainForwarding::send_loop() {
  for (;;) {
    PeerSend send;
    tp::FrameConnection* link = nullptr;
    const std::string peer_name = [&] {
      std::unique_lock lock(mutex_);
      queue_changed_.wait(lock, [this] { return stopping_ || !sends_.empty(); });
      if (stopping_) return std::string();
      send = std::move(sends_.front());
      sends_.pop_front();
      return fmt::format("{}:{}", send.host, send.port);
    }();
    if (peer_name.empty()) return;
    Status written = Status::ok();
    {
      std::unique_lock lock(mutex_);
      if (const auto found = peer_links_.find(peer_name); found != peer_links_.end()) link = found->second.get();
    }
    if (link == nullptr) {
      // Opened outside the mutex (a handshake takes a round trip or two); only this thread adds links.
      Result<std::unique_ptr<tp::FrameConnection>> opened = open_peer_link(send.host, send.port, kPeerLinkTimeout);
      if (opened) {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        link = opened->get();
        peer_links_[peer_name] = std::move(*opened);
      } else {
        written = opened.status().with_context("cannot link to it: ");
      }
    }
    if (link != nullptr) {
      const Tile& tile = *send.tile;
      const std::span<const double> data(tile.data(), tile.size());
      written = gemm::write_store(*link, {tile.id(), tile.rows(), tile.cols(), gemm::tile_crc32c(data)}, data);
    }
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (written.is_ok()) {
      ++tiles_sent_;
      bytes_sent_ += send.tile->bytes();
      tell_coordinator_locked(gemm::Sent{token_, send.tile->id(), true, ""});
      continue;
    }
    if (const auto found = peer_links_.find(peer_name); found != peer_links_.end()) {
      found->second->shutdown();
      peer_links_.erase(found);
    }
    const std::string reason = fmt::format("tile {} did not reach {}: {}", send.tile->id(), peer_name, written.message());
    if (coordinator_ != nullptr) coordinator_->log(reason);
    tell_coordinator_locked(gemm::Sent{token_, send.tile->id(), false, reason});
  }
}

void ChainForwarding::stop_run() {
  std::thread forwarder, sender;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (next_ != nullptr) next_->shutdown();  // a write blocked on a stalled next node returns
    for (auto& [name, link] : peer_links_) link->shutdown();  // and one blocked on a stalled peer
    forwarder = std::move(forwarder_);
    sender = std::move(sender_);
  }
  queue_changed_.notify_all();
  if (forwarder.joinable()) forwarder.join();
  if (sender.joinable()) sender.join();
  std::lock_guard lock(mutex_);
  if (active_ && coordinator_ != nullptr && next_ != nullptr) {
    coordinator_->log(fmt::format("forwarding run {}: {} tiles ({} bytes) forwarded to {}", token_, tiles_forwarded_,
                                  bytes_forwarded_, next_name_));
  }
  if (active_ && coordinator_ != nullptr && tiles_sent_ > 0) {
    coordinator_->log(fmt::format("run {}: {} tiles ({} bytes) sent to {} peers", token_, tiles_sent_, bytes_sent_,
                                  peer_links_.size()));
  }
  active_ = false;
  coordinator_ = nullptr;
  next_.reset();
  queue_.clear();
  sends_.clear();
  peer_links_.clear();
}

void ChainForwarding::end_session() { stop_run(); }

}  // namespace tessera::worker
