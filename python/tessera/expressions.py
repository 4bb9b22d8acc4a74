"""Matrix expressions built lazily on a cluster (``cluster.array(A) @ cluster.array(B) + ...``).

An :class:`Expression` only records the text in ``tessera eval``'s grammar, the arrays it names
and its shape, checking shapes as it is built; ``compute()`` hands it to the cluster it came from
(:meth:`Cluster.evaluate`), which evaluates it and returns the value with an :class:`EvalReport`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from . import _tessera
from .errors import InvalidInputError

# compute()'s defaults, like Cluster.evaluate's, are `tessera eval`'s, read at import from the one
# C++ definition (EvalSettings in balance/session/settings.hpp), which also makes their checks.
_EVAL = _tessera.EvalSettings()

if TYPE_CHECKING:  # for the annotations only: cluster.py imports this module, not the reverse
    from .cluster import Cluster


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

    @property
    def arrays(self) -> Mapping[str, np.ndarray]:
        """The arrays ``text`` names, by name (x0, x1, ...), as a read-only mapping: the
        C-contiguous float64 arrays :meth:`Cluster.array` made, not copied again."""
        return MappingProxyType(self._inputs)

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

    def compute(self, *, mode: str = _EVAL.mode, tile: int | None = None, nodes: "Sequence[str] | None" = None,
                every_node: bool = _EVAL.every_node, policy: str = _EVAL.policy, verify: str = _EVAL.verify,
                rewrite: bool = _EVAL.rewrite, tile_route: str = _EVAL.tile_route, explain: bool = False,
                progress: "Callable[[dict], None] | None" = None):
        """Evaluates on the cluster that made this expression (``cluster.evaluate(self, ...)``);
        returns ``(numpy array, EvalReport)``.

        mode: "scheduled" (tile tasks placed by HEFT with each node's tile cache, intermediates
        kept on the nodes; ``tile`` fixes the tile size, else the simulation picks it; ``nodes``
        names the only nodes to use; the fastest few of them run alone when that is forecast clearly
        faster, unless ``every_node=True``; ``tile_route``: "auto", whichever the schedule forecasts
        sooner, "direct", tiles between nodes worker to worker where every worker can, or
        "coordinator") or "sequence" (one multiply per product, with ``policy``:
        "even" | "proportional" | "model" | "dynamic"); verify: "freivalds" | "exact" | "none",
        of the value (scheduled) or of every product (sequence), a failure raising
        VerificationError; rewrite=False evaluates as written; explain=True adds the before/after
        trees to the report's table. Ctrl-C cancels and raises KeyboardInterrupt."""
        return self._cluster.evaluate(self, mode=mode, tile=tile, nodes=nodes, every_node=every_node, policy=policy,
                                      verify=verify, rewrite=rewrite, tile_route=tile_route, explain=explain,
                                      progress=progress)
