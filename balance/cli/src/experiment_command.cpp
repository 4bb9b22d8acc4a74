// `tessera experiment`: replay a study file (multiply, graph or expressions).
#include "tessera/balance/cli/commands.hpp"

#include <ostream>

#include "tessera/balance/study/experiment.hpp"
#include "tessera/balance/study/expression_study.hpp"
#include "tessera/balance/study/graph_study.hpp"

namespace tessera::balance::cli {

int command_experiment(const ExperimentCommand& command, std::ostream& out, std::ostream& err) {
  const study::ExperimentOptions& options = command.options;
  Status status = Status::ok();
  const std::string workload = study::study_workload(command.study_path);
  if (workload == "graph") {
    Result<study::GraphStudy> study = study::load_graph_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = study::run_graph_study(*study, options, out);
  } else if (workload == "expressions") {
    Result<study::ExpressionStudy> study = study::load_expression_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = study::run_expression_study(*study, options, out);
  } else {
    Result<study::Study> study = study::load_study(command.study_path);
    if (!study) return report_failure(err, study.status());
    status = study::run_experiment(*study, options, out);
  }
  if (options.interrupted != nullptr && options.interrupted->load()) {
    err << "tessera: interrupted; every cluster the study started was stopped, partial results written\n";
    return kExitInterrupted;
  }
  if (!status) return report_failure(err, status);
  return kExitOk;
}

}  // namespace tessera::balance::cli
