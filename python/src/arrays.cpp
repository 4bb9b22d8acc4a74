#include "arrays.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "errors.hpp"
#include "run_control.hpp"
#include "tessera/graphdata/graph_io.hpp"

namespace tessera::python {

namespace tp = tessera::partition;

namespace {

std::string shape_text(const py::array& array) {
  std::string text;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) text += fmt::format("{}{}", d == 0 ? "" : "x", array.shape(d));
  return text.empty() ? "a scalar" : text;
}

void check_matrix(const py::array& array, std::string_view name) {
  if (array.ndim() != 2) {
    raise_status(invalid_argument(fmt::format("{} is {} ({}-D); give a 2-D array", name, shape_text(array), array.ndim())));
  }
  if (!array.dtype().is(py::dtype::of<double>())) {
    raise_status(invalid_argument(fmt::format("{} has dtype {}; Tessera multiplies float64 (convert with "
                                              "{}.astype(numpy.float64))",
                                              name, std::string(py::str(array.dtype())), name)));
  }
  if ((array.flags() & py::array::c_style) == 0) {
    raise_status(invalid_argument(fmt::format("{} is not C-contiguous; pass numpy.ascontiguousarray({})", name, name)));
  }
}

std::span<const int64_t> span_of(const IndexArray& array) {
  return {array.data(), static_cast<std::size_t>(array.size())};
}

void check_same_length(const IndexArray& sources, const IndexArray& targets) {
  if (sources.ndim() != 1 || targets.ndim() != 1 || sources.size() != targets.size()) {
    raise_status(invalid_argument(fmt::format("the edge arrays must be 1-D and of equal length (src has {}, dst {} "
                                              "entries)",
                                              sources.size(), targets.size())));
  }
}

}  // namespace

linalg::MatrixView input_view(const py::array& array, std::string_view name) {
  check_matrix(array, name);
  return {static_cast<const double*>(array.data()), static_cast<std::size_t>(array.shape(0)),
          static_cast<std::size_t>(array.shape(1))};
}

linalg::MutableMatrixView output_view(const py::array& array, uint64_t rows, uint64_t cols) {
  check_matrix(array, "out");
  if (static_cast<uint64_t>(array.shape(0)) != rows || static_cast<uint64_t>(array.shape(1)) != cols) {
    raise_status(invalid_argument(fmt::format("out is {} but the product is {}x{}", shape_text(array), rows, cols)));
  }
  if (!array.writeable()) raise_status(invalid_argument("out is read-only; pass a writeable array"));
  // mutable_data() would raise numpy's own error on a read-only array; checked above.
  return {static_cast<double*>(const_cast<void*>(array.data())), static_cast<std::size_t>(rows),
          static_cast<std::size_t>(cols)};
}

graphdata::DirectedGraph directed_graph_from_edges(int64_t vertex_count, const IndexArray& sources, const IndexArray& targets,
                                            const py::object& weights) {
  check_same_length(sources, targets);
  const std::span<const int64_t> from = span_of(sources), to = span_of(targets);
  std::vector<graphdata::DirectedEdge> edges(from.size());
  for (std::size_t i = 0; i < edges.size(); ++i) edges[i] = {from[i], to[i], 1.0};
  const bool weighted = !weights.is_none();
  if (weighted) {
    const auto values = weights.cast<RealArray>();
    if (values.ndim() != 1 || static_cast<std::size_t>(values.size()) != edges.size()) {
      raise_status(invalid_argument(fmt::format("weights has {} entries for {} edges; give one per edge",
                                                values.size(), edges.size())));
    }
    for (std::size_t i = 0; i < edges.size(); ++i) edges[i].weight = values.data()[i];
  }
  return value_or_raise(
      without_gil([&] { return graphdata::build_directed_graph(vertex_count, std::move(edges), weighted); }));
}

graphdata::Graph graph_from_coordinates(int64_t rows, int64_t cols, const IndexArray& row_index, const IndexArray& col_index,
                                 graphdata::GraphBuildStats* stats) {
  check_same_length(row_index, col_index);
  if (rows < 0 || cols < 0) raise_status(invalid_argument("a matrix shape cannot be negative"));
  const std::span<const int64_t> row = span_of(row_index), col = span_of(col_index);
  // graph_of_pattern is what parse_matrix_market uses, so a matrix and its .mtx file give one graph.
  std::vector<std::pair<int64_t, int64_t>> entries(row.size());
  for (std::size_t e = 0; e < entries.size(); ++e) {
    if (row[e] < 0 || row[e] >= rows || col[e] < 0 || col[e] >= cols) {
      raise_status(invalid_argument(fmt::format("entry ({}, {}) is outside the {}x{} matrix", row[e], col[e], rows, cols)));
    }
    entries[e] = {row[e], col[e]};
  }
  return value_or_raise(without_gil([&] { return graphdata::graph_of_pattern(rows, cols, std::move(entries), stats); }));
}

graphdata::Graph graph_from_edges(int64_t vertex_count, const IndexArray& sources, const IndexArray& targets,
                           const py::object& edge_weights, const py::object& vertex_weights,
                           graphdata::GraphBuildStats* stats) {
  check_same_length(sources, targets);
  const std::span<const int64_t> from = span_of(sources), to = span_of(targets);
  graphdata::GraphInput input;
  input.vertex_count = vertex_count;
  input.edges.resize(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) input.edges[i] = {from[i], to[i], 1};
  if (!edge_weights.is_none()) {
    const auto weights = edge_weights.cast<IndexArray>();
    if (weights.ndim() != 1 || static_cast<std::size_t>(weights.size()) != from.size()) {
      raise_status(invalid_argument(fmt::format("edge_weights has {} entries for {} edges; give one per edge",
                                                weights.size(), from.size())));
    }
    input.weighted_edges = true;
    for (std::size_t i = 0; i < from.size(); ++i) input.edges[i].weight = weights.data()[i];
  }
  if (!vertex_weights.is_none()) {
    const auto weights = vertex_weights.cast<IndexArray>();
    input.vertex_weights.assign(weights.data(), weights.data() + weights.size());
  }
  return value_or_raise(without_gil([&] { return graphdata::build_graph(input, stats); }));
}

py::array_t<double> to_numpy(std::vector<double>&& values) {
  auto owner = std::make_unique<std::vector<double>>(std::move(values));
  std::vector<double>* raw = owner.get();
  py::capsule free_when_done(owner.release(), [](void* pointer) { delete static_cast<std::vector<double>*>(pointer); });
  return py::array_t<double>({static_cast<py::ssize_t>(raw->size())}, {static_cast<py::ssize_t>(sizeof(double))},
                             raw->data(), free_when_done);
}

}  // namespace tessera::python
