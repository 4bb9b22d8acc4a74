// `tessera multiply`: C = A x B on the cluster from random or .npy inputs, verified and reported.
#include "tessera/cli/commands.hpp"

#include <unistd.h>

#include <atomic>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "command_output.hpp"
#include "tessera/cli/progress_line.hpp"
#include "tessera/balance/multiply/report.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/balance/session/settings.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/strings.hpp"
#include "subcommands.hpp"

namespace tessera::cli {

namespace {

struct Inputs {
  linalg::Matrix a, b;
};

// A zero-sized .npy is a valid file but no multiply's input; said here, naming the file, before
// the cluster is connected and profiled (the planner's own check would come after both).
Status check_not_empty(const linalg::Matrix& matrix, std::string_view name, const std::string& path) {
  if (matrix.rows >= 1 && matrix.cols >= 1) return Status::ok();
  return invalid_argument(fmt::format("{} holds {} as a {}x{} matrix, which has no entries; a multiply needs at least "
                                      "one row and one column",
                                      printable(path), name, matrix.rows, matrix.cols));
}

Result<Inputs> prepare_inputs(const MultiplyCommand& command, multiply::VerifyMode verify) {
  Inputs inputs;
  if (command.a_path.empty() != command.b_path.empty()) {
    return invalid_argument("give both --a and --b, or neither (random inputs from --seed)");
  }
  if (!command.a_path.empty()) {
    Result<linalg::Matrix> a = linalg::read_npy(command.a_path);
    if (!a) return a.status();
    TESSERA_RETURN_IF_ERROR(check_not_empty(*a, "A", command.a_path));
    if (!command.settings.allow_nonfinite) {
      TESSERA_RETURN_IF_ERROR(session::check_finite_input(*a, "A", command.a_path, flag_spelling()));
    }
    Result<linalg::Matrix> b = linalg::read_npy(command.b_path);
    if (!b) return b.status();
    TESSERA_RETURN_IF_ERROR(check_not_empty(*b, "B", command.b_path));
    if (!command.settings.allow_nonfinite) {
      TESSERA_RETURN_IF_ERROR(session::check_finite_input(*b, "B", command.b_path, flag_spelling()));
    }
    TESSERA_RETURN_IF_ERROR(
        session::check_product_shapes(command.a_path, a->rows, a->cols, command.b_path, b->rows, b->cols));
    const auto mismatch = [](const std::optional<uint64_t>& flag, uint64_t actual) {
      return flag.has_value() && *flag != actual;
    };
    if (mismatch(command.m, a->rows) || mismatch(command.k, a->cols) || mismatch(command.n, b->cols)) {
      return invalid_argument(fmt::format("--m/--n/--k disagree with the .npy shapes (A {}x{}, B {}x{}); drop them "
                                          "when giving --a/--b",
                                          a->rows, a->cols, b->rows, b->cols));
    }
    TESSERA_RETURN_IF_ERROR(session::check_multiply_memory(a->rows, b->cols, a->cols, verify, true, true,
                                                           "; multiply smaller matrices", flag_spelling()));
    inputs.a = std::move(*a);
    inputs.b = std::move(*b);
    return inputs;
  }
  if (!command.n && !command.m && !command.k) return invalid_argument("give --n N (or --m/--n/--k, or --a/--b)");
  // Every dimension is one of the flags given or copied from one, so checking the flags given
  // checks them all, and the message can name the flag that was written.
  constexpr uint64_t kMaxDim = 1u << 20;
  for (const auto& [field, value] : {std::pair{"m", command.m}, std::pair{"n", command.n}, std::pair{"k", command.k}}) {
    if (!value || (*value >= 1 && *value <= kMaxDim)) continue;
    const std::string given = flag_spelling().assignment(field, std::to_string(*value));
    if (*value == 0) {
      return invalid_argument(fmt::format("{}: a matrix needs at least one row and one column; give {} 1 or more",
                                          given, flag_spelling().name(field)));
    }
    return invalid_argument(fmt::format("{} is over {}, the largest matrix dimension supported; give {} {} or less",
                                        given, kMaxDim, flag_spelling().name(field), kMaxDim));
  }
  const uint64_t n = command.n.value_or(command.m.value_or(command.k.value_or(0)));
  const uint64_t m = command.m.value_or(n);
  const uint64_t k = command.k.value_or(n);
  linalg::FillKind fill = linalg::FillKind::kUniform;
  if (command.fill == "integers") {
    fill = linalg::FillKind::kIntegers;
  } else if (command.fill != "uniform") {
    return invalid_argument(fmt::format("unknown --fill '{}'; use uniform or integers", command.fill));
  }
  TESSERA_RETURN_IF_ERROR(session::check_multiply_memory(m, n, k, verify, false, true, "; use a smaller --n (or --m/--k)",
                                                         flag_spelling()));
  inputs.a = linalg::random_matrix(m, k, command.settings.seed, fill);
  inputs.b = linalg::random_matrix(k, n, command.settings.seed + 1, fill);
  return inputs;
}

// The flags of `tessera multiply` as the facade's options; fails naming the flag.
Result<session::MultiplyOptions> multiply_options(const MultiplyCommand& command, std::size_t node_count,
                                                  const std::string& config_path) {
  if (command.overlap != "on" && command.overlap != "off") {
    return invalid_argument(fmt::format("unknown --overlap '{}'; use on or off", command.overlap));
  }
  session::MultiplySettings settings = command.settings;
  settings.overlap = command.overlap == "on";
  return session::resolve_multiply_settings(settings, node_count, config_path, flag_spelling());
}

}  // namespace

int command_multiply(const MultiplyCommand& command, std::ostream& out, std::ostream& err) {
  Result<ProgressMode> progress_mode = parse_progress_mode(command.progress);
  if (!progress_mode) return report_failure(err, progress_mode.status());
  Result<emulation::ReachableCluster> cluster = emulation::load_reachable_cluster(command.config_path, command.run_dir);
  if (!cluster) return report_failure(err, cluster.status());
  Result<session::MultiplyOptions> options = multiply_options(command, cluster->spec.nodes.size(), cluster->spec.source_path);
  if (!options) return report_failure(err, options.status());
  print_warnings(err, cluster->warnings);
  const auto interrupted = [&command] { return command.interrupted != nullptr && command.interrupted->load(); };
  Result<Inputs> inputs = prepare_inputs(command, options->verify);
  if (!inputs) return report_failure(err, inputs.status());
  if (interrupted()) return report_interrupted(err);

  session::SessionOptions session_options;
  session_options.profile_path = command.profile_path;
  session_options.require_all = command.require_all;
  Result<session::Session> session = session::Session::open(std::move(*cluster), session_options);
  if (!session) return interrupted() ? report_interrupted(err) : report_failure(err, session.status());
  print_left_out(err, *session);

  const Inputs& in = *inputs;
  linalg::Matrix c(in.a.rows, in.b.cols);
  ProgressPrinter progress(err, progress_wanted(*progress_mode, STDERR_FILENO), stderr_progress_options());
  // Credits arrive on the nodes' threads; atomics keep them off the printer's lock, which a
  // terminal that stopped reading could hold.
  std::vector<std::atomic<uint64_t>> jobs_done(session->cluster().nodes.size());
  session::RunControl control;
  control.cancel = command.interrupted;
  control.on_notice = [&progress](const std::string& notice) { progress.notice(notice); };
  control.on_profile_progress = profile_progress_printer(err);
  control.on_run_start = [&progress, &jobs_done](const session::RunStart& start) {
    MultiplyProgress shape;
    for (std::size_t i = 0; i < start.plan.shares.size(); ++i) {
      NodeJobs node{start.plan.shares[i].node_name, 0, i < start.jobs.per_node.size() ? start.jobs.per_node[i] : 0,
                    std::nullopt, std::nullopt};
      if (start.forecast && i < start.forecast->finish_s.size()) node.predicted_s = start.forecast->finish_s[i];
      shape.nodes.push_back(std::move(node));
    }
    shape.total_jobs = start.jobs.total;
    if (start.forecast) shape.predicted_s = start.forecast->makespan_s;
    progress.start([&jobs_done, shape](double elapsed_s) mutable {
      std::vector<uint64_t> done;
      for (const std::atomic<uint64_t>& jobs : jobs_done) done.push_back(jobs.load());
      record_jobs(shape, done, elapsed_s);
      return multiply_progress_text(shape, elapsed_s);
    });
  };
  control.on_credit = [&jobs_done](std::size_t node, uint64_t done) {
    if (node < jobs_done.size()) jobs_done[node].store(done);
  };
  Result<session::MultiplyOutcome> outcome = session->multiply(in.a, in.b, c, *options, control);
  progress.stop();  // the line is gone before anything else is written
  if (interrupted()) {
    // The session shut its connections down when it saw the flag (the workers then end the
    // session and drop queued work); close() says BYE on any link still open. Idempotent.
    session->close();
    return report_interrupted(err);
  }
  if (!outcome) return report_failure(err, outcome.status());
  session->close();
  print_warnings(err, outcome->warnings);
  const multiply::MultiplyReport& report = outcome->report;
  if (command.show_plan) out << report.plan.to_string() << "\n";
  out << multiply::format_report_table(report);

  if (!command.report_path.empty()) {
    if (Status written = multiply::write_report_json(command.report_path, report); !written) return report_failure(err, written);
    out << "report written to " << command.report_path << "\n";
  }
  if (!command.out_path.empty()) {
    if (Status written = linalg::write_npy(command.out_path, c); !written) return report_failure(err, written);
    out << "C written to " << command.out_path << "\n";
  }
  if (options->verify != multiply::VerifyMode::kNone && !report.verification.passed) {
    err << "tessera: verification FAILED: " << report.verification.detail << "\n";
    return kExitVerificationFailed;
  }
  return kExitOk;
}

Subcommand add_multiply_command(CLI::App& app) {
  auto command = std::make_shared<MultiplyCommand>();
  auto sizes = std::make_shared<MatrixSizeFlags>();
  CLI::App* sub = app.add_subcommand("multiply", "C = A x B spread over the cluster, verified");
  sub->add_option("config", command->config_path, "cluster description (YAML)")->required();
  CLI::Option* n_opt = sub->add_option("--n", sizes->n, "columns of C (and rows/inner size unless --m/--k)");
  CLI::Option* m_opt = sub->add_option("--m", sizes->m, "rows of A and C");
  CLI::Option* k_opt = sub->add_option("--k", sizes->k, "columns of A, rows of B");
  sub->add_option("--run-dir", command->run_dir, "run directory of `tessera up` (for emulated endpoints)");
  sub->add_option("--policy", command->settings.policy, "even | proportional | model | dynamic")->capture_default_str();
  sub->add_option("--tile-rows", command->settings.tile_rows, "dynamic: rows per tile (default about m / (8 x nodes))");
  sub->add_option("--weights", command->settings.weights, "relative powers, one per node (comma separated)")
      ->delimiter(',');
  sub->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");
  sub->add_option("--seed", command->settings.seed, "seed of the random inputs")->capture_default_str();
  sub->add_option("--fill", command->fill, "random values: uniform in [-1,1) | integers in [-8,8]")
      ->capture_default_str();
  sub->add_option("--verify", command->settings.verify, "freivalds | exact | none")->capture_default_str();
  sub->add_option("--report", command->report_path, "write the report as JSON");
  sub->add_option("--a", command->a_path, "A as .npy (float64, C order)");
  sub->add_option("--b", command->b_path, "B as .npy (float64, C order)");
  sub->add_option("--out", command->out_path, "write C as .npy");
  sub->add_option("--panel-width", command->settings.panel_width, "rows of B per panel (1 to 1048576)")
      ->capture_default_str();
  sub->add_option("--panels-in-flight", command->settings.panels_in_flight,
                           "panels a node may hold unacknowledged (1 to 1024)")
      ->capture_default_str();
  sub->add_option("--refill", command->settings.refill_threshold,
                           "send jobs once this many credits are back (1 = as each returns; <= panels in flight)")
      ->capture_default_str();
  sub->add_option("--layout", command->settings.layout,
                           "even/proportional: rows | 2d (column-based rectangles) | square-corner | 3d (splits k)")
      ->capture_default_str();
  sub->add_option("--distribution", command->settings.distribution,
                           "how B reaches the nodes: star (the coordinator sends it to each) | chain (each node "
                           "forwards it to the next) | auto (the model policy chooses by forecast; others: star)")
      ->capture_default_str();
  sub->add_option("--overlap", command->overlap,
                           "on: panels travel while nodes compute; off: one panel at a time (SeqMsg)")
      ->capture_default_str();
  sub->add_flag("--show-plan", command->show_plan, "print the plan before running it");
  sub->add_flag("--require-all", command->require_all, kRequireAllHelp);
  sub->add_flag("--allow-nonfinite", command->settings.allow_nonfinite,
                         "accept NaN/inf in --a/--b (refused by default); verification counts matching NaN/inf as equal");
  sub->add_option("--node-timeout", command->settings.node_timeout_s,
                           "seconds a node that owes frames may stay silent before it is dropped as unresponsive "
                           "and its tiles reissued; 0 = from the profile's link and GEMM speeds, at least 10 s")
      ->capture_default_str();
  sub->add_option("--progress", command->progress,
                           "auto: a progress line (jobs done per node, ETA) on stderr when it is a terminal and the "
                           "run lasts over a second | always | never")
      ->capture_default_str();

  return {sub, [command, sizes, n_opt, m_opt, k_opt](const Invocation& call) {
            if (*n_opt) command->n = sizes->n;
            if (*m_opt) command->m = sizes->m;
            if (*k_opt) command->k = sizes->k;
            // Ctrl-C closes the workers' sessions at once, so a multiply started right after finds them free.
            command->interrupted = &call.stop_cleanly_on_interrupt();
            return command_multiply(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
