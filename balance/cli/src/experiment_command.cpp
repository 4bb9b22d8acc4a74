// `tessera experiment`: replay a study file (multiply, graph or expressions).
#include "tessera/balance/cli/commands.hpp"

#include <ostream>

#include "tessera/experiment/multiply_study.hpp"
#include "tessera/experiment/study.hpp"
#include "tessera/experiment/expression_study.hpp"
#include "tessera/experiment/graph_study.hpp"

namespace tessera::balance::cli {

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

}  // namespace tessera::balance::cli
