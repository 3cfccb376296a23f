"""Derivatives of the ops, of the prelude's functions and of the usual math edefs.

Each rule sees one op over atoms (variables and literals), so that it may repeat an operand at no
cost.  :func:`reverse_op` gives, for each operand that wants one, its part of the cotangent given
the cotangent ``dv`` of the result ``r``; :func:`forward_op` gives the tangent of ``r`` from the
operands' tangents (``None`` where a tangent is zero).  Arithmetic broadcasts a scalar over a
structure: the scalar's cotangent is then the sum over the structure (:meth:`Shapes.fit`).
"""

from __future__ import annotations

from collections.abc import Callable

from autodiff.partials import function_partial, partial
from autodiff.tangent import Shapes
from knossos import expr as E
from knossos.callee import Callee, CalleeKind
from knossos.expr import Expr
from knossos.natives import STOP_GRADIENT
from knossos.op_table import FUNCTION, ROW
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
#: Edefs with a derivative that are not an op of the language: the library's functions (op_table)
#: and stop_gradient.
OWN_RULES = frozenset({*FUNCTION, STOP_GRADIENT})


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
    row = ROW.get(op)
    if row is not None:  # a value op: its partials (op_table); none for a Bool or Integer result
        for k in range(len(row.partials)):
            give(k, lambda k=k: fit(partial(op, k, args, r, dv), args[k].type))  # type: ignore[misc]
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
    elif op is Op.CALL and e.data.name in FUNCTION:
        give(0, lambda: function_partial(e, r, dv))
    elif not (op is Op.CALL and e.data.name == STOP_GRADIENT):  # pragma: no cover
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
        out = _plus(out, t)
    return out


def _plus(x: Expr, y: Expr) -> Expr:
    """``x + y``, as a difference where ``y`` is negated and under the condition where both select
    on one condition (max's tangent is then one select, not a sum of two)."""
    if y.op is Op.NEG:
        return E.op(Op.SUB, x, y.args[0])
    if x.op is Op.IF and y.op is Op.IF and x.args[0] is y.args[0]:
        return E.op(Op.IF, x.args[0], _plus(x.args[1], y.args[1]), _plus(x.args[2], y.args[2]))
    if _is_zero(x):
        return y
    return x if _is_zero(y) else E.op(Op.ADD, x, y)


def _is_zero(e: Expr) -> bool:
    return e.op is Op.CONST and type(e.data) is float and e.data == 0.0


def forward_op(e: Expr, r: Expr, tangent: Tangent, shapes: Shapes) -> Expr | None:
    """The tangent of ``r``, the value of ``e``, from its operands' tangents (None: zero)."""
    op, args = e.op, e.args
    d = [tangent(a) for a in args]

    def spread(t: Expr | None) -> Expr | None:
        """A term of the type of a scalar operand spread over the result (a sum of terms with one of
        the result's type has it already)."""
        if t is None or t.type is r.type:
            return t
        return E.op(Op.ADD, shapes.zero_like(r), t)

    def scaled(t: Expr | None, f: Callable[[Expr], Expr]) -> Expr | None:
        return None if t is None else f(t)

    row = ROW.get(op)
    if row is not None:  # a value op: the sum of its operands' tangents through its partials (op_table)
        terms = [None if t is None else partial(op, k, args, r, t) for k, t in enumerate(d[: len(row.partials)])]
        return spread(_sum(terms))
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
    if op is Op.CALL and e.data.name in FUNCTION:
        return scaled(d[0], lambda t: function_partial(e, r, t))
    if op is Op.CALL and e.data.name == STOP_GRADIENT:
        return None
    raise AssertionError(f"no forward rule for {op.name}")  # pragma: no cover
