#include "connection_handler.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "tessera/transport/auth.hpp"
#include "tessera/gemm/codec.hpp"
#include "worker_log.hpp"

namespace tessera::worker {

namespace tp = tessera::transport;

namespace {

// An authenticated peer that stops sending half-way through a frame for this long is gone. 60 s:
// long enough for a stalled Wi-Fi link to recover, short enough that a peer that really is gone
// frees its session within a minute.
constexpr auto kFrameStallTimeout = std::chrono::milliseconds(60000);

}  // namespace


void ConnectionHandler::serve() {
  // The pool is idle here (the previous session's close() waited for it), so its totals grow
  // only with this session's work from now on.
  context_.start_counting();
  log_line(fmt::format("session with {} started ({})", context_.peer(), connection_->wire_description()));
  while (!server_.stopping_ && serve_frame() == HandlerStep::kContinue) {
  }
  if (server_.stopping_) context_.end("worker stopping");
  close();
  const gemm::Stats totals = context_.stats();
  const double cpu = totals.io_cpu_seconds + totals.compute_cpu_seconds;
  const std::string io_share =
      totals.compute_cpu_seconds > 0.0 ? fmt::format(", {:.1f}% io", 100.0 * totals.io_cpu_seconds / cpu) : "";
  log_line(fmt::format("session with {} ended: {} ({} jobs, {} bytes in, {} bytes out in {:.3f} s; CPU io {:.4f} s, "
                       "compute {:.4f} s{})",
                       context_.peer(), context_.end_reason(), totals.jobs, totals.bytes_received,
                       totals.bytes_sent, totals.session_seconds, totals.io_cpu_seconds,
                       totals.compute_cpu_seconds, io_share));
}

bool ConnectionHandler::handshake(const std::function<Status(bool mac_right)>& on_answer) {
  tp::Hello hello;
  hello.worker_version = worker_version();
  hello.arch = server_.facts_.arch;
  hello.hostname = server_.facts_.hostname;
  hello.cores = server_.facts_.cores;
  hello.threads = server_.pool_.threads();
  hello.memory_bytes = server_.facts_.memory_bytes;
  hello.tile_memory_cap = server_.store_.cap_bytes();
  hello.capabilities = server_.capabilities() | tp::kCapabilityTls;
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

bool ConnectionHandler::wait_for_frame() {
  // The coordinator legitimately says nothing while it waits for jobs it queued here, so work in
  // the pool (queued, running, or finished since the last look) counts as activity; a session
  // silent while nothing of it progresses is idle, and ends only when another coordinator asks
  // for the worker (CoordinatorSlot::claim). The wait is sliced so such a request is seen soon.
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

HandlerStep ConnectionHandler::serve_frame() {
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
  const HandlerStep step = handler == nullptr        ? handle_unrouted(*header)
                           : handler->on_stream ? handler->on_stream(context_, *header)
                                                : deliver_payload(*handler, *header);
  server_.slot_.set_in_frame(false);
  server_.slot_.touch();
  return step;
}

HandlerStep ConnectionHandler::deliver_payload(const MessageHandler& handler, const tp::FrameHeader& header) {
  const uint64_t max_payload =
      handler.max_payload_bytes != nullptr ? handler.max_payload_bytes(context_.limits()) : kMaxControlPayloadBytes;
  if (header.payload_length > max_payload) {
    return context_.fail(tp::ErrorCode::kBadFrame,
                         fmt::format("{} payload of {} bytes exceeds the {}-byte limit for that message",
                                     tp::message_type_name(header.type), header.payload_length, max_payload),
                         header.request_id);
  }
  if (handler.check_length != nullptr) {
    if (Status fits = handler.check_length(header.type, header.payload_length, context_.limits()); !fits.is_ok()) {
      return context_.fail(tp::ErrorCode::kBadFrame, fits.message(), header.request_id);
    }
  }
  std::vector<std::byte> payload;
  if (Status read = connection_->read_growing(payload, header.payload_length); !read.is_ok()) {
    return context_.read_failed(read, header.request_id);
  }
  return handler.on_message(context_, header, payload);
}

HandlerStep ConnectionHandler::handle_unrouted(const tp::FrameHeader& header) {
  const auto type = static_cast<tp::MessageType>(header.type);
  if (type != tp::MessageType::kBye && type != tp::MessageType::kError) {
    // The payload is never read: nothing here would use it.
    const uint64_t capability = tp::capability_of_message(header.type);
    const std::string missing =
        capability != 0 && (server_.capabilities() & capability) == 0
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

HandlerStep ConnectionHandler::handle_bye(uint64_t request_id) {
  // From here the session is ending: a coordinator that reconnects at once waits for the slot
  // instead of being refused as busy.
  server_.slot_.mark_closing();
  // Queued tasks still send their replies (CREDITs, RESULTs): BYE is an orderly end, not an abort.
  server_.pool_.wait_idle();
  context_.flush_writes();
  (void)connection_->write_message(tp::Bye{}, request_id);
  return context_.end("BYE");
}

void ConnectionHandler::close() {
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

void ConnectionHandler::serve_peer() {
  // A peer link is quiet for as long as its run has nothing to send (converged, or between sync
  // steps): it ends with its run (the service closes it), not by an idle bound.
  connection_->set_read_timeout(std::chrono::milliseconds(0));
  log_line(fmt::format("peer link from {} opened ({})", context_.peer(), connection_->wire_description()));
  while (!server_.stopping_ && serve_peer_frame() == HandlerStep::kContinue) {
  }
  if (server_.stopping_) context_.end("worker stopping");
  connection_->shutdown();
  log_line(fmt::format("peer link from {} closed: {} ({} bytes in)", context_.peer(), context_.end_reason(),
                       connection_->bytes_received()));
}

HandlerStep ConnectionHandler::serve_peer_frame() {
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
  return deliver_payload(*handler, *header);
}

}  // namespace tessera::worker
