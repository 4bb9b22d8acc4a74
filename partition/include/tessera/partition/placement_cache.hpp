// Placement cache: partitions saved on disk so that placing the same graph the same way again
// costs a hash of the graph and a file read instead of a METIS run, which on a large graph costs
// far more than both.
//
// A PlacementKey names everything the partition depends on: the graph's content hash and sizes,
// the parts, the method, objective, seed, imbalance and the normalised target weights. The file
// name derives from the key, so different weights or part counts live side by side. A file is a
// hint, never trusted: load_placement checks sizes against the graph before allocating, the
// checksum, and every field against the key and every part id against the parts, and anything
// off is a miss with a reason, not an error. store_placement writes a temporary file and renames
// it over the old one, so a reader sees the old file or the new one, never half of one.
//
// Free functions without shared state: thread-safe; concurrent stores of one key leave one
// complete file (the last rename wins). The format is native-endian (x86-64 and arm64 are both
// little-endian); a file from a big-endian host fails the magic check and is ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/status.hpp"
#include "tessera/graphdata/graph.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::partition {

// XXH3-64 over the vertex and edge counts and the CSR arrays (xadj, adjncy, vertex and edge
// weights, each with its length), so graphs with equal sizes but different edges or weights hash
// differently. O(V + E), a few ms per million edges.
uint64_t graph_content_hash(const graphdata::Graph& graph);

struct PlacementKey {
  uint64_t graph_hash = 0;
  int64_t vertices = 0;
  int64_t edges = 0;
  PartitionMethod method = PartitionMethod::kMetis;
  Objective objective = Objective::kCut;
  uint64_t seed = 0;
  double imbalance = 0;
  std::vector<double> target_weights;  // normalised to sum 1; the part count is its size
};

// The key of partitioning `graph` with `options`. Fails (kInvalidArgument) on target weights that
// normalise_weights refuses.
Result<PlacementKey> placement_key(const graphdata::Graph& graph, const PartitionOptions& options);
// The same with the graph's content hash already computed (graph_content_hash(graph)): a caller
// that looks up several keys of one graph hashes it once.
Result<PlacementKey> placement_key(uint64_t graph_hash, const graphdata::Graph& graph, const PartitionOptions& options);

// Whether two keys name the same placement: all fields equal except the imbalance and the target
// weights, which match within 1e-9 relative (weights 4,1,1,1 and 0.4,0.1,0.1,0.1 are one key).
// `why`, when given, says what differs.
bool same_placement(const PlacementKey& a, const PlacementKey& b, std::string* why = nullptr);

// "placement-<graph hash>-<digest of the rest>.tpc": 16 hex digits each. The weights enter the
// digest rounded to 1e-6, so keys that same_placement matches share a file except, rarely, across
// a rounding boundary (a miss, never a wrong hit).
std::string placement_file_name(const PlacementKey& key);

// Writes `partition.part` under `dir` / placement_file_name(key), creating `dir`, via a temporary
// file in `dir` renamed over the target. Fails (kInvalidArgument) when the partition does not fit
// the key (length != key.vertices, a part outside 0..parts-1); (kIoError) on I/O errors, with
// the path and the system's reason.
Status store_placement(const std::filesystem::path& dir, const PlacementKey& key, const Partition& partition);

// The stored partition for `key`, with its quality recomputed on `graph` (evaluate_partition, so
// it is exactly what partition_graph would report for that assignment) and the note it was stored
// with. nullopt (a miss) when there is no file, or the file is unreadable, truncated, corrupt (bad
// magic, version or checksum), for another key (graph hash, sizes, parts, method, seed, weights)
// or holds a part id out of range or in a part whose target is 0; `reason`, when given, says
// which, and is cleared on a hit. Never allocates more than the graph's size implies, whatever the
// file claims. Fails (kInvalidArgument) only when `key` does not describe `graph` (vertex or edge
// count differ): a caller's mistake, not the file's.
Result<std::optional<Partition>> load_placement(const std::filesystem::path& dir, const PlacementKey& key,
                                                const graphdata::Graph& graph, std::string* reason = nullptr);

}  // namespace tessera::partition
