// The library's values as plain Python data (dicts, lists, numbers, strings) and back: what the
// Python classes in tessera/results.py wrap. Key names follow the CLI's JSON reports where one
// exists (report.hpp for a multiply, `tessera graph --report` for a graph run), so a script can
// read either. REQUIRE the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "tessera/emulation/local_cluster.hpp"
#include "tessera/balance/model/model.hpp"
#include "tessera/balance/plan/plan.hpp"
#include "tessera/balance/profile/profile.hpp"
#include "tessera/balance/session/session.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace tessera::python {

namespace py = pybind11;

py::list lifecycle_list(const std::vector<emulation::NodeLifecycle>& nodes);
py::list reachability_list(const std::vector<emulation::NodeReachability>& nodes);
py::dict profile_dict(const balance::profile::ClusterProfile& profile, const std::string& path);

// Plan <-> dict: policy, m, n, k, panel_width, panels_in_flight, refill_threshold, layout,
// tile_rows, shares [{node, weight, rows: (begin, end), blocks: [(row_begin, rows, col_begin,
// cols, k_begin, depth)...]}], text (Plan::to_string, what `tessera model` prints).
py::dict plan_dict(const balance::plan::Plan& plan);
// Raises InvalidInputError naming a missing or wrong field.
balance::plan::Plan plan_from_dict(const py::dict& plan);
py::dict prediction_dict(const balance::model::Prediction& prediction, const balance::plan::Plan& plan);

py::dict partition_dict(const partition::Partition& partition, const std::vector<std::string>& names);

}  // namespace tessera::python
