// What the multiply's chain (chain_feed.hpp) and the DAG runner's worker-to-worker tiles (dag_run.cpp)
// share of a forwarding run, beside the GEMM client's FORWARD_SETUP (gemm/client.hpp): how one worker
// reaches another, and a fresh run token. Internal to the run library. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>


namespace tessera::balance::run {

// How worker `from` reaches worker `to` (indices in cluster.links()): hosts[from][to] when given
// (emulation::load_peer_hosts for emulated clusters), else `to`'s own host (`fallback`).
std::string peer_host(const std::vector<std::vector<std::string>>& hosts, std::size_t from, std::size_t to,
                      const std::string& fallback);

// A random token naming one run on the workers.
uint64_t fresh_forward_token();

}  // namespace tessera::balance::run
