#include "forward_setup.hpp"

#include <random>


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

}  // namespace tessera::balance::run
