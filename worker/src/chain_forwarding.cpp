#include "chain_forwarding.hpp"

#include "tessera/transport/request.hpp"

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
  Result<tp::ForwardMessage> reply = header ? tp::read_forward_payload(connection, *header) : header.status();
  connection.clear_read_deadline();
  if (!reply) return reply.status();
  const auto* ready = std::get_if<tp::ForwardReady>(&*reply);
  if (ready == nullptr || !ready->linked || ready->run_token != run_token) {
    return protocol_error(fmt::format("it did not take the link for run {}", run_token));
  }
  return Status::ok();
}

}  // namespace

ChainForwarding::~ChainForwarding() { stop_run(); }

tp::ForwardReady ChainForwarding::setup(SessionContext& coordinator, const tp::ForwardSetup& setup,
                                        std::chrono::milliseconds timeout) {
  stop_run();
  tp::ForwardReady ready{setup.run_token, false, ""};
  const std::string next_name = fmt::format("{}:{}", setup.next_host, setup.next_port);
  {
    std::lock_guard lock(mutex_);
    active_ = true;
    token_ = setup.run_token;
    first_ = setup.first_tile_id;
    last_ = setup.last_tile_id;
    coordinator_ = &coordinator;
    stopping_ = false;
    tiles_forwarded_ = bytes_forwarded_ = 0;
    queued_ids_.clear();
  }
  if (setup.next_host.empty()) {
    ready.linked = true;  // the chain's tail: nothing to link
    return ready;
  }
  // The next node admits our peer link only once its own FORWARD_SETUP has come: the coordinator
  // sets the chain up from its tail.
  auto connection = tp::FrameConnection::connect(setup.next_host, setup.next_port, timeout, coordinator.limits());
  Status linked = connection.status();
  if (connection) {
    Result<tp::Hello> hello =
        tp::client_handshake(**connection, coordinator.secret(), timeout, tp::SessionRole::kPeer, coordinator.wire());
    if (!hello) {
      linked = hello.status();
    } else if ((hello->capabilities & tp::kCapabilityForward) == 0) {
      linked = invalid_config("it does not take forwarded tiles (it offers " +
                              tp::capability_names(hello->capabilities) + ")");
    } else {
      linked = tp::write_forward_message(**connection, tp::ForwardSetup{setup.run_token, 0, 0, "", 0});
      // The next node answers FORWARD_READY once it has taken the link for this run, or ERROR
      // saying why not (no run there, another run): only then is the link known to carry tiles.
      if (linked.is_ok()) linked = await_peer_ready(**connection, setup.run_token, timeout);
    }
  }
  if (!linked.is_ok()) {
    ready.reason = fmt::format("cannot link to the next node {}: {}", next_name, linked.message());
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
  tell_coordinator_locked(tp::Stored{run_token, tile->id()});
  return Status::ok();
}

void ChainForwarding::tell_coordinator_locked(const tp::ForwardMessage& message) {
  if (coordinator_ == nullptr) return;
  SessionContext* coordinator = coordinator_;
  // The coordinator's writer thread sends it after anything queued before; the context outlives
  // the write (end_session, which clears coordinator_, runs before the session's writes are dropped).
  coordinator->write_later([coordinator, message] { (void)tp::write_forward_message(coordinator->connection(), message); });
}

Status ChainForwarding::admit_peer() const {
  std::lock_guard lock(mutex_);
  if (active_) return Status::ok();
  return not_found("no forwarding run on this worker");
}

Status ChainForwarding::forward(tp::FrameConnection& next, Incoming& incoming) {
  const Tile& tile = *incoming.tile;
  const tp::TilePrefix prefix{tile.id(), tile.rows(), tile.cols(), incoming.data_crc32c};
  const auto header_bytes = tp::encode_store_header(prefix);
  const auto prefix_bytes = tp::encode_store_prefix(prefix);
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
    const tp::ForwardReady broken{token_, false,
                                  fmt::format("the link to the next node {} failed after {} tiles: {}", next_name_,
                                              tiles_forwarded_, written.message())};
    if (coordinator_ != nullptr) coordinator_->log(broken.reason);
    tell_coordinator_locked(broken);
    return;
  }
}

void ChainForwarding::stop_run() {
  std::thread forwarder;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (next_ != nullptr) next_->shutdown();  // a write blocked on a stalled next node returns
    forwarder = std::move(forwarder_);
  }
  queue_changed_.notify_all();
  if (forwarder.joinable()) forwarder.join();
  std::lock_guard lock(mutex_);
  if (active_ && coordinator_ != nullptr && next_ != nullptr) {
    coordinator_->log(fmt::format("forwarding run {}: {} tiles ({} bytes) forwarded to {}", token_, tiles_forwarded_,
                                  bytes_forwarded_, next_name_));
  }
  active_ = false;
  coordinator_ = nullptr;
  next_.reset();
  queue_.clear();
}

void ChainForwarding::end_session() { stop_run(); }

}  // namespace tessera::worker
