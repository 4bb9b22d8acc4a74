// `tessera eval`: evaluate a matrix expression on the cluster.
//
//   tessera eval CONFIG "u * P^8" --input P=P.npy --input u=u.npy [--out r.npy] [--explain]
//                [--no-rewrite] [--mode scheduled|sequence] [--tile N] [--nodes A,B] [--cache-mb MB]
//                [--tile-route auto|direct|coordinator]
//                [--policy even|proportional|model|dynamic] [--verify freivalds|exact|none]
//                [--report FILE.json] [--run-dir DIR] [--profile FILE]
//
// An input is a float64 .npy file (NAME=FILE.npy) or generated (NAME=random:ROWSxCOLS or
// NAME=integers:ROWSxCOLS, seeded by the name, so a run can be repeated without files; integer
// entries keep products exact). The expression (expr/parse.hpp) is parsed against the inputs'
// shapes, rewritten by cost unless --no-rewrite, and evaluated on the cluster (Session::evaluate):
// scheduled (the default) as tile tasks placed by HEFT with tile caches, the value verified;
// sequence as one verified multiply per product. Prints the expression, what it became and its
// cost, then the schedule's predicted and measured figures per node and task kind (scheduled)
// or one line per product (sequence), and the totals; --explain adds the before/after trees. Exit codes as commands.hpp: 2 bad flags, input or expression (the
// column is named), 1 the run failed, 3 a product failed verification, 130 interrupted.
// Not thread-safe.
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

#include "tessera/balance/session/settings.hpp"

namespace tessera::cli {

struct EvalCommand {
  std::string config_path;
  std::string expression;
  std::vector<std::string> inputs;  // NAME=FILE.npy | NAME=random:RxC | NAME=integers:RxC
  std::string out_path;
  std::string report_path;
  std::string run_dir;
  std::string profile_path;
  // Mode, tile, nodes, cache, policy, verify and rewriting: defaults and checks once for the CLI
  // and Python (session/settings.hpp).
  session::EvalSettings settings;
  bool explain = false;
  // --require-all: every node must answer at the start, or the command fails naming those that
  // did not; by default they are left out with a warning (session::SessionOptions::require_all).
  bool require_all = session::SessionOptions{}.require_all;
  const std::atomic<bool>* interrupted = nullptr;
};
int command_eval(const EvalCommand& command, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
