"""Derivatives of the ops, of the prelude's functions and of the usual math edefs.

Each rule sees one op over atoms (variables and literals), so that it may repeat an operand at no
cost.  :func:`reverse_op` gives, for each operand that wants one, its part of the cotangent given
the cotangent ``dv`` of the result ``r``; :func:`forward_op` gives the tangent of ``r`` from the
operands' tangents (``None`` where a tangent is zero).  Arithmetic broadcasts a scalar over a
structure: the scalar's cotangent is then the sum over the structure (:meth:`Shapes.fit`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from autodiff.tangent import Shapes
from knossos import expr as E
from knossos.callee import Callee, CalleeKind
from knossos.expr import Expr
from knossos.natives import STOP_GRADIENT
from knossos.ops import Op
from knossos.types import FLOAT

#: The prelude's functions with a derivative, as the op they compute.
PRELUDE_OPS: dict[str, Op] = {
    "add$ff": Op.ADD,
    "add$vfvf": Op.ADD,
    "sub$ff": Op.SUB,
    "mul$ff": Op.MUL,
    "div$ff": Op.DIV,
    "exp$f": Op.EXP,
    "log$f": Op.LOG,
}
#: Edefs whose meaning is an op's when they take and return Floats (the reference's programs declare them).
MATH_EDEFS: dict[str, Op] = {"exp": Op.EXP, "log": Op.LOG, "tanh": Op.TANH, "abs": Op.ABS, "pow": Op.POW, "max": Op.MAX}
#: Edefs with a derivative written here (not an op of the language).
OWN_RULES = frozenset({"cosh", "erf", "log1p", "expm1", "sin", "cos", STOP_GRADIENT})


def known_callee(callee: Callee) -> bool:
    """Whether the derivative of calling ``callee`` is known here."""
    if callee.kind is CalleeKind.BUILTIN:
        return callee.name in PRELUDE_OPS
    floats = all(t is FLOAT for t in callee.param_types) and callee.ret_type is FLOAT
    return callee.kind is CalleeKind.EDEF and floats and (callee.name in MATH_EDEFS or callee.name in OWN_RULES)


def as_op(call: Expr) -> Expr:
    """A call of a known function (:func:`known_callee`) as the op node it computes (cosh stays a call)."""
    callee: Callee = call.data
    op = PRELUDE_OPS.get(callee.name) if callee.kind is CalleeKind.BUILTIN else MATH_EDEFS.get(callee.name)
    return call if op is None else E.make(op, call.args)


def _sinh(x: Expr) -> Expr:
    return E.op(Op.DIV, E.op(Op.SUB, E.op(Op.EXP, x), E.op(Op.EXP, E.op(Op.NEG, x))), E.const(2.0))


def _erf_slope(x: Expr) -> Expr:
    """d erf(x) / dx = 2 / sqrt(pi) exp(-x^2)."""
    return E.op(Op.MUL, E.const(1.1283791670955126), E.op(Op.EXP, E.op(Op.NEG, E.op(Op.MUL, x, x))))


#: The slope of each edef of :data:`OWN_RULES` but cosh, of its call ``e`` (over an atom) and its
#: result ``r``.
_SLOPES: dict[str, Callable[[Expr, Expr], Expr]] = {
    "erf": lambda e, r: _erf_slope(e.args[0]),
    "log1p": lambda e, r: E.op(Op.DIV, E.const(1.0), E.op(Op.ADD, E.const(1.0), e.args[0])),
    "expm1": lambda e, r: E.op(Op.ADD, r, E.const(1.0)),
    # sin' = cos = sin(x + pi/2) and cos' = -sin = cos(x + pi/2): each a call of the function itself,
    # which the program declares (the other may not be)
    "sin": lambda e, r: _shifted_call(e),
    "cos": lambda e, r: _shifted_call(e),
}


def _shifted_call(e: Expr) -> Expr:
    """The function ``e`` calls, at its argument plus pi/2."""
    return E.call(e.data, E.op(Op.ADD, e.args[0], E.const(math.pi / 2)))


def _one_minus_square(r: Expr) -> Expr:
    return E.op(Op.SUB, E.const(1.0), E.op(Op.MUL, r, r))


def _in_range(i: Expr, n: Expr) -> Expr:
    return E.op(Op.AND, E.op(Op.GTE, i, E.const(0)), E.op(Op.LT, i, n))


def reverse_op(e: Expr, r: Expr, dv: Expr, wants: Callable[[Expr], bool], shapes: Shapes) -> list[tuple[Expr, Expr]]:
    """(operand, its part of the cotangent) for each operand of ``e`` that ``wants`` one."""
    op, args = e.op, e.args
    out: list[tuple[Expr, Expr]] = []

    def give(k: int, make: Callable[[], Expr]) -> None:
        if wants(args[k]):
            out.append((args[k], make()))

    fit = shapes.fit
    if op is Op.ADD:
        give(0, lambda: fit(dv, args[0].type))
        give(1, lambda: fit(dv, args[1].type))
    elif op is Op.SUB:
        give(0, lambda: fit(dv, args[0].type))
        give(1, lambda: fit(E.op(Op.NEG, dv), args[1].type))
    elif op is Op.MUL:
        give(0, lambda: fit(E.op(Op.MUL, dv, args[1]), args[0].type))
        give(1, lambda: fit(E.op(Op.MUL, dv, args[0]), args[1].type))
    elif op is Op.DIV:
        give(0, lambda: fit(E.op(Op.DIV, dv, args[1]), args[0].type))
        give(1, lambda: fit(E.op(Op.NEG, E.op(Op.MUL, dv, E.op(Op.DIV, r, args[1]))), args[1].type))
    elif op is Op.NEG:
        give(0, lambda: E.op(Op.NEG, dv))
    elif op is Op.EXP:
        give(0, lambda: E.op(Op.MUL, dv, r))
    elif op is Op.LOG:
        give(0, lambda: E.op(Op.DIV, dv, args[0]))
    elif op is Op.TANH:
        give(0, lambda: E.op(Op.MUL, dv, _one_minus_square(r)))
    elif op is Op.SQRT:  # d sqrt(x) = dx / (2 sqrt(x))
        give(0, lambda: E.op(Op.DIV, dv, E.op(Op.MUL, E.const(2.0), r)))
    elif op is Op.POW:
        x, p = args
        give(0, lambda: E.op(Op.MUL, dv, E.op(Op.MUL, p, E.op(Op.POW, x, E.op(Op.SUB, p, E.const(1.0))))))
        give(1, lambda: E.op(Op.MUL, dv, E.op(Op.MUL, r, E.op(Op.LOG, x))))
    elif op is Op.ABS:
        give(0, lambda: E.op(Op.IF, E.op(Op.LT, args[0], E.const(0.0)), E.op(Op.NEG, dv), dv))
    elif op is Op.MAX:  # max(a, b) is a unless a < b
        second = E.op(Op.LT, args[0], args[1])
        give(0, lambda: E.op(Op.IF, second, E.const(0.0), dv))
        give(1, lambda: E.op(Op.IF, second, dv, E.const(0.0)))
    elif op is Op.INDEX:
        i, v = args
        give(1, lambda: E.op(Op.DELTAVEC, E.op(Op.SIZE, v), i, dv))
    elif op is Op.SUM:
        give(0, lambda: E.op(Op.CONSTVEC, E.op(Op.SIZE, args[0]), dv))
    elif op is Op.CONSTVEC:
        give(1, lambda: E.op(Op.SUM, dv))
    elif op is Op.DELTAVEC:
        n, i, x = args
        give(2, lambda: E.op(Op.IF, _in_range(i, n), E.op(Op.INDEX, i, dv), shapes.zero_like(x)))
    elif op is Op.TUPLE:
        for k in range(len(args)):
            give(k, lambda k=k: E.get(k + 1, len(args), dv))  # type: ignore[misc]
    elif op is Op.GET:
        index, count = e.data
        t = args[0]

        def one_hot() -> Expr:
            parts = [dv if j == index else shapes.zero_like(E.get(j, count, t)) for j in range(1, count + 1)]
            return E.tuple_(*parts)

        give(0, one_hot)
    elif op is Op.ASSERT:
        give(1, lambda: dv)
    elif op is Op.CALL and e.data.name == "cosh":
        give(0, lambda: E.op(Op.MUL, dv, _sinh(args[0])))
    elif op is Op.CALL and e.data.name in _SLOPES:
        give(0, lambda: E.op(Op.MUL, dv, _SLOPES[e.data.name](e, r)))
    elif op is not Op.TO_FLOAT and not (op is Op.CALL and e.data.name == STOP_GRADIENT):  # pragma: no cover
        # (every op with a Float result is above; stop_gradient passes no cotangent on)
        raise AssertionError(f"no reverse rule for {op.name}")
    return out


Tangent = Callable[[Expr], "Expr | None"]


def _sum(terms: list[Expr | None]) -> Expr | None:
    present = [t for t in terms if t is not None]
    if not present:
        return None
    out = present[0]
    for t in present[1:]:
        out = E.op(Op.ADD, out, t)
    return out


def forward_op(e: Expr, r: Expr, tangent: Tangent, shapes: Shapes) -> Expr | None:
    """The tangent of ``r``, the value of ``e``, from its operands' tangents (None: zero)."""
    op, args = e.op, e.args
    d = [tangent(a) for a in args]

    def spread(t: Expr | None) -> Expr | None:
        """A term of the type of a scalar operand spread over the result: spread it too."""
        if t is None or t.type is r.type:
            return t
        return E.op(Op.ADD, shapes.zero_like(r), t)

    def scaled(t: Expr | None, f: Callable[[Expr], Expr]) -> Expr | None:
        return None if t is None else f(t)

    if op is Op.ADD:
        return _sum([spread(d[0]), spread(d[1])]) if d[0] is None or d[1] is None else E.op(Op.ADD, d[0], d[1])
    if op is Op.SUB:
        if d[0] is not None and d[1] is not None:
            return E.op(Op.SUB, d[0], d[1])
        return spread(d[0]) if d[1] is None else spread(E.op(Op.NEG, d[1]))
    if op is Op.MUL:
        a, b = args
        return _sum([scaled(d[0], lambda t: E.op(Op.MUL, t, b)), scaled(d[1], lambda t: E.op(Op.MUL, a, t))])
    if op is Op.DIV:
        a, b = args
        first = scaled(d[0], lambda t: E.op(Op.DIV, t, b))
        second = scaled(d[1], lambda t: E.op(Op.DIV, E.op(Op.MUL, r, t), b))
        if second is None:
            return first
        return E.op(Op.NEG, second) if first is None else E.op(Op.SUB, first, second)
    if op is Op.NEG:
        return scaled(d[0], lambda t: E.op(Op.NEG, t))
    if op is Op.EXP:
        return scaled(d[0], lambda t: E.op(Op.MUL, t, r))
    if op is Op.LOG:
        return scaled(d[0], lambda t: E.op(Op.DIV, t, args[0]))
    if op is Op.TANH:
        return scaled(d[0], lambda t: E.op(Op.MUL, t, _one_minus_square(r)))
    if op is Op.SQRT:
        return scaled(d[0], lambda t: E.op(Op.DIV, t, E.op(Op.MUL, E.const(2.0), r)))
    if op is Op.POW:
        x, p = args
        return _sum(
            [
                scaled(
                    d[0], lambda t: E.op(Op.MUL, t, E.op(Op.MUL, p, E.op(Op.POW, x, E.op(Op.SUB, p, E.const(1.0)))))
                ),
                scaled(d[1], lambda t: E.op(Op.MUL, t, E.op(Op.MUL, r, E.op(Op.LOG, x)))),
            ]
        )
    if op is Op.ABS:
        return scaled(d[0], lambda t: E.op(Op.IF, E.op(Op.LT, args[0], E.const(0.0)), E.op(Op.NEG, t), t))
    if op is Op.MAX:
        if d[0] is None and d[1] is None:
            return None
        zero = E.const(0.0)
        return E.op(Op.IF, E.op(Op.LT, args[0], args[1]), d[1] or zero, d[0] or zero)
    if op is Op.INDEX:
        return scaled(d[1], lambda t: E.op(Op.INDEX, args[0], t))
    if op is Op.SUM:
        return scaled(d[0], lambda t: E.op(Op.SUM, t))
    if op is Op.CONSTVEC:
        return scaled(d[1], lambda t: E.op(Op.CONSTVEC, args[0], t))
    if op is Op.DELTAVEC:
        return scaled(d[2], lambda t: E.op(Op.DELTAVEC, args[0], args[1], t))
    if op is Op.TUPLE:
        if all(t is None for t in d):
            return None
        return E.tuple_(*(t if t is not None else shapes.zero_like(a) for t, a in zip(d, args, strict=True)))
    if op is Op.GET:
        return scaled(d[0], lambda t: E.get(e.data[0], e.data[1], t))
    if op is Op.ASSERT:
        return scaled(d[1], lambda t: E.op(Op.ASSERT, args[0], t))
    if op is Op.CALL and e.data.name == "cosh":
        return scaled(d[0], lambda t: E.op(Op.MUL, t, _sinh(args[0])))
    if op is Op.CALL and e.data.name in _SLOPES:
        return scaled(d[0], lambda t: E.op(Op.MUL, t, _SLOPES[e.data.name](e, r)))
    if op is Op.TO_FLOAT or (op is Op.CALL and e.data.name == STOP_GRADIENT):
        return None
    raise AssertionError(f"no forward rule for {op.name}")  # pragma: no cover
