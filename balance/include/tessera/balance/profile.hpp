// Profiles: what each node really delivers, measured by the node itself.
//
// The quick profile asks every worker, one at a time so they do not compete for shared cores, to
// time a square GEMM for a few hundred milliseconds on all its compute threads. The relative powers
// pw_i = gflops_i / sum(gflops) are Tinetti & Luque's weights. A profile is saved as YAML next to
// the cluster file (configs/lab.yaml -> configs/lab.profile.yaml) and read back by `multiply`.
// ClusterProfile is a value; functions are thread-compatible. A later issue adds speed curves and
// link measurements to the same file under new keys; readers ignore nothing they do not know.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/balance/cluster_connection.hpp"
#include "tessera/balance/cluster_spec.hpp"
#include "tessera/core/status.hpp"

namespace tessera::balance {

struct NodeProfile {
  std::string name;
  std::string endpoint;
  double gflops = 0.0;        // measured GEMM rate
  uint32_t probe_size = 0;    // square GEMM dimension used
  uint32_t repetitions = 0;
  double probe_seconds = 0.0;
  uint32_t threads = 0;       // the worker's compute threads
  uint32_t cores = 0;         // online CPUs the worker saw
  std::string arch;
  std::string worker_version;
  bool operator==(const NodeProfile&) const = default;
};

struct ClusterProfile {
  std::string cluster;
  std::string measured_at;  // UTC, ISO 8601
  std::string method = "quick-gemm";
  std::vector<NodeProfile> nodes;
  bool operator==(const ClusterProfile&) const = default;

  // gflops normalised to sum 1, cluster order of `nodes`.
  std::vector<double> relative_powers() const;
};

struct QuickProfileOptions {
  // Square GEMM; 1024 takes ~43 ms at 50 GFLOP/s. Smaller probes let per-job overhead (waking
  // the pool, ~0.5 ms) show as lost speed: 512 measured 10% below the true rate here.
  uint32_t probe_size = 1024;
  // Per node. A probe may catch one extra 100 ms quota slice of a throttled node; over 1 s that
  // is at most ~10% (0.5 s probes measured a quarter core up to 23% fast).
  double min_seconds = 1.0;
};

// Runs the GEMM probe on each linked node in turn. `on_node` (optional) is told each result as
// it arrives, for progress output.
Result<ClusterProfile> run_quick_profile(ClusterConnection& cluster, const std::string& cluster_name,
                                         const QuickProfileOptions& options,
                                         const std::function<void(const NodeProfile&)>& on_node = {});

// configs/lab.yaml -> configs/lab.profile.yaml
std::string default_profile_path(const std::string& cluster_config_path);
Status save_profile(const std::string& path, const ClusterProfile& profile);
Result<ClusterProfile> load_profile(const std::string& path);

// Weights for each node of `cluster`, in cluster order, from the profile. Fails naming the first
// node the profile lacks, with the command that fixes it.
Result<std::vector<double>> profile_weights(const ClusterProfile& profile, const ClusterSpec& cluster,
                                            const std::string& profile_path);

}  // namespace tessera::balance
