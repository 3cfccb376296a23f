"""Scalar semantics shared by the interpreter and the native functions.

Floats behave as C++ ``double`` does (IEEE: division by zero gives an infinity or NaN, overflow
gives an infinity) rather than raising as Python does, and a Float sum adds in index order from +0.0
(:func:`fsum_in_order`), so interpreter and C++ agree to the bit; Integer division truncates towards
zero as in C++, and dividing an Integer by zero is a run-time error.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from functools import reduce

from knossos import libm
from knossos.errors import KsEvalError

INF = math.inf
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1


def checked(value: int) -> int:
    """Integers are 64-bit, as in the C++ the programs compile to; overflow is an error here."""
    if not INT_MIN <= value <= INT_MAX:
        raise KsEvalError("Integer overflow (Integers are 64-bit)")
    return value


def fadd(a: float, b: float) -> float:
    return a + b


def fsub(a: float, b: float) -> float:
    return a - b


def fmul(a: float, b: float) -> float:
    return a * b


def checked_add(a: int, b: int) -> int:
    return checked(a + b)


def checked_sub(a: int, b: int) -> int:
    return checked(a - b)


def checked_mul(a: int, b: int) -> int:
    return checked(a * b)


def checked_neg(a: int) -> int:
    return checked(-a)


def checked_abs(a: int) -> int:
    return checked(abs(a))


def fdiv(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0.0:
            return math.nan
        return math.copysign(INF, a) * math.copysign(1.0, b)


def idiv(a: int, b: int) -> int:
    if b == 0:
        raise KsEvalError("Integer division by zero")
    q = abs(a) // abs(b)
    return checked(q if (a >= 0) == (b >= 0) else -q)


def fexp(a: float) -> float:
    try:
        return math.exp(a)
    except OverflowError:
        return INF


def flog(a: float) -> float:
    if a > 0.0:
        return math.log(a)
    if a == 0.0:
        return -INF
    return math.nan


def fsqrt(a: float) -> float:
    """C's sqrt: NaN below zero (Python raises), -0.0 of -0.0, infinity of infinity."""
    return math.sqrt(a) if a >= 0.0 or math.isnan(a) else math.nan


def _odd_integer(b: float) -> bool:
    return math.isfinite(b) and b == math.floor(b) and math.fmod(b, 2.0) != 0.0


def fpow(a: float, b: float) -> float:
    """C's pow: infinities where Python raises, negative for a negative base and an odd exponent."""
    try:
        return math.pow(a, b)
    except OverflowError:
        return -INF if a < 0 and _odd_integer(b) else INF
    except ValueError:
        if a == 0.0 and b < 0:
            return -INF if math.copysign(1.0, a) < 0 and _odd_integer(b) else INF
        return math.nan


def fcosh(a: float) -> float:
    try:
        return math.cosh(a)
    except OverflowError:
        return INF


def flog1p(a: float) -> float:
    """C's log1p: -inf at -1, NaN below it (Python raises)."""
    if a > -1.0 or math.isnan(a):
        return math.log1p(a)
    return -INF if a == -1.0 else math.nan


def fexpm1(a: float) -> float:
    try:
        return math.expm1(a)
    except OverflowError:
        return INF


def fsin(a: float) -> float:
    """C's sin: NaN of an infinity (Python raises)."""
    return math.sin(a) if math.isfinite(a) else math.nan


def fcos(a: float) -> float:
    return math.cos(a) if math.isfinite(a) else math.nan


def flgamma(a: float) -> float:
    """The C library's lgamma, as the compiled C++ calls it (knossos/libm.py)."""
    return libm.lgamma(a)


def fsum_in_order(terms: Iterable[float]) -> float:
    """The sum of Floats as the emitted C++ computes it: ``((0.0 + t0) + t1) + ...``, IEEE double adds
    in index order.  Not ``math.fsum`` (which rounds the exact sum, so differs in the last bits, and
    raises on inf + -inf or an overflowing partial sum) nor numpy's pairwise sum: infinities and NaN
    propagate as in C++ and nothing raises."""
    total: float = reduce(operator.add, terms, 0.0)
    return total


def cmax(a: float, b: float) -> float:
    """``std::max``: the first argument unless it is less than the second."""
    return b if a < b else a


_MASK = (1 << 64) - 1


def ranhashdoub(v: int) -> float:
    """The reference runtime's hash of an integer to a double in [0, 1) (Numerical Recipes' ranhash)."""
    x = v & _MASK
    x = (x * 3935559000370003845 + 2691343689449507681) & _MASK
    x ^= x >> 21
    x ^= (x << 37) & _MASK
    x ^= x >> 4
    x = (x * 4768777513237032717) & _MASK
    x ^= (x << 20) & _MASK
    x ^= x >> 41
    x ^= (x << 5) & _MASK
    return 5.42101086242752217e-20 * x
