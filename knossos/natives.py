"""Python implementations of functions that programs declare with ``edef`` or take from the prelude.

An edef has no body, so the interpreter needs its meaning from here; an edef that is missing from
:data:`NATIVES` can be parsed, typed and costed but not evaluated.  Arguments arrive in the
interpreter's value representation (:mod:`knossos.values`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from knossos import arith
from knossos.errors import KsEvalError
from knossos.op_table import FUNCTIONS
from knossos.types import FLOAT, vec
from knossos.values import Value, add

Native = Callable[..., Value]

#: The identity whose derivative is zero (JAX's ``stop_gradient``): no cotangent passes through it and
#: its tangent is zero (autodiff.primitives).  The torch front end holds a softmax's shift by the row's
#: maximum with it: the result does not depend on the shift, so its derivative through the shift is
#: zero anyway (torch's is), but computing it would take the reverse pass through the maximum's loops.
STOP_GRADIENT = "stop_gradient"


def _same_size(what: str, a: list[object], b: list[object]) -> None:
    if len(a) != len(b):
        raise KsEvalError(f"{what}: sizes differ ({len(a)} and {len(b)})")


def _dotv(a: list[float], b: list[float]) -> float:
    _same_size("dotv", a, b)  # type: ignore[arg-type]
    return arith.fsum_in_order(x * y for x, y in zip(a, b, strict=True))


def _mul_mat_vec(m: list[list[float]], v: list[float]) -> list[float]:
    for row in m:
        _same_size("mul$Mat$Vec", row, v)  # type: ignore[arg-type]
    return [arith.fsum_in_order(x * y for x, y in zip(row, v, strict=True)) for row in m]


def _rev_mul_mat_vec(m: list[list[float]], v: list[float], dr: list[float]) -> tuple[Value, Value]:
    _same_size("rev$mul$Mat$Vec", m, dr)  # type: ignore[arg-type]
    for row in m:
        _same_size("rev$mul$Mat$Vec", row, v)  # type: ignore[arg-type]
    d_m = [[d * x for x in v] for d in dr]
    d_v = [arith.fsum_in_order(dr[i] * m[i][j] for i in range(len(m))) for j in range(len(v))]
    return (d_m, d_v)


def _abs(x: Value) -> Value:
    if isinstance(x, int) and not isinstance(x, bool):
        return arith.checked(abs(x))
    return abs(x)  # type: ignore[arg-type]


def digamma(x: float) -> float:
    """The derivative of lgamma (for fwd$lgamma and rev$lgamma), step for step as ``ks::digamma`` in
    cpp_backend/runtime.h computes it, so that the interpreter and C++ agree: NaN at the poles (zero
    and the negative integers), at -inf and at NaN, +inf at +inf."""
    if x <= 0 and (x == -math.inf or x == math.floor(x)):  # floor(-inf) raises in Python; C gives -inf
        return math.nan
    if x < 0:  # reflection
        return digamma(1 - x) - math.pi / math.tan(math.pi * x)
    result = 0.0
    while x < 6:
        result -= 1 / x
        x += 1
    inv = 1 / x
    inv2 = inv * inv
    return (
        result
        + math.log(x)
        - 0.5 * inv
        - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    )


_VF = vec(FLOAT)

NATIVES: dict[str, Native] = {
    "abs": _abs,
    "max": arith.cmax,
    "pow": arith.fpow,
    "tanh": math.tanh,
    "exp": arith.fexp,
    "log": arith.flog,
    **{f.name: f.meaning for f in FUNCTIONS},
    "lgamma": arith.flgamma,
    STOP_GRADIENT: lambda x: x,
    "fwd$lgamma": lambda x, dx: digamma(x) * dx,
    "rev$lgamma": lambda x, dr: digamma(x) * dr,
    "dotv": _dotv,
    "mul$Mat$Vec": _mul_mat_vec,
    "rev$mul$Mat$Vec": _rev_mul_mat_vec,
    # the prelude
    "add$ii": lambda a, b: arith.checked(a + b),
    "add$ff": lambda a, b: a + b,
    "add$vfvf": lambda a, b: add(_VF, a, b),
    "sub$ii": lambda a, b: arith.checked(a - b),
    "sub$ff": lambda a, b: a - b,
    "mul$ii": lambda a, b: arith.checked(a * b),
    "mul$ff": lambda a, b: a * b,
    "div$ii": arith.idiv,
    "div$ff": arith.fdiv,
    "exp$f": arith.fexp,
    "log$f": arith.flog,
    "eq$ii": lambda a, b: a == b,
    "eq$ff": lambda a, b: a == b,
    "gt$ii": lambda a, b: a > b,
    "gt$ff": lambda a, b: a > b,
    "gte$ii": lambda a, b: a >= b,
    "gte$ff": lambda a, b: a >= b,
    "$ranhashdoub": arith.ranhashdoub,
}
