"""Arguments of compiled callables (:mod:`cpp_backend.callable`) as the C ABI takes them: a Float as a
double, an array of numbers as a C-contiguous numpy array of the leaf's dtype; anything that does not
fit is a one-line KsUsageError."""

from __future__ import annotations

import ctypes

import numpy as np

from cpp_backend.entry import DTYPES, KIND_NAME, Leaf
from knossos.errors import KsUsageError
from knossos.types import FLOAT, INTEGER, Type


def scalar_box(t: Type, x: object, where: str) -> ctypes.c_double | ctypes.c_int64 | ctypes.c_bool:
    """A Float, Integer or Bool argument (Python or numpy) in the C type the entry point reads."""
    if (isinstance(x, np.ndarray) and x.ndim == 0) or isinstance(x, np.generic):
        x = x.item()  # a long double stays one (no Python type holds it)
    if t is FLOAT:
        return ctypes.c_double(float_argument(x, where))
    if t is INTEGER:
        if isinstance(x, bool) or not isinstance(x, int):
            raise KsUsageError(f"{where} must be an Integer, not {describe(x)}")
        if not -(2**63) <= x < 2**63:
            raise KsUsageError(f"{where} is out of the 64-bit Integer range")
        return ctypes.c_int64(x)
    if not isinstance(x, bool):
        raise KsUsageError(f"{where} must be a Bool, not {describe(x)}")
    return ctypes.c_bool(x)


def describe(x: object) -> str:
    if isinstance(x, np.ndarray):
        return f"a {x.ndim}-d array of {x.dtype}"
    return f"a {type(x).__name__}"


def float_argument(x: object, where: str) -> float:
    """A Float argument as a double: Python and numpy ints and floats; a one-line error for anything
    else, an int beyond the Float range, or a long double that a double cannot hold exactly."""
    if isinstance(x, np.floating) and x.dtype.itemsize > 8:
        return float(_doubles(np.asarray(x), where))
    if isinstance(x, bool) or not isinstance(x, float | int):
        raise KsUsageError(f"{where} must be a Float, not {describe(x)}")
    try:
        return float(x)
    except OverflowError:
        raise KsUsageError(f"{where} is out of the Float range") from None


def _doubles(x: np.ndarray, where: str) -> np.ndarray:
    """A long double array as doubles, refused where a value would change (a Float is a double)."""
    y = x.astype(np.float64)
    same = (y.astype(x.dtype) == x) | np.isnan(x)
    if not bool(np.all(same)):
        raise KsUsageError(f"{where} has a {x.dtype} value that a Float (a 64-bit double) cannot hold exactly")
    return y


def as_array(leaf: Leaf, x: object, where: str) -> np.ndarray:
    """``x`` as a C-contiguous array of ``leaf``'s dtype; a one-line error if it does not fit (a long
    double array is converted where every value is a double: :func:`float_argument`)."""
    assert leaf.elem is not None
    want = DTYPES[leaf.elem]
    kind = KIND_NAME[leaf.elem]
    if not isinstance(x, np.ndarray):
        if isinstance(x, str | bytes) or not isinstance(x, list | tuple):
            raise KsUsageError(f"{where} must be a {leaf.rank}-d array of {kind}s, not {describe(x)}")
        try:
            x = np.asarray(x)
        except ValueError:
            raise KsUsageError(
                f"{where} must be a {leaf.rank}-d array of {kind}s: its rows have different lengths"
            ) from None
    assert isinstance(x, np.ndarray)
    if x.ndim != leaf.rank and not (x.size == 0 and x.ndim == 1 and leaf.rank > 1):
        raise KsUsageError(f"{where} must be a {leaf.rank}-d array of {kind}s ({leaf.type}), not {x.ndim}-d")
    if x.size == 0 and x.ndim != leaf.rank:
        x = x.reshape((0,) * leaf.rank)
    if x.dtype != want and x.size == 0 and x.dtype.kind in "biuf":
        x = x.astype(want)  # no values to check (np.asarray([]) is of float64)
    if x.dtype != want and not (leaf.elem is FLOAT and x.dtype.kind == "f" and x.dtype.itemsize > 8):
        ok = (leaf.elem is FLOAT and x.dtype.kind in "fiu") or (leaf.elem is INTEGER and x.dtype.kind in "iu")
        if not ok or not np.can_cast(x.dtype, want, "same_kind" if leaf.elem is FLOAT else "safe"):
            raise KsUsageError(f"{where} must be an array of {kind}s ({want}), not of {x.dtype}")
        x = x.astype(want)
    if x.dtype != want:  # a long double array for Floats
        x = _doubles(x, where)
    if not x.flags.c_contiguous or not x.flags.aligned:
        x = np.ascontiguousarray(x)
    return x


__all__ = ["as_array", "describe", "float_argument", "scalar_box"]
