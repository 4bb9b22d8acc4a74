// tessera._tessera: the compiled half of the Python package. Exposes ClusterHandle (as
// _Cluster), graphs for the graph algorithms (DirectedGraph) and for partitioning (Graph), and
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

#include <cstring>
#include <filesystem>

#include "arrays.hpp"
#include "cluster_handle.hpp"
#include "errors.hpp"
#include "reports.hpp"
#include "run_control.hpp"
#include "tessera/partition/digraph.hpp"
#include "tessera/partition/generators.hpp"
#include "tessera/partition/graph_io.hpp"
#include "tessera/partition/graph_partition.hpp"

namespace py = pybind11;
namespace tp = tessera::partition;
namespace ts = tessera::balance::session;
using tessera::python::ClusterHandle;
using tessera::python::IndexArray;
using tessera::python::raise_status;
using tessera::python::value_or_raise;
using tessera::python::without_gil;

namespace {

py::dict stats_dict(const tp::GraphBuildStats& stats) {
  return py::dict(py::arg("self_loops_removed") = stats.self_loops_removed,
                  py::arg("duplicates_merged") = stats.duplicates_merged);
}

}  // namespace

PYBIND11_MODULE(_tessera, module) {
  module.doc() = "Tessera's compiled core; use the `tessera` package, which documents and wraps it.";
  module.attr("version") = TESSERA_VERSION;
  module.attr("build_worker_binary") = TESSERA_BUILD_WORKER_BINARY;

  py::class_<tp::DirectedGraph>(module, "DirectedGraph",
                                "A directed graph in CSR form (out-edges), the input of the graph algorithms. Make one "
                                "with tessera.directed_graph().")
      .def_property_readonly("vertex_count", [](const tp::DirectedGraph& g) { return g.vertex_count; })
      .def_property_readonly("edge_count", &tp::DirectedGraph::edge_count)
      .def_property_readonly("weighted", &tp::DirectedGraph::weighted)
      .def("__repr__", [](const tp::DirectedGraph& g) { return "<tessera.DirectedGraph: " + tp::describe(g) + ">"; });

  py::class_<tp::Graph>(module, "Graph",
                        "An undirected graph as METIS partitions it. Make one with tessera.partition_graph_input().")
      .def_property_readonly("vertex_count", &tp::Graph::vertex_count)
      .def_property_readonly("edge_count", &tp::Graph::edge_count)
      .def("__repr__", [](const tp::Graph& g) { return "<tessera.Graph: " + tp::describe(g) + ">"; });

  module.def(
      "directed_graph_from_edges",
      [](int64_t vertex_count, const IndexArray& sources, const IndexArray& targets, const py::object& weights) {
        return tessera::python::directed_graph_from_edges(vertex_count, sources, targets, weights);
      },
      py::arg("vertex_count"), py::arg("src"), py::arg("dst"), py::arg("weights") = py::none());
  module.def(
      "read_directed_graph",
      [](const std::string& path) { return value_or_raise(without_gil([&] { return tp::read_directed_graph_file(path); })); },
      py::arg("path"));
  module.def(
      "generate_directed_graph",
      [](const std::string& spec, uint64_t seed) {
        return value_or_raise(without_gil([&] { return tp::generate_directed_graph(spec, seed); }));
      },
      py::arg("spec"), py::arg("seed") = 1);
  module.def("is_generator_spec", [](const std::string& text) { return tp::is_generator_spec(text); });

  module.def(
      "graph_from_coordinates",
      [](int64_t rows, int64_t cols, const IndexArray& row, const IndexArray& col) {
        tp::GraphBuildStats stats;
        tp::Graph graph = tessera::python::graph_from_coordinates(rows, cols, row, col, &stats);
        return py::make_tuple(std::move(graph), stats_dict(stats));
      },
      py::arg("rows"), py::arg("cols"), py::arg("row"), py::arg("col"));
  module.def(
      "graph_from_edges",
      [](int64_t vertex_count, const IndexArray& sources, const IndexArray& targets, const py::object& edge_weights,
         const py::object& vertex_weights) {
        tp::GraphBuildStats stats;
        tp::Graph graph =
            tessera::python::graph_from_edges(vertex_count, sources, targets, edge_weights, vertex_weights, &stats);
        return py::make_tuple(std::move(graph), stats_dict(stats));
      },
      py::arg("vertex_count"), py::arg("src"), py::arg("dst"), py::arg("edge_weights") = py::none(),
      py::arg("vertex_weights") = py::none());
  module.def(
      "read_graph",
      [](const std::string& path) {
        tp::GraphBuildStats stats;
        tp::Graph graph = value_or_raise(without_gil([&] { return tp::read_graph_file(path, &stats); }));
        return py::make_tuple(std::move(graph), stats_dict(stats));
      },
      py::arg("path"));
  module.def(
      "generate_graph",
      [](const std::string& spec, uint64_t seed) {
        tp::Graph graph = value_or_raise(without_gil([&] { return tp::generate_graph(spec, seed); }));
        return py::make_tuple(std::move(graph), stats_dict({}));
      },
      py::arg("spec"), py::arg("seed") = 1);

  module.def(
      "partition_graph",
      [](const tp::Graph& graph, const std::vector<double>& weights, const std::vector<std::string>& names,
         const std::string& method, double imbalance, const std::string& objective, uint64_t seed) {
        tp::PartitionOptions options;
        options.method = value_or_raise(tp::parse_partition_method(method));
        options.objective = value_or_raise(tp::parse_objective(objective));
        options.imbalance = imbalance;
        options.seed = seed;
        options.target_weights = weights;
        tp::Partition partition = value_or_raise(without_gil([&] { return tp::partition_graph(graph, options); }));
        py::array_t<int32_t> parts(static_cast<py::ssize_t>(partition.part.size()));
        if (!partition.part.empty()) {
          std::memcpy(parts.mutable_data(), partition.part.data(), partition.part.size() * sizeof(int32_t));
        }
        return py::make_tuple(parts, tessera::python::partition_dict(partition, names));
      },
      py::arg("graph"), py::arg("weights"), py::arg("names"), py::arg("method"), py::arg("imbalance"),
      py::arg("objective"), py::arg("seed"));

  py::class_<ts::MultiplySettings>(module, "MultiplySettings",
                                   "A multiply's options, as tessera.Cluster.multiply takes them; a default-constructed "
                                   "one holds the defaults the CLI's `tessera multiply` has too.")
      .def(py::init<>())
      .def_readwrite("policy", &ts::MultiplySettings::policy)
      .def_readwrite("layout", &ts::MultiplySettings::layout)
      .def_readwrite("verify", &ts::MultiplySettings::verify)
      .def_readwrite("weights", &ts::MultiplySettings::weights)
      .def_readwrite("seed", &ts::MultiplySettings::seed)
      .def_readwrite("panel_width", &ts::MultiplySettings::panel_width)
      .def_readwrite("panels_in_flight", &ts::MultiplySettings::panels_in_flight)
      .def_readwrite("refill_threshold", &ts::MultiplySettings::refill_threshold)
      .def_readwrite("overlap", &ts::MultiplySettings::overlap)
      .def_readwrite("tile_rows", &ts::MultiplySettings::tile_rows)
      .def_readwrite("node_timeout_s", &ts::MultiplySettings::node_timeout_s)
      .def_readwrite("allow_nonfinite", &ts::MultiplySettings::allow_nonfinite)
      .def("__eq__", [](const ts::MultiplySettings& a, const ts::MultiplySettings& b) { return a == b; });

  py::class_<ts::GraphSettings>(module, "GraphSettings",
                                "A graph run's options, as tessera.Cluster.pagerank and the other graph calls take "
                                "them; a default-constructed one holds the defaults `tessera graph` has too.")
      .def(py::init<>())
      .def_readwrite("algorithm", &ts::GraphSettings::algorithm)
      .def_readwrite("tolerance", &ts::GraphSettings::tolerance)
      .def_readwrite("source", &ts::GraphSettings::source)
      .def_readwrite("damping", &ts::GraphSettings::damping)
      .def_readwrite("beta", &ts::GraphSettings::beta)
      .def_readwrite("label", &ts::GraphSettings::label)
      .def_readwrite("mode", &ts::GraphSettings::mode)
      .def_readwrite("partition", &ts::GraphSettings::partition)
      .def_readwrite("seed", &ts::GraphSettings::seed)
      .def_readwrite("verify", &ts::GraphSettings::verify)
      .def_readwrite("poll_ms", &ts::GraphSettings::poll_ms)
      .def_readwrite("snapshot_ms", &ts::GraphSettings::snapshot_ms)
      .def_readwrite("node_timeout_s", &ts::GraphSettings::node_timeout_s)
      .def_readwrite("max_seconds", &ts::GraphSettings::max_seconds)
      .def_readwrite("level_fraction", &ts::GraphSettings::level_fraction)
      .def_readwrite("batch_age_ms", &ts::GraphSettings::batch_age_ms)
      .def_readwrite("batch_entries", &ts::GraphSettings::batch_entries)
      .def_readwrite("priority_fraction", &ts::GraphSettings::priority_fraction)
      .def("__eq__", [](const ts::GraphSettings& a, const ts::GraphSettings& b) { return a == b; });

  py::class_<tessera::balance::profile::ProfileOptions>(
      module, "ProfileOptions",
      "A profile measurement's options, as tessera.Cluster.profile takes them; a default-constructed one holds the "
      "defaults `tessera profile` has too.")
      .def(py::init<>())
      .def_readwrite("quick", &tessera::balance::profile::ProfileOptions::quick)
      .def_readwrite("refresh", &tessera::balance::profile::ProfileOptions::refresh)
      .def_readwrite("only_nodes", &tessera::balance::profile::ProfileOptions::only_nodes)
      .def_readwrite("reference_size", &tessera::balance::profile::ProfileOptions::reference_size)
      .def_readwrite("window_seconds", &tessera::balance::profile::ProfileOptions::window_seconds);

  py::class_<ClusterHandle>(module, "_Cluster")
      .def(py::init<std::string, std::string, std::string, std::string, bool>(), py::arg("config_path"),
           py::arg("run_dir"), py::arg("profile_path"), py::arg("worker_binary"), py::arg("keep_connected"))
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
           py::arg("rewrite"), py::arg("explain"), py::arg("mode"), py::arg("tile"), py::arg("nodes"),
           py::arg("every_node"), py::arg("progress"), py::arg("notice"))
      .def("close", &ClusterHandle::close);
}
