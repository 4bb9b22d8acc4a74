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

The package's modules, each importing only the ones before it in this order: :mod:`tessera.errors`
(the exceptions) and :mod:`tessera.results` (the values calls return: Plan, Report, ...) import
none of the others; :mod:`tessera.arrays` (the array rule above) imports errors;
:mod:`tessera.expressions` (lazy matrix expressions) imports errors and the compiled module (for
the option defaults it shares with ``tessera multiply``); :mod:`tessera.graphs` (graph inputs, ``partition()``)
imports errors, results and the compiled module; :mod:`tessera.cluster` (``Cluster``,
``TesseraWarning``) imports all of them, and none imports it: ``partition()`` knows a Cluster by
its ``profile_weights()`` method, and ``Expression.compute()`` calls ``evaluate()`` on the cluster
that made it. The pure-Python modules call each other by public names only. This file only
re-exports the names users call.
"""

from __future__ import annotations

from . import _tessera, errors
from .cluster import Cluster, ResidentArray, TesseraWarning
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
from .expressions import Expression
from .graphs import DirectedGraph, PartitionGraph, directed_graph, partition, partition_graph_input
from .results import EvalReport, GraphReport, PartitionResult, Plan, Prediction, Report

__version__ = _tessera.version
__all__ = [
    "Cluster",
    "ResidentArray",
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
