"""Checking and converting the arrays a multiply or an expression reads and writes.

The rule is the package docstring's (``help(tessera)``, "Arrays"): a 2-D C-contiguous float64
array is used in place; any other 2-D real array is converted with one copy unless
``allow_copy=False``; ``out=`` is never converted. :func:`as_matrix` and :func:`check_out` are
what :class:`tessera.Cluster`'s ``multiply()`` and ``array()`` call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InvalidInputError

__all__ = ["as_matrix", "check_out"]


def as_matrix(value: Any, name: str, allow_copy: bool) -> np.ndarray:
    """The 2-D C-contiguous float64 array the library reads, by the rule in the module docstring:
    ``value`` itself when it already is one, else a converted copy (refused when ``allow_copy`` is
    False). Raises InvalidInputError, naming the argument ``name``, for what the rule refuses."""
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


def check_out(out: Any, rows: int, cols: int) -> np.ndarray:
    """``out`` itself, once it is checked to be what C is written into: a numpy float64 array of
    shape (rows, cols), C-contiguous and writeable (never converted). Raises InvalidInputError
    saying which of these it is not."""
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
