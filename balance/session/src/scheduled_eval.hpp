// The scheduled evaluation behind Session::evaluate (EvalMode::kScheduled): the expression
// lowered to tile tasks for each candidate tile size (transposes read through, see schedule.hpp), placed by
// HEFT with the nodes' tile caches, the fastest predicted schedule run on the workers
// (run/dag_run.hpp), rescheduled on the survivors when a node is lost, and checked.
// Internal to the session library; prints nothing. Not thread-safe (drives the connections).
#pragma once

#include <map>
#include <string>

#include "tessera/balance/cluster/cluster_connection.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/report/eval_report.hpp"
#include "tessera/balance/session/session.hpp"

namespace tessera::balance::session {

// REQUIRES: `prepared` has no kPower node and every transpose reads an input
// (expr::transposes_to_inputs); `inputs` hold its inputs, checked for shape; model.nodes are in
// the cluster's order. Fills outcome.value and outcome.scheduled.
// `peer_hosts`: how each node's worker reaches each other node's (hosts[from][to], cluster order;
// empty: at the nodes' own hosts).
Status run_scheduled(cluster::ClusterConnection& connection, const model::ClusterModel& model, const expr::Expr& prepared,
                     const std::map<std::string, linalg::MatrixView>& inputs, const EvalOptions& options,
                     const std::vector<std::vector<std::string>>& peer_hosts, const RunControl& control,
                     report::EvalOutcome& outcome);

}  // namespace tessera::balance::session
