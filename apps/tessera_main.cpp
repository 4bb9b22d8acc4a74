// tessera: the coordinator's command line. Parses flags and hands over to tessera::balance.
//
// Nothing escapes main as an exception: a std::bad_alloc or any other std::exception that slips
// past the library's checks ends in one sentence and exit 1, never in std::terminate's abort.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <exception>
#include <iostream>
#include <new>
#include <sstream>

#include <CLI/CLI.hpp>

#include "tessera/balance/cli/commands.hpp"
#include "tessera/balance/cli/eval_command.hpp"
#include "tessera/balance/cli/graph_command.hpp"
#include "tessera/balance/cli/keygen_command.hpp"
#include "tessera/balance/cli/partition_command.hpp"
#include "tessera/core/strings.hpp"

namespace tb = tessera::balance;

namespace {
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

// The first Ctrl-C asks the command to stop cleanly (sessions closed, clusters stopped); a second
// one means "now": only async-signal-safe calls here.
extern "C" void on_interrupt(int) {
  if (g_interrupted.exchange(true)) ::_exit(tessera::balance::cli::kExitInterrupted);
}

void stop_cleanly_on_interrupt() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int run(int argc, char** argv);
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "tessera: out of memory; the inputs (or --n) are larger than this machine can hold, or other "
                 "programs use the memory. Try smaller matrices\n";
  } catch (const std::exception& error) {
    // what() may quote input (a library's exception text), so it is escaped like report_failure's.
    std::cerr << "tessera: internal error: " << tessera::printable_message(error.what())
              << "; please report it with the command you ran\n";
  } catch (...) {
    std::cerr << "tessera: internal error (unknown exception); please report it with the command you ran\n";
  }
  return tb::cli::kExitRunFailed;
}

namespace {
int run(int argc, char** argv) {
  CLI::App app{"tessera: balanced matrix multiplication on a mixed cluster"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);

  // The default, leaving out nodes that do not answer, is session::SessionOptions::require_all's.
  constexpr const char* kRequireAllHelp =
      "fail unless every node answers at the start (default: leave out, with a warning, nodes that are unreachable "
      "or refuse, and run on the others)";

  tb::cli::LifecycleCommand lifecycle;
  auto add_lifecycle = [&](const char* name, const char* help) {
    CLI::App* sub = app.add_subcommand(name, help);
    sub->add_option("config", lifecycle.config_path, "cluster description (YAML)")->required();
    sub->add_option("--run-dir", lifecycle.local.run_dir, "where pid files and logs live, a private (0700) folder (default $TESSERA_RUN_DIR, else "
                                                          "$XDG_RUNTIME_DIR/tessera, else /tmp/tessera-UID)");
    return sub;
  };
  CLI::App* up = add_lifecycle("up", "start one local worker process per node of CONFIG");
  up->add_flag("--no-emulation", lifecycle.local.no_emulation,
               "ignore emulate: settings and run every node unthrottled (no root needed)");
  CLI::App* down = add_lifecycle("down", "stop the workers `tessera up` started for CONFIG");
  CLI::App* status = add_lifecycle("status", "show whether each node of CONFIG answers, all checked at once");
  tb::cli::StatusCommand status_command;
  status->add_flag("--json", status_command.json, "print the nodes' states as one JSON document");
  status->add_option("--watch", status_command.watch_s, "redraw every SECONDS until Ctrl-C");
  status->add_option("--deadline-ms", status_command.deadline_ms,
                     "how long each node may take to connect and authenticate")
      ->capture_default_str();
  status->add_option("--profile", status_command.profile_path, "profile file (default: CONFIG with .profile.yaml)");

  tb::cli::ProfileCommand profile;
  CLI::App* profile_cmd = app.add_subcommand(
      "profile", "measure every node: GEMM speed curve, link latency and bandwidth; saved and reused");
  profile_cmd->add_option("config", profile.config_path, "cluster description (YAML)")->required();
  profile_cmd->add_option("--run-dir", profile.run_dir, "run directory of `tessera up` (for emulated endpoints)");
  profile_cmd->add_option("--out", profile.profile_path, "profile file (default: CONFIG with .profile.yaml)");
  profile_cmd->add_flag("--refresh", profile.measure.refresh, "re-measure every node, even unchanged ones");
  profile_cmd->add_flag("--require-all", profile.require_all, kRequireAllHelp);
  profile_cmd->add_flag("--quick", profile.measure.quick, "one GEMM size in one window, small link transfers");
  profile_cmd->add_option("--node", profile.measure.only_nodes, "re-measure only this node (repeatable)");
  profile_cmd->add_option("--probe-size", profile.measure.reference_size, "reference GEMM size (its rate gives pw_i)")
      ->capture_default_str();
  profile_cmd->add_option("--window-seconds", profile.measure.window_seconds,
                          "timed window per GEMM measurement (0.05 to 30)")
      ->capture_default_str();

  tb::cli::ModelCommand model;
  uint64_t model_m = 0, model_n = 0, model_k = 0;
  CLI::App* model_cmd = app.add_subcommand("model", "print each policy's plan and predicted finish times (runs nothing)");
  model_cmd->add_option("config", model.config_path, "cluster description (YAML)")->required();
  model_cmd->add_option("--profile", model.profile_path, "profile file (default: CONFIG with .profile.yaml)");
  CLI::Option* model_n_opt = model_cmd->add_option("--n", model_n, "columns of C (and rows/inner size unless --m/--k)");
  CLI::Option* model_m_opt = model_cmd->add_option("--m", model_m, "rows of A and C");
  CLI::Option* model_k_opt = model_cmd->add_option("--k", model_k, "columns of A, rows of B");
  model_cmd->add_option("--panel-width", model.panel_width, "rows of B per panel")->capture_default_str();
  model_cmd->add_option("--panels-in-flight", model.panels_in_flight, "panels a node may hold unacknowledged")
      ->capture_default_str();
  model_cmd->add_flag("--scale", model.scale,
                      "instead: the model policy's makespan against the number of nodes (the first 1, 2, 4, ... of the file)");

  tb::cli::MultiplyCommand multiply;
  uint64_t m = 0, n = 0, k = 0;
  CLI::App* multiply_cmd = app.add_subcommand("multiply", "C = A x B spread over the cluster, verified");
  multiply_cmd->add_option("config", multiply.config_path, "cluster description (YAML)")->required();
  CLI::Option* n_opt = multiply_cmd->add_option("--n", n, "columns of C (and rows/inner size unless --m/--k)");
  CLI::Option* m_opt = multiply_cmd->add_option("--m", m, "rows of A and C");
  CLI::Option* k_opt = multiply_cmd->add_option("--k", k, "columns of A, rows of B");
  multiply_cmd->add_option("--run-dir", multiply.run_dir, "run directory of `tessera up` (for emulated endpoints)");
  multiply_cmd->add_option("--policy", multiply.settings.policy, "even | proportional | model | dynamic")->capture_default_str();
  multiply_cmd->add_option("--tile-rows", multiply.settings.tile_rows, "dynamic: rows per tile (default about m / (8 x nodes))");
  multiply_cmd->add_option("--weights", multiply.settings.weights, "relative powers, one per node (comma separated)")
      ->delimiter(',');
  multiply_cmd->add_option("--profile", multiply.profile_path, "profile file (default: CONFIG with .profile.yaml)");
  multiply_cmd->add_option("--seed", multiply.settings.seed, "seed of the random inputs")->capture_default_str();
  multiply_cmd->add_option("--fill", multiply.fill, "random values: uniform in [-1,1) | integers in [-8,8]")
      ->capture_default_str();
  multiply_cmd->add_option("--verify", multiply.settings.verify, "freivalds | exact | none")->capture_default_str();
  multiply_cmd->add_option("--report", multiply.report_path, "write the report as JSON");
  multiply_cmd->add_option("--a", multiply.a_path, "A as .npy (float64, C order)");
  multiply_cmd->add_option("--b", multiply.b_path, "B as .npy (float64, C order)");
  multiply_cmd->add_option("--out", multiply.out_path, "write C as .npy");
  multiply_cmd->add_option("--panel-width", multiply.settings.panel_width, "rows of B per panel (1 to 1048576)")
      ->capture_default_str();
  multiply_cmd->add_option("--panels-in-flight", multiply.settings.panels_in_flight,
                           "panels a node may hold unacknowledged (1 to 1024)")
      ->capture_default_str();
  multiply_cmd->add_option("--refill", multiply.settings.refill_threshold,
                           "send jobs once this many credits are back (1 = as each returns; <= panels in flight)")
      ->capture_default_str();
  multiply_cmd->add_option("--layout", multiply.settings.layout,
                           "even/proportional: rows | 2d (column-based rectangles) | square-corner | 3d (splits k)")
      ->capture_default_str();
  multiply_cmd->add_option("--distribution", multiply.settings.distribution,
                           "how B reaches the nodes: star (the coordinator sends it to each) | chain (each node "
                           "forwards it to the next) | auto (the model policy chooses by forecast; others: star)")
      ->capture_default_str();
  multiply_cmd->add_option("--overlap", multiply.overlap,
                           "on: panels travel while nodes compute; off: one panel at a time (SeqMsg)")
      ->capture_default_str();
  multiply_cmd->add_flag("--show-plan", multiply.show_plan, "print the plan before running it");
  multiply_cmd->add_flag("--require-all", multiply.require_all, kRequireAllHelp);
  multiply_cmd->add_flag("--allow-nonfinite", multiply.settings.allow_nonfinite,
                         "accept NaN/inf in --a/--b (refused by default); verification counts matching NaN/inf as equal");
  multiply_cmd->add_option("--node-timeout", multiply.settings.node_timeout_s,
                           "seconds a node that owes frames may stay silent before it is dropped as unresponsive "
                           "and its tiles reissued; 0 = from the profile's link and GEMM speeds, at least 10 s")
      ->capture_default_str();
  multiply_cmd->add_option("--progress", multiply.progress,
                           "auto: a progress line (jobs done per node, ETA) on stderr when it is a terminal and the "
                           "run lasts over a second | always | never")
      ->capture_default_str();

  tb::cli::EvalCommand eval;
  bool no_rewrite = false;
  CLI::App* eval_cmd = app.add_subcommand(
      "eval", "evaluate a matrix expression (u * P^8, A*B*C*D, I + A + A^2) with each product on the cluster, verified");
  eval_cmd->add_option("config", eval.config_path, "cluster description (YAML)")->required();
  eval_cmd->add_option("expression", eval.expression,
                       "products * or @, sums + -, scalars (2 * A), transposes A' or A.T, powers A^k, I; e.g. \"u * P^8\"")
      ->required();
  eval_cmd->add_option("--input", eval.inputs, "NAME=FILE.npy, NAME=random:ROWSxCOLS or NAME=integers:ROWSxCOLS (repeat)")
      ->required();
  eval_cmd->add_option("--out", eval.out_path, "write the result as .npy");
  eval_cmd->add_option("--report", eval.report_path, "write the expression, its costs and every product's figures as JSON");
  eval_cmd->add_flag("--explain", eval.explain, "print the expression before and after rewriting, with their costs");
  eval_cmd->add_flag("--no-rewrite", no_rewrite, "evaluate as written (no reordering, powers by squaring)");
  eval_cmd->add_flag("--require-all", eval.require_all, kRequireAllHelp);
  eval_cmd->add_option("--mode", eval.settings.mode,
                       "scheduled: tile tasks placed by HEFT, intermediates kept on the nodes | sequence: one "
                       "multiply per product, every intermediate back here")
      ->capture_default_str();
  eval_cmd->add_option("--tile", eval.settings.tile, "scheduled: tile size (default: the fastest predicted of 256..4096)");
  eval_cmd->add_option("--nodes", eval.settings.nodes, "scheduled: only these nodes (comma-separated names)")->delimiter(',');
  eval_cmd->add_flag("--every-node", eval.settings.every_node,
                     "scheduled: give every node tasks, even when fewer nodes (the fastest first) are forecast faster");
  eval_cmd->add_option("--cache-mb", eval.settings.cache_mb, "scheduled: each node's tile cache (default: half its tile memory)");
  eval_cmd->add_option("--tile-route", eval.settings.tile_route,
                       "scheduled: tiles between nodes go direct (worker to worker, where every worker can), "
                       "through the coordinator, or auto: whichever the schedule forecasts sooner")
      ->capture_default_str();
  eval_cmd->add_option("--policy", eval.settings.policy, "sequence: policy of every product: even | proportional | model | dynamic")
      ->capture_default_str();
  eval_cmd->add_option("--verify", eval.settings.verify, "freivalds | exact | none: the value (scheduled) or each product (sequence)")
      ->capture_default_str();
  eval_cmd->add_option("--run-dir", eval.run_dir, "run directory of `tessera up` (for emulated endpoints)");
  eval_cmd->add_option("--profile", eval.profile_path, "profile file (default: CONFIG with .profile.yaml)");

  tb::cli::ExperimentCommand experiment;
  uint32_t repeat = 0;
  CLI::App* experiment_cmd =
      app.add_subcommand("experiment", "replay a study: every combination, CSV, plots and report.md");
  experiment_cmd->add_option("study", experiment.study_path, "study file (YAML), e.g. experiments/balanced-vs-even.yaml")
      ->required();
  experiment_cmd->add_option("--out", experiment.options.out_dir, "output folder (default experiments/results/STUDY)");
  CLI::Option* repeat_opt =
      experiment_cmd->add_option("--repeat", repeat, "repetitions per combination (default: the study's)")
          ->check(CLI::Range(1u, 1000u));
  experiment_cmd->add_option("--run-dir", experiment.options.run_dir, "run directory for the clusters it starts");
  experiment_cmd->add_flag("--require-all", experiment.options.require_all, kRequireAllHelp);

  tb::cli::PartitionCommand partition;
  CLI::App* partition_cmd = app.add_subcommand(
      "partition", "partition a graph, sparse matrix or generated instance by node weights (METIS); print its quality");
  partition_cmd->add_option("input", partition.input,
                            "graph file (.mtx, .graph, .edges/.el/.txt) or generator: mesh2d:NXxNY, mesh3d:NXxNYxNZ, "
                            "rmat:SCALE[:EF], lognormal:N")
      ->required();
  CLI::Option* partition_weights_opt =
      partition_cmd->add_option("--weights", partition.weights, "relative part weights (comma separated)")
          ->delimiter(',');
  partition_cmd->add_option("--cluster", partition.config_path, "take the parts and weights from this cluster's profile")
      ->excludes(partition_weights_opt);
  partition_cmd->add_option("--profile", partition.profile_path, "profile file (default: CONFIG with .profile.yaml)");
  partition_cmd->add_option("--method", partition.settings.method, "metis | contiguous | hash")->capture_default_str();
  partition_cmd->add_option("--imbalance", partition.settings.imbalance, "allowed max part weight / target")
      ->capture_default_str();
  partition_cmd->add_option("--objective", partition.settings.objective, "cut | volume (metis)")->capture_default_str();
  partition_cmd->add_option("--seed", partition.settings.seed, "METIS seed, hash key, generator seed")->capture_default_str();
  partition_cmd->add_option("--out", partition.out_path, "write one part number per vertex, one per line");
  partition_cmd->add_option("--report", partition.report_path, "write the quality as JSON");

  tb::cli::GraphCommand graph;
  CLI::App* graph_cmd = app.add_subcommand(
      "graph", "PageRank, Katz, connected components or shortest paths on the cluster's graph services, verified");
  graph_cmd->add_option("config", graph.config_path, "cluster description (YAML)")->required();
  graph_cmd->add_option("--algorithm", graph.settings.algorithm, "pagerank | katz | cc | sssp")->required();
  CLI::Option* graph_file_opt =
      graph_cmd->add_option("--graph", graph.graph_path, "graph file: .mtx, .graph/.metis, .edges/.el/.txt/.snap");
  graph_cmd->add_option("--generate", graph.generate, "generator: rmat:SCALE[:EF], lognormal:N, mesh2d:NXxNY, mesh3d:NXxNYxNZ")
      ->excludes(graph_file_opt);
  graph_cmd->add_option("--partition", graph.settings.partition,
                        "auto (locality placement; METIS where the forecast says it pays) | metis | contiguous | hash")
      ->capture_default_str();
  graph_cmd->add_option("--nodes", graph.settings.nodes,
                        "auto (the set forecast fastest, left-out nodes named with why) | all | node names a,b,c")
      ->capture_default_str();
  graph_cmd->add_option("--placement-cache", graph.settings.placement_cache,
                        "keep placements and past runs' figures here (default $XDG_CACHE_HOME or ~/.cache, tessera/graphs; none: off)");
  graph_cmd->add_option("--weights", graph.weights,
                        "profile | equal | w1,w2,... (default: profile when one exists, else equal)");
  graph_cmd->add_option("--mode", graph.settings.mode, "async (accumulative updates, no barriers) | sync (Jacobi steps)")
      ->capture_default_str();
  double tolerance = 0.0;
  CLI::Option* tolerance_opt = graph_cmd->add_option("--tolerance", tolerance,
                                        "pagerank/katz: stop at sum |pending delta| <= T (default 1e-6)");
  int64_t graph_source = 0;
  CLI::Option* source_opt = graph_cmd->add_option("--source", graph_source, "sssp (required) and katz: the source vertex");
  graph_cmd->add_option("--damping", graph.settings.damping, "pagerank damping")->capture_default_str();
  double beta = 0.0;
  CLI::Option* beta_opt = graph_cmd->add_option("--beta", beta, "katz: attenuation, below 1/lambda_max");
  graph_cmd->add_option("--label", graph.settings.label, "cc: label components by their max or min vertex id")
      ->capture_default_str();
  graph_cmd->add_option("--seed", graph.settings.seed, "generator seed, METIS seed, hash key")->capture_default_str();
  graph_cmd->add_option("--out", graph.out_path, "write the values: .txt (one per line) or .npy (float64, N x 1)");
  graph_cmd->add_option("--report", graph.report_path, "write figures and the convergence trace as JSON");
  graph_cmd->add_option("--trace-png", graph.trace_png_path, "plot the residual over time (gnuplot)");
  graph_cmd->add_flag("--verify", graph.settings.verify, "compare with a reference computed here (exit 3 when it differs)");
  graph_cmd->add_flag("--require-all", graph.require_all, kRequireAllHelp);
  graph_cmd->add_option("--poll-ms", graph.settings.poll_ms, "async: progress poll interval")->capture_default_str();
  graph_cmd->add_option("--level-fraction", graph.settings.level_fraction,
                        "async pagerank/katz: common priority level = F x residual per edge, sent with every poll "
                        "(0 = off)")
      ->capture_default_str();
  graph_cmd->add_option("--batch-age-ms", graph.settings.batch_age_ms,
                        "async: a batch of deltas for another node leaves at the latest this long after its first delta")
      ->capture_default_str();
  graph_cmd->add_option("--batch-entries", graph.settings.batch_entries,
                        "a batch of deltas for another node leaves once it holds this many")
      ->capture_default_str();
  graph_cmd->add_option("--priority-fraction", graph.settings.priority_fraction,
                        "async pagerank/katz: share of a part's pending vertices (sampled, by |dv| / out-degree) updated per "
                        "sweep; 1 = every pending vertex")
      ->capture_default_str();
  graph_cmd->add_option("--snapshot-ms", graph.settings.snapshot_ms, "values fetched from every node this often (restart points)")
      ->capture_default_str();
  graph_cmd->add_option("--node-timeout", graph.settings.node_timeout_s,
                        "seconds a node may stay silent during a call before it is lost")
      ->capture_default_str();
  graph_cmd->add_option("--max-seconds", graph.settings.max_seconds, "give up when the run takes longer")->capture_default_str();
  graph_cmd->add_option("--run-dir", graph.run_dir, "run directory of `tessera up` (for emulated endpoints)");
  graph_cmd->add_option("--profile", graph.profile_path, "profile file (default: CONFIG with .profile.yaml)");
  graph_cmd->add_option("--progress", graph.progress,
                        "auto: a progress line (residual, ETA) on stderr when it is a terminal and the run lasts "
                        "over a second | always | never")
      ->capture_default_str();

  tb::cli::KeygenCommand keygen;
  CLI::App* keygen_cmd = app.add_subcommand(
      "keygen", "write a new random cluster secret to PATH (mode 0600) for secret_file: and /etc/tessera/secret");
  keygen_cmd->add_option("path", keygen.path,
                         "where to write it (default $XDG_CONFIG_HOME/tessera/secret, else ~/.config/tessera/secret)");
  keygen_cmd->add_flag("--force", keygen.force, "replace an existing regular file at PATH (never a link)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // CLI11's messages quote the arguments as given (a file name can hold any byte), so its
    // error text is escaped like every other message; help goes to stdout as it is.
    std::ostringstream message;
    const int code = app.exit(error, std::cout, message);
    std::cerr << tessera::printable_message(message.str());
    return code == 0 ? 0 : tb::cli::kExitBadInput;
  }
  if (*n_opt) multiply.n = n;
  if (*m_opt) multiply.m = m;
  if (*k_opt) multiply.k = k;
  if (*model_n_opt) model.n = model_n;
  if (*model_m_opt) model.m = model_m;
  if (*model_k_opt) model.k = model_k;

  if (*up) return tb::cli::command_up(lifecycle, std::cout, std::cerr);
  if (*down) return tb::cli::command_down(lifecycle, std::cout, std::cerr);
  if (*status) {
    status_command.lifecycle = lifecycle;
    stop_cleanly_on_interrupt();
    status_command.interrupted = &g_interrupted;
    return tb::cli::command_status(status_command, std::cout, std::cerr);
  }
  if (*profile_cmd) return tb::cli::command_profile(profile, std::cout, std::cerr);
  if (*multiply_cmd) {
    // Ctrl-C closes the workers' sessions at once, so a multiply started right after finds them free.
    stop_cleanly_on_interrupt();
    multiply.interrupted = &g_interrupted;
    return tb::cli::command_multiply(multiply, std::cout, std::cerr);
  }
  if (*model_cmd) return tb::cli::command_model(model, std::cout, std::cerr);
  if (*eval_cmd) {
    eval.settings.rewrite = !no_rewrite;
    stop_cleanly_on_interrupt();
    eval.interrupted = &g_interrupted;
    return tb::cli::command_eval(eval, std::cout, std::cerr);
  }
  if (*graph_cmd) {
    if (*tolerance_opt) graph.settings.tolerance = tolerance;
    if (*source_opt) graph.settings.source = graph_source;
    if (*beta_opt) graph.settings.beta = beta;
    stop_cleanly_on_interrupt();
    graph.interrupted = &g_interrupted;
    return tb::cli::command_graph(graph, std::cout, std::cerr);
  }
  if (*partition_cmd) return tb::cli::command_partition(partition, std::cout, std::cerr);
  if (*keygen_cmd) return tb::cli::command_keygen(keygen, std::cout, std::cerr);
  if (*experiment_cmd) {
    if (*repeat_opt) experiment.options.repeat = repeat;
    for (int i = 0; i < argc; ++i) experiment.options.command_line += (i == 0 ? "tessera" : std::string(" ") + argv[i]);
    // Ctrl-C or a TERM stops the study cleanly: it shuts the sessions down and stops its clusters.
    stop_cleanly_on_interrupt();
    experiment.options.interrupted = &g_interrupted;
    return tb::cli::command_experiment(experiment, std::cout, std::cerr);
  }
  return tb::cli::kExitBadInput;
}
}  // namespace
