"""The C math library's ``lgamma``, which the compiled C++ calls too (``ks::lgamma_f`` in
cpp_backend/runtime.h), so that the interpreter and C++ in exact order agree to the bit.

Python's ``math.lgamma`` is CPython's own Lanczos approximation, not the C library's: on glibc the
two differ in the last bits for about half of the arguments in [-50, 200].  Where the C library
cannot be loaded (no ``libm``), ``math.lgamma`` is used and exact order may differ in the last bits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import sys
from collections.abc import Callable


def _load() -> Callable[[float], float] | None:
    names = ["libm.so.6", ctypes.util.find_library("m")] if sys.platform.startswith("linux") else [None]
    if sys.platform == "win32":
        names = ["ucrtbase"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            f = lib.lgamma
        except (OSError, AttributeError):
            continue
        f.argtypes = [ctypes.c_double]
        f.restype = ctypes.c_double
        return f  # type: ignore[no-any-return]
    return None


_lgamma = _load()
#: Whether :func:`lgamma` is the C library's (otherwise it is ``math.lgamma``).
FROM_C_LIBRARY = _lgamma is not None


def lgamma(x: float) -> float:
    """``lgamma`` as C computes it: +inf at the poles and on overflow (``math.lgamma`` raises there)."""
    if _lgamma is not None:
        return float(_lgamma(x))
    try:
        return math.lgamma(x)
    except (OverflowError, ValueError):
        return math.inf
