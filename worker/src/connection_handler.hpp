// ConnectionHandler: one connection of the worker, on its own thread: authenticate (HELLO, AUTH,
// the auth throttle's hook), then dispatch every frame through the service table until BYE, an
// error, or the peer leaves. A coordinator's connection uses the services' handlers and holds the
// server's coordinator slot; a peer's (another worker, see service.hpp) uses their peer handlers
// and holds nothing. One state machine per connection; pool tasks the services submit run on pool
// threads and only write frames. Owns the connection's ServiceContext; shares the connection.
// Internal to the worker library.
#pragma once

#include <functional>
#include <memory>

#include "server_core.hpp"
#include "tessera/core/status.hpp"
#include "tessera/transport/frame_connection.hpp"
#include "tessera/worker/service.hpp"

namespace tessera::worker {

class ConnectionHandler {
 public:
  ConnectionHandler(ServerCore& server, std::shared_ptr<transport::FrameConnection> connection)
      : server_(server),
        connection_(std::move(connection)),
        context_(*connection_, server.store_, server.pool_, server.stopping_, server.options_.secret,
                 server.blocks_.get()) {}

  // Sends HELLO (with the services' capabilities) and checks the AUTH of a coordinator, or of a
  // peer worker when a service takes peer links; false (logged) if it fails or times out.
  // `on_answer` is the handshake hook between the MAC check and the verdict (ServerHandshakeHooks).
  bool handshake(const std::function<Status(bool mac_right)>& on_answer);
  // Why handshake() failed.
  const Status& last_failure() const { return last_failure_; }
  // Who authenticated. REQUIRES: handshake() succeeded.
  transport::SessionRole role() const { return role_; }
  // REQUIRES: handshake() succeeded as the coordinator and the session slot is ours. Returns when
  // the session ended and the pool and store are clean again.
  void serve();
  // REQUIRES: handshake() succeeded as a peer. Returns when the peer link ended (the peer left,
  // sent something no peer handler takes, or a service closed the link when its run ended).
  void serve_peer();

 private:
  HandlerStep serve_frame();
  HandlerStep serve_peer_frame();
  // Waits for the next frame's first byte: false when the session was idle for the idle timeout.
  bool wait_for_frame();
  // Reads a whole payload for a handler that decodes it, within the handler's size bound.
  HandlerStep deliver_payload(const MessageHandler& handler, const transport::FrameHeader& header);
  // BYE and ERROR, which the session answers whatever services it hosts; anything else no
  // service handles is refused.
  HandlerStep handle_unrouted(const transport::FrameHeader& header);
  HandlerStep handle_bye(uint64_t request_id);
  void close();

  ServerCore& server_;
  std::shared_ptr<transport::FrameConnection> connection_;
  ServiceContext context_;
  Status last_failure_;
  transport::SessionRole role_ = transport::SessionRole::kCoordinator;
};

}  // namespace tessera::worker
