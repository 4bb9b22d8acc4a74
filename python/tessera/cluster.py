"""The cluster: :class:`Cluster`, the one object through which Python starts, profiles, plans
for and runs on a Tessera cluster (multiply, expressions, graph algorithms).

Every call goes to the compiled module's cluster handle under the object's lock, then wraps what
comes back in the values of :mod:`tessera.results`. The library's notices are logged on the
"tessera" logger and its warnings issued as :class:`TesseraWarning`.
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

from . import _tessera
from .arrays import as_matrix, check_out
from .errors import InvalidInputError, NotFoundError, VerificationError
from .expressions import Expression
from .graphs import directed_graph
from .results import EvalReport, GraphReport, Plan, Prediction, Report

_log = logging.getLogger("tessera")

# The option defaults, defined once in C++ (balance/session/settings.hpp and, for profile(),
# profile::ProfileOptions) for this package and the `tessera` CLI alike; the signatures below read
# them here, at import, so help() shows the values.
_MULTIPLY = _tessera.MultiplySettings()
_GRAPH = _tessera.GraphSettings()
_EVAL = _tessera.EvalSettings()
_PROFILE = _tessera.ProfileOptions()
_PLACE = _tessera.PlacementSettings()


def _defaults_in_docstring(function: Callable) -> Callable:
    """Fills the docstring's {multiply.<field>} with the C++ defaults, so what help() says in words
    is what the signature says."""
    function.__doc__ = function.__doc__.format(multiply=_MULTIPLY)
    return function


def _multiply_settings(**fields: Any) -> "_tessera.MultiplySettings":
    """A MultiplySettings with ``fields`` set (keyword name -> value, as the C++ fields are named)."""
    settings = _tessera.MultiplySettings()
    for name, value in fields.items():
        setattr(settings, name, value)
    return settings


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
        require_all: False (default, as the CLI without ``--require-all``): a node that is
            unreachable or refuses the session when a call connects is left out, with a
            :class:`TesseraWarning` naming it and why, and the call runs on the nodes that
            answered (its report's ``left_out_at_start`` lists them); only a cluster where no node
            answers raises. True: any such node makes the call raise, naming it.

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
        require_all: bool = _tessera.default_require_all,
    ):
        self._handle = _tessera.ClusterHandle(
            os.fspath(config),
            os.fspath(run_dir) if run_dir is not None else "",
            os.fspath(profile_path) if profile_path is not None else "",
            os.fspath(worker_binary) if worker_binary is not None else _default_worker_binary(),
            bool(keep_connected),
            bool(require_all),
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
        one, cores: None when the node did not answer, local_pid). Raises ConfigError, as a run
        would, when the cluster's secret cannot be read (a secret_file others can read, ...)."""
        with self._lock:
            return self._handle.status()

    # -- profile ----------------------------------------------------------------------------------
    def saved_profile(self) -> "dict | None":
        """The saved profile as plain data (see profile()), or None when none was measured."""
        with self._lock:
            return self._handle.saved_profile()

    def profile(
        self,
        refresh: bool = _PROFILE.refresh,
        quick: bool = _PROFILE.quick,
        *,
        nodes: "Sequence[str] | None" = None,
        probe_size: int = _PROFILE.reference_size,
        window_seconds: float = _PROFILE.window_seconds,
        progress: "Callable[[str], None] | None" = None,
    ) -> dict:
        """Measure what the saved profile cannot supply (everything with ``refresh``; only
        ``nodes`` if named), save it, and return it, as ``tessera profile``.

        Returns a dict: cluster, measured_at, path, coordinator_send_bytes_per_s, measured (the
        nodes measured now), nodes (per node: name, endpoint, gflops, relative_power, speed as
        (size, GFLOP/s) pairs, latency_s, to_node_bytes_per_s, from_node_bytes_per_s, threads,
        cores, memory_bytes, ...), left_out_at_start (nodes that did not answer: not measured, their
        saved figures kept) and warnings. ``progress(line)`` receives each node's finished measurements.
        Ctrl-C takes effect when the measurement in progress has ended.
        """
        callback = progress if progress is not None else (lambda line: _log.info("%s", line))
        with self._lock:
            options = _tessera.ProfileOptions()
            options.refresh = bool(refresh)
            options.quick = bool(quick)
            options.only_nodes = list(nodes or [])
            options.reference_size = int(probe_size)
            options.window_seconds = float(window_seconds)
            result = self._handle.profile(options, callback)
        _warn_all(result["warnings"])
        return result

    def profile_weights(self) -> tuple:
        """``(names, weights)``: the node names, cluster order, and each node's weight from the
        saved profile (its measured GFLOP/s at the reference size), the weights the proportional
        policy and ``tessera partition --cluster`` use; :func:`tessera.partition` given this
        cluster makes its nodes the parts with these targets. Raises NotFoundError when no profile
        is saved or it lacks a node (run ``profile()``)."""
        with self._lock:
            names, weights = self._handle.profile_weights()
        return list(names), list(weights)

    # -- planning -------------------------------------------------------------------------------
    def plan(
        self,
        m: int,
        n: int,
        k: int,
        # "model", not multiply()'s default: the plan the performance model gives is the one worth
        # looking at before a run; the other policies are a policy= away.
        policy: str = "model",
        layout: str = _MULTIPLY.layout,
        *,
        weights: "Sequence[float] | None" = None,
        panel_width: int = _MULTIPLY.panel_width,
        panels_in_flight: int = _MULTIPLY.panels_in_flight,
        refill_threshold: int = _MULTIPLY.refill_threshold,
        overlap: bool = _MULTIPLY.overlap,
        tile_rows: int = _MULTIPLY.tile_rows,
        distribution: str = _MULTIPLY.distribution,
    ) -> Plan:
        """The plan ``policy`` gives for C (m x n) = A (m x k) B (k x n) on this cluster, without
        connecting or running anything (what ``tessera model`` prints for each policy).

        policy: "even" | "proportional" | "model" | "dynamic"; layout: "rows" | "2d" |
        "square-corner" | "3d" (model and dynamic plan rows only). ``weights`` (proportional
        only): one per node instead of the measured speeds. ``distribution``: "auto" | "star" |
        "chain", as for multiply(). Policies that need the profile
        raise NotFoundError without one (run ``profile()``).
        """
        with self._lock:
            result = self._handle.plan(
                int(m), int(n), int(k),
                _multiply_settings(
                    policy=policy, layout=layout, weights=[float(w) for w in (weights or [])],
                    panel_width=int(panel_width), panels_in_flight=int(panels_in_flight),
                    refill_threshold=int(refill_threshold), overlap=bool(overlap), tile_rows=int(tile_rows),
                    distribution=str(distribution),
                ),
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
    @_defaults_in_docstring
    def multiply(
        self,
        A: Any,
        B: Any,
        *,
        policy: str = _MULTIPLY.policy,
        layout: str = _MULTIPLY.layout,
        verify: str = _MULTIPLY.verify,
        out: "np.ndarray | None" = None,
        progress: "Callable[[dict], None] | None" = None,
        plan: "Plan | None" = None,
        weights: "Sequence[float] | None" = None,
        seed: int = _MULTIPLY.seed,
        panel_width: int = _MULTIPLY.panel_width,
        panels_in_flight: int = _MULTIPLY.panels_in_flight,
        refill_threshold: int = _MULTIPLY.refill_threshold,
        overlap: bool = _MULTIPLY.overlap,
        tile_rows: int = _MULTIPLY.tile_rows,
        node_timeout: float = _MULTIPLY.node_timeout_s,
        allow_nonfinite: bool = _MULTIPLY.allow_nonfinite,
        allow_copy: bool = True,
        distribution: str = _MULTIPLY.distribution,
    ):
        """C = A @ B on the cluster; returns ``(C, report)``.

        A and B: 2-D arrays, read in place when C-contiguous float64 (else converted by the rule
        in the module docstring; ``allow_copy=False`` refuses instead). ``out``: a C-contiguous,
        writeable float64 array of shape (m, n), not overlapping A or B, to write C into (no
        allocation); C is then ``out``. Write a fresh numpy.empty once first (``out.fill(0)``):
        pages first touched during the run are page faults on the threads receiving C, which
        slow it. The defaults are ``tessera multiply``'s: policy "{multiply.policy}" (the profile's
        speeds; a quick profile is measured first when none exists), layout "{multiply.layout}", verify
        "{multiply.verify}" ("exact" | "none"), panels of {multiply.panel_width} rows of B, {multiply.panels_in_flight} in flight per node.
        ``plan``: run this Plan (from ``plan()``) instead of planning; it must be for these
        shapes and this cluster. ``progress(done)`` is called about every 50 ms while credits
        come back, with node -> jobs done. NaN/inf inputs are refused unless ``allow_nonfinite``.
        ``distribution``: how B reaches the nodes, "{multiply.distribution}" (the model policy chooses by
        forecast; the others send it to each node) | "star" | "chain" (forwarded from node to node).

        The GIL is released while the cluster works. Ctrl-C cancels the run, closes the workers'
        sessions (they are free at once) and raises KeyboardInterrupt.

        Raises InvalidInputError (shapes, dtypes, options), ClusterError (network, workers),
        NotFoundError, ResourceExhaustedError (C, the copy of B and verification's copies would
        not fit in this machine's memory, checked before they are allocated), VerificationError (the product failed verification; ``.report`` and
        ``.result`` hold the report and C).
        """
        entry = time.perf_counter()
        a = as_matrix(A, "A", allow_copy)
        b = as_matrix(B, "B", allow_copy)
        if a.shape[1] != b.shape[0]:
            raise InvalidInputError(
                f"A is {a.shape[0]}x{a.shape[1]} and B is {b.shape[0]}x{b.shape[1]}: A's columns must equal B's rows"
            )
        c = check_out(out, a.shape[0], b.shape[1]) if out is not None else np.empty((a.shape[0], b.shape[1]))
        if out is not None and (np.may_share_memory(c, a) or np.may_share_memory(c, b)):
            # C is written while A and B are still being read: the product would be garbage.
            raise InvalidInputError("out overlaps A or B; pass an array of its own")
        notices, notice = _notice_collector()

        with self._lock:
            text, plan_fields, plan_warnings, table, timing = self._handle.multiply(
                a, b, c,
                _multiply_settings(
                    policy=policy, layout=layout, verify=verify, weights=[float(w) for w in (weights or [])],
                    seed=int(seed), panel_width=int(panel_width), panels_in_flight=int(panels_in_flight),
                    refill_threshold=int(refill_threshold), overlap=bool(overlap), tile_rows=int(tile_rows),
                    node_timeout_s=float(node_timeout), allow_nonfinite=bool(allow_nonfinite),
                    distribution=str(distribution),
                ),
                out is None, plan.to_dict() if plan is not None else None, progress, notice,
            )
        _warn_all(plan_warnings)
        fields = json.loads(text)
        timing["call_s"] = time.perf_counter() - entry
        report = Report(fields, Plan(plan_fields, plan_warnings), plan_warnings, notices, table, timing)
        if report.verified is False:
            raise VerificationError(
                f"verification FAILED: {report.verification['detail']}", report=report, result=c
            )
        return c, report

    # -- matrices kept on the nodes ---------------------------------------------------------------
    def scatter(self, A: Any, *, columns: int = _PLACE.columns, nodes=None, split: str = _PLACE.split,
                measure: bool = _PLACE.measure, expected_products: int = _PLACE.expected_products,
                placement_cache: str = _PLACE.placement_cache, allow_copy: bool = True) -> "ResidentArray":
        """Place A's rows on the nodes once and get a :class:`ResidentArray` whose products by thin
        operands (``R @ X``, X with few columns) ship only X out and the rows of the product back.

        ``split="balanced"`` sizes the shares for operands of ``columns`` columns from the
        profile's rates and links, so that the nodes finish together; a node whose operand alone
        would arrive after the others finish gets no rows, with a TesseraWarning saying so. With
        ``measure`` (the default) a few products on the placed rows then measure what each node
        really delivers when all run at once, and whole pieces of rows move to where those
        figures put them (a capped node's rate in a long product is not what a short probe
        shows); a move is made only when it repays its transfer within ``expected_products``
        products. ``split="even"`` gives every node the same rows, as tools that split by count
        do. ``nodes`` (names) places on those nodes only. ``placement`` says what placing cost
        (``bytes``, ``seconds``, ``forecast_s`` the profile's product time, ``measured_s`` the
        median product with the final shares, ``bytes_moved``, ``bytes_reused`` the rows the nodes'
        block stores had from an earlier session and did not need sent, ``remembered``).

        Measured shares are remembered in ``placement_cache`` (default the user's cache folder,
        tessera/resident; ``"none"``: off), keyed by A's content, the nodes and ``columns``: the next
        session that scatters the same A places those shares again without measuring, and with
        the workers' block stores (``tessera-worker --store``) nothing is sent.

        The cluster keeps its connections open while a ResidentArray lives; ``free()`` (or
        ``with``) gives the nodes' memory back. A is converted by the module's rule and
        referenced, not copied again: the placement is redone from it when the session it lived
        in has ended (another kind of call, a failure), so do not change A while the
        ResidentArray is in use."""
        if not isinstance(columns, int) or isinstance(columns, bool) or columns < 1:
            raise InvalidInputError(f"columns={columns!r}: give the operands' column count, 1 or more")
        settings = _tessera.PlacementSettings()
        settings.columns, settings.split, settings.measure = columns, split, bool(measure)
        settings.expected_products = max(1, int(expected_products))
        settings.placement_cache = str(placement_cache)
        settings.nodes = [nodes] if isinstance(nodes, str) else [str(name) for name in (nodes or [])]
        a = as_matrix(A, "A", allow_copy)
        return ResidentArray(a, lambda matrix: self._place_rows(matrix, settings), self._resident_multiply,
                             self._release_rows, self._resident_power, self._resident_cg)

    def _place_rows(self, a: np.ndarray, settings) -> dict:
        with self._lock:
            placed = self._handle.place(a, settings)
        _warn_all(placed["warnings"])
        return placed

    # Each resident call warns of the nodes it lost (their rows placed again on the others).
    def _resident_multiply(self, placed: dict, x: np.ndarray, y: np.ndarray) -> dict:
        with self._lock:
            info = self._handle.resident_multiply(placed["id"], placed["generation"], x, y)
        _warn_all(info.pop("notices"))
        return info

    def _resident_power(self, placed: dict, iterations: int, tol: float, seed: int) -> dict:
        with self._lock:
            info = self._handle.power_iteration(placed["id"], placed["generation"], iterations, tol, seed)
        _warn_all(info.pop("notices"))
        return info

    def _resident_cg(self, placed: dict, b: np.ndarray, tol: float, max_iterations: int) -> dict:
        with self._lock:
            info = self._handle.conjugate_gradient(placed["id"], placed["generation"], b, tol, max_iterations)
        _warn_all(info.pop("notices"))
        return info

    def _release_rows(self, placed: dict) -> None:
        with self._lock:
            self._handle.release(placed["id"], placed["generation"])

    # -- matrix expressions -----------------------------------------------------------------------
    def array(self, value: Any, *, allow_copy: bool = True) -> Expression:
        """A lazy expression of this 2-D array (see :class:`Expression`); converted to C-contiguous
        float64 by the module's rule. Nothing is sent until ``compute()``."""
        matrix = as_matrix(value, "array", allow_copy)
        with self._lock:
            name = f"x{self._next_array}"
            self._next_array += 1
        return Expression(self, name, {name: matrix}, (matrix.shape[0], matrix.shape[1]))

    def identity(self) -> Expression:
        """The identity, sized by the sum it stands in: ``cluster.identity() + A + A @ A``."""
        return Expression(self, "I", {}, None)

    def evaluate(
        self,
        expression: Expression,
        *,
        mode: str = _EVAL.mode,
        tile: int | None = None,
        nodes: "Sequence[str] | None" = None,
        every_node: bool = _EVAL.every_node,
        policy: str = _EVAL.policy,
        verify: str = _EVAL.verify,
        rewrite: bool = _EVAL.rewrite,
        tile_route: str = _EVAL.tile_route,
        explain: bool = False,
        progress: "Callable[[dict], None] | None" = None,
    ):
        """Evaluate ``expression`` (built from :meth:`array` and :meth:`identity`) on this cluster,
        as ``tessera eval`` does; returns ``(numpy array, EvalReport)``. ``expression.compute()``
        calls this on the cluster that made the expression; the keywords are compute()'s (see
        :meth:`Expression.compute`), with its defaults. Raises InvalidInputError for something
        that is not an Expression, an identity alone (it has no size) or a bad option,
        VerificationError when the value fails verification."""
        if not isinstance(expression, Expression):
            raise InvalidInputError(
                f"evaluate() takes an Expression (cluster.array(...) @ ...), not {type(expression).__name__}")
        if expression.shape is None:
            raise InvalidInputError("an identity alone has no size")
        if tile is not None and (not isinstance(tile, int) or tile < 1):
            raise InvalidInputError(f"tile must be a positive whole number, not {tile!r}")
        settings = _tessera.EvalSettings()
        settings.mode, settings.tile, settings.nodes = mode, tile or 0, list(nodes or [])
        settings.every_node, settings.policy, settings.verify = bool(every_node), policy, verify
        settings.rewrite, settings.tile_route = bool(rewrite), tile_route
        notices, notice = _notice_collector()

        with self._lock:
            values, rows, cols, report_text, table, left_out = self._handle.evaluate(
                expression.text, dict(expression.arrays), settings, bool(explain), progress, notice)
        _warn_all(left_out)
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
        nodes: "str | Sequence[str]",
        placement_cache: str,
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

        settings = _tessera.GraphSettings()
        settings.algorithm = algorithm
        settings.mode = mode
        settings.partition = partition
        settings.nodes = nodes if isinstance(nodes, str) else ",".join(str(name) for name in nodes)
        settings.placement_cache = str(placement_cache)
        settings.tolerance = None if tolerance is None else float(tolerance)
        settings.source = None if source is None else int(source)
        settings.damping = float(damping)
        settings.beta = None if beta is None else float(beta)
        settings.label = label
        settings.seed = int(seed)
        settings.verify = bool(verify)
        settings.poll_ms = int(poll_ms)
        settings.snapshot_ms = int(snapshot_ms)
        settings.node_timeout_s = float(node_timeout)
        settings.max_seconds = float(max_seconds)

        with self._lock:
            values, text, left_out = self._handle.graph(built, settings, weights_text, progress, notice)
        _warn_all(left_out)
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
        partition: how vertices are placed: "auto" (a locality placement, METIS where the
            forecast says its time pays back) | "metis" | "contiguous" | "hash".
        nodes: which nodes take part: "auto" (the set the graph placement model forecasts
            fastest; report.choice says why each node left out was left out) | "all" | names.
        placement_cache: directory for placements and past runs' figures ("" the default,
            "none" off).
        weights: each node's share: "profile" (measured speeds; the default when a profile exists,
            else "equal"), "equal", or one number per node.
        verify: compare with a reference computed here; a failure raises VerificationError.
        progress(point): called with each trace point (time_s, residual, edge_updates, ...).
        node_timeout, max_seconds, poll_ms, snapshot_ms: as ``tessera graph``'s flags.

        Returns ``(values, report)``: a numpy array with one value per vertex and a
        :class:`GraphReport`. Ctrl-C cancels the run and raises KeyboardInterrupt.
        """

    def pagerank(self, graph: Any, *, damping: float = _GRAPH.damping, tolerance: float | None = None,
                 mode: str = _GRAPH.mode, partition: str = _GRAPH.partition, nodes=_GRAPH.nodes,
                 placement_cache: str = _GRAPH.placement_cache, weights=None, seed: int = _GRAPH.seed,
                 verify: bool = _GRAPH.verify, num_vertices: int | None = None, poll_ms: int = _GRAPH.poll_ms,
                 snapshot_ms: int = _GRAPH.snapshot_ms, node_timeout: float = _GRAPH.node_timeout_s,
                 max_seconds: float = _GRAPH.max_seconds, progress=None):
        return self._graph(graph, "pagerank", num_vertices=num_vertices, mode=mode, partition=partition, nodes=nodes,
                           placement_cache=placement_cache,
                           weights=weights, tolerance=tolerance, source=None, damping=damping, beta=None,
                           label=_GRAPH.label, seed=seed, verify=verify, poll_ms=poll_ms, snapshot_ms=snapshot_ms,
                           node_timeout=node_timeout, max_seconds=max_seconds, progress=progress)

    pagerank.__doc__ = (
        """PageRank (damping ``damping``) to sum |pending delta| <= ``tolerance`` (default 1e-6);
        values sum to 1, a dangling vertex's rank spread over all vertices.""" + _GRAPH_DOC
    )

    def katz(self, graph: Any, beta: float | None = None, *, source: int | None = None,
             tolerance: float | None = None, mode: str = _GRAPH.mode, partition: str = _GRAPH.partition, nodes=_GRAPH.nodes,
                 placement_cache: str = _GRAPH.placement_cache,
             weights=None, seed: int = _GRAPH.seed, verify: bool = _GRAPH.verify, num_vertices: int | None = None,
             poll_ms: int = _GRAPH.poll_ms, snapshot_ms: int = _GRAPH.snapshot_ms,
             node_timeout: float = _GRAPH.node_timeout_s, max_seconds: float = _GRAPH.max_seconds, progress=None):
        return self._graph(graph, "katz", num_vertices=num_vertices, mode=mode, partition=partition, nodes=nodes,
                           placement_cache=placement_cache,
                           weights=weights, tolerance=tolerance, source=source, damping=_GRAPH.damping, beta=beta,
                           label=_GRAPH.label, seed=seed, verify=verify, poll_ms=poll_ms, snapshot_ms=snapshot_ms,
                           node_timeout=node_timeout, max_seconds=max_seconds, progress=progress)

    katz.__doc__ = (
        """Katz centrality x = sum_k beta^k (A^T)^k b with b = 1 (or the indicator of ``source``),
        using edge weights. ``beta`` must be below 1/lambda_max(A); without it the error
        suggests one for this graph.""" + _GRAPH_DOC
    )

    def connected_components(self, graph: Any, *, label: str = _GRAPH.label, mode: str = _GRAPH.mode,
                             partition: str = _GRAPH.partition, nodes=_GRAPH.nodes,
                 placement_cache: str = _GRAPH.placement_cache, weights=None, seed: int = _GRAPH.seed,
                             verify: bool = _GRAPH.verify, num_vertices: int | None = None,
                             poll_ms: int = _GRAPH.poll_ms, snapshot_ms: int = _GRAPH.snapshot_ms,
                             node_timeout: float = _GRAPH.node_timeout_s, max_seconds: float = _GRAPH.max_seconds,
                             progress=None):
        values, report = self._graph(graph, "cc", num_vertices=num_vertices, mode=mode, partition=partition, nodes=nodes,
                           placement_cache=placement_cache,
                                     weights=weights, tolerance=None, source=None, damping=_GRAPH.damping,
                                     beta=None, label=label, seed=seed, verify=verify, poll_ms=poll_ms,
                                     snapshot_ms=snapshot_ms, node_timeout=node_timeout, max_seconds=max_seconds,
                                     progress=progress)
        return values.astype(np.int64), report

    connected_components.__doc__ = (
        """Weakly connected components: each vertex's label is the largest (``label="max"``) or
        smallest vertex id of its component; values are an int64 array.""" + _GRAPH_DOC
    )

    def sssp(self, graph: Any, source: int, *, mode: str = _GRAPH.mode, partition: str = _GRAPH.partition, nodes=_GRAPH.nodes,
                 placement_cache: str = _GRAPH.placement_cache,
             weights=None, seed: int = _GRAPH.seed, verify: bool = _GRAPH.verify, num_vertices: int | None = None,
             poll_ms: int = _GRAPH.poll_ms, snapshot_ms: int = _GRAPH.snapshot_ms,
             node_timeout: float = _GRAPH.node_timeout_s, max_seconds: float = _GRAPH.max_seconds, progress=None):
        return self._graph(graph, "sssp", num_vertices=num_vertices, mode=mode, partition=partition, nodes=nodes,
                           placement_cache=placement_cache,
                           weights=weights, tolerance=None, source=source, damping=_GRAPH.damping, beta=None,
                           label=_GRAPH.label, seed=seed, verify=verify, poll_ms=poll_ms, snapshot_ms=snapshot_ms,
                           node_timeout=node_timeout, max_seconds=max_seconds, progress=progress)

    sssp.__doc__ = (
        """Single-source shortest path lengths from ``source`` over the edge weights (>= 0; 1 when
        unweighted); unreachable vertices are inf.""" + _GRAPH_DOC
    )


class ResidentArray:
    """A matrix whose rows stay on the cluster's nodes between products (``Cluster.scatter``).

    ``R @ X`` (X a 1-D vector or a 2-D array with R's columns as rows) returns the product as a
    numpy array, each call sending only X and receiving only the result; every product is checked
    on this machine at a cost that does not read A (a random vector's r^T A kept from the
    placement) and a product that fails the check raises VerificationError. ``nodes`` says where
    the rows are (node name -> rows held), ``placement`` what placing cost (bytes, seconds), and
    ``last_product`` what the last product cost (seconds, bytes to and from the nodes)."""

    def __init__(self, a: np.ndarray, place: Callable[[np.ndarray], dict],
                 multiply: Callable[[dict, np.ndarray, np.ndarray], dict], release: Callable[[dict], None],
                 power: Callable[..., dict], cg: Callable[..., dict]):
        # The cluster's calls, bound to it: placing A, one product, the iterative methods, freeing.
        self._a = a
        self._place_on_nodes, self._multiply_on_nodes, self._release_on_nodes = place, multiply, release
        self._power_on_nodes, self._cg_on_nodes = power, cg
        self._placed: dict | None = None
        self.nodes: dict[str, int] = {}
        self.placement: dict = {}
        self.placements = 0
        self.last_product: dict = {}
        self._place()

    @property
    def shape(self) -> tuple[int, int]:
        return (self._a.shape[0], self._a.shape[1])

    def _place(self) -> None:
        placed = self._place_on_nodes(self._a)
        self._placed = placed
        self.nodes = {name: rows for name, rows in placed["nodes"]}
        self.placement = {key: placed[key] for key in ("bytes", "bytes_reused", "seconds", "forecast_s", "measured_s",
                                                        "first_measured_s", "bytes_moved", "measuring_rounds",
                                                        "remembered")}
        self.placement["left_out"] = list(placed["warnings"])
        self.placements += 1

    def __matmul__(self, X: Any) -> np.ndarray:
        return self.multiply(X)

    def multiply(self, X: Any, *, allow_copy: bool = True) -> np.ndarray:
        """The product A @ X (see the class); X is converted by the module's rule."""
        vector = np.ndim(X) == 1
        x = as_matrix(np.asarray(X).reshape(-1, 1) if vector else X, "X", allow_copy)
        if x.shape[0] != self._a.shape[1]:
            raise InvalidInputError(
                f"A is {self._a.shape[0]}x{self._a.shape[1]} and X is {x.shape[0]}x{x.shape[1]}: "
                "X's rows must equal A's columns")
        y = np.empty((self._a.shape[0], x.shape[1]))
        info = self._on_nodes(lambda placed: self._multiply_on_nodes(placed, x, y))
        self.last_product = info
        if not info["verified"]:
            raise VerificationError(f"verification FAILED: {info['detail']}", report=info, result=y)
        return y[:, 0] if vector else y

    def power_iteration(self, *, iterations: int = 1000, tol: float = 1e-10, seed: int = 1):
        """The dominant eigenpair of a square A by power iteration on the nodes: each step one
        resident product (only the vector travels), checked. Stops when the eigenvalue estimate
        moves by at most ``tol`` relative, or after ``iterations`` steps. Returns ``(value,
        vector, info)``: ``vector`` has unit norm; ``info`` holds ``iterations``, ``residual``
        (the true ||A v - value v|| / |value|, from one more checked product), ``converged``,
        ``seconds`` and ``product_seconds``. Raises InvalidInputError for a matrix that is not
        square or bad options, VerificationError when a product fails its check."""
        if not isinstance(iterations, int) or iterations < 1 or not tol > 0:
            raise InvalidInputError(f"iterations={iterations!r}, tol={tol!r}: give iterations >= 1 and tol > 0")
        info = self._on_nodes(lambda placed: self._power_on_nodes(placed, int(iterations), float(tol), int(seed)))
        vector = info.pop("vector")
        return info.pop("value"), vector, info

    def conjugate_gradient(self, b: Any, *, tol: float = 1e-10, max_iterations: int | None = None):
        """x with A x = b for a symmetric positive definite A, by conjugate gradient on the nodes:
        each step one resident product, checked. Stops when the recurrence's residual is within
        ``tol`` of ||b||, then checks the TRUE residual ||b - A x|| / ||b|| with one more product.
        Returns ``(x, info)`` with ``iterations``, ``residual`` (the true one), ``converged`` (the
        true residual within ``tol``, or within the rounding a product leaves, 10 n eps),
        ``seconds`` and ``product_seconds``. Raises InvalidInputError for a matrix that is not
        square, a b of the wrong length or a matrix found not positive definite, VerificationError
        when the recurrence converged but the true residual did not, or a product failed its check."""
        rhs = as_matrix(np.asarray(b, dtype=float).reshape(-1, 1), "b", True)
        limit = 0 if max_iterations is None else int(max_iterations)
        if limit < 0 or not tol > 0:
            raise InvalidInputError(f"tol={tol!r}, max_iterations={max_iterations!r}: give tol > 0 and max_iterations >= 0")
        info = self._on_nodes(lambda placed: self._cg_on_nodes(placed, rhs, float(tol), limit))
        info.pop("value")
        return info.pop("vector"), info

    def _on_nodes(self, call: Callable[[dict], dict]) -> dict:
        """call(placement), placing A again first when its session has ended."""
        if self._placed is None:
            raise InvalidInputError("this ResidentArray was freed")
        try:
            info = call(self._placed)
        except NotFoundError:
            self._place()
            info = call(self._placed)
        # Where the rows are now: a lost node's rows were placed again on the others.
        rows = info.pop("node_rows", None)
        if rows:
            self.nodes = {name: held for name, held in rows}
        return info

    def free(self) -> None:
        """Gives the nodes' memory back; the array can no longer be multiplied. Idempotent."""
        if self._placed is None:
            return
        self._release_on_nodes(self._placed)
        self._placed = None

    def __enter__(self) -> "ResidentArray":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __repr__(self) -> str:
        where = ", ".join(f"{name} {rows}" for name, rows in self.nodes.items())
        return f"<tessera.ResidentArray {self.shape[0]}x{self.shape[1]} on {where or 'nothing (freed)'}>"

