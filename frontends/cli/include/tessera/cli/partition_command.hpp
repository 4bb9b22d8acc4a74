// `tessera partition`: partition a graph, sparse matrix or generated instance into parts whose
// weights follow given weights or a cluster's measured node speeds, and report the quality.
//
//   tessera partition INPUT (--weights w1,w2,.. | --cluster CONFIG [--profile P])
//                     [--method metis|contiguous|hash] [--imbalance 1.03] [--objective cut|volume]
//                     [--seed S] [--out parts.txt] [--report FILE.json]
//
// INPUT is a file picked by extension (.mtx Matrix Market, .graph/.metis METIS, .edges/.el/.txt edge
// list; see graphdata/graph_io.hpp) or a generator spec (mesh2d:200x200, mesh3d:20x20x20, rmat:16,
// rmat:16:8, lognormal:100000; see graphdata/generators.hpp, seeded by --seed). With --cluster the
// parts are the cluster's nodes, weighted by the GFLOP/s of its saved profile (`tessera profile`).
// Prints a per-part table (name, weight, target, vertices) and imbalance, edge cut, communication
// volume to `out`; input clean-up and trap notes to `err`. --out writes one part number per line in
// vertex order (METIS' .part format); --report writes JSON with imbalance, max_target_deviation,
// edge_cut, comm_volume, method, objective, seed, input, vertices, edges, seconds, note and
// parts[] = {name, weight, target, target_weight, vertices}.
// Exit codes as in commands.hpp: 0 ok; 2 bad flags, bad input file contents or weights; 1 anything
// else (unreadable file, missing profile, METIS failure). Not thread-safe (writes to the streams).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "tessera/balance/session/settings.hpp"

namespace tessera::cli {

struct PartitionCommand {
  std::string input;            // file or generator spec
  std::vector<double> weights;  // one per part (--weights); exclusive with config_path
  std::string config_path;      // --cluster: parts are its nodes, weights from its profile
  std::string profile_path;     // empty: next to the config (configs/lab.profile.yaml)
  // Method, imbalance, objective and seed: defaults and checks once for the CLI and Python
  // (session/settings.hpp).
  session::PartitionSettings settings;
  std::string out_path;     // empty: no parts file
  std::string report_path;  // empty: no JSON report
};

int command_partition(const PartitionCommand& command, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
