// `tessera graph`: run PageRank, Katz, connected components or shortest paths on a cluster's graph
// services and report the answer, the work per node and the convergence.
//
//   tessera graph CONFIG --algorithm pagerank|katz|cc|sssp (--graph FILE | --generate SPEC)
//                 [--partition metis|contiguous|hash] [--weights profile|equal|w1,w2,...]
//                 [--mode async|sync] [--tolerance T] [--source V] [--damping D] [--beta B]
//                 [--label max|min] [--seed S] [--out values.txt|values.npy] [--report FILE.json]
//                 [--trace-png FILE.png] [--verify] [--poll-ms N] [--level-fraction F] [--batch-age-ms MS]
//                 [--batch-entries N] [--priority-fraction P] [--run-dir DIR]
//                 [--profile FILE] [--progress auto|always|never]
//
// FILE is read by extension (.mtx, .graph/.metis, .edges/.el/.txt/.snap; graphdata/digraph.hpp);
// SPEC is a generator (rmat:SCALE[:EF], lognormal:N, mesh2d:NXxNY, mesh3d:NXxNYxNZ) seeded by
// --seed. --weights defaults to `profile` when a profile exists (next to CONFIG, or --profile),
// else `equal` with a note. Prints to `out`: the graph, the plan (method; per node the target
// share against the vertices and edges it got; edge cut), per node vertices, edges, updates, edge
// updates, batches sent/received, bytes (coordinator link and peer links), busy/idle seconds and
// memory (bytes per edge); totals (wall time, edge updates, edge updates/s, residual, polls,
// restarts and lost nodes) and the verification line. Notices (lost nodes, the weights note) go
// to `err`. --out writes one value per line (.txt, %.17g, "inf" where unreachable) or a float64
// .npy of shape (N, 1); --report the same figures as JSON with the convergence trace;
// --trace-png the residual over time (log y) with gnuplot (a missing gnuplot is a warning).
// --progress (default auto: only when stderr is a terminal) shows the residual against the
// tolerance and an ETA from its decay on one line of stderr, redrawn in place after the first
// second and cleared before the report (progress_line.hpp).
// Exit codes as commands.hpp: 2 bad flags or input (a malformed graph names FILE:LINE, an
// unknown value lists the valid ones), 1 the run failed (an unreachable node or one without the
// graph service is named), 3 verification failed, 130 interrupted. Not thread-safe.
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>

#include "tessera/balance/session/settings.hpp"

namespace tessera::cli {

struct GraphCommand {
  std::string config_path;
  std::string run_dir;        // where `tessera up` recorded emulated endpoints; empty: default
  std::string profile_path;   // empty: next to the config
  std::string graph_path;     // --graph FILE
  std::string generate;       // --generate SPEC
  std::string weights;        // empty: profile if one exists, else equal
  // --algorithm, --tolerance, --source, --damping, --beta, --label, --mode, --partition, --nodes,
  // --placement-cache, --seed,
  // --verify, --poll-ms, --snapshot-ms, --node-timeout, --max-seconds, --level-fraction,
  // --batch-age-ms, --batch-entries, --priority-fraction: the options Python's graph calls take
  // too, with their defaults and checks (session/settings.hpp).
  session::GraphSettings settings;
  // --require-all: every node must answer at the start, or the command fails naming those that
  // did not; by default they are left out with a warning (session::SessionOptions::require_all).
  bool require_all = session::SessionOptions{}.require_all;
  std::string out_path;
  std::string report_path;
  std::string trace_png_path;
  std::string progress = "auto";  // auto | always | never
  // Set by the caller's signal handler: the run stops, sessions are closed, exit 130.
  const std::atomic<bool>* interrupted = nullptr;
};

int command_graph(const GraphCommand& command, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
