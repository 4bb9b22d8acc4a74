"""Tessera from Python: numpy in, numpy out, the cluster one object away.

    import numpy as np
    import tessera

    with tessera.Cluster("configs/local.yaml") as cluster:   # starts the local workers, stops them after
        cluster.profile(quick=True)                           # measured speeds and links
        A = np.random.rand(2048, 2048)
        B = np.random.rand(2048, 2048)
        C, report = cluster.multiply(A, B)                     # verified (Freivalds) by default
        print(report)

The compiled module (``tessera._tessera``) links Tessera's coordinator libraries; this package
documents the API, turns arguments into what the library takes, and wraps the results.

Arrays (the rule): a 2-D ``float64`` C-contiguous array is read (A, B) or written (``out=``) in
place, without a copy. Any other 2-D real array (float32, integers, Fortran order, a strided
slice) is converted to C-contiguous float64 with ONE copy made here, unless
``allow_copy=False``, which refuses it instead. Integers beyond 2**53 lose precision in that
conversion. Complex, boolean, object and string arrays are refused (InvalidInputError), as are
arrays that are not 2-D. ``out=`` is never converted: it must be float64, C-contiguous, writeable
and of the product's shape.

Errors: see :mod:`tessera.errors` (every exception derives from :class:`TesseraError`; bad input
from ``ValueError``). Ctrl-C during a run cancels it, frees the workers for the next call, and
raises ``KeyboardInterrupt``.

Notices the library has for the person waiting ("no profile at ...; measuring a quick one now")
go to the ``logging`` logger ``"tessera"`` at INFO level and into ``report.notices``; warnings
(a node the plan gives nothing, a secret others can read) are issued as :class:`TesseraWarning`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import _tessera, errors
from .errors import (
    BusyError,
    CancelledError,
    ClusterError,
    ConfigError,
    InvalidInputError,
    NotFoundError,
    ResourceExhaustedError,
    TesseraError,
    TesseraFileError,
    VerificationError,
)

__version__ = _tessera.version
__all__ = [
    "Cluster",
    "Plan",
    "Prediction",
    "Report",
    "GraphReport",
    "EvalReport",
    "Expression",
    "PartitionResult",
    "DirectedGraph",
    "PartitionGraph",
    "directed_graph",
    "partition_graph_input",
    "partition",
    "TesseraWarning",
] + errors.__all__

DirectedGraph = _tessera.DirectedGraph
PartitionGraph = _tessera.Graph

_log = logging.getLogger("tessera")


class TesseraWarning(UserWarning):
    """A warning from the library (planning, secrets readable by others, ignored emulation)."""


def _warn_all(messages: Iterable[str]) -> None:
    for message in messages:
        warnings.warn(message, TesseraWarning, stacklevel=3)


def _notice_collector():
    """A list and the callback that appends to it: the library's notices for the person waiting,
    kept for the report and logged at INFO on the "tessera" logger."""
    notices: list = []

    def notice(text: str) -> None:
        notices.append(text)
        _log.info("%s", text)

    return notices, notice


# --- Arrays ------------------------------------------------------------------------------------


def _as_matrix(value: Any, name: str, allow_copy: bool) -> np.ndarray:
    """The 2-D C-contiguous float64 array the library reads, by the rule in the module docstring."""
    array = np.asarray(value)
    if array.ndim != 2:
        raise InvalidInputError(f"{name} has shape {array.shape} ({array.ndim}-D); give a 2-D array")
    if array.dtype.kind not in "fiu":
        raise InvalidInputError(
            f"{name} has dtype {array.dtype}; Tessera multiplies real matrices (give float64, or a float or "
            f"integer array to convert)"
        )
    if array.dtype == np.float64 and array.flags.c_contiguous:
        return array
    if not allow_copy:
        what = f"dtype {array.dtype}" if array.dtype != np.float64 else "not C-contiguous"
        raise InvalidInputError(
            f"{name} is {what} and allow_copy=False; pass numpy.ascontiguousarray({name}, dtype=numpy.float64)"
        )
    return np.ascontiguousarray(array, dtype=np.float64)


def _check_out(out: Any, rows: int, cols: int) -> np.ndarray:
    if not isinstance(out, np.ndarray):
        raise InvalidInputError(f"out must be a numpy.ndarray, not {type(out).__name__}")
    if out.shape != (rows, cols):
        raise InvalidInputError(f"out has shape {out.shape} but the product is {rows}x{cols}")
    if out.dtype != np.float64:
        raise InvalidInputError(f"out has dtype {out.dtype}; it must be float64 (results are written in place)")
    if not out.flags.c_contiguous:
        raise InvalidInputError("out is not C-contiguous; results are written in place, so pass a C-contiguous array")
    if not out.flags.writeable:
        raise InvalidInputError("out is read-only; pass a writeable array")
    return out


# --- Values ------------------------------------------------------------------------------------


class _Record:
    """Fields of a dict as attributes, the dict itself from to_dict()."""

    def __init__(self, fields: dict):
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._fields))

    def to_dict(self) -> dict:
        """The fields as a plain dict (a deep copy: safe to modify or json.dump)."""
        return json.loads(json.dumps(self._fields))


class Plan:
    """Which node multiplies which part of C = A B: a value, made without running anything.

    Attributes: ``policy``, ``m``, ``n``, ``k``, ``panel_width``, ``panels_in_flight``,
    ``refill_threshold``, ``layout``, ``tile_rows``, ``shares`` (one dict per node, cluster order:
    ``node``, ``weight``, ``rows`` as (begin, end), ``blocks`` for 2-D/3-D layouts), ``rows``
    (node -> (begin, end)), ``weights`` (node -> share of the work), ``warnings``.

    ``str(plan)`` is the text ``tessera model`` and ``tessera multiply --show-plan`` print;
    ``repr(plan)`` a one-line summary; ``==`` compares every field. Pass a plan to
    ``Cluster.multiply(A, B, plan=plan)`` to run exactly it; ``to_dict()``/``Plan.from_dict()``
    round-trip it through plain data (JSON).
    """

    _KEYS = ("policy", "m", "n", "k", "panel_width", "panels_in_flight", "refill_threshold", "layout", "tile_rows")

    def __init__(self, fields: dict, warnings_: Sequence[str] = ()):
        self._fields = fields
        self.warnings = list(warnings_)

    @classmethod
    def from_dict(cls, fields: dict) -> "Plan":
        """A plan from ``to_dict()``'s output (for example read back from JSON)."""
        shares = [
            {
                "node": share["node"],
                "weight": float(share["weight"]),
                "rows": tuple(share["rows"]),
                "blocks": [tuple(block) for block in share["blocks"]],
            }
            for share in fields["shares"]
        ]
        copy = {key: fields[key] for key in cls._KEYS}
        copy["shares"] = shares
        copy["text"] = fields.get("text", "")
        return cls(copy)

    def to_dict(self) -> dict:
        """The plan as plain data (lists for tuples), accepted back by from_dict()."""
        return json.loads(json.dumps(self._fields))

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__["_fields"]
        if name in Plan._KEYS or name == "shares":
            return fields[name]
        raise AttributeError(f"Plan has no field {name!r}")

    @property
    def rows(self) -> dict:
        """node -> (first row, end row) of C for row layouts."""
        return {share["node"]: tuple(share["rows"]) for share in self._fields["shares"]}

    @property
    def weights(self) -> dict:
        """node -> the normalised share of the work the policy aimed for."""
        return {share["node"]: share["weight"] for share in self._fields["shares"]}

    def _comparable(self):
        return (
            tuple(self._fields[key] for key in Plan._KEYS),
            tuple(
                (s["node"], s["weight"], tuple(s["rows"]), tuple(tuple(b) for b in s["blocks"]))
                for s in self._fields["shares"]
            ),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return self._comparable() == other._comparable()

    def __hash__(self) -> int:
        return hash(self._comparable())

    def __str__(self) -> str:
        return self._fields["text"]

    def __repr__(self) -> str:
        f = self._fields
        if f["layout"] == "rows":
            parts = ", ".join(f"{node!r}: {rows}" for node, rows in self.rows.items())
            shares = f"rows={{{parts}}}"
        else:
            parts = ", ".join(f"{s['node']!r}: {len(s['blocks'])}" for s in f["shares"])
            shares = f"blocks={{{parts}}}"
        return (
            f"Plan(policy={f['policy']!r}, m={f['m']}, n={f['n']}, k={f['k']}, layout={f['layout']!r}, "
            f"panel_width={f['panel_width']}, {shares})"
        )


class Prediction(_Record):
    """The performance model's forecast of a plan: ``makespan_s`` and ``finish_s`` (node ->
    predicted finish time in seconds)."""

    def __repr__(self) -> str:
        finish = ", ".join(f"{node!r}: {seconds:.3f}" for node, seconds in self.finish_s.items())
        return f"Prediction(makespan_s={self.makespan_s:.3f}, finish_s={{{finish}}})"


class Report(_Record):
    """What a multiply did: the fields of ``tessera multiply --report`` (report.hpp) as
    attributes: ``makespan_s``, ``gflops``, ``imbalance``, ``verified`` (None when not verified),
    ``verification`` (dict: mode, max_error_ratio, max_abs_error, seconds, detail),
    ``predicted_makespan_s``, ``prediction_error``, ``nodes`` (per-node dicts: rows, bytes,
    compute/comm/idle seconds, ...), ``policy``, ``m``, ``n``, ``k``, ``layout``, ``lost_nodes``...
    Also ``plan`` (the :class:`Plan` that ran), ``warnings``, ``notices`` and ``timing`` (where
    the call's seconds went: call_s, the whole call as Python saw it; input_check_s, the NaN/inf
    scan; output_fill_s, zeroing a C allocated here before the run; session_open_s and
    session_close_s; driver_s, the library's multiply).
    ``str(report)`` is the table ``tessera multiply`` prints; ``to_dict()`` the JSON document.
    """

    def __init__(self, fields: dict, plan: Plan, warnings_: Sequence[str], notices: Sequence[str], table: str):
        super().__init__(fields)
        self.__dict__["plan"] = plan
        self.__dict__["warnings"] = list(warnings_)
        self.__dict__["notices"] = list(notices)
        self.__dict__["_table"] = table

    def __str__(self) -> str:
        return self._table

    def __repr__(self) -> str:
        verified = {None: "not verified", True: "verified", False: "verification FAILED"}[self.verified]
        return (
            f"<tessera.Report {self.policy} {self.m}x{self.k} @ {self.k}x{self.n}: {self.makespan_s:.3f} s, "
            f"{self.gflops:.2f} GFLOP/s, imbalance {self.imbalance:.3f}, {verified}>"
        )


class GraphReport(_Record):
    """What a graph run did: the fields of ``tessera graph --report`` as attributes: ``algorithm``,
    ``mode``, ``partition``, ``weights``, ``tolerance``, ``graph``, ``placement``, ``nodes``,
    ``totals`` (wall_s, edge_updates, edge_updates_per_s, residual, polls, restarts, ...),
    ``lost_nodes``, ``trace``, ``verification`` (None unless verify=True). Also ``notices``."""

    def __init__(self, fields: dict, notices: Sequence[str]):
        super().__init__(fields)
        self.__dict__["notices"] = list(notices)

    @property
    def wall_s(self) -> float:
        """Seconds from shipping the first parts to the values gathered."""
        return self.totals["wall_s"]

    def __repr__(self) -> str:
        verification = self.verification
        verified = "" if verification is None else (", verified" if verification["passed"] else ", verification FAILED")
        return (
            f"<tessera.GraphReport {self.algorithm['description']} {self.mode} on {len(self.nodes)} nodes: "
            f"{self.totals['wall_s']:.3f} s, {self.totals['edge_updates']} edge updates{verified}>"
        )


class EvalReport(_Record):
    """What evaluating an expression did: the fields of ``tessera eval --report`` as attributes:
    ``expression``, ``rewritten``, ``rows``, ``cols``, ``cost_as_written`` and ``cost_evaluated``
    (flops, products, intermediate_bytes, moved_bytes), ``products`` (one dict per product run on
    the cluster in sequence mode: m, n, k, policy, makespan_s, predicted_makespan_s, verified),
    ``makespan_sum_s``, ``wall_s``, ``mode`` and ``scheduled`` (scheduled mode: tile, candidates,
    tasks, predicted/measured/theoretical makespans, fastest_alone_s, theoretical_speedup,
    predicted/measured/naive bytes, per node and per task kind figures, lost_nodes, verified).
    ``str(report)`` is the table ``tessera eval`` prints; also ``notices``."""

    def __init__(self, fields: dict, table: str, notices: Sequence[str]):
        super().__init__(fields)
        self.__dict__["table"] = table
        self.__dict__["notices"] = list(notices)

    def __str__(self) -> str:
        return self.table

    def __repr__(self) -> str:
        if self.scheduled is not None:
            return (f"<tessera.EvalReport {self.expression}: {self.scheduled['tasks']} tile tasks scheduled, "
                    f"{self.scheduled['measured_makespan_s']:.3f} s>")
        return (f"<tessera.EvalReport {self.expression}: {len(self.products)} products on the cluster, "
                f"{self.wall_s:.3f} s>")


class Expression:
    """A matrix expression on a cluster, built lazily and computed by :meth:`compute`.

    Made by :meth:`Cluster.array` and :meth:`Cluster.identity`; combine with ``@`` (product),
    ``+``, ``-``, ``*`` by a number, ``.T`` and ``**`` (a whole power of a square matrix).
    Shapes are checked as the expression is built (InvalidInputError naming both shapes); nothing
    is sent until ``compute()``, which rewrites the whole expression by cost (``u @ P**8``
    becomes eight vector-matrix products, chains are reordered, repeated parts computed once) and
    runs it on the cluster as tile tasks with intermediates kept on the nodes, verified. An identity takes its size from the sum it is in.
    """

    def __init__(self, cluster: "Cluster", text: str, inputs: dict, shape: "tuple | None"):
        self._cluster = cluster
        self._text = text
        self._inputs = inputs
        self.shape = shape  # (rows, cols); None for an identity not yet sized by a sum

    def __repr__(self) -> str:
        shape = "x".join(map(str, self.shape)) if self.shape else "sized by its sum"
        return f"<tessera.Expression {self._text} ({shape})>"

    @property
    def text(self) -> str:
        """The expression in ``tessera eval``'s grammar, arrays named x0, x1, ..."""
        return self._text

    def _other(self, other: Any) -> "Expression":
        if not isinstance(other, Expression):
            raise InvalidInputError(
                f"cannot combine an Expression with {type(other).__name__}; wrap arrays with cluster.array()")
        if other._cluster is not self._cluster:
            raise InvalidInputError("the two expressions belong to different clusters")
        return other

    def _joined(self, other: "Expression") -> dict:
        inputs = dict(self._inputs)
        inputs.update(other._inputs)
        return inputs

    def __matmul__(self, other: Any) -> "Expression":
        other = self._other(other)
        if self.shape is None or other.shape is None:
            raise InvalidInputError("an identity in a product has no size to take; leave it out (I @ A is A)")
        if self.shape[1] != other.shape[0]:
            raise InvalidInputError(
                f"cannot multiply {self.shape[0]}x{self.shape[1]} by {other.shape[0]}x{other.shape[1]}: the "
                f"left's columns must equal the right's rows")
        return Expression(self._cluster, f"({self._text}) @ ({other._text})", self._joined(other),
                          (self.shape[0], other.shape[1]))

    def _additive(self, other: Any, op: str) -> "Expression":
        other = self._other(other)
        if self.shape is None and other.shape is None:
            raise InvalidInputError("an identity plus an identity has no size; add a matrix to it")
        shape = self.shape or other.shape
        if self.shape is None or other.shape is None:
            if shape[0] != shape[1]:
                raise InvalidInputError(f"an identity needs a square partner, not {shape[0]}x{shape[1]}")
        elif self.shape != other.shape:
            raise InvalidInputError(
                f"cannot {'add' if op == '+' else 'subtract'} {self.shape[0]}x{self.shape[1]} and "
                f"{other.shape[0]}x{other.shape[1]}: the shapes must be equal")
        return Expression(self._cluster, f"({self._text}) {op} ({other._text})", self._joined(other), shape)

    def __add__(self, other: Any) -> "Expression":
        return self._additive(other, "+")

    def __sub__(self, other: Any) -> "Expression":
        return self._additive(other, "-")

    def __mul__(self, scalar: Any) -> "Expression":
        if isinstance(scalar, Expression):
            raise InvalidInputError("* multiplies by a number; use @ for the matrix product")
        value = float(scalar)
        if not np.isfinite(value):
            raise InvalidInputError(f"the scalar {scalar} is not finite")
        return Expression(self._cluster, f"{value!r} * ({self._text})", dict(self._inputs), self.shape)

    __rmul__ = __mul__

    def __neg__(self) -> "Expression":
        return self * -1.0

    @property
    def T(self) -> "Expression":
        shape = None if self.shape is None else (self.shape[1], self.shape[0])
        return Expression(self._cluster, f"({self._text})'", dict(self._inputs), shape)

    def __pow__(self, exponent: Any) -> "Expression":
        if not isinstance(exponent, (int, np.integer)) or isinstance(exponent, bool) or exponent < 0:
            raise InvalidInputError(f"the exponent must be a whole number >= 0, not {exponent!r}")
        if self.shape is None or self.shape[0] != self.shape[1]:
            raise InvalidInputError("only a square matrix has powers")
        return Expression(self._cluster, f"({self._text})^{int(exponent)}", dict(self._inputs), self.shape)

    def compute(self, *, mode: str = "scheduled", tile: int | None = None, nodes: "Sequence[str] | None" = None,
                every_node: bool = False, policy: str = "proportional", verify: str = "freivalds",
                rewrite: bool = True, explain: bool = False, progress: "Callable[[dict], None] | None" = None):
        """Evaluates on the cluster; returns ``(numpy array, EvalReport)``.

        mode: "scheduled" (tile tasks placed by HEFT with each node's tile cache, intermediates
        kept on the nodes; ``tile`` fixes the tile size, else the simulation picks it; ``nodes``
        names the only nodes to use; the fastest few of them run alone when that is forecast clearly
        faster, unless ``every_node=True``) or "sequence" (one multiply per product, with ``policy``:
        "even" | "proportional" | "model" | "dynamic"); verify: "freivalds" | "exact" | "none",
        of the value (scheduled) or of every product (sequence), a failure raising
        VerificationError; rewrite=False evaluates as written; explain=True adds the before/after
        trees to the report's table. Ctrl-C cancels and raises KeyboardInterrupt."""
        if self.shape is None:
            raise InvalidInputError("an identity alone has no size")
        if tile is not None and (not isinstance(tile, int) or tile < 1):
            raise InvalidInputError(f"tile must be a positive whole number, not {tile!r}")
        return self._cluster._evaluate(self._text, self._inputs, policy, verify, rewrite, explain, mode,
                                       tile or 0, list(nodes or []), bool(every_node), progress)


class PartitionResult(_Record):
    """A partition: ``parts`` (int32 array, the part of each vertex) and the quality figures of
    ``tessera partition --report``: ``imbalance``, ``max_target_deviation``, ``edge_cut``,
    ``comm_volume``, ``total_weight``, ``note``, ``part_figures`` (per part: name, weight, target,
    target_weight, vertices), plus ``vertices``, ``edges`` and ``build`` (self-loops removed,
    duplicates merged while building the graph)."""

    def __init__(self, parts: np.ndarray, fields: dict):
        super().__init__(fields)
        self.__dict__["parts"] = parts

    def __repr__(self) -> str:
        return (
            f"<tessera.PartitionResult {len(self.part_figures)} parts of {self.vertices} vertices: imbalance "
            f"{self.imbalance:.4f}, edge cut {self.edge_cut}, comm volume {self.comm_volume}>"
        )


# --- Graph inputs ------------------------------------------------------------------------------


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


def directed_graph(graph: Any, *, num_vertices: int | None = None, seed: int = 1) -> DirectedGraph:
    """A :class:`DirectedGraph` (the graph algorithms' input) from any of:

    - a scipy.sparse matrix (square): each stored entry A[i, j] is an edge i -> j with the entry as
      its weight (boolean matrices: unweighted), as ``tessera graph`` reads a Matrix Market file;
    - edge arrays ``(src, dst)`` or ``(src, dst, weights)`` (or an (E, 2) / (E, 3) array): vertex
      count ``num_vertices``, default the largest id + 1; a repeated edge is a parallel edge;
    - a file path (.mtx, .graph/.metis, .edges/.el/.txt/.snap/.edgelist; partition/digraph.hpp);
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
    seed: int = 1,
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
    method: str = "metis",
    imbalance: float = 1.03,
    objective: str = "cut",
    seed: int = 1,
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
            the parts weighted by their measured speeds (``tessera partition --cluster``).
        method: "metis" | "contiguous" | "hash".
        imbalance: allowed max part weight / target (metis), >= 1.
        objective: "cut" | "volume" (metis).
        seed: METIS' seed, the hash key, and a generator spec's seed.

    Returns a :class:`PartitionResult`. Raises InvalidInputError on bad weights or input.
    """
    built, stats = partition_graph_input(
        graph, num_vertices=num_vertices, edge_weights=edge_weights, vertex_weights=vertex_weights, seed=seed
    )
    if isinstance(weights, Cluster):
        names, targets = weights._handle.profile_weights()
    else:
        targets = [float(w) for w in weights]
        names = [f"part{i}" for i in range(len(targets))]
    parts, fields = _tessera.partition_graph(built, targets, names, method, float(imbalance), objective, int(seed))
    fields["part_figures"] = fields.pop("parts")
    fields.update(
        {"vertices": built.vertex_count, "edges": built.edge_count, "method": method, "objective": objective,
         "build": stats}
    )
    return PartitionResult(parts, fields)


# --- The cluster -------------------------------------------------------------------------------


def _default_worker_binary() -> str:
    """TESSERA_WORKER_BIN, else the worker installed with this package, else the one of the build
    that made the module, else tessera-worker on PATH; empty when none exists."""
    from_env = os.environ.get("TESSERA_WORKER_BIN")
    if from_env:
        return from_env
    packaged = os.path.join(os.path.dirname(__file__), "bin", "tessera-worker")
    for candidate in (packaged, _tessera.build_worker_binary):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("tessera-worker") or ""


class Cluster:
    """A Tessera cluster described by a YAML file (configs/local.yaml, configs/pi-lab.yaml, ...).

    Args:
        config: path of the cluster file.
        run_dir: where local clusters keep pid files, logs and the secret (default: as ``tessera
            up``: $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>).
        profile_path: the saved profile (default: next to the config, ``<config>.profile.yaml``).
        worker_binary: the tessera-worker that ``up()`` starts (default: $TESSERA_WORKER_BIN, the
            one installed with this package, the one of the build, or tessera-worker on PATH).
        keep_connected: False (default): every call connects and disconnects, as the CLI does, so
            other coordinators find the workers free between calls. True: one session is kept
            for the next call (saves the handshakes); a failed or interrupted call closes it and
            the next call reconnects. ``close()`` ends it.

    Used as a context manager, the cluster starts its local workers on entry (``up()``) and on
    exit stops only the workers that this entry started (already running ones keep running).
    Calls are serialised per object (a lock); use one object per thread for concurrency.
    """

    def __init__(
        self,
        config: "str | os.PathLike[str]",
        *,
        run_dir: "str | os.PathLike[str] | None" = None,
        profile_path: "str | os.PathLike[str] | None" = None,
        worker_binary: "str | os.PathLike[str] | None" = None,
        keep_connected: bool = False,
    ):
        self._handle = _tessera._Cluster(
            os.fspath(config),
            os.fspath(run_dir) if run_dir is not None else "",
            os.fspath(profile_path) if profile_path is not None else "",
            os.fspath(worker_binary) if worker_binary is not None else _default_worker_binary(),
            bool(keep_connected),
        )
        self._lock = threading.RLock()
        self._next_array = 0  # names x0, x1, ... of the arrays in expressions

    # -- identity ---------------------------------------------------------------------------------
    @property
    def config_path(self) -> str:
        """The cluster file."""
        return self._handle.config_path

    @property
    def profile_path(self) -> str:
        """Where the profile is saved and read."""
        return self._handle.profile_path

    @property
    def nodes(self) -> list:
        """The node names, cluster order."""
        return list(self._handle.node_names)

    def __repr__(self) -> str:
        return f"tessera.Cluster({self.config_path!r}, nodes={self.nodes!r})"

    # -- local lifecycle ------------------------------------------------------------------------
    def up(self, *, no_emulation: bool = False, start_timeout: float = 10.0) -> list:
        """Start a tessera-worker per node not already running (local clusters: loopback hosts),
        as ``tessera up``; waits until each answers. Returns one dict per node: name, state
        ("started", "already running", ...), pid, detail. Raises ConfigError for a node that is
        not local, ClusterError when a worker does not come up (with the tail of its log)."""
        with self._lock:
            result = self._handle.up(bool(no_emulation), float(start_timeout))
        _warn_all(result["warnings"])
        return result["nodes"]

    def down(self, *, only_started: bool = False) -> list:
        """Stop the cluster's recorded local workers, as ``tessera down`` (SIGTERM, then SIGKILL
        after 5 s); with ``only_started`` just the ones this object's ``up()`` started. Returns one
        dict per node stopped. Stopping twice is a no-op."""
        with self._lock:
            return self._handle.down(bool(only_started))

    def __enter__(self) -> "Cluster":
        self.up()
        return self

    def __exit__(self, *exc_info) -> None:
        with self._lock:
            self._handle.close()
            self._handle.down(True)

    def close(self) -> None:
        """Close a kept session (keep_connected=True). Idempotent; the next call reconnects."""
        with self._lock:
            self._handle.close()

    def status(self) -> list:
        """Connect to every node at once with a short timeout, as ``tessera status``: one dict per
        node (name, endpoint, state: "reachable" | "BUSY" | "REFUSED" | "UNREACHABLE", reachable,
        busy, detail, load: the host's 1-minute load average or None when the node did not report
        one, cores: None when the node did not answer, local_pid)."""
        with self._lock:
            return self._handle.status()

    # -- profile ----------------------------------------------------------------------------------
    def saved_profile(self) -> "dict | None":
        """The saved profile as plain data (see profile()), or None when none was measured."""
        with self._lock:
            return self._handle.saved_profile()

    def profile(
        self,
        refresh: bool = False,
        quick: bool = False,
        *,
        nodes: "Sequence[str] | None" = None,
        probe_size: int = 1024,
        window_seconds: float = 0.2,
        progress: "Callable[[str], None] | None" = None,
    ) -> dict:
        """Measure what the saved profile cannot supply (everything with ``refresh``; only
        ``nodes`` if named), save it, and return it, as ``tessera profile``.

        Returns a dict: cluster, measured_at, path, coordinator_send_bytes_per_s, measured (the
        nodes measured now), nodes (per node: name, endpoint, gflops, relative_power, speed as
        (size, GFLOP/s) pairs, latency_s, to_node_bytes_per_s, from_node_bytes_per_s, threads,
        cores, memory_bytes, ...). ``progress(line)`` receives each node's finished measurements.
        Ctrl-C takes effect when the measurement in progress has ended.
        """
        callback = progress if progress is not None else (lambda line: _log.info("%s", line))
        with self._lock:
            return self._handle.profile(
                bool(refresh), bool(quick), list(nodes or []), int(probe_size), float(window_seconds), callback
            )

    # -- planning -------------------------------------------------------------------------------
    def plan(
        self,
        m: int,
        n: int,
        k: int,
        policy: str = "model",
        layout: str = "rows",
        *,
        weights: "Sequence[float] | None" = None,
        panel_width: int = 256,
        panels_in_flight: int = 4,
        refill_threshold: int = 1,
        overlap: bool = True,
        tile_rows: int = 0,
    ) -> Plan:
        """The plan ``policy`` gives for C (m x n) = A (m x k) B (k x n) on this cluster, without
        connecting or running anything (what ``tessera model`` prints for each policy).

        policy: "even" | "proportional" | "model" | "dynamic"; layout: "rows" | "2d" |
        "square-corner" | "3d" (model and dynamic plan rows only). ``weights`` (proportional
        only): one per node instead of the measured speeds. Policies that need the profile
        raise NotFoundError without one (run ``profile()``).
        """
        with self._lock:
            result = self._handle.plan(
                int(m), int(n), int(k), policy, layout, [float(w) for w in (weights or [])], int(panel_width),
                int(panels_in_flight), int(refill_threshold), bool(overlap), int(tile_rows),
            )
        _warn_all(result["warnings"])
        return Plan(result["plan"], result["warnings"])

    def predict(self, plan_or_m: "Plan | int", n: int | None = None, k: int | None = None, **plan_options) -> Prediction:
        """The performance model's forecast (makespan and per-node finish times) of a Plan, or of
        the plan ``plan(m, n, k, **plan_options)`` gives. Needs the profile (NotFoundError)."""
        if isinstance(plan_or_m, Plan):
            plan = plan_or_m
        else:
            if n is None or k is None:
                raise InvalidInputError("give a Plan, or m, n and k")
            plan = self.plan(plan_or_m, n, k, **plan_options)
        with self._lock:
            return Prediction(self._handle.predict(plan.to_dict()))

    # -- multiply -------------------------------------------------------------------------------
    def multiply(
        self,
        A: Any,
        B: Any,
        *,
        policy: str = "proportional",
        layout: str = "rows",
        verify: str = "freivalds",
        out: "np.ndarray | None" = None,
        progress: "Callable[[dict], None] | None" = None,
        plan: "Plan | None" = None,
        weights: "Sequence[float] | None" = None,
        seed: int = 1,
        panel_width: int = 256,
        panels_in_flight: int = 4,
        refill_threshold: int = 1,
        overlap: bool = True,
        tile_rows: int = 0,
        node_timeout: float = 0.0,
        allow_nonfinite: bool = False,
        allow_copy: bool = True,
    ):
        """C = A @ B on the cluster; returns ``(C, report)``.

        A and B: 2-D arrays, read in place when C-contiguous float64 (else converted by the rule
        in the module docstring; ``allow_copy=False`` refuses instead). ``out``: a C-contiguous,
        writeable float64 array of shape (m, n), not overlapping A or B, to write C into (no
        allocation); C is then ``out``. Write a fresh numpy.empty once first (``out.fill(0)``):
        pages first touched during the run are page faults on the threads receiving C, which
        slow it. The defaults are ``tessera multiply``'s: policy "proportional" (the profile's
        speeds; a quick profile is measured first when none exists), layout "rows", verify
        "freivalds" ("exact" | "none"), panels of 256 rows of B, 4 in flight per node.
        ``plan``: run this Plan (from ``plan()``) instead of planning; it must be for these
        shapes and this cluster. ``progress(done)`` is called about every 50 ms while credits
        come back, with node -> jobs done. NaN/inf inputs are refused unless ``allow_nonfinite``.

        The GIL is released while the cluster works. Ctrl-C cancels the run, closes the workers'
        sessions (they are free at once) and raises KeyboardInterrupt.

        Raises InvalidInputError (shapes, dtypes, options), ClusterError (network, workers),
        NotFoundError, ResourceExhaustedError (C, the copy of B and verification's copies would
        not fit in this machine's memory, checked before they are allocated), VerificationError (the product failed verification; ``.report`` and
        ``.result`` hold the report and C).
        """
        entry = time.perf_counter()
        a = _as_matrix(A, "A", allow_copy)
        b = _as_matrix(B, "B", allow_copy)
        if a.shape[1] != b.shape[0]:
            raise InvalidInputError(
                f"A is {a.shape[0]}x{a.shape[1]} and B is {b.shape[0]}x{b.shape[1]}: A's columns must equal B's rows"
            )
        c = _check_out(out, a.shape[0], b.shape[1]) if out is not None else np.empty((a.shape[0], b.shape[1]))
        if out is not None and (np.may_share_memory(c, a) or np.may_share_memory(c, b)):
            # C is written while A and B are still being read: the product would be garbage.
            raise InvalidInputError("out overlaps A or B; pass an array of its own")
        notices, notice = _notice_collector()

        with self._lock:
            text, plan_fields, plan_warnings, table, timing = self._handle.multiply(
                a, b, c, policy, layout, verify, [float(w) for w in (weights or [])], int(seed), int(panel_width),
                int(panels_in_flight), int(refill_threshold), bool(overlap), int(tile_rows), float(node_timeout),
                bool(allow_nonfinite), out is None, plan.to_dict() if plan is not None else None, progress, notice,
            )
        _warn_all(plan_warnings)
        report = Report(json.loads(text), Plan(plan_fields, plan_warnings), plan_warnings, notices, table)
        timing["call_s"] = time.perf_counter() - entry
        report.__dict__["timing"] = timing
        if report.verified is False:
            raise VerificationError(
                f"verification FAILED: {report.verification['detail']}", report=report, result=c
            )
        return c, report

    # -- matrix expressions -----------------------------------------------------------------------
    def array(self, value: Any, *, allow_copy: bool = True) -> Expression:
        """A lazy expression of this 2-D array (see :class:`Expression`); converted to C-contiguous
        float64 by the module's rule. Nothing is sent until ``compute()``."""
        matrix = _as_matrix(value, "array", allow_copy)
        with self._lock:
            name = f"x{self._next_array}"
            self._next_array += 1
        return Expression(self, name, {name: matrix}, (matrix.shape[0], matrix.shape[1]))

    def identity(self) -> Expression:
        """The identity, sized by the sum it stands in: ``cluster.identity() + A + A @ A``."""
        return Expression(self, "I", {}, None)

    def _evaluate(self, text: str, inputs: dict, policy: str, verify: str, rewrite: bool, explain: bool, mode: str,
                  tile: int, nodes: list, every_node: bool, progress: "Callable[[dict], None] | None"):
        notices, notice = _notice_collector()

        with self._lock:
            values, rows, cols, report_text, table = self._handle.evaluate(
                text, inputs, policy, verify, bool(rewrite), bool(explain), mode, int(tile), nodes, every_node,
                progress, notice)
        return values.reshape(rows, cols), EvalReport(json.loads(report_text), table, notices)

    # -- graph algorithms -------------------------------------------------------------------------
    def _graph(
        self,
        graph: Any,
        algorithm: str,
        *,
        num_vertices: int | None,
        mode: str,
        partition: str,
        weights: "str | Sequence[float] | None",
        tolerance: float | None,
        source: int | None,
        damping: float,
        beta: float | None,
        label: str,
        seed: int,
        verify: bool,
        poll_ms: int,
        snapshot_ms: int,
        node_timeout: float,
        max_seconds: float,
        progress: "Callable[[dict], None] | None",
    ):
        built = directed_graph(graph, num_vertices=num_vertices, seed=seed)
        if weights is None:
            weights_text = ""
        elif isinstance(weights, str):
            weights_text = weights
        else:
            weights_text = ",".join(repr(float(w)) for w in weights)
        notices, notice = _notice_collector()

        with self._lock:
            values, text = self._handle.graph(
                built, algorithm, mode, partition, weights_text,
                None if tolerance is None else float(tolerance), None if source is None else int(source),
                float(damping), None if beta is None else float(beta), label, int(seed), bool(verify), int(poll_ms),
                int(snapshot_ms), float(node_timeout), float(max_seconds), progress, notice,
            )
        report = GraphReport(json.loads(text), notices)
        if report.verification is not None and not report.verification["passed"]:
            raise VerificationError(
                f"verification FAILED: {report.verification['detail']}", report=report, result=values
            )
        return values, report

    _GRAPH_DOC = """

        graph: a scipy.sparse adjacency matrix (A[i, j] = edge i -> j), ``(src, dst[, weights])``
            edge arrays (``num_vertices`` default: largest id + 1), a file path, a generator spec
            ("rmat:12", "mesh2d:64x64", ...; seeded by ``seed``) or a DirectedGraph.
        mode: "async" (accumulative updates, no barriers) | "sync" (Jacobi steps).
        partition: how vertices are placed: "metis" | "contiguous" | "hash".
        weights: each node's share: "profile" (measured speeds; the default when a profile exists,
            else "equal"), "equal", or one number per node.
        verify: compare with a reference computed here; a failure raises VerificationError.
        progress(point): called with each trace point (time_s, residual, edge_updates, ...).
        node_timeout, max_seconds, poll_ms, snapshot_ms: as ``tessera graph``'s flags.

        Returns ``(values, report)``: a numpy array with one value per vertex and a
        :class:`GraphReport`. Ctrl-C cancels the run and raises KeyboardInterrupt.
        """

    def pagerank(self, graph: Any, *, damping: float = 0.85, tolerance: float | None = None, mode: str = "async",
                 partition: str = "metis", weights=None, seed: int = 1, verify: bool = False,
                 num_vertices: int | None = None, poll_ms: int = 100, snapshot_ms: int = 1000,
                 node_timeout: float = 30.0, max_seconds: float = 600.0, progress=None):
        return self._graph(graph, "pagerank", num_vertices=num_vertices, mode=mode, partition=partition,
                           weights=weights, tolerance=tolerance, source=None, damping=damping, beta=None,
                           label="max", seed=seed, verify=verify, poll_ms=poll_ms, snapshot_ms=snapshot_ms,
                           node_timeout=node_timeout, max_seconds=max_seconds, progress=progress)

    pagerank.__doc__ = (
        """PageRank (damping ``damping``) to sum |pending delta| <= ``tolerance`` (default 1e-6);
        values sum to 1, a dangling vertex's rank spread over all vertices.""" + _GRAPH_DOC
    )

    def katz(self, graph: Any, beta: float | None = None, *, source: int | None = None,
             tolerance: float | None = None, mode: str = "async", partition: str = "metis", weights=None,
             seed: int = 1, verify: bool = False, num_vertices: int | None = None, poll_ms: int = 100,
             snapshot_ms: int = 1000, node_timeout: float = 30.0, max_seconds: float = 600.0, progress=None):
        return self._graph(graph, "katz", num_vertices=num_vertices, mode=mode, partition=partition,
                           weights=weights, tolerance=tolerance, source=source, damping=0.85, beta=beta,
                           label="max", seed=seed, verify=verify, poll_ms=poll_ms, snapshot_ms=snapshot_ms,
                           node_timeout=node_timeout, max_seconds=max_seconds, progress=progress)

    katz.__doc__ = (
        """Katz centrality x = sum_k beta^k (A^T)^k b with b = 1 (or the indicator of ``source``),
        using edge weights. ``beta`` must be below 1/lambda_max(A); without it the error
        suggests one for this graph.""" + _GRAPH_DOC
    )

    def connected_components(self, graph: Any, *, label: str = "max", mode: str = "async",
                             partition: str = "metis", weights=None, seed: int = 1, verify: bool = False,
                             num_vertices: int | None = None, poll_ms: int = 100, snapshot_ms: int = 1000,
                             node_timeout: float = 30.0, max_seconds: float = 600.0, progress=None):
        values, report = self._graph(graph, "cc", num_vertices=num_vertices, mode=mode, partition=partition,
                                     weights=weights, tolerance=None, source=None, damping=0.85, beta=None,
                                     label=label, seed=seed, verify=verify, poll_ms=poll_ms,
                                     snapshot_ms=snapshot_ms, node_timeout=node_timeout, max_seconds=max_seconds,
                                     progress=progress)
        return values.astype(np.int64), report

    connected_components.__doc__ = (
        """Weakly connected components: each vertex's label is the largest (``label="max"``) or
        smallest vertex id of its component; values are an int64 array.""" + _GRAPH_DOC
    )

    def sssp(self, graph: Any, source: int, *, mode: str = "async", partition: str = "metis", weights=None,
             seed: int = 1, verify: bool = False, num_vertices: int | None = None, poll_ms: int = 100,
             snapshot_ms: int = 1000, node_timeout: float = 30.0, max_seconds: float = 600.0, progress=None):
        return self._graph(graph, "sssp", num_vertices=num_vertices, mode=mode, partition=partition,
                           weights=weights, tolerance=None, source=source, damping=0.85, beta=None, label="max",
                           seed=seed, verify=verify, poll_ms=poll_ms, snapshot_ms=snapshot_ms,
                           node_timeout=node_timeout, max_seconds=max_seconds, progress=progress)

    sssp.__doc__ = (
        """Single-source shortest path lengths from ``source`` over the edge weights (>= 0; 1 when
        unweighted); unreachable vertices are inf.""" + _GRAPH_DOC
    )
