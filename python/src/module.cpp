// tessera._tessera: the compiled half of the Python package. Exposes ClusterHandle (as
// _Cluster), graphs for the graph algorithms (DirectedGraph) and for partitioning (Graph), and
// partition_graph. Users call the pure-Python package (tessera/__init__.py), which documents the
// API, applies the array conversion rule and wraps results in classes; this layer does only what
// needs C++. Errors arrive as the exceptions of tessera/errors.py (errors.hpp).
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
using tessera::python::ClusterHandle;
using tessera::python::GraphArgs;
using tessera::python::IndexArray;
using tessera::python::MultiplyArgs;
using tessera::python::raise_status;
using tessera::python::value_or_raise;
using tessera::python::without_gil;

namespace {

py::dict stats_dict(const tp::GraphBuildStats& stats) {
  return py::dict(py::arg("self_loops_removed") = stats.self_loops_removed,
                  py::arg("duplicates_merged") = stats.duplicates_merged);
}

MultiplyArgs multiply_args(const std::string& policy, const std::string& layout, const std::string& verify,
                           const std::vector<double>& weights, uint64_t seed, uint64_t panel_width,
                           uint32_t panels_in_flight, uint32_t refill_threshold, bool overlap, uint64_t tile_rows,
                           double node_timeout_s) {
  MultiplyArgs args;
  args.policy = policy;
  args.layout = layout;
  args.verify = verify;
  args.weights = weights;
  args.seed = seed;
  args.panel_width = panel_width;
  args.panels_in_flight = panels_in_flight;
  args.refill_threshold = refill_threshold;
  args.overlap = overlap;
  args.tile_rows = tile_rows;
  args.node_timeout_s = node_timeout_s;
  return args;
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
      .def("profile", &ClusterHandle::profile, py::arg("refresh"), py::arg("quick"), py::arg("nodes"),
           py::arg("probe_size"), py::arg("window_seconds"), py::arg("progress"))
      .def(
          "plan",
          [](const ClusterHandle& self, uint64_t m, uint64_t n, uint64_t k, const std::string& policy,
             const std::string& layout, const std::vector<double>& weights, uint64_t panel_width,
             uint32_t panels_in_flight, uint32_t refill_threshold, bool overlap, uint64_t tile_rows) {
            return self.plan(m, n, k,
                             multiply_args(policy, layout, "none", weights, 1, panel_width, panels_in_flight,
                                           refill_threshold, overlap, tile_rows, 0.0));
          },
          py::arg("m"), py::arg("n"), py::arg("k"), py::arg("policy"), py::arg("layout"), py::arg("weights"),
          py::arg("panel_width"), py::arg("panels_in_flight"), py::arg("refill_threshold"), py::arg("overlap"),
          py::arg("tile_rows"))
      .def("predict", &ClusterHandle::predict, py::arg("plan"))
      .def("profile_weights", &ClusterHandle::profile_weights)
      .def(
          "multiply",
          [](ClusterHandle& self, const py::array& a, const py::array& b, const py::array& c, const std::string& policy,
             const std::string& layout, const std::string& verify, const std::vector<double>& weights, uint64_t seed,
             uint64_t panel_width, uint32_t panels_in_flight, uint32_t refill_threshold, bool overlap,
             uint64_t tile_rows, double node_timeout_s, bool allow_nonfinite, bool fill_output,
             const py::object& plan, const py::object& progress, const py::object& notice) {
            return self.multiply(a, b, c,
                                 multiply_args(policy, layout, verify, weights, seed, panel_width, panels_in_flight,
                                               refill_threshold, overlap, tile_rows, node_timeout_s),
                                 allow_nonfinite, fill_output, plan, progress, notice);
          },
          py::arg("a"), py::arg("b"), py::arg("c"), py::arg("policy"), py::arg("layout"), py::arg("verify"),
          py::arg("weights"), py::arg("seed"), py::arg("panel_width"), py::arg("panels_in_flight"),
          py::arg("refill_threshold"), py::arg("overlap"), py::arg("tile_rows"), py::arg("node_timeout_s"),
          py::arg("allow_nonfinite"), py::arg("fill_output"), py::arg("plan"), py::arg("progress"),
          py::arg("notice"))
      .def(
          "graph",
          [](ClusterHandle& self, const tp::DirectedGraph& graph, const std::string& algorithm, const std::string& mode,
             const std::string& partition, const std::string& weights, std::optional<double> tolerance,
             std::optional<int64_t> source, double damping, std::optional<double> beta, const std::string& label,
             uint64_t seed, bool verify, uint32_t poll_ms, uint32_t snapshot_ms, double node_timeout_s,
             double max_seconds, const py::object& progress, const py::object& notice) {
            GraphArgs args;
            args.algorithm = algorithm;
            args.mode = mode;
            args.partition = partition;
            args.weights = weights;
            args.tolerance = tolerance;
            args.source = source;
            args.damping = damping;
            args.beta = beta;
            args.label = label;
            args.seed = seed;
            args.verify = verify;
            args.poll_ms = poll_ms;
            args.snapshot_ms = snapshot_ms;
            args.node_timeout_s = node_timeout_s;
            args.max_seconds = max_seconds;
            return self.graph(graph, args, progress, notice);
          },
          py::arg("graph"), py::arg("algorithm"), py::arg("mode"), py::arg("partition"), py::arg("weights"),
          py::arg("tolerance"), py::arg("source"), py::arg("damping"), py::arg("beta"), py::arg("label"),
          py::arg("seed"), py::arg("verify"), py::arg("poll_ms"), py::arg("snapshot_ms"), py::arg("node_timeout_s"),
          py::arg("max_seconds"), py::arg("progress"), py::arg("notice"))
      .def(
          "evaluate",
          [](ClusterHandle& self, const std::string& expression, const py::dict& inputs, const std::string& policy,
             const std::string& verify, bool rewrite, bool explain, const std::string& mode, uint64_t tile,
             const std::vector<std::string>& nodes, bool every_node, const py::object& progress,
             const py::object& notice) {
            return self.evaluate(expression, inputs,
                                 multiply_args(policy, "rows", verify, {}, 1, 256, 4, 1, true, 0, 0.0), rewrite,
                                 explain, mode, tile, nodes, every_node, progress, notice);
          },
          py::arg("expression"), py::arg("inputs"), py::arg("policy"), py::arg("verify"), py::arg("rewrite"),
          py::arg("explain"), py::arg("mode"), py::arg("tile"), py::arg("nodes"), py::arg("every_node"),
          py::arg("progress"), py::arg("notice"))
      .def("close", &ClusterHandle::close);
}
