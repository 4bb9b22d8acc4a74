// What the Session's sources share, internal to the session library: the session's state (its
// connection, profile and resident matrices) and the watcher that turns a caller's cancel flag into
// closed connections. A Session is used from one thread at a time; so is its State.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/balance/session/session.hpp"

namespace tessera::balance::session {

// The caller's matrix is borrowed: the caller keeps it unchanged while the placement lives, and a
// lost node's rows are placed again from it.
struct Session::ResidentEntry {
  multiply::ResidentMatrix matrix;
  linalg::MatrixView source;
};

struct Session::State {
  cluster::ClusterSpec cluster;  // the nodes taking part
  // For each node taking part, its position in the cluster file: what the caller's per-node lists
  // (weights, peer hosts), made from the file before the session knew who answered, are indexed by.
  std::vector<std::size_t> file_positions;
  std::size_t file_node_count = 0;
  std::vector<cluster::LeftOutNode> left_out;
  SessionOptions options;
  std::string profile_path;
  std::optional<profile::ClusterProfile> profile;
  std::optional<Status> ignored_profile_problem;
  cluster::ClusterConnection connection;
  std::map<uint64_t, ResidentEntry> resident;
  uint64_t next_resident_id = 1;
  uint32_t next_resident_tile = multiply::kFirstResidentTileId;
};

// Shuts the sessions down when the caller's cancel flag is set, for as long as it lives. The flag
// is looked at every 50 ms; the wait ends at once when the watcher goes, so a short call does not
// pay for the rest of a period on its way out.
class CancelWatcher {
 public:
  CancelWatcher(const std::atomic<bool>* cancel, cluster::ClusterConnection& connection) {
    if (cancel == nullptr) return;
    thread_ = std::jthread([this, cancel, &connection](std::stop_token stop) {
      std::unique_lock lock(mutex_);
      while (!stop.stop_requested()) {
        if (cancel->load()) {
          connection.shutdown_all();
          return;
        }
        woken_.wait_for(lock, stop, std::chrono::milliseconds(50), [] { return false; });
      }
    });
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any woken_;
  std::jthread thread_;  // last: joined before the mutex and condition it waits on go
};

inline bool cancel_requested(const RunControl& control) { return control.cancel != nullptr && control.cancel->load(); }

}  // namespace tessera::balance::session
