// A finished graph run as the JSON document `tessera graph --report` writes and the Python
// module's report carries: the cluster, the graph, the algorithm and mode, the placement, per-node
// figures, totals, lost nodes, the convergence trace and the verification. Pure formatting;
// thread-compatible.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/balance/graphs/graph_run.hpp"
#include "tessera/graphdata/digraph.hpp"

namespace tessera::balance::graphs {

struct GraphReportHeader {
  std::string cluster;
  std::string input;  // the graph file or generator spec as given; empty: not recorded
  // Run settings the caller chose, recorded beside the outcome's own ({"poll_ms", 100}, ...).
  std::vector<std::pair<std::string, double>> settings;
};

// indent < 0: one line; otherwise pretty-printed with that many spaces. Non-finite numbers
// (unreachable distances in errors) are written as null.
std::string graph_report_json(const GraphReportHeader& header, const graphdata::DirectedGraph& graph,
                              const GraphOutcome& outcome, int indent = 2);

}  // namespace tessera::balance::graphs
