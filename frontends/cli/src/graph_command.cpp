#include "tessera/cli/graph_command.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include <fmt/format.h>

#include "command_output.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/progress_line.hpp"
#include "tessera/balance/graphs/graph_report.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/core/strings.hpp"
#include "tessera/graph/algorithm.hpp"
#include "tessera/linalg/matrix.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "subcommands.hpp"

namespace tessera::cli {
namespace {

namespace tp = tessera::partition;
namespace tg = tessera::graph;


Result<graphdata::DirectedGraph> load_graph(const GraphCommand& command) {
  if (command.graph_path.empty() == command.generate.empty()) {
    return invalid_argument("give the graph with --graph FILE or --generate SPEC (one of the two)");
  }
  if (!command.graph_path.empty()) return graphdata::read_directed_graph_file(command.graph_path);
  return graphdata::generate_directed_graph(command.generate, command.settings.seed);
}

std::string graph_source(const GraphCommand& command) {
  return command.graph_path.empty() ? fmt::format("{} (seed {})", command.generate, command.settings.seed) : command.graph_path;
}

// --weights as given, or `profile` when a profile exists and `equal` (with a note) when not.
Result<graphs::TargetWeights> target_weights(const GraphCommand& command, const std::string& profile_path, std::ostream& err) {
  if (!command.weights.empty()) return graphs::parse_target_weights(command.weights);
  std::error_code error;
  if (std::filesystem::exists(profile_path, error)) return graphs::parse_target_weights("profile");
  err << fmt::format("note: no profile at {}; sharing the graph equally (run `tessera profile {}` to weight the nodes "
                     "by speed)\n",
                     profile_path, command.config_path);
  return graphs::TargetWeights{};
}

std::string bytes_text(uint64_t bytes) {
  const auto value = static_cast<double>(bytes);
  if (value >= 1e9) return fmt::format("{:.2f} GB", value / 1e9);
  if (value >= 1e6) return fmt::format("{:.2f} MB", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f} kB", value / 1e3);
  return fmt::format("{} B", bytes);
}

double share_of(int64_t part, int64_t total) {
  return total > 0 ? static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

void print_placement(std::ostream& out, const std::string& title, const graphs::PlacementSummary& placement) {
  int64_t vertices = 0, edges = 0;
  for (int64_t v : placement.vertices) vertices += v;
  for (int64_t e : placement.edges) edges += e;
  out << fmt::format("{}: edge cut {}, imbalance {:.3f}{}\n", title, placement.quality.edge_cut,
                     placement.quality.imbalance, placement.note.empty() ? "" : " (" + placement.note + ")");
  out << fmt::format("  {:<12} {:>8} {:>10} {:>8} {:>12} {:>8}\n", "node", "target", "vertices", "share", "edges",
                     "share");
  for (std::size_t part = 0; part < placement.nodes.size(); ++part) {
    out << fmt::format("  {:<12} {:>8.4f} {:>10} {:>8.4f} {:>12} {:>8.4f}\n", placement.nodes[part],
                       placement.target_share[part], placement.vertices[part], share_of(placement.vertices[part], vertices),
                       placement.edges[part], share_of(placement.edges[part], edges));
  }
}

void print_choice(std::ostream& out, const graphs::GraphOutcome& outcome) {
  const graphs::NodeChoiceRecord& choice = outcome.choice;
  out << fmt::format("nodes ({}): {}\n", choice.mode, join(choice.taking_part, ", "));
  for (const std::string& sentence : choice.left_out) out << "  " << sentence << "\n";
  if (choice.forecast) {
    out << fmt::format("  forecast {:.3f} s (placing {:.3f} s, slowest node {:.3f} s, noticing the end {:.3f} s), bound by {}\n",
                       choice.forecast->total_s, choice.forecast->placement_s, choice.forecast->slowest_node_s,
                       choice.forecast->termination_s, choice.bound);
  }
  if (!choice.workload_source.empty()) out << "  sweeps: " << choice.workload_source << "\n";
  out << fmt::format("placing: {}{}{}\n", outcome.placing.method, outcome.placing.cached ? " (cached placement reused)" : "",
                     outcome.placing.reason.empty() ? "" : "; " + outcome.placing.reason);
  if (!outcome.placing.cache_note.empty()) out << "  " << outcome.placing.cache_note << "\n";
}

void print_outcome(std::ostream& out, const graphs::GraphOutcome& outcome) {
  out << fmt::format("{}, {}, tolerance {:g}\n", tg::describe(outcome.algorithm), graphs::graph_mode_name(outcome.mode),
                     outcome.tolerance);
  print_choice(out, outcome);
  print_placement(out, fmt::format("plan ({} by weights {})", outcome.placing.method, outcome.weights),
                  outcome.placement);
  if (outcome.final_placement) print_placement(out, "after the last restart", *outcome.final_placement);
  out << fmt::format("{:<12} {:>9} {:>10} {:>11} {:>12} {:>15} {:>10} {:>10} {:>8} {:>8} {:>10} {:>20}\n", "node",
                     "vertices", "edges", "updates", "edge upd", "batches out/in", "coord", "peer", "busy s", "idle s",
                     "forecast s", "memory (B/edge)");
  for (const graphs::GraphNodeFigures& node : outcome.nodes) {
    // The node's forecast: its ship, edge, delta and gather seconds, set against busy + idle.
    std::string forecast = "-";
    if (outcome.choice.forecast) {
      for (const graphs::GraphNodeForecast& predicted : outcome.choice.forecast->nodes) {
        if (predicted.name == node.name) forecast = fmt::format("{:.3f}", predicted.total_s);
      }
    }
    out << fmt::format("{:<12} {:>9} {:>10} {:>11} {:>12} {:>15} {:>10} {:>10} {:>8.3f} {:>8.3f} {:>10} {:>20}{}\n", node.name,
                       node.vertices, node.edges, node.updates, node.edge_updates,
                       fmt::format("{}/{}", node.batches_sent, node.batches_received),
                       bytes_text(node.coordinator_bytes_sent + node.coordinator_bytes_received),
                       bytes_text(node.peer_bytes_sent + node.peer_bytes_received), node.busy_s, node.idle_s, forecast,
                       fmt::format("{} ({:.1f})", bytes_text(node.memory_bytes), node.bytes_per_edge()),
                       node.lost ? "  LOST" : node.left_out ? "  left out" : "");
  }
  out << fmt::format("total: {:.3f} s (placing {:.3f} s, run {:.3f} s){}, {} edge updates, {:.3g} edge updates/s, "
                     "residual {:.3g}, {} polls ({:.2f} ms each){}\n",
                     outcome.total_s(), outcome.placement_s, outcome.wall_s,
                     outcome.choice.forecast ? fmt::format(", forecast {:.3f} s", outcome.choice.forecast->total_s) : "",
                     outcome.edge_updates, outcome.edge_updates_per_s,
                     outcome.residual, outcome.polls,
                     outcome.polls > 0 ? 1e3 * outcome.poll_s / static_cast<double>(outcome.polls) : 0.0,
                     outcome.mode == graphs::GraphMode::kSync ? fmt::format(", {} steps", outcome.steps) : "");
  std::string lost = "none";
  if (!outcome.lost_nodes.empty()) {
    lost.clear();
    for (std::size_t i = 0; i < outcome.lost_nodes.size(); ++i) {
      lost += fmt::format("{}{} ({})", i == 0 ? "" : ", ", outcome.lost_nodes[i], outcome.lost_reasons[i]);
    }
  }
  out << fmt::format("restarts {}, lost nodes: {}\n", outcome.restarts, lost);
  if (outcome.verification) out << outcome.verification->detail << "\n";
}

Status write_text(const std::string& path, const std::string& text, std::string_view what) {
  std::ofstream file(path, std::ios::trunc);
  if (!file) return io_error(fmt::format("cannot write {} {}", what, path));
  file << text;
  if (!file.flush()) return io_error(fmt::format("cannot write {} {}", what, path));
  return Status::ok();
}

Status write_values(const std::string& path, const std::vector<double>& values) {
  if (std::filesystem::path(path).extension() == ".npy") {
    linalg::Matrix column(values.size(), 1);
    column.values = values;
    return linalg::write_npy(path, column);
  }
  std::string text;
  text.reserve(values.size() * 12);
  for (double value : values) {
    text += fmt::format("{:.17g}", value);
    text += '\n';
  }
  return write_text(path, text, "values");
}

// Residual over time, log y, through a script with the data inline (nothing left beside the PNG).
Status write_trace_png(const std::string& path, const graphs::GraphOutcome& outcome) {
  std::string data;
  for (const graphs::TracePoint& point : outcome.trace) {
    if (point.residual > 0.0) data += fmt::format("{} {}\n", point.time_s, point.residual);
  }
  if (data.empty()) return invalid_argument("no positive residual to plot (the run converged at its first poll)");
  const bool linear = tg::is_linear(outcome.algorithm);
  std::string script = experiment::kPlotHeader;
  script += "$trace << EOD\n" + data + "EOD\n";
  script += fmt::format("set output '{}'\n", path);
  script += fmt::format("set title \"{}, {}: residual over time\"\n", tg::describe(outcome.algorithm),
                        graphs::graph_mode_name(outcome.mode));
  script += fmt::format("set xlabel 'time since the parts were shipped (s)'\nset ylabel '{}'\nset logscale y\n"
                        "set format y '10^{{%L}}'\n",
                        linear ? "sum |pending delta|" : "vertices with a pending delta");
  if (linear) script += fmt::format("set arrow from graph 0, first {0} to graph 1, first {0} nohead dt 2\n", outcome.tolerance);
  script += "plot $trace using 1:2 with linespoints title 'residual'\n";
  const std::string script_path = path + ".gp";
  TESSERA_RETURN_IF_ERROR(write_text(script_path, script, "gnuplot script"));
  Status plotted = experiment::run_gnuplot(script_path);
  std::error_code error;
  std::filesystem::remove(script_path, error);
  return plotted;
}

}  // namespace

int command_graph(const GraphCommand& command, std::ostream& out, std::ostream& err) {
  const auto interrupted = [&command] { return command.interrupted != nullptr && command.interrupted->load(); };
  Result<ProgressMode> progress_mode = parse_progress_mode(command.progress);
  if (!progress_mode) return report_failure(err, progress_mode.status());
  Result<emulation::ReachableCluster> cluster = emulation::load_reachable_cluster(command.config_path, command.run_dir);
  if (!cluster) return report_failure(err, cluster.status());
  print_warnings(err, cluster->warnings);

  Result<graphdata::DirectedGraph> graph = load_graph(command);
  if (!graph) return report_failure(err, graph.status());
  out << fmt::format("{}: {}\n", graph_source(command), graphdata::describe(*graph));
  Result<graphs::GraphRunOptions> options = session::graph_run_options(command.settings, *graph, flag_spelling());
  if (!options) return report_failure(err, options.status());
  const tg::AlgorithmSpec spec = options->algorithm;
  // Everything that needs only the graph fails here, before a connection is made.
  if (Status checked = graphs::check_graph_run(*graph, spec, graph_source(command)); !checked) {
    return report_failure(err, checked);
  }
  Result<double> tolerance = graphs::run_tolerance(spec, command.settings.tolerance);
  if (!tolerance) return report_failure(err, tolerance.status());
  const std::string profile_path =
      command.profile_path.empty() ? profile::default_profile_path(command.config_path) : command.profile_path;
  Result<graphs::TargetWeights> weights = target_weights(command, profile_path, err);
  if (!weights) return report_failure(err, weights.status());
  options->weights = std::move(*weights);
  if (interrupted()) return report_interrupted(err);

  session::SessionOptions session_options;
  session_options.profile_path = command.profile_path;
  session_options.connect.required_capabilities = transport::kCapabilityGraph;
  // Only weights taken from the profile need it intact.
  session_options.damaged_profile_is_error = options->weights.source == graphs::TargetWeights::Source::kProfile;
  session_options.measure_missing_profile = false;
  session_options.require_all = command.require_all;
  const std::string cluster_name = cluster->spec.name;
  Result<session::Session> session = session::Session::open(std::move(*cluster), session_options);
  if (!session) return interrupted() ? report_interrupted(err) : report_failure(err, session.status());
  print_left_out(err, *session);

  ProgressPrinter progress(err, progress_wanted(*progress_mode, STDERR_FILENO), stderr_progress_options());
  ResidualTrend trend;
  // cc and sssp stop at no pending vertex (tolerance 0), which a logarithm never reaches; a count
  // below one vertex is that zero.
  const double eta_target = *tolerance > 0.0 ? *tolerance : 0.5;
  session::RunControl control;
  control.cancel = command.interrupted;
  control.on_notice = [&progress](const std::string& notice) { progress.notice(notice); };
  control.on_graph_progress = [&progress, &trend](const graphs::TracePoint& point) {
    progress.update([&] { trend.add(point.time_s, point.residual); });
  };
  progress.start([&trend, &tolerance, eta_target](double elapsed_s) {
    return graph_progress_text(trend.latest(), *tolerance, elapsed_s, trend.eta_s(eta_target));
  });
  Result<graphs::GraphOutcome> outcome = session->graph(*graph, std::move(*options), control);
  progress.stop();  // the line is gone before anything else is written
  if (interrupted()) {
    session->close();
    return report_interrupted(err);
  }
  session->close();
  if (!outcome) return report_failure(err, outcome.status());
  print_outcome(out, *outcome);

  if (!command.out_path.empty()) {
    if (Status written = write_values(command.out_path, outcome->values); !written) return report_failure(err, written);
    out << "values written to " << command.out_path << "\n";
  }
  if (!command.report_path.empty()) {
    graphs::GraphReportHeader header{cluster_name, graph_source(command),
                             {{"poll_ms", command.settings.poll_ms},
                              {"level_fraction", command.settings.level_fraction},
                              {"batch_age_ms", command.settings.batch_age_ms},
                              {"batch_entries", command.settings.batch_entries},
                              {"priority_fraction", command.settings.priority_fraction},
                              {"seed", static_cast<double>(command.settings.seed)}}};
    const std::string text = graphs::graph_report_json(header, *graph, *outcome) + "\n";
    if (Status written = write_text(command.report_path, text, "report"); !written) return report_failure(err, written);
    out << "report written to " << command.report_path << "\n";
  }
  if (!command.trace_png_path.empty()) {
    if (Status plotted = write_trace_png(command.trace_png_path, *outcome); plotted) {
      out << "trace plotted to " << command.trace_png_path << "\n";
    } else {
      err << "warning: no trace plot: " << printable_message(plotted.message()) << "\n";
    }
  }
  if (outcome->verification && !outcome->verification->passed) {
    err << "tessera: verification FAILED: " << outcome->verification->detail << "\n";
    return kExitVerificationFailed;
  }
  return kExitOk;
}

Subcommand add_graph_command(CLI::App& app) {
  auto command = std::make_shared<GraphCommand>();
  // Flags whose absence means "the algorithm's default", so they are read only when given.
  struct Numbers {
    double tolerance = 0.0;
    int64_t source = 0;
    double beta = 0.0;
  };
  auto numbers = std::make_shared<Numbers>();
  CLI::App* sub = app.add_subcommand(
      "graph", "PageRank, Katz, connected components or shortest paths on the cluster's graph services, verified");
  sub->add_option("config", command->config_path, "cluster description (YAML)")->required();
  sub->add_option("--algorithm", command->settings.algorithm, "pagerank | katz | cc | sssp")->required();
  CLI::Option* graph_file_opt =
      sub->add_option("--graph", command->graph_path, "graph file: .mtx, .graph/.metis, .edges/.el/.txt/.snap");
  sub->add_option("--generate", command->generate, "generator: rmat:SCALE[:EF], lognormal:N, mesh2d:NXxNY, mesh3d:NXxNYxNZ")
      ->excludes(graph_file_opt);
  sub->add_option("--partition", command->settings.partition,
                        "auto (locality placement; METIS where the forecast says it pays) | metis | contiguous | hash")
      ->capture_default_str();
  sub->add_option("--nodes", command->settings.nodes,
                        "auto (the set forecast fastest, left-out nodes named with why) | all | node names a,b,c")
      ->capture_default_str();
  sub->add_option("--placement-cache", command->settings.placement_cache,
                        "keep placements and past runs' figures here (default $XDG_CACHE_HOME or ~/.cache, tessera/graphs; none: off)");
  sub->add_option("--weights", command->weights,
                        "profile | equal | w1,w2,... (default: profile when one exists, else equal)");
  sub->add_option("--mode", command->settings.mode, "async (accumulative updates, no barriers) | sync (Jacobi steps)")
      ->capture_default_str();
  CLI::Option* tolerance_opt = sub->add_option("--tolerance", numbers->tolerance,
                                        "pagerank/katz: stop at sum |pending delta| <= T (default 1e-6)");
  CLI::Option* source_opt = sub->add_option("--source", numbers->source, "sssp (required) and katz: the source vertex");
  sub->add_option("--damping", command->settings.damping, "pagerank damping")->capture_default_str();
  CLI::Option* beta_opt = sub->add_option("--beta", numbers->beta, "katz: attenuation, below 1/lambda_max");
  sub->add_option("--label", command->settings.label, "cc: label components by their max or min vertex id")
      ->capture_default_str();
  sub->add_option("--seed", command->settings.seed, "generator seed, METIS seed, hash key")->capture_default_str();
  sub->add_option("--out", command->out_path, "write the values: .txt (one per line) or .npy (float64, N x 1)");
  sub->add_option("--report", command->report_path, "write figures and the convergence trace as JSON");
  sub->add_option("--trace-png", command->trace_png_path, "plot the residual over time (gnuplot)");
  sub->add_flag("--verify", command->settings.verify, "compare with a reference computed here (exit 3 when it differs)");
  sub->add_flag("--require-all", command->require_all, kRequireAllHelp);
  sub->add_option("--poll-ms", command->settings.poll_ms, "async: progress poll interval")->capture_default_str();
  sub->add_option("--level-fraction", command->settings.level_fraction,
                        "async pagerank/katz: common priority level = F x residual per edge, sent with every poll "
                        "(0 = off)")
      ->capture_default_str();
  sub->add_option("--batch-age-ms", command->settings.batch_age_ms,
                        "async: a batch of deltas for another node leaves at the latest this long after its first delta")
      ->capture_default_str();
  sub->add_option("--batch-entries", command->settings.batch_entries,
                        "a batch of deltas for another node leaves once it holds this many")
      ->capture_default_str();
  sub->add_option("--priority-fraction", command->settings.priority_fraction,
                        "async pagerank/katz: share of a part's pending vertices (sampled, by |dv| / out-degree) updated per "
                        "sweep; 1 = every pending vertex")
      ->capture_default_str();
  sub->add_option("--snapshot-ms", command->settings.snapshot_ms, "values fetched from every node this often (restart points)")
      ->capture_default_str();
  sub->add_option("--node-timeout", command->settings.node_timeout_s,
                        "seconds a node may stay silent during a call before it is lost")
      ->capture_default_str();
  sub->add_option("--max-seconds", command->settings.max_seconds, "give up when the run takes longer")->capture_default_str();
  sub->add_option("--run-dir", command->run_dir, "run directory of `tessera up` (for emulated endpoints)");
  sub->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");
  sub->add_option("--progress", command->progress,
                        "auto: a progress line (residual, ETA) on stderr when it is a terminal and the run lasts "
                        "over a second | always | never")
      ->capture_default_str();

  return {sub, [command, numbers, tolerance_opt, source_opt, beta_opt](const Invocation& call) {
            if (*tolerance_opt) command->settings.tolerance = numbers->tolerance;
            if (*source_opt) command->settings.source = numbers->source;
            if (*beta_opt) command->settings.beta = numbers->beta;
            command->interrupted = &call.stop_cleanly_on_interrupt();
            return command_graph(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
