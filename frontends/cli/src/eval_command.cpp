#include "tessera/cli/eval_command.hpp"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <functional>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "command_output.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/balance/expr/parse.hpp"
#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/expr/eval_report.hpp"
#include "tessera/balance/multiply/verify.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/linalg/matrix.hpp"
#include "subcommands.hpp"

namespace tessera::cli {

namespace {

constexpr uint64_t kMaxGeneratedDimension = 1u << 16;

// "4096x4096" -> (4096, 4096).
Result<std::pair<uint64_t, uint64_t>> generated_shape(std::string_view text, const std::string& flag) {
  const std::size_t x = text.find('x');
  uint64_t rows = 0, cols = 0;
  const auto read = [](std::string_view part, uint64_t& value) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    return error == std::errc() && end == part.data() + part.size();
  };
  if (x == std::string_view::npos || !read(text.substr(0, x), rows) || !read(text.substr(x + 1), cols) || rows == 0 ||
      cols == 0 || rows > kMaxGeneratedDimension || cols > kMaxGeneratedDimension) {
    return invalid_argument(fmt::format("--input {}: the shape must be ROWSxCOLS with each 1..{}, e.g. random:4096x4096",
                                        flag, kMaxGeneratedDimension));
  }
  return std::make_pair(rows, cols);
}

// NAME=FILE.npy, NAME=random:RxC, NAME=integers:RxC; generated ones are seeded by the name.
Result<std::map<std::string, linalg::Matrix>> load_inputs(const std::vector<std::string>& flags) {
  std::map<std::string, linalg::Matrix> inputs;
  for (const std::string& flag : flags) {
    const std::size_t equals = flag.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == flag.size()) {
      return invalid_argument(fmt::format("--input {}: write NAME=FILE.npy or NAME=random:ROWSxCOLS", flag));
    }
    const std::string name = flag.substr(0, equals);
    const std::string source = flag.substr(equals + 1);
    if (inputs.count(name) != 0) return invalid_argument(fmt::format("--input {} is given twice", name));
    Result<linalg::Matrix> matrix = [&]() -> Result<linalg::Matrix> {
      for (const auto& [prefix, fill] : {std::pair{"random:", linalg::FillKind::kUniform},
                                         std::pair{"integers:", linalg::FillKind::kIntegers}}) {
        if (source.rfind(prefix, 0) == 0) {
          Result<std::pair<uint64_t, uint64_t>> shape = generated_shape(source.substr(std::string_view(prefix).size()), flag);
          if (!shape) return shape.status();
          return linalg::random_matrix(shape->first, shape->second, std::hash<std::string>{}(name), fill);
        }
      }
      Result<linalg::Matrix> read = linalg::read_npy(source);
      // An input that cannot be read is bad input (exit 2), whatever the reason.
      if (!read) return invalid_argument(fmt::format("--input {}: {}", name, read.status().message()));
      if (read->rows == 0 || read->cols == 0) {
        return invalid_argument(fmt::format("--input {}: {} holds a {}x{} matrix, which has no entries; an input needs "
                                            "at least one row and one column",
                                            name, source, read->rows, read->cols));
      }
      if (const std::optional<multiply::NonFiniteEntry> entry = multiply::first_nonfinite(*read)) {
        return invalid_argument(fmt::format("--input {}: {} holds NaN or infinite values: {} (0-based [row][column])",
                                            name, source, multiply::describe_nonfinite(name, *entry)));
      }
      return read;
    }();
    if (!matrix) return matrix.status();
    inputs.emplace(name, std::move(*matrix));
  }
  return inputs;
}

}  // namespace

int command_eval(const EvalCommand& command, std::ostream& out, std::ostream& err) {
  Result<session::EvalOptions> options = session::resolve_eval_settings(command.settings, command.config_path,
                                                                        flag_spelling());
  if (!options) return report_failure(err, options.status());
  Result<std::map<std::string, linalg::Matrix>> inputs = load_inputs(command.inputs);
  if (!inputs) return report_failure(err, inputs.status());
  std::map<std::string, expr::Shape> shapes;
  std::map<std::string, linalg::MatrixView> views;
  for (const auto& [name, matrix] : *inputs) {
    shapes.emplace(name, expr::Shape{matrix.rows, matrix.cols});
    views.emplace(name, linalg::MatrixView(matrix));
  }
  Result<expr::Expr> parsed = expr::parse(command.expression, shapes);
  if (!parsed) return report_failure(err, parsed.status());
  const std::vector<std::string> used = expr::input_names(*parsed);
  for (const auto& [name, shape] : shapes) {
    if (std::find(used.begin(), used.end(), name) == used.end()) {
      err << "warning: --input " << name << " is not used by the expression\n";
    }
  }

  Result<session::Session> session =
      open_command_session(err, command.config_path, command.run_dir, command.profile_path, command.require_all);
  if (!session) return report_failure(err, session.status());

  session::RunControl control;
  control.cancel = command.interrupted;
  control.on_notice = [&err](const std::string& notice) { err << notice << "\n"; };
  Result<expr::EvalOutcome> outcome = session->evaluate(*parsed, views, *options, control);
  const bool interrupted = command.interrupted != nullptr && command.interrupted->load();
  session->close();
  if (interrupted) return report_interrupted(err);
  if (!outcome) return report_failure(err, outcome.status());

  for (const expr::EvalProduct& product : outcome->products) {
    print_warnings(err, product.warnings);
  }
  out << expr::format_eval_table(*outcome, command.explain);
  if (!command.report_path.empty()) {
    std::ofstream file(command.report_path, std::ios::trunc);
    if (!(file << expr::eval_report_json(*outcome) << "\n") || !file.flush()) {
      return report_failure(err, io_error(fmt::format("cannot write report {}", command.report_path)));
    }
    out << "report written to " << command.report_path << "\n";
  }
  if (!command.out_path.empty()) {
    if (Status written_file = linalg::write_npy(command.out_path, outcome->value); !written_file) {
      return report_failure(err, written_file);
    }
    out << "result written to " << command.out_path << "\n";
  }
  return kExitOk;
}

Subcommand add_eval_command(CLI::App& app) {
  auto command = std::make_shared<EvalCommand>();
  auto no_rewrite = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "eval", "evaluate a matrix expression (u * P^8, A*B*C*D, I + A + A^2) with each product on the cluster, verified");
  sub->add_option("config", command->config_path, "cluster description (YAML)")->required();
  sub->add_option("expression", command->expression,
                       "products * or @, sums + -, scalars (2 * A), transposes A' or A.T, powers A^k, I; e.g. \"u * P^8\"")
      ->required();
  sub->add_option("--input", command->inputs, "NAME=FILE.npy, NAME=random:ROWSxCOLS or NAME=integers:ROWSxCOLS (repeat)")
      ->required();
  sub->add_option("--out", command->out_path, "write the result as .npy");
  sub->add_option("--report", command->report_path, "write the expression, its costs and every product's figures as JSON");
  sub->add_flag("--explain", command->explain, "print the expression before and after rewriting, with their costs");
  sub->add_flag("--no-rewrite", *no_rewrite, "evaluate as written (no reordering, powers by squaring)");
  sub->add_flag("--require-all", command->require_all, kRequireAllHelp);
  sub->add_option("--mode", command->settings.mode,
                       "scheduled: tile tasks placed by HEFT, intermediates kept on the nodes | sequence: one "
                       "multiply per product, every intermediate back here")
      ->capture_default_str();
  sub->add_option("--tile", command->settings.tile, "scheduled: tile size (default: the fastest predicted of 256..4096)");
  sub->add_option("--nodes", command->settings.nodes, "scheduled: only these nodes (comma-separated names)")->delimiter(',');
  sub->add_flag("--every-node", command->settings.every_node,
                     "scheduled: give every node tasks, even when fewer nodes (the fastest first) are forecast faster");
  sub->add_option("--cache-mb", command->settings.cache_mb, "scheduled: each node's tile cache (default: half its tile memory)");
  sub->add_option("--tile-route", command->settings.tile_route,
                       "scheduled: tiles between nodes go direct (worker to worker, where every worker can), "
                       "through the coordinator, or auto: whichever the schedule forecasts sooner")
      ->capture_default_str();
  sub->add_option("--policy", command->settings.policy, "sequence: policy of every product: even | proportional | model | dynamic")
      ->capture_default_str();
  sub->add_option("--verify", command->settings.verify, "freivalds | exact | none: the value (scheduled) or each product (sequence)")
      ->capture_default_str();
  sub->add_option("--run-dir", command->run_dir, "run directory of `tessera up` (for emulated endpoints)");
  sub->add_option("--profile", command->profile_path, "profile file (default: CONFIG with .profile.yaml)");

  return {sub, [command, no_rewrite](const Invocation& call) {
            command->settings.rewrite = !*no_rewrite;
            command->interrupted = &call.stop_cleanly_on_interrupt();
            return command_eval(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
