// `tessera iterate CONFIG --method power|cg --matrix A.npy [--rhs b.npy] --out x.npy`: A placed on
// the nodes once (Session::place_rows, shares sized for a vector), then power iteration or
// conjugate gradient with one resident product per step (multiply/iterate.hpp), the answer's true
// residual checked, and the vector written.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>

#include "command_output.hpp"
#include "subcommands.hpp"
#include "tessera/balance/multiply/iterate.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/balance/session/settings.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/linalg/matrix.hpp"

namespace tessera::cli {

namespace {

struct IterateCommand {
  std::string config_path;
  std::string method = "power";
  std::string matrix_path;
  std::string rhs_path;
  std::string out_path;
  std::optional<uint32_t> iterations;  // power: PowerOptions{}'s; cg: CgOptions{}'s (10 n)
  double tol = balance::multiply::PowerOptions{}.tol;
  uint64_t seed = balance::multiply::PowerOptions{}.seed;
  session::PlacementSettings placement;
  bool no_measure = false;
  std::string run_dir;
  std::string profile_path;
  bool require_all = session::SessionOptions{}.require_all;
  const std::atomic<bool>* interrupted = nullptr;
};

int command_iterate(const IterateCommand& command, std::ostream& out, std::ostream& err) {
  session::PlacementSettings placement_settings = command.placement;
  placement_settings.measure = !command.no_measure;
  // The steps the placement will serve, as far as the command knows: a move must repay itself.
  placement_settings.expected_products =
      command.iterations.value_or(command.method == "power" ? balance::multiply::PowerOptions{}.iterations : 100);
  Result<session::PlacementOptions> placement = session::resolve_placement_settings(placement_settings, flag_spelling());
  if (!placement) return report_failure(err, placement.status());
  if (command.method != "power" && command.method != "cg") {
    return report_failure(err, invalid_argument(fmt::format("--method {}: use power or cg", command.method)));
  }
  if (command.method == "cg" && command.rhs_path.empty()) {
    return report_failure(err, invalid_argument("--method cg needs --rhs b.npy (the right-hand side)"));
  }
  if (!(command.tol > 0.0) || command.iterations == 0u) {
    return report_failure(err, invalid_argument(fmt::format("--tol {:g} and --iterations {}: give tol > 0 and "
                                                            "iterations >= 1",
                                                            command.tol, command.iterations.value_or(1))));
  }
  Result<linalg::Matrix> a = linalg::read_npy(command.matrix_path);
  if (!a) return report_failure(err, a.status());
  if (a->rows != a->cols || a->rows == 0) {
    return report_failure(err, invalid_argument(fmt::format("{} holds a {}x{} matrix; --method {} needs a square one",
                                                            printable(command.matrix_path), a->rows, a->cols,
                                                            command.method)));
  }
  if (Status finite = session::check_finite_input(*a, "A", command.matrix_path, flag_spelling()); !finite) {
    return report_failure(err, finite);
  }
  linalg::Matrix b;
  if (command.method == "cg") {
    Result<linalg::Matrix> read = linalg::read_npy(command.rhs_path);
    if (!read) return report_failure(err, read.status());
    if (read->rows * read->cols != a->rows || (read->rows != 1 && read->cols != 1)) {
      return report_failure(err, invalid_argument(fmt::format("{} holds {}x{}; --rhs needs a vector of {} entries",
                                                              printable(command.rhs_path), read->rows, read->cols,
                                                              a->rows)));
    }
    b = std::move(*read);
  }
  Result<session::Session> session =
      open_command_session(err, command.config_path, command.run_dir, command.profile_path, command.require_all);
  if (!session) return report_failure(err, session.status());
  session::RunControl control;
  control.cancel = command.interrupted;
  control.on_notice = [&err](const std::string& notice) { print_warnings(err, {notice}); };
  Result<session::ResidentPlacement> placed = session->place_rows(*a, *placement, control);
  if (!placed) return report_failure(err, placed.status());
  print_warnings(err, placed->warnings);
  std::string where;
  for (const auto& [node, rows] : placed->rows_per_node) where += fmt::format("{}{} {}", where.empty() ? "" : ", ", node, rows);
  const std::string reused =
      placed->bytes_reused > 0
          ? fmt::format(", {:.1f} MB not sent: the nodes' block stores had it", static_cast<double>(placed->bytes_reused) / 1e6)
          : "";
  out << fmt::format("placed {}x{} ({:.1f} MB sent{}) in {:.3f} s: rows {}\n", a->rows, a->cols,
                     static_cast<double>(placed->bytes_placed) / 1e6, reused, placed->seconds, where);
  if (placed->remembered) {
    out << fmt::format("shares as an earlier run measured them (a product {:.4f} s then); not measured again\n",
                       placed->measured_product_s);
  }
  if (placed->measuring_rounds > 0) {
    out << fmt::format("measured on the placed rows: a product {:.4f} s with the first shares, {:.4f} s with these "
                       "({} rounds, {:.1f} MB moved; the profile forecast {:.4f} s)\n",
                       placed->first_measured_product_s, placed->measured_product_s, placed->measuring_rounds,
                       static_cast<double>(placed->bytes_moved) / 1e6, placed->forecast_product_s);
  }
  Result<multiply::IterationOutcome> outcome = internal_error("no method ran");
  if (command.method == "power") {
    multiply::PowerOptions options;
    options.iterations = command.iterations.value_or(options.iterations);
    options.tol = command.tol;
    options.seed = command.seed;
    outcome = session->power_iteration(placed->id, options, control);
  } else {
    multiply::CgOptions options;
    options.tol = command.tol;
    options.max_iterations = command.iterations.value_or(options.max_iterations);
    outcome = session->conjugate_gradient(placed->id, b.values, options, control);
  }
  const bool interrupted = command.interrupted != nullptr && command.interrupted->load();
  session->close();
  if (interrupted) return report_interrupted(err);
  if (!outcome) return report_failure(err, outcome.status());
  if (command.method == "power") out << fmt::format("eigenvalue {:.17g}\n", outcome->value);
  out << fmt::format("{} steps in {:.3f} s ({:.4f} s per step, {:.0f}% in resident products); true relative residual "
                     "{:.3g}; {}\n",
                     outcome->iterations, outcome->seconds,
                     outcome->seconds / std::max<uint32_t>(1, outcome->iterations),
                     outcome->seconds > 0 ? 100.0 * outcome->product_seconds / outcome->seconds : 0.0,
                     outcome->residual, outcome->converged ? "converged" : "NOT converged");
  if (!command.out_path.empty()) {
    linalg::Matrix result(outcome->vector.size(), 1);
    result.values = outcome->vector;
    if (Status written = linalg::write_npy(command.out_path, result); !written) return report_failure(err, written);
    out << "vector written to " << command.out_path << "\n";
  }
  return outcome->converged ? kExitOk : kExitRunFailed;
}

}  // namespace

Subcommand add_iterate_command(CLI::App& app) {
  auto command = std::make_shared<IterateCommand>();
  CLI::App* sub = app.add_subcommand(
      "iterate", "power iteration or conjugate gradient on a matrix placed on the nodes once, each step one product "
                 "by a vector, the answer's true residual checked");
  sub->add_option("config", command->config_path, "cluster description (YAML)")->required();
  sub->add_option("--method", command->method, "power (the dominant eigenpair) | cg (A x = b, A symmetric positive "
                                               "definite)")
      ->capture_default_str();
  sub->add_option("--matrix", command->matrix_path, "A as .npy (square)")->required();
  sub->add_option("--rhs", command->rhs_path, "cg: b as .npy, n x 1 or 1 x n (np.save(path, b.reshape(-1, 1)))");
  sub->add_option("--out", command->out_path, "write the eigenvector (power) or the solution (cg) as .npy");
  sub->add_option("--iterations", command->iterations,
                  fmt::format("at most this many steps (default: power {}, cg 10 n)",
                              balance::multiply::PowerOptions{}.iterations));
  sub->add_option("--tol", command->tol, "power: the eigenvalue's relative change; cg: the relative residual")
      ->capture_default_str();
  sub->add_option("--seed", command->seed, "power: the start vector's")->capture_default_str();
  sub->add_option("--split", command->placement.split,
                  "balanced (by the profile, then measured on the placed rows) | even (every node the same rows)")
      ->capture_default_str();
  sub->add_flag("--no-measure", command->no_measure, "balanced: keep the profile's shares, do not measure and move them");
  sub->add_option("--placement-cache", command->placement.placement_cache,
                  "remember measured shares here for the next run on the same matrix (default $XDG_CACHE_HOME or "
                  "~/.cache, tessera/resident; none: off)");
  sub->add_option("--nodes", command->placement.nodes, "only these nodes (comma-separated names)")->delimiter(',');
  sub->add_flag("--require-all", command->require_all, kRequireAllHelp);
  sub->add_option("--run-dir", command->run_dir, "run directory of `tessera up` (for emulated endpoints)");
  sub->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");
  return {sub, [command](const Invocation& call) {
            command->interrupted = &call.stop_cleanly_on_interrupt();
            return command_iterate(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
