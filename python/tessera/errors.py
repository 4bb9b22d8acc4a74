"""Tessera's exceptions, and the one table that maps a C++ Status code to them.

Every failure of the C++ library reaches Python as one of these classes, with the library's own
message unchanged (the sentence `tessera` prints after ``tessera:``). All derive from
:class:`TesseraError`; bad input also derives from :class:`ValueError`, file trouble from
:class:`OSError`.

==========================  ===========================  ==========================================
Status code                 Exception                    Typical cause
==========================  ===========================  ==========================================
InvalidArgument             InvalidInputError            a bad keyword, shape, dtype or graph
InvalidConfig               ConfigError                  the cluster YAML is wrong, a run dir unsafe
IoError                     TesseraFileError             a file cannot be read or written
NetworkError, ProtocolError ClusterError                 a worker is unreachable or failed mid-run
AuthFailed                  ClusterError                 the shared secret does not match
Busy                        BusyError                    a worker serves another coordinator
ResourceExhausted           ResourceExhaustedError       out of memory, a time or restart limit
NotFound                    NotFoundError                no profile yet, an unknown node
VerificationFailed          VerificationError            the result failed its check
Cancelled                   CancelledError               the run was cancelled
Internal (and unknown)      TesseraError                 a bug in Tessera
==========================  ===========================  ==========================================

A multiply or graph run whose result fails verification raises :class:`VerificationError`
carrying the run's report in ``.report``. Ctrl-C during a run raises Python's own
``KeyboardInterrupt`` after the run was cancelled.
"""

from __future__ import annotations

__all__ = [
    "TesseraError",
    "InvalidInputError",
    "ConfigError",
    "TesseraFileError",
    "ClusterError",
    "BusyError",
    "ResourceExhaustedError",
    "NotFoundError",
    "VerificationError",
    "CancelledError",
    "error_for_status",
]


class TesseraError(Exception):
    """Base class of every Tessera error.

    Attributes:
        code: the C++ Status code name ("InvalidArgument", "NetworkError", ...).
        message: the library's message, unchanged (also ``str(error)``).
    """

    code = "Internal"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidInputError(TesseraError, ValueError):
    """A bad argument or input: a keyword value, an array's shape or dtype, a malformed graph."""

    code = "InvalidArgument"


class ConfigError(InvalidInputError):
    """The cluster description (YAML) or a run directory is wrong; the message names the line."""

    code = "InvalidConfig"


class TesseraFileError(TesseraError, OSError):
    """A file could not be read or written (the message names it)."""

    code = "IoError"

    def __init__(self, message: str, code: str | None = None):
        TesseraError.__init__(self, message, code)


class ClusterError(TesseraError):
    """A network or worker failure: a node unreachable, a connection lost, a protocol breach, a
    wrong secret. ``code`` tells which ("NetworkError", "ProtocolError", "AuthFailed", "Busy")."""

    code = "NetworkError"


class BusyError(ClusterError):
    """A worker is serving another coordinator's session; try again once it is free."""

    code = "Busy"


class ResourceExhaustedError(TesseraError):
    """A memory cap or size limit would be exceeded, or a run hit its time or restart limit."""

    code = "ResourceExhausted"


class NotFoundError(TesseraError):
    """Something referenced does not exist yet: most often the cluster's profile (run
    ``cluster.profile()``), or a node named in an argument."""

    code = "NotFound"


class VerificationError(TesseraError):
    """The result failed its verification. ``report`` holds the run's report (a
    :class:`tessera.Report` or :class:`tessera.GraphReport`), ``result`` the computed values."""

    code = "VerificationFailed"

    def __init__(self, message: str, code: str | None = None, report=None, result=None):
        super().__init__(message, code)
        self.report = report
        self.result = result


class CancelledError(TesseraError):
    """The operation was cancelled (without a KeyboardInterrupt to re-raise)."""

    code = "Cancelled"


# The one mapping from the C++ StatusCode names (core/status.hpp) to the classes above.
_BY_CODE = {
    "InvalidArgument": InvalidInputError,
    "InvalidConfig": ConfigError,
    "IoError": TesseraFileError,
    "NetworkError": ClusterError,
    "ProtocolError": ClusterError,
    "AuthFailed": ClusterError,
    "Busy": BusyError,
    "ResourceExhausted": ResourceExhaustedError,
    "NotFound": NotFoundError,
    "VerificationFailed": VerificationError,
    "Cancelled": CancelledError,
    "Internal": TesseraError,
}


def error_for_status(code: str, message: str) -> TesseraError:
    """The exception a C++ ``Status`` becomes: the ``TesseraError`` subclass for its code name
    (``"Busy"`` -> ``BusyError``, an unknown code -> ``TesseraError``) carrying ``message`` and
    ``code``. The compiled module raises every failure through this."""
    return _BY_CODE.get(code, TesseraError)(message, code)
