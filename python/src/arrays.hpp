// numpy arrays as the library's views and graphs.
//
// Matrices cross without a copy: input_view/output_view wrap the array's own memory in a
// linalg::MatrixView / MutableMatrixView, so they must be 2-D, float64 and C-contiguous (the
// Python layer converts anything else first, by the rule in tessera/__init__.py); anything else is
// refused here as InvalidInputError. The caller keeps the array alive while the view is used.
// Graphs are built from index arrays (copied into the library's CSR types, which own their
// arrays). All functions REQUIRE the GIL and raise Python exceptions on bad input.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/linalg/matrix.hpp"
#include "tessera/graphdata/digraph.hpp"
#include "tessera/graphdata/graph.hpp"

namespace tessera::python {

namespace py = pybind11;

using IndexArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using RealArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

// The array's memory as a read-only matrix. `name` ("A", "B") is used in messages.
linalg::MatrixView input_view(const py::array& array, std::string_view name);
// The array's memory as the product's destination; it must be rows x cols and writeable.
linalg::MutableMatrixView output_view(const py::array& array, uint64_t rows, uint64_t cols);

// A DirectedGraph of the edges src[i] -> dst[i] (weights[i] when `weights` is not None).
graphdata::DirectedGraph directed_graph_from_edges(int64_t vertex_count, const IndexArray& sources,
                                                   const IndexArray& targets, const py::object& weights);

// The undirected graph `tessera partition` builds from a Matrix Market file with these nonzero
// coordinates (row-net model, graph_io.hpp): square -> rows adjacent where A(i,j) or A(j,i) is
// nonzero, rectangular -> rows adjacent when they share a column; vertex weight = the row's
// nonzeros. `stats` receives the clean-up counts.
graphdata::Graph graph_from_coordinates(int64_t rows, int64_t cols, const IndexArray& row_index,
                                        const IndexArray& col_index, graphdata::GraphBuildStats* stats);
// The undirected graph of an edge list, as `tessera partition` reads a .edges file (symmetrised,
// self-loops dropped, duplicates merged), with optional integer edge and vertex weights.
graphdata::Graph graph_from_edges(int64_t vertex_count, const IndexArray& sources, const IndexArray& targets,
                                  const py::object& edge_weights, const py::object& vertex_weights,
                                  graphdata::GraphBuildStats* stats);

// A 1-D float64 array owning `values` (moved, not copied).
py::array_t<double> to_numpy(std::vector<double>&& values);

}  // namespace tessera::python
