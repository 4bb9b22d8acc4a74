// tessera._tessera: the compiled half of the Python package. Exposes ClusterHandle, graphs for the graph algorithms (DirectedGraph) and for partitioning (Graph), and
// partition_graph. Users call the pure-Python package (python/tessera/), which documents the
// API, applies the array conversion rule and wraps results in classes; this layer does only what
// needs C++. Errors arrive as the exceptions of tessera/errors.py (errors.hpp).
//
// MultiplySettings, GraphSettings (balance/session/settings.hpp) and profile::ProfileOptions are
// the C++ option values that the `tessera` CLI fills from its flags: the package reads its keyword defaults from a
// default-constructed one at import time and fills one per call, so both front ends share every
// default and check.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <concepts>
#include <cstring>
#include <filesystem>
#include <utility>

#include "arrays.hpp"
#include "cluster_handle.hpp"
#include "errors.hpp"
#include "reports.hpp"
#include "run_control.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/graphdata/generators.hpp"
#include "tessera/graphdata/graph_io.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace py = pybind11;
namespace tp = tessera::partition;
namespace graphdata = tessera::graphdata;
namespace ts = tessera::balance::session;
using tessera::python::ClusterHandle;
using tessera::python::IndexArray;
using tessera::python::raise_status;
using tessera::python::value_or_raise;
using tessera::python::without_gil;

namespace {

py::dict stats_dict(const graphdata::GraphBuildStats& stats) {
  return py::dict(py::arg("self_loops_removed") = stats.self_loops_removed,
                  py::arg("duplicates_merged") = stats.duplicates_merged);
}

// An options struct as a Python class: constructed with the defaults both front ends share, its
// fields (name, member) read-write attributes, compared by value where C++ can.
template <typename Options, typename... Fields>
void bind_options(py::module_& module, const char* name, const char* doc,
                  const std::pair<const char*, Fields Options::*>&... fields) {
  py::class_<Options> bound(module, name, doc);
  bound.def(py::init<>());
  (bound.def_readwrite(fields.first, fields.second), ...);
  if constexpr (std::equality_comparable<Options>) {
    bound.def("__eq__", [](const Options& a, const Options& b) { return a == b; });
  }
}

}  // namespace

PYBIND11_MODULE(_tessera, module) {
  module.doc() = "Tessera's compiled core; use the `tessera` package, which documents and wraps it.";
  module.attr("version") = TESSERA_VERSION;
  module.attr("build_worker_binary") = TESSERA_BUILD_WORKER_BINARY;
  // Cluster(require_all=...)'s default, the CLI's without --require-all.
  module.attr("default_require_all") = tessera::balance::session::SessionOptions{}.require_all;

  py::class_<graphdata::DirectedGraph>(module, "DirectedGraph",
                                "A directed graph in CSR form (out-edges), the input of the graph algorithms. Make one "
                                "with tessera.directed_graph().")
      .def_property_readonly("vertex_count", [](const graphdata::DirectedGraph& g) { return g.vertex_count; })
      .def_property_readonly("edge_count", &graphdata::DirectedGraph::edge_count)
      .def_property_readonly("weighted", &graphdata::DirectedGraph::weighted)
      .def("__repr__", [](const graphdata::DirectedGraph& g) { return "<tessera.DirectedGraph: " + graphdata::describe(g) + ">"; });

  py::class_<graphdata::Graph>(module, "Graph",
                        "An undirected graph as METIS partitions it. Make one with tessera.partition_graph_input().")
      .def_property_readonly("vertex_count", &graphdata::Graph::vertex_count)
      .def_property_readonly("edge_count", &graphdata::Graph::edge_count)
      .def("__repr__", [](const graphdata::Graph& g) { return "<tessera.Graph: " + graphdata::describe(g) + ">"; });

  module.def(
      "directed_graph_from_edges",
      [](int64_t vertex_count, const IndexArray& sources, const IndexArray& targets, const py::object& weights) {
        return tessera::python::directed_graph_from_edges(vertex_count, sources, targets, weights);
      },
      py::arg("vertex_count"), py::arg("src"), py::arg("dst"), py::arg("weights") = py::none());
  module.def(
      "read_directed_graph",
      [](const std::string& path) { return value_or_raise(without_gil([&] { return graphdata::read_directed_graph_file(path); })); },
      py::arg("path"));
  module.def(
      "generate_directed_graph",
      [](const std::string& spec, uint64_t seed) {
        return value_or_raise(without_gil([&] { return graphdata::generate_directed_graph(spec, seed); }));
      },
      py::arg("spec"), py::arg("seed") = 1);
  module.def("is_generator_spec", [](const std::string& text) { return graphdata::is_generator_spec(text); });

  module.def(
      "graph_from_coordinates",
      [](int64_t rows, int64_t cols, const IndexArray& row, const IndexArray& col) {
        graphdata::GraphBuildStats stats;
        graphdata::Graph graph = tessera::python::graph_from_coordinates(rows, cols, row, col, &stats);
        return py::make_tuple(std::move(graph), stats_dict(stats));
      },
      py::arg("rows"), py::arg("cols"), py::arg("row"), py::arg("col"));
  module.def(
      "graph_from_edges",
      [](int64_t vertex_count, const IndexArray& sources, const IndexArray& targets, const py::object& edge_weights,
         const py::object& vertex_weights) {
        graphdata::GraphBuildStats stats;
        graphdata::Graph graph =
            tessera::python::graph_from_edges(vertex_count, sources, targets, edge_weights, vertex_weights, &stats);
        return py::make_tuple(std::move(graph), stats_dict(stats));
      },
      py::arg("vertex_count"), py::arg("src"), py::arg("dst"), py::arg("edge_weights") = py::none(),
      py::arg("vertex_weights") = py::none());
  module.def(
      "read_graph",
      [](const std::string& path) {
        graphdata::GraphBuildStats stats;
        graphdata::Graph graph = value_or_raise(without_gil([&] { return graphdata::read_graph_file(path, &stats); }));
        return py::make_tuple(std::move(graph), stats_dict(stats));
      },
      py::arg("path"));
  module.def(
      "generate_graph",
      [](const std::string& spec, uint64_t seed) {
        graphdata::Graph graph = value_or_raise(without_gil([&] { return graphdata::generate_graph(spec, seed); }));
        return py::make_tuple(std::move(graph), stats_dict({}));
      },
      py::arg("spec"), py::arg("seed") = 1);

  module.def(
      "partition_graph",
      [](const graphdata::Graph& graph, const std::vector<double>& weights, const std::vector<std::string>& names,
         const ts::PartitionSettings& settings) {
        tp::PartitionOptions options = value_or_raise(ts::resolve_partition_settings(settings, tessera::python::keyword_spelling()));
        options.target_weights = weights;
        tp::Partition partition = value_or_raise(without_gil([&] { return tp::partition_graph(graph, options); }));
        py::array_t<int32_t> parts(static_cast<py::ssize_t>(partition.part.size()));
        if (!partition.part.empty()) {
          std::memcpy(parts.mutable_data(), partition.part.data(), partition.part.size() * sizeof(int32_t));
        }
        return py::make_tuple(parts, tessera::python::partition_dict(partition, names));
      },
      py::arg("graph"), py::arg("weights"), py::arg("names"), py::arg("settings"));

  using ts::EvalSettings;
  using ts::PartitionSettings;
  using ts::GraphSettings;
  using ts::MultiplySettings;
  using tessera::balance::profile::ProfileOptions;
  bind_options<MultiplySettings>(
      module, "MultiplySettings",
      "A multiply's options, as tessera.Cluster.multiply takes them; a default-constructed one holds the defaults the "
      "CLI's `tessera multiply` has too.",
      std::pair{"policy", &MultiplySettings::policy}, std::pair{"layout", &MultiplySettings::layout},
      std::pair{"distribution", &MultiplySettings::distribution},
      std::pair{"verify", &MultiplySettings::verify}, std::pair{"weights", &MultiplySettings::weights},
      std::pair{"seed", &MultiplySettings::seed}, std::pair{"panel_width", &MultiplySettings::panel_width},
      std::pair{"panels_in_flight", &MultiplySettings::panels_in_flight},
      std::pair{"refill_threshold", &MultiplySettings::refill_threshold},
      std::pair{"overlap", &MultiplySettings::overlap}, std::pair{"tile_rows", &MultiplySettings::tile_rows},
      std::pair{"node_timeout_s", &MultiplySettings::node_timeout_s},
      std::pair{"allow_nonfinite", &MultiplySettings::allow_nonfinite});
  bind_options<GraphSettings>(
      module, "GraphSettings",
      "A graph run's options, as tessera.Cluster.pagerank and the other graph calls take them; a default-constructed "
      "one holds the defaults `tessera graph` has too.",
      std::pair{"algorithm", &GraphSettings::algorithm}, std::pair{"tolerance", &GraphSettings::tolerance},
      std::pair{"source", &GraphSettings::source}, std::pair{"damping", &GraphSettings::damping},
      std::pair{"beta", &GraphSettings::beta}, std::pair{"label", &GraphSettings::label},
      std::pair{"mode", &GraphSettings::mode}, std::pair{"partition", &GraphSettings::partition},
      std::pair{"nodes", &GraphSettings::nodes}, std::pair{"placement_cache", &GraphSettings::placement_cache},
      std::pair{"seed", &GraphSettings::seed}, std::pair{"verify", &GraphSettings::verify},
      std::pair{"poll_ms", &GraphSettings::poll_ms}, std::pair{"snapshot_ms", &GraphSettings::snapshot_ms},
      std::pair{"node_timeout_s", &GraphSettings::node_timeout_s},
      std::pair{"max_seconds", &GraphSettings::max_seconds},
      std::pair{"level_fraction", &GraphSettings::level_fraction},
      std::pair{"batch_age_ms", &GraphSettings::batch_age_ms},
      std::pair{"batch_entries", &GraphSettings::batch_entries},
      std::pair{"priority_fraction", &GraphSettings::priority_fraction});
  bind_options<EvalSettings>(
      module, "EvalSettings",
      "An expression evaluation's options, as tessera.Expression.compute takes them; a default-constructed one holds "
      "the defaults `tessera eval` has too.",
      std::pair{"mode", &EvalSettings::mode}, std::pair{"rewrite", &EvalSettings::rewrite},
      std::pair{"tile", &EvalSettings::tile}, std::pair{"nodes", &EvalSettings::nodes},
      std::pair{"every_node", &EvalSettings::every_node}, std::pair{"cache_mb", &EvalSettings::cache_mb},
      std::pair{"tile_route", &EvalSettings::tile_route}, std::pair{"policy", &EvalSettings::policy},
      std::pair{"verify", &EvalSettings::verify});
  bind_options<PartitionSettings>(
      module, "PartitionSettings",
      "A graph partitioning's options, as tessera.partition takes them; a default-constructed one holds the defaults "
      "`tessera partition` has too.",
      std::pair{"method", &PartitionSettings::method}, std::pair{"imbalance", &PartitionSettings::imbalance},
      std::pair{"objective", &PartitionSettings::objective}, std::pair{"seed", &PartitionSettings::seed});
  bind_options<ts::PlacementSettings>(
      module, "PlacementSettings",
      "How Cluster.scatter shares a matrix out; a default-constructed one holds the defaults `tessera iterate` has too.",
      std::pair{"columns", &ts::PlacementSettings::columns}, std::pair{"nodes", &ts::PlacementSettings::nodes},
      std::pair{"split", &ts::PlacementSettings::split}, std::pair{"measure", &ts::PlacementSettings::measure},
      std::pair{"expected_products", &ts::PlacementSettings::expected_products},
      std::pair{"placement_cache", &ts::PlacementSettings::placement_cache});
  bind_options<ProfileOptions>(
      module, "ProfileOptions",
      "A profile measurement's options, as tessera.Cluster.profile takes them; a default-constructed one holds the "
      "defaults `tessera profile` has too.",
      std::pair{"quick", &ProfileOptions::quick}, std::pair{"refresh", &ProfileOptions::refresh},
      std::pair{"only_nodes", &ProfileOptions::only_nodes}, std::pair{"reference_size", &ProfileOptions::reference_size},
      std::pair{"window_seconds", &ProfileOptions::window_seconds});

  py::class_<ClusterHandle>(module, "ClusterHandle")
      .def(py::init<std::string, std::string, std::string, std::string, bool, bool>(), py::arg("config_path"),
           py::arg("run_dir"), py::arg("profile_path"), py::arg("worker_binary"), py::arg("keep_connected"),
           py::arg("require_all"))
      .def_property_readonly("config_path", &ClusterHandle::config_path)
      .def_property_readonly("profile_path", &ClusterHandle::profile_path)
      .def_property_readonly("node_names", &ClusterHandle::node_names)
      .def("up", &ClusterHandle::up, py::arg("no_emulation"), py::arg("start_timeout_s"))
      .def("down", &ClusterHandle::down, py::arg("only_started"))
      .def("started", &ClusterHandle::started)
      .def("status", &ClusterHandle::status)
      .def("saved_profile", &ClusterHandle::saved_profile)
      .def("profile", &ClusterHandle::profile, py::arg("options"), py::arg("progress"))
      .def("plan", &ClusterHandle::plan, py::arg("m"), py::arg("n"), py::arg("k"), py::arg("settings"))
      .def("predict", &ClusterHandle::predict, py::arg("plan"))
      .def("profile_weights", &ClusterHandle::profile_weights)
      .def("multiply", &ClusterHandle::multiply, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("settings"),
           py::arg("fill_output"), py::arg("plan"), py::arg("progress"), py::arg("notice"))
      .def("graph", &ClusterHandle::graph, py::arg("graph"), py::arg("settings"), py::arg("weights"),
           py::arg("progress"), py::arg("notice"))
      .def("evaluate", &ClusterHandle::evaluate, py::arg("expression"), py::arg("inputs"), py::arg("settings"),
           py::arg("explain"), py::arg("progress"), py::arg("notice"))
      .def("place", &ClusterHandle::place, py::arg("a"), py::arg("settings"))
      .def("resident_multiply", &ClusterHandle::resident_multiply, py::arg("id"), py::arg("generation"), py::arg("x"),
           py::arg("y"))
      .def("power_iteration", &ClusterHandle::power_iteration, py::arg("id"), py::arg("generation"),
           py::arg("iterations"), py::arg("tol"), py::arg("seed"))
      .def("conjugate_gradient", &ClusterHandle::conjugate_gradient, py::arg("id"), py::arg("generation"), py::arg("b"),
           py::arg("tol"), py::arg("max_iterations"))
      .def("release", &ClusterHandle::release, py::arg("id"), py::arg("generation"))
      .def("close", &ClusterHandle::close);
}
