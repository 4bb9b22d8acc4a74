// `tessera experiment`: replay a study file (multiply, graph, expressions or resident).
#include "tessera/cli/commands.hpp"

#include <ostream>

#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/experiment/expression_study.hpp"
#include "tessera/experiment/graph_study.hpp"
#include "tessera/experiment/resident_study.hpp"
#include "subcommands.hpp"

namespace tessera::cli {

int command_experiment(const ExperimentCommand& command, std::ostream& out, std::ostream& err) {
  const experiment::ExperimentOptions& options = command.options;
  Status status = Status::ok();
  const std::string workload = experiment::study_workload(command.study_path);
  if (workload == "graph") {
    Result<experiment::GraphStudy> study = experiment::load_graph_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = experiment::run_graph_study(*study, options, out);
  } else if (workload == "expressions") {
    Result<experiment::ExpressionStudy> study = experiment::load_expression_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = experiment::run_expression_study(*study, options, out);
  } else if (workload == "resident") {
    Result<experiment::ResidentStudy> study = experiment::load_resident_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = experiment::run_resident_study(*study, options, out);
  } else {
    Result<experiment::Study> study = experiment::load_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = experiment::run_experiment(*study, options, out);
  }
  if (options.interrupted != nullptr && options.interrupted->load()) {
    err << "tessera: interrupted; every cluster the study started was stopped, partial results written\n";
    return kExitInterrupted;
  }
  if (!status) return report_failure(err, status);
  return kExitOk;
}

Subcommand add_experiment_command(CLI::App& app) {
  auto command = std::make_shared<ExperimentCommand>();
  auto repeat = std::make_shared<uint32_t>(0);
  CLI::App* sub =
      app.add_subcommand("experiment", "replay a study: every combination, CSV, plots and report.md");
  sub->add_option("study", command->study_path, "study file (YAML), e.g. experiments/balanced-vs-even.yaml")
      ->required();
  sub->add_option("--out", command->options.out_dir, "output folder (default experiments/results/STUDY)");
  CLI::Option* repeat_opt =
      sub->add_option("--repeat", *repeat, "repetitions per combination (default: the study's)")
          ->check(CLI::Range(1u, 1000u));
  sub->add_option("--run-dir", command->options.run_dir, "run directory for the clusters it starts");
  sub->add_flag("--require-all", command->options.require_all, kRequireAllHelp);

  return {sub, [command, repeat, repeat_opt](const Invocation& call) {
            if (*repeat_opt) command->options.repeat = *repeat;
            command->options.command_line = call.command_line;
            // Ctrl-C or a TERM stops the study cleanly: it shuts the sessions down and stops its clusters.
            command->options.interrupted = &call.stop_cleanly_on_interrupt();
            return command_experiment(*command, call.out, call.err);
          }};
}

}  // namespace tessera::cli
