#include "forward_setup.hpp"

#include <random>

#include "tessera/transport/request.hpp"

namespace tessera::balance::run {

namespace tp = tessera::transport;

std::string peer_host(const std::vector<std::vector<std::string>>& hosts, std::size_t from, std::size_t to,
                      const std::string& fallback) {
  if (from < hosts.size() && to < hosts[from].size() && !hosts[from][to].empty()) return hosts[from][to];
  return fallback;
}

uint64_t fresh_forward_token() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

Result<tp::ForwardReady> request_forward_setup(tp::FrameConnection& connection, const tp::ForwardSetup& setup) {
  TESSERA_RETURN_IF_ERROR(tp::write_forward_message(connection, setup));
  for (;;) {
    Result<tp::FrameHeader> header = tp::read_reply_header(
        connection, {tp::MessageType::kForwardReady, tp::MessageType::kStored, tp::MessageType::kSent});
    if (!header) return header.status();
    Result<tp::ForwardMessage> reply = tp::read_forward_payload(connection, *header);
    if (!reply) return reply.status();
    if (const auto* ready = std::get_if<tp::ForwardReady>(&*reply); ready != nullptr && ready->run_token == setup.run_token) {
      return *ready;
    }
  }
}

Status end_forward_run(tp::FrameConnection& connection, uint64_t token) {
  uint64_t ended = fresh_forward_token();
  if (ended == token) ++ended;
  return request_forward_setup(connection, tp::ForwardSetup{ended, 0, 0, "", 0}).status();
}

}  // namespace tessera::balance::run
