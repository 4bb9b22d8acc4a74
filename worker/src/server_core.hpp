// ServerCore: what a connection needs from the worker server (its options and node facts, the
// service table, tile store, compute pool, the coordinator slot, the auth throttle, the log of
// unauthenticated connections, the stopping flag); WorkerServer::Impl adds the acceptor and the
// connection threads. Owned by the server; members are thread-safe as their own types say.
// Internal to the worker library.
#pragma once

#include <atomic>
#include <chrono>

#include <asio.hpp>

#include "coordinator_slot.hpp"
#include "log_limiter.hpp"
#include "tessera/worker/auth_throttle.hpp"
#include "tessera/worker/block_keeper.hpp"
#include "tessera/worker/compute_pool.hpp"
#include "tessera/worker/service.hpp"
#include "tessera/worker/tile_store.hpp"
#include "tessera/worker/worker_server.hpp"

namespace tessera::worker {

// How often a waiting session looks whether another coordinator asked it to yield: the newcomer
// waits about this long for the worker, and an idle session wakes this often.
constexpr auto kYieldPoll = std::chrono::milliseconds(100);

struct ServerCore {
  ServerCore(const WorkerOptions& options, const NodeFacts& facts, ServiceTable services,
             std::unique_ptr<BlockKeeper> blocks)
      : options_(options),
        facts_(facts),
        services_(std::move(services)),
        store_(options.tile_memory_cap),
        pool_(options.threads),
        auth_throttle_(options.auth_throttle),
        blocks_(std::move(blocks)) {}

  // What HELLO offers: the services' bits, and the block store's when the worker has one.
  uint64_t capabilities() const {
    return services_.capabilities() | (blocks_ ? transport::kCapabilityBlockStore : 0);
  }

  WorkerOptions options_;  // threads and tile_memory_cap already resolved
  NodeFacts facts_;
  const ServiceTable services_;
  asio::io_context io_;
  TileStore store_;
  ComputePool pool_;
  CoordinatorSlot slot_;
  LogLimiter unauthenticated_log_;  // lines about connections that have not authenticated
  AuthThrottle auth_throttle_;      // per-address holds of answers after failed authentications
  std::atomic<bool> stopping_{false};
  const std::unique_ptr<BlockKeeper> blocks_;  // null without --store
};

}  // namespace tessera::worker
