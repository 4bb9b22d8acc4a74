"""The values calls return: a Plan, the model's Prediction, and the reports of a multiply, a
graph run, an expression's evaluation and a partition.

Each is a thin wrapper around the plain data (a dict, the JSON document the CLI's ``--report``
writes) the compiled module returns: its fields read as attributes, ``to_dict()`` gives them back,
and ``str()`` is the table the CLI prints where it has one. Nothing here calls the library.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np


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
        # Plans saved before chains existed have neither: B then goes to each node.
        copy["distribution"] = fields.get("distribution", "star")
        copy["chain"] = list(fields.get("chain", []))
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
    compute/comm/idle seconds, ...), ``policy``, ``m``, ``n``, ``k``, ``layout``, ``lost_nodes``,
    ``left_out_at_start`` (``[{node, reason}]``: nodes that did not answer when the call connected)...
    Also ``plan`` (the :class:`Plan` that ran), ``warnings``, ``notices`` and ``timing`` (where
    the call's seconds went: call_s, the whole call as Python saw it; input_check_s, the NaN/inf
    scan; output_fill_s, zeroing a C allocated here before the run; session_open_s and
    session_close_s; driver_s, the library's multiply).
    ``str(report)`` is the table ``tessera multiply`` prints; ``to_dict()`` the JSON document.
    """

    def __init__(self, fields: dict, plan: Plan, warnings_: Sequence[str], notices: Sequence[str], table: str,
                 timing: dict):
        super().__init__(fields)
        self.__dict__["plan"] = plan
        self.__dict__["warnings"] = list(warnings_)
        self.__dict__["notices"] = list(notices)
        self.__dict__["_table"] = table
        self.__dict__["timing"] = dict(timing)

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
    ``mode``, ``partition``, ``weights``, ``tolerance``, ``graph``, ``choice`` (mode, taking_part,
    left_out sentences, the forecast and the candidates weighed), ``placing`` (method, cached,
    reason), ``placement``, ``nodes``, ``totals`` (total_s = placement_s + wall_s, forecast_s,
    edge_updates, edge_updates_per_s, residual, polls, restarts, ...),
    ``lost_nodes``, ``left_out_at_start`` (``[{node, reason}]``: nodes that did not answer when the call
    connected), ``trace``, ``verification`` (None unless verify=True). Also ``notices``."""

    def __init__(self, fields: dict, notices: Sequence[str]):
        super().__init__(fields)
        self.__dict__["notices"] = list(notices)

    @property
    def wall_s(self) -> float:
        """Seconds from shipping the first parts to the values gathered."""
        return self.totals["wall_s"]

    @property
    def total_s(self) -> float:
        """Seconds the run took to answer: choosing nodes and placing, then running."""
        return self.totals["total_s"]

    def __repr__(self) -> str:
        verification = self.verification
        verified = "" if verification is None else (", verified" if verification["passed"] else ", verification FAILED")
        taking_part = len(self.choice["taking_part"])
        return (
            f"<tessera.GraphReport {self.algorithm['description']} {self.mode} on {taking_part} of {len(self.nodes)} "
            f"nodes: {self.totals['total_s']:.3f} s, {self.totals['edge_updates']} edge updates{verified}>"
        )


class EvalReport(_Record):
    """What evaluating an expression did: the fields of ``tessera eval --report`` as attributes:
    ``expression``, ``rewritten``, ``rows``, ``cols``, ``cost_as_written`` and ``cost_evaluated``
    (flops, products, intermediate_bytes, moved_bytes), ``products`` (one dict per product run on
    the cluster in sequence mode: m, n, k, policy, makespan_s, predicted_makespan_s, verified),
    ``makespan_sum_s``, ``wall_s``, ``mode`` and ``scheduled`` (scheduled mode: tile, candidates,
    tasks, predicted/measured/theoretical makespans, fastest_alone_s, theoretical_speedup,
    predicted/measured/naive bytes, per node and per task kind figures, lost_nodes, verified),
    ``left_out_at_start`` (``[{node, reason}]``: nodes that did not answer when the call connected).
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
