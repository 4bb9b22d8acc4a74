"""Graphs in, graphs out: building the graph algorithms' input, and partitioning a graph.

:func:`directed_graph` makes the :class:`DirectedGraph` the cluster's graph algorithms run on
(``Cluster.pagerank()`` and the others call it on what they are given);
:func:`partition_graph_input` makes the undirected :class:`PartitionGraph` that :func:`partition`
cuts into weighted parts, as ``tessera partition`` does. Both accept scipy.sparse matrices, edge
arrays, file paths and generator specs; the graphs themselves are the compiled module's types.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import _tessera
from .errors import InvalidInputError
from .results import PartitionResult

if TYPE_CHECKING:  # for the annotations only: cluster.py imports this module, not the reverse
    from .cluster import Cluster

DirectedGraph = _tessera.DirectedGraph
PartitionGraph = _tessera.Graph

# partition()'s defaults are `tessera partition`'s, read at import from the one C++ definition
# (PartitionSettings in balance/session/settings.hpp); its checks are made there too.
_PARTITION = _tessera.PartitionSettings()
_GRAPH = _tessera.GraphSettings()  # directed_graph()'s generator seed is `tessera graph --seed`'s


def _is_sparse(value: Any) -> bool:
    return hasattr(value, "tocoo") and hasattr(value, "shape") and hasattr(value, "nnz")


def _edge_arrays(value: Any):
    """(src, dst, weights or None) from a tuple/list of 2 or 3 arrays or an (E, 2)/(E, 3) array."""
    if isinstance(value, np.ndarray) and value.ndim == 2 and value.shape[1] in (2, 3):
        columns = [value[:, i] for i in range(value.shape[1])]
    elif isinstance(value, (tuple, list)) and len(value) in (2, 3):
        columns = list(value)
    else:
        return None
    src = np.asarray(columns[0])
    dst = np.asarray(columns[1])
    for name, array in (("src", src), ("dst", dst)):
        if array.size and array.dtype.kind not in "iu":
            raise InvalidInputError(f"the edge array {name} has dtype {array.dtype}; vertex ids are integers")
    weights = None if len(columns) == 2 else np.asarray(columns[2], dtype=np.float64)
    return src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False), weights


def _vertex_count(src: np.ndarray, dst: np.ndarray, num_vertices: int | None) -> int:
    if num_vertices is not None:
        return int(num_vertices)
    if src.size == 0:
        return 0
    return int(max(src.max(), dst.max())) + 1


def directed_graph(graph: Any, *, num_vertices: int | None = None, seed: int = _GRAPH.seed) -> DirectedGraph:
    """A :class:`DirectedGraph` (the graph algorithms' input) from any of:

    - a scipy.sparse matrix (square): each stored entry A[i, j] is an edge i -> j with the entry as
      its weight (boolean matrices: unweighted), as ``tessera graph`` reads a Matrix Market file;
    - edge arrays ``(src, dst)`` or ``(src, dst, weights)`` (or an (E, 2) / (E, 3) array): vertex
      count ``num_vertices``, default the largest id + 1; a repeated edge is a parallel edge;
    - a file path (.mtx, .graph/.metis, .edges/.el/.txt/.snap/.edgelist; graphdata/digraph.hpp);
    - a generator spec ("rmat:SCALE[:EF]", "lognormal:N", "mesh2d:NXxNY", "mesh3d:NXxNYxNZ"),
      seeded by ``seed``;
    - a DirectedGraph (returned as is).

    Raises InvalidInputError on a malformed graph (the message names the file line or edge).
    """
    if isinstance(graph, DirectedGraph):
        return graph
    if isinstance(graph, (str, os.PathLike)):
        text = os.fspath(graph)
        if not os.path.exists(text) and _tessera.is_generator_spec(text):
            return _tessera.generate_directed_graph(text, seed)
        return _tessera.read_directed_graph(text)
    if _is_sparse(graph):
        rows, cols = graph.shape
        if rows != cols:
            raise InvalidInputError(f"the adjacency matrix is {rows}x{cols}; a graph's must be square")
        coo = graph.tocoo()
        weights = None if coo.dtype == np.bool_ else np.asarray(coo.data, dtype=np.float64)
        return _tessera.directed_graph_from_edges(rows, coo.row.astype(np.int64), coo.col.astype(np.int64), weights)
    edges = _edge_arrays(graph)
    if edges is None:
        raise InvalidInputError(
            f"cannot make a graph of a {type(graph).__name__}; give a scipy.sparse matrix, (src, dst[, weights]) "
            f"arrays, a file path or a generator spec"
        )
    src, dst, weights = edges
    return _tessera.directed_graph_from_edges(_vertex_count(src, dst, num_vertices), src, dst, weights)


def partition_graph_input(
    graph: Any,
    *,
    num_vertices: int | None = None,
    edge_weights: Any = None,
    vertex_weights: Any = None,
    seed: int = _PARTITION.seed,
):
    """The undirected graph :func:`partition` partitions, and the clean-up made building it
    ({"self_loops_removed", "duplicates_merged"}), from any of:

    - a scipy.sparse matrix: the row-net model ``tessera partition`` applies to a .mtx file
      (square: rows adjacent where A[i, j] or A[j, i] is nonzero, vertex weight = the row's
      nonzeros; rectangular: rows adjacent when they share a column);
    - edge arrays ``(src, dst)`` (symmetrised, self-loops dropped, duplicates merged), with optional
      integer ``edge_weights`` (>= 1) and ``vertex_weights``, vertex count ``num_vertices`` or the
      largest id + 1;
    - a file path (.mtx, .graph/.metis, .edges/.el/.txt) or a generator spec (seeded by ``seed``);
    - a PartitionGraph.
    """
    if isinstance(graph, PartitionGraph):
        return graph, {"self_loops_removed": 0, "duplicates_merged": 0}
    if isinstance(graph, (str, os.PathLike)):
        text = os.fspath(graph)
        if _tessera.is_generator_spec(text):
            return _tessera.generate_graph(text, seed)
        return _tessera.read_graph(text)
    if _is_sparse(graph):
        rows, cols = graph.shape
        coo = graph.tocoo()
        return _tessera.graph_from_coordinates(rows, cols, coo.row.astype(np.int64), coo.col.astype(np.int64))
    edges = _edge_arrays(graph)
    if edges is None:
        raise InvalidInputError(
            f"cannot partition a {type(graph).__name__}; give a scipy.sparse matrix, (src, dst) arrays, a file path "
            f"or a generator spec"
        )
    src, dst, weights = edges
    if weights is not None and edge_weights is None:
        edge_weights = weights
    if edge_weights is not None:
        edge_weights = np.asarray(edge_weights)
        if edge_weights.dtype.kind == "f":
            if not np.all(np.isfinite(edge_weights)) or not np.array_equal(edge_weights, np.round(edge_weights)):
                raise InvalidInputError("edge_weights must be whole numbers (METIS takes integer weights)")
        edge_weights = edge_weights.astype(np.int64)
    if vertex_weights is not None:
        vertex_weights = np.asarray(vertex_weights).astype(np.int64)
    return _tessera.graph_from_edges(_vertex_count(src, dst, num_vertices), src, dst, edge_weights, vertex_weights)


def partition(
    graph: Any,
    weights: "Sequence[float] | Cluster",
    *,
    method: str = _PARTITION.method,
    imbalance: float = _PARTITION.imbalance,
    objective: str = _PARTITION.objective,
    seed: int = _PARTITION.seed,
    num_vertices: int | None = None,
    edge_weights: Any = None,
    vertex_weights: Any = None,
) -> PartitionResult:
    """Partition a graph into parts whose weights follow ``weights``, cutting few edges: what
    ``tessera partition`` does, on the same inputs with the same defaults.

    Args:
        graph: a scipy.sparse matrix, ``(src, dst)`` edge arrays, a file path or a generator spec
            (see :func:`partition_graph_input`).
        weights: one target weight per part (any scale), or a :class:`Cluster`, whose nodes become
            the parts weighted by their measured speeds, ``Cluster.profile_weights()``
            (``tessera partition --cluster``).
        method: "metis" | "contiguous" | "hash".
        imbalance: allowed max part weight / target (metis), >= 1.
        objective: "cut" | "volume" (metis).
        seed: METIS' seed, the hash key, and a generator spec's seed.

    Returns a :class:`PartitionResult`. Raises InvalidInputError on bad weights or input.
    """
    built, stats = partition_graph_input(
        graph, num_vertices=num_vertices, edge_weights=edge_weights, vertex_weights=vertex_weights, seed=seed
    )
    # A Cluster is known by its public profile_weights() rather than by isinstance: cluster.py
    # imports this module, so importing Cluster here would make the two depend on each other.
    if hasattr(weights, "profile_weights"):
        names, targets = weights.profile_weights()
    else:
        targets = [float(w) for w in weights]
        names = [f"part{i}" for i in range(len(targets))]
    settings = _tessera.PartitionSettings()
    settings.method, settings.imbalance, settings.objective, settings.seed = method, float(imbalance), objective, int(seed)
    parts, fields = _tessera.partition_graph(built, targets, names, settings)
    fields["part_figures"] = fields.pop("parts")
    fields.update(
        {"vertices": built.vertex_count, "edges": built.edge_count, "method": method, "objective": objective,
         "build": stats}
    )
    return PartitionResult(parts, fields)
