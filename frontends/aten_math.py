"""Core ATen ops of transformers, RNNs and the library losses that :mod:`frontends.aten` lacks:
``erf``/``gelu``, ``log1p``/``expm1``/``softplus``, ``std``, ``cat``/``stack``, the masks
(``arange``, ``tril``/``triu``, ``eq``/``ne``, ``masked_fill``, the logical ops) and ``clamp``.

``erf``, ``log1p``, ``expm1``, ``sin``, ``cos`` and ``cosh`` are functions of the language's library
(their rows in :mod:`knossos.op_table`), declared by an ``edef`` the translation adds: calls of
:func:`native`, lowered from their rows (:mod:`frontends.aten_ops`).
"""

from __future__ import annotations

import math
from typing import Any

from frontends.aten import (
    Call,
    Lowering,
    Unsupported,
    as_tensor,
    dim_of,
    elementwise,
    moments,
    sigmoid,
    unary,
)
from frontends.tensor import Index, Tensor, converted, flit, iadd, ic, literal_of, view
from knossos import expr as E
from knossos.callee import Callee, edef_callee
from knossos.cost import DEFAULT_EDEF_COST
from knossos.expr import Expr
from knossos.natives import STOP_GRADIENT
from knossos.op_table import FUNCTION
from knossos.ops import Op
from knossos.types import BOOL, FLOAT, INTEGER

#: The library functions a translation may call, Float to Float (each declared by an edef).
NATIVE_FUNCTIONS = (*FUNCTION, STOP_GRADIENT)


def native_callee(name: str) -> Callee:
    return edef_callee(name, (FLOAT,), FLOAT, DEFAULT_EDEF_COST)


def native(name: str, x: Expr) -> Expr:
    """``(name x)``, a call of a library function of :data:`NATIVE_FUNCTIONS`."""
    return E.call(native_callee(name), x)


def float_operand(f: Any) -> Lowering:
    """An element-wise function of a tensor taken as Floats (an integer one converted first)."""
    return lambda c: unary(converted(as_tensor(c.args[0]), FLOAT), f)


def _gelu(c: Call) -> Tensor:
    """``x * 0.5 * (1 + erf(x / sqrt 2))``; with ``approximate="tanh"``,
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`` (torch's formulas)."""
    x = converted(as_tensor(c.args[0]), FLOAT)
    approximate = c.kwargs.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"approximate={approximate!r}")

    def exact(v: Expr) -> Expr:
        inner = native("erf", E.op(Op.MUL, v, E.const(1 / math.sqrt(2.0))))
        return E.op(Op.MUL, E.op(Op.MUL, v, E.const(0.5)), E.op(Op.ADD, E.const(1.0), inner))

    def tanh_form(v: Expr) -> Expr:
        cube = E.op(Op.MUL, E.op(Op.MUL, v, v), v)
        inner = E.op(Op.MUL, E.const(math.sqrt(2.0 / math.pi)), E.op(Op.ADD, v, E.op(Op.MUL, E.const(0.044715), cube)))
        return E.op(Op.MUL, E.op(Op.MUL, E.const(0.5), v), E.op(Op.ADD, E.const(1.0), E.op(Op.TANH, inner)))

    form = exact if approximate == "none" else tanh_form
    return unary(x, lambda e: c.block.share(e, form))


def _softplus(c: Call) -> Tensor:
    """``log1p(exp(beta x)) / beta``, or ``x`` where ``beta x > threshold`` (torch's formula)."""
    x = converted(as_tensor(c.args[0]), FLOAT)
    beta, threshold = float(c.arg(1, "beta", 1.0)), float(c.arg(2, "threshold", 20.0))

    def f(v: Expr) -> Expr:
        scaled = v if beta == 1.0 else E.op(Op.MUL, v, flit(beta))
        soft = native("log1p", E.op(Op.EXP, scaled))
        if beta != 1.0:
            soft = E.op(Op.DIV, soft, flit(beta))
        return E.op(Op.IF, E.op(Op.GT, scaled, flit(threshold)), v, soft)

    return unary(x, lambda e: c.block.share(e, f))


def _silu(c: Call) -> Tensor:
    x = converted(as_tensor(c.args[0]), FLOAT)
    return unary(x, lambda e: c.block.share(e, lambda v: E.op(Op.MUL, v, sigmoid(v))))


def _std(c: Call) -> Tensor:
    return unary(moments(c)[0], lambda e: E.op(Op.SQRT, e))


def _clamp(c: Call) -> Tensor:
    """``min(max(x, lo), hi)``: NaN stays NaN, as in torch."""
    x = as_tensor(c.args[0])
    lo, hi = c.arg(1, "min"), c.arg(2, "max")
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        raise Unsupported("tensor bounds")
    elem = c.elem

    def f(v: Expr) -> Expr:
        out = v
        if lo is not None:  # x < lo ? lo : x, so that a NaN x stays NaN
            out = E.op(Op.IF, E.op(Op.LT, out, literal_of(lo, elem)), literal_of(lo, elem), out)
        if hi is not None:
            out = c.block.share(
                out, lambda w: E.op(Op.IF, E.op(Op.GT, w, literal_of(hi, elem)), literal_of(hi, elem), w)
            )
        return out

    return unary(converted(x, elem), lambda e: c.block.share(e, f))


# -- joining -------------------------------------------------------------------------------------------
def _cat(c: Call) -> Tensor:
    """The pieces along ``dim``: an ``if`` on the index chooses the piece (pieces of size 0, and the
    1-d empty tensors torch lets through, are skipped)."""
    pieces = [converted(as_tensor(t), c.elem) for t in c.args[0]]
    rank = len(c.shape)
    d = dim_of(int(c.arg(1, "dim", 0)), rank)
    pieces = [t for t in pieces if t.rank == rank and t.shape[d] > 0]
    if not pieces:
        return Tensor(c.shape, lambda idx: literal_of(0, c.elem), cheap=True, elem=c.elem)
    starts = []
    s = 0
    for t in pieces:
        starts.append(s)
        s += t.shape[d]
    pieces = [c.block.cheap(t) for t in pieces] if len(pieces) > 1 else pieces

    def at(idx: Index) -> Expr:
        i = idx[d]
        var = i if i.op in (Op.VAR, Op.CONST) else None

        def pick(k: int, j: Expr) -> Expr:
            here = pieces[k].at((*idx[:d], iadd(j, ic(-starts[k])), *idx[d + 1 :]))
            if k == len(pieces) - 1:
                return here
            return E.op(Op.IF, E.op(Op.LT, j, ic(starts[k + 1])), here, pick(k + 1, j))

        return pick(0, i) if var is not None else c.block.share(i, lambda j: pick(0, j))

    return Tensor(c.shape, at, cheap=False, elem=c.elem)


def _stack(c: Call) -> Tensor:
    rank = len(c.shape)
    d = dim_of(int(c.arg(1, "dim", 0)), rank)
    pieces = [converted(as_tensor(t), c.elem) for t in c.args[0]]
    shape = (*c.shape[:d], 1, *c.shape[d + 1 :])
    lifted = [view(t, shape, lambda idx: (*idx[:d], *idx[d + 1 :])) for t in pieces]
    return _cat(Call(c.block, (lifted, d), {}, c.shape, c.elem))


# -- masks ---------------------------------------------------------------------------------------------
def _arange(c: Call) -> Tensor:
    """``start + i * step``: Integers for an integer dtype, Floats otherwise."""
    args = list(c.args)
    if len(args) == 1:
        start, step = 0, 1
    else:
        start, step = args[0], args[2] if len(args) > 2 else c.kwargs.get("step", 1)
    if c.elem is FLOAT:
        return Tensor(
            c.shape,
            lambda idx: E.op(
                Op.ADD, E.const(float(start)), E.op(Op.MUL, E.op(Op.TO_FLOAT, idx[0]), E.const(float(step)))
            ),
            cheap=False,
        )
    if not isinstance(start, int) or not isinstance(step, int):
        raise Unsupported("an integer arange with float bounds")
    return Tensor(c.shape, lambda idx: iadd(_imul(idx[0], step), ic(start)), cheap=True, elem=INTEGER)


def _imul(i: Expr, k: int) -> Expr:
    return i if k == 1 else E.op(Op.MUL, i, ic(k))


def _triangle(lower: bool) -> Lowering:
    """``tril``/``triu``: the element where ``j - i <= diagonal`` (``>=`` for triu), else 0."""

    def low(c: Call) -> Tensor:
        x = as_tensor(c.args[0])
        diagonal = int(c.arg(1, "diagonal", 0))
        if x.rank < 2:
            raise Unsupported(f"a tensor of rank {x.rank}")

        def at(idx: Index) -> Expr:
            offset = E.op(Op.SUB, idx[-1], idx[-2])
            keep = E.op(Op.LTE if lower else Op.GTE, offset, ic(diagonal))
            return E.op(Op.IF, keep, x.at(idx), literal_of(0, x.elem))

        return Tensor(x.shape, at, cheap=False, elem=x.elem)

    return low


def _masked_fill(c: Call) -> Tensor:
    """``where(mask, value, x)``."""
    x, mask, value = c.args[0], as_tensor(c.args[1]), c.args[2]
    if mask.elem is not BOOL:
        raise Unsupported("a mask that is not a Bool tensor")
    v = converted(as_tensor(value, c.elem), c.elem)
    return elementwise(
        c.block, c.shape, [mask, v, converted(as_tensor(x), c.elem)], lambda m, a, b: E.op(Op.IF, m, a, b), c.elem
    )


def logical(o: Op | None) -> Lowering:
    """``logical_not`` (``o`` None), ``logical_and``/``logical_or`` of tensors taken as Bools."""

    def low(c: Call) -> Tensor:
        ts = [converted(as_tensor(a), BOOL) for a in c.args[: 1 if o is None else 2]]
        if o is None:
            return unary_bool(ts[0])
        return elementwise(c.block, c.shape, ts, lambda a, b: E.op(o, a, b), BOOL)

    return low


def unary_bool(x: Tensor) -> Tensor:
    return Tensor(x.shape, lambda idx: E.op(Op.IF, x.at(idx), E.const(False), E.const(True)), cheap=False, elem=BOOL)


def _bitwise_not(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    if x.elem is not BOOL:
        raise Unsupported("bitwise_not of an integer tensor")
    return unary_bool(x)


def bitwise(o: Op) -> Lowering:
    """``&`` and ``|`` of Bool tensors (what ``mask_a | mask_b`` is)."""

    def low(c: Call) -> Tensor:
        ts = [as_tensor(a) for a in c.args[:2]]
        if any(t.elem is not BOOL for t in ts):
            raise Unsupported("bitwise arithmetic on integer tensors")
        return elementwise(c.block, c.shape, ts, lambda a, b: E.op(o, a, b), BOOL)

    return low


def _diagonal(c: Call) -> Tensor:
    """``diagonal(x, offset, dim1, dim2)``: a view, the diagonal's index last."""
    x = as_tensor(c.args[0])
    offset = int(c.arg(1, "offset", 0))
    d1, d2 = dim_of(int(c.arg(2, "dim1", 0)), x.rank), dim_of(int(c.arg(3, "dim2", 1)), x.rank)
    rest = [k for k in range(x.rank) if k not in (d1, d2)]

    def in_index(idx: Index) -> Index:
        full: list[Expr] = [ic(0)] * x.rank
        for k, v in zip(rest, idx[:-1], strict=True):
            full[k] = v
        j = idx[-1]
        full[d1] = iadd(j, ic(max(-offset, 0)))
        full[d2] = iadd(j, ic(max(offset, 0)))
        return tuple(full)

    return view(x, c.shape, in_index)


def _flip(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    dims = {dim_of(int(d), x.rank) for d in c.args[1]}

    def in_index(idx: Index) -> Index:
        return tuple(E.op(Op.SUB, ic(x.shape[k] - 1), v) if k in dims else v for k, v in enumerate(idx))

    return view(x, c.shape, in_index)


MATH_LOWERINGS: dict[str, Lowering] = {
    "gelu.default": _gelu,
    "softplus.default": _softplus,
    "silu.default": _silu,
    "std.correction": _std,
    "clamp.default": _clamp,
    "cat.default": _cat,
    "stack.default": _stack,
    "arange.default": _arange,
    "arange.start": _arange,
    "arange.start_step": _arange,
    "tril.default": _triangle(lower=True),
    "triu.default": _triangle(lower=False),
    "masked_fill.Scalar": _masked_fill,
    "masked_fill.Tensor": _masked_fill,
    "logical_not.default": logical(None),
    "bitwise_not.default": _bitwise_not,
    "diagonal.default": _diagonal,
    "flip.default": _flip,
}
