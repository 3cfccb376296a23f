"""Core ATen ops as Knossos code: one lowering per op, from :class:`~frontends.tensor.Tensor`
operands to a Tensor (docs/torch.md has the table).

A lowering sees a :class:`Call`: the block it may bind materialised tensors in, the op's arguments
(Tensors where the graph has tensors; numbers, lists and None as torch gives them) and the output
shape that torch's export recorded.  Element-wise ops and views stay lazy; products, convolutions and
ops that read an operand's elements more than once first make that operand cheap to read
(:meth:`LetBlock.cheap`).  A variant that cannot be expressed raises :class:`Unsupported`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from frontends.folds import tree_reduce
from frontends.tensor import (
    Index,
    LetBlock,
    Tensor,
    broadcast_index,
    broadcasts,
    clamped,
    converted,
    filled,
    flit,
    iadd,
    ic,
    imul,
    index_div,
    index_in_range,
    literal_of,
    reshape_index,
    scalar,
    view,
)
from knossos import expr as E
from knossos.callee import edef_callee
from knossos.cost import DEFAULT_EDEF_COST
from knossos.expr import Expr
from knossos.natives import STOP_GRADIENT
from knossos.ops import Op
from knossos.types import BOOL, FLOAT, INTEGER, Type


class Unsupported(Exception):
    """An op, or a variant of one (an argument, a dtype), that has no lowering."""


@dataclass
class Call:
    block: LetBlock
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    shape: tuple[int, ...]
    #: The element type of the (first) result: Float, Integer or Bool, from torch's dtype.
    elem: Type = FLOAT

    def arg(self, k: int, name: str, default: Any = None) -> Any:
        if k < len(self.args):
            return self.args[k]
        return self.kwargs.get(name, default)


Lowering = Callable[[Call], Tensor]


def as_tensor(x: Any, elem: Type = FLOAT) -> Tensor:
    """A Tensor, or a Python number as a 0-d one: an ``int`` an Integer where ``elem`` is, a ``bool``
    a Bool."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, bool):
        return scalar(x, BOOL)
    if not isinstance(x, int | float):
        raise Unsupported(f"an operand of type {type(x).__name__}")
    return scalar(x, INTEGER if elem is INTEGER and isinstance(x, int) else FLOAT)


def dim_of(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


# -- element-wise ------------------------------------------------------------------------------------
def unary(x: Tensor, f: Callable[[Expr], Expr], elem: Type = FLOAT) -> Tensor:
    return Tensor(x.shape, lambda idx: f(x.at(idx)), cheap=False, elem=elem, sums=x.sums)


def elementwise(
    block: LetBlock,
    shape: tuple[int, ...],
    operands: Sequence[Any],
    f: Callable[..., Expr],
    elem: Type = FLOAT,
    operand_elem: Type | None = None,
) -> Tensor:
    """``f`` of the operands' elements, broadcast to ``shape``; an operand read more than once per
    element of its own (broadcast, or repeated) is made cheap first.  With ``operand_elem``, the
    operands are converted to that element type first (torch's type promotion)."""
    ts = [as_tensor(x, operand_elem or FLOAT) for x in operands]
    if operand_elem is not None:
        ts = [converted(t, operand_elem) for t in ts]
    ts = [block.cheap(t) if broadcasts(t.shape, shape) or sum(u is t for u in ts) > 1 else t for t in ts]
    maps = [broadcast_index(t.shape, shape) for t in ts]

    def at(idx: Index) -> Expr:
        return f(*(t.at(m(idx)) for t, m in zip(ts, maps, strict=True)))

    return Tensor(shape, at, cheap=False, elem=elem, sums=any(t.sums for t in ts))


def _op(o: Op) -> Callable[..., Expr]:
    return lambda *xs: E.op(o, *xs)


def _float(x: Tensor) -> Tensor:
    """``x`` with Float elements (torch's float ops promote Integer and Bool tensors)."""
    return converted(x, FLOAT)


def promoted(operands: Sequence[Any]) -> Type:
    """The element type torch computes a comparison of these operands in: Float if one is, else
    Integer if one is, else Bool (a Python number counts as its own type only against a Bool)."""
    elems = [x.elem for x in operands if isinstance(x, Tensor)]
    numbers = [x for x in operands if not isinstance(x, Tensor)]
    if FLOAT in elems or any(isinstance(x, float) for x in numbers):
        return FLOAT
    if INTEGER in elems or any(isinstance(x, int) and not isinstance(x, bool) for x in numbers):
        return INTEGER
    return BOOL


def binary(o: Op) -> Lowering:
    def lower(c: Call) -> Tensor:
        a, b = c.args[0], c.args[1]
        if c.elem is BOOL:
            raise Unsupported("arithmetic with a Bool result")
        alpha = c.kwargs.get("alpha", 1)
        if alpha != 1:
            b = elementwise(
                c.block, as_tensor(b).shape, [b], lambda x: E.op(Op.MUL, literal_of(alpha, c.elem), x), c.elem, c.elem
            )
        return elementwise(c.block, c.shape, [a, b], _op(o), c.elem, c.elem)

    return lower


def float_unary(f: Callable[[Expr], Expr]) -> Lowering:
    """An op of Floats (torch gives a float tensor of an integer one: converted first)."""

    def lower(c: Call) -> Tensor:
        if c.elem is not FLOAT:
            raise Unsupported("an integer result")
        return unary(_float(as_tensor(c.args[0])), f)

    return lower


def signed(o: Op) -> Lowering:
    """``neg``/``abs``, which keep an integer tensor's dtype."""

    def lower(c: Call) -> Tensor:
        x = as_tensor(c.args[0])
        return unary(converted(x, c.elem), _op(o), c.elem)

    return lower


def sigmoid(x: Expr) -> Expr:
    return E.op(Op.DIV, E.const(1.0), E.op(Op.ADD, E.const(1.0), E.op(Op.EXP, E.op(Op.NEG, x))))


def _pow_scalar(c: Call) -> Tensor:
    x, p = as_tensor(c.args[0]), c.args[1]
    if not isinstance(p, int | float) or isinstance(p, bool):
        raise Unsupported("a tensor exponent of pow.Tensor_Scalar")
    if p == 1:
        return x
    if p == 2:
        return unary(x, lambda e: c.block.share(e, lambda v: E.op(Op.MUL, v, v)))
    return unary(x, lambda e: E.op(Op.POW, e, flit(p)))


def compare(o: Op) -> Lowering:
    def lower(c: Call) -> Tensor:
        operands = [c.args[0], c.args[1]]
        common = promoted(operands)
        if common is BOOL and o not in (Op.EQ, Op.NE):
            common = INTEGER  # torch orders Bools as 0 and 1
        return elementwise(c.block, c.shape, operands, _op(o), BOOL, common)

    return lower


def _where(c: Call) -> Tensor:
    cond = c.args[0]
    if not isinstance(cond, Tensor) or cond.elem is not BOOL:
        raise Unsupported("a condition that is not a Bool tensor")
    common = c.elem
    return elementwise(
        c.block,
        c.shape,
        [cond, converted(as_tensor(c.args[1], common), common), converted(as_tensor(c.args[2], common), common)],
        _op(Op.IF),
        common,
    )


def nan_max(block: LetBlock, a: Expr, b: Expr) -> Expr:
    """``max(a, b)``, NaN if either is, as torch's ``maximum`` and ``amax`` are: the language's
    ``(max a b)`` is ``a`` unless ``a < b``, so it keeps a NaN ``a`` but not a NaN ``b``."""
    # both read before the branch: a read inside one is a cotangent as large as the whole vector
    return block.share(a, lambda u: block.share(b, lambda v: E.op(Op.IF, E.op(Op.NE, v, v), v, E.op(Op.MAX, u, v))))


def nan_min(block: LetBlock, a: Expr, b: Expr) -> Expr:
    """``min(a, b)``, NaN if either is: ``b`` where ``b < a`` or ``b`` is NaN, else ``a``."""
    return block.share(
        a, lambda u: block.share(b, lambda v: E.op(Op.IF, E.op(Op.OR, E.op(Op.LT, v, u), E.op(Op.NE, v, v)), v, u))
    )


# -- reductions --------------------------------------------------------------------------------------
def reduced_dims(x: Tensor, dims: Any) -> list[int]:
    if dims is None or (isinstance(dims, list | tuple) and len(dims) == 0):
        return list(range(x.rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({dim_of(int(d), x.rank) for d in dims})


def _in_index(x: Tensor, red: list[int], keepdim: bool, idx: Index, fill: dict[int, Expr]) -> Index:
    out: list[Expr] = []
    k = 0
    for d in range(x.rank):
        if d in fill:
            out.append(fill[d])
            if keepdim:
                k += 1
        else:
            out.append(idx[k])
            k += 1
    return tuple(out)


def sum_over(block: LetBlock, x: Tensor, red: list[int], keepdim: bool, shape: tuple[int, ...]) -> Tensor:
    """The sum over ``red``: Floats, or Integers (a Bool tensor counts its Trues, as torch does)."""
    x = x if x.elem is FLOAT else converted(x, INTEGER)

    def at(idx: Index) -> Expr:
        js = {d: block.index_var() for d in red}
        body = x.at(_in_index(x, red, keepdim, idx, js))
        for d in reversed(red):
            body = E.sumbuild(ic(x.shape[d]), js[d], body)
        return body

    return Tensor(shape, at, cheap=False, elem=x.elem, sums=True)


def count(x: Tensor, red: list[int]) -> int:
    n = 1
    for d in red:
        n *= x.shape[d]
    return n


def amax_over(block: LetBlock, x: Tensor, red: list[int], keepdim: bool, shape: tuple[int, ...]) -> Tensor:
    """The largest element over ``red`` (Floats, NaN if one is; or Integers): one dimension after the
    other, each a few loops of small trees (:func:`frontends.folds.tree_reduce`), not one tree over
    every element, so the program's size does not grow with the dimension's."""
    x = block.cheap(x if x.elem is INTEGER else _float(x))
    if count(x, red) == 0:
        raise Unsupported("amax over no elements")

    def pick(a: Expr, b: Expr) -> Expr:
        return E.op(Op.MAX, a, b) if x.elem is INTEGER else nan_max(block, a, b)

    for k, d in enumerate(red):
        x = tree_reduce(block, x, d, pick, "max")
        if k < len(red) - 1:  # the next dimension's levels read each element several times
            x = block.materialise(x, "max")
    kept = tuple(1 if d in red else n for d, n in enumerate(x.shape))
    return x if keepdim else view(x, shape, reshape_index(kept, shape))


def amax_split(block: LetBlock, x: Tensor, red: list[int], keepdim: bool, shape: tuple[int, ...]) -> Tensor:
    """``amax`` with torch's gradient at a tie, shared evenly by the equal elements (the loops of
    :func:`amax_over` give it to the first): ``top + sum((x - top) / ties where x == top)``, whose
    every term is 0, so the value is ``top``'s (where it is finite; an infinite or NaN ``top`` is
    itself), while each tied element's derivative is ``1 / ties`` and ``top``'s cancels."""
    if x.elem is INTEGER:
        return amax_over(block, x, red, keepdim, shape)
    x = block.cheap(_float(x))
    kept = tuple(1 if d in red else n for d, n in enumerate(x.shape))
    top = block.materialise(amax_over(block, x, red, True, kept), "max")
    hits = elementwise(block, x.shape, [x, top], _op(Op.EQ), BOOL)
    ties = block.materialise(unary(sum_over(block, hits, red, True, kept), _op(Op.TO_FLOAT)), "ties")

    def share(a: Expr, t: Expr, n: Expr) -> Expr:
        return E.op(Op.IF, E.op(Op.EQ, a, t), E.op(Op.DIV, E.op(Op.SUB, a, t), n), flit(0.0))

    shares = sum_over(block, elementwise(block, x.shape, [x, top, ties], share), red, True, kept)

    def value(t: Expr, v: Expr) -> Expr:
        return E.op(Op.IF, E.op(Op.EQ, E.op(Op.SUB, t, t), flit(0.0)), E.op(Op.ADD, t, v), t)

    out = elementwise(block, kept, [top, shares], value)
    return out if keepdim else view(out, shape, reshape_index(kept, shape))


def _sum(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    if c.kwargs.get("dtype") is not None:
        raise Unsupported("sum with a dtype")
    return sum_over(c.block, x, reduced_dims(x, c.arg(1, "dim")), bool(c.arg(2, "keepdim", False)), c.shape)


def _mean(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    if c.kwargs.get("dtype") is not None:
        raise Unsupported("mean with a dtype")
    red = reduced_dims(x, c.arg(1, "dim"))
    total = sum_over(c.block, x, red, bool(c.arg(2, "keepdim", False)), c.shape)
    n = float(count(x, red))
    return unary(total, lambda e: E.op(Op.DIV, e, E.const(n)))


def _amax(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    return amax_split(c.block, x, reduced_dims(x, c.arg(1, "dim")), bool(c.arg(2, "keepdim", False)), c.shape)


def _amin(c: Call) -> Tensor:
    """``amin`` as ``-amax(-x)``."""
    x = as_tensor(c.args[0])
    x = x if x.elem is INTEGER else _float(x)
    negated = c.block.materialise(unary(x, lambda e: E.op(Op.NEG, e), x.elem), "neg")
    red, keepdim = reduced_dims(x, c.arg(1, "dim")), bool(c.arg(2, "keepdim", False))
    return unary(amax_split(c.block, negated, red, keepdim, c.shape), lambda e: E.op(Op.NEG, e), x.elem)


def moments(c: Call) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` of ``var``/``var_mean.correction`` (the correction 1 unless given)."""
    x = _float(as_tensor(c.args[0]))
    correction = c.kwargs.get("correction")
    corr = 1.0 if correction is None else float(correction)
    return moments_over(c.block, x, reduced_dims(x, c.arg(1, "dim")), corr, bool(c.kwargs.get("keepdim", False)))


def moments_over(block: LetBlock, x: Tensor, red: list[int], correction: float, keepdim: bool) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` over ``red``: ``sum((x - mean)^2) / (n - correction)``, the mean computed first,
    as torch does (not the one-pass ``E[x^2] - E[x]^2``, which loses digits)."""
    x = block.cheap(_float(x))
    kept = tuple(1 if d in red else k for d, k in enumerate(x.shape))
    shape = kept if keepdim else tuple(k for d, k in enumerate(x.shape) if d not in red)
    n = float(count(x, red))
    mean = block.materialise(unary(sum_over(block, x, red, True, kept), lambda e: E.op(Op.DIV, e, E.const(n))), "mean")

    def square(a: Expr, b: Expr) -> Expr:
        return block.share(E.op(Op.SUB, a, b), lambda v: E.op(Op.MUL, v, v))

    dev = elementwise(block, x.shape, [x, mean], square)
    denominator = E.const(n - correction)
    var = unary(sum_over(block, dev, red, keepdim, shape), lambda e: E.op(Op.DIV, e, denominator))
    return var, (mean if keepdim else view(mean, shape, reshape_index(kept, shape)))


def held(x: Tensor) -> Tensor:
    """``x`` through ``stop_gradient`` (:data:`knossos.natives.STOP_GRADIENT`): its value, derivative zero."""
    callee = edef_callee(STOP_GRADIENT, (FLOAT,), FLOAT, DEFAULT_EDEF_COST)
    return unary(x, lambda e: E.call(callee, e))


def softmax(block: LetBlock, x: Tensor, dim: int, log: bool) -> Tensor:
    """torch's decomposition: ``exp(x - max) / sum(exp(x - max))``, or ``(x - max) - log(sum(exp(x - max)))``.
    The result does not depend on the shift ``max``, so its derivative through it is zero: it is held
    (:func:`held`), as torch's backward formula does, and the reverse pass never enters its loops."""
    x = block.cheap(_float(x))
    red = [dim_of(dim, x.rank)]
    kept = tuple(1 if d in red else n for d, n in enumerate(x.shape))
    top = block.materialise(held(amax_over(block, x, red, True, kept)), "max")
    shifted = elementwise(block, x.shape, [x, top], _op(Op.SUB))
    if log:
        shifted = block.materialise(shifted, "shifted")
        total = sum_over(block, unary(shifted, _op(Op.EXP)), red, True, kept)
        return elementwise(block, x.shape, [shifted, unary(total, _op(Op.LOG))], _op(Op.SUB))
    exps = block.materialise(unary(shifted, _op(Op.EXP)), "exp")
    total = block.materialise(sum_over(block, exps, red, True, kept), "total")
    return elementwise(block, x.shape, [exps, total], _op(Op.DIV))


def _softmax(log: bool) -> Lowering:
    return lambda c: softmax(c.block, as_tensor(c.args[0]), int(c.args[1]), log)


# -- products ----------------------------------------------------------------------------------------
def _contract(block: LetBlock, k: int, shape: tuple[int, ...], term: Callable[[Index, Expr], Expr]) -> Tensor:
    """``at(idx) = sumbuild k (lam j (term idx j))``."""

    def at(idx: Index) -> Expr:
        var = block.index_var()
        return E.sumbuild(ic(k), var, term(idx, var))

    return Tensor(shape, at, cheap=False, sums=True)


def _operands(c: Call, ranks: tuple[int, ...]) -> list[Tensor]:
    ts = [c.block.cheap(_float(as_tensor(a))) for a in c.args[: len(ranks)]]
    for t, r in zip(ts, ranks, strict=True):
        if t.rank != r:
            raise Unsupported(f"an operand of rank {t.rank} (expected {r})")
    return ts


def matmul(block: LetBlock, a: Tensor, b: Tensor) -> Tensor:
    return _contract(
        block, a.shape[1], (a.shape[0], b.shape[1]), lambda idx, j: E.op(Op.MUL, a.at((idx[0], j)), b.at((j, idx[1])))
    )


def _mm(c: Call) -> Tensor:
    a, b = _operands(c, (2, 2))
    return matmul(c.block, a, b)


def _bmm(c: Call) -> Tensor:
    a, b = _operands(c, (3, 3))
    return _contract(
        c.block,
        a.shape[2],
        c.shape,
        lambda idx, j: E.op(Op.MUL, a.at((idx[0], idx[1], j)), b.at((idx[0], j, idx[2]))),
    )


def _mv(c: Call) -> Tensor:
    a, v = _operands(c, (2, 1))
    return _contract(c.block, a.shape[1], c.shape, lambda idx, j: E.op(Op.MUL, a.at((idx[0], j)), v.at((j,))))


def _dot(c: Call) -> Tensor:
    a, b = _operands(c, (1, 1))
    return _contract(c.block, a.shape[0], (), lambda idx, j: E.op(Op.MUL, a.at((j,)), b.at((j,))))


def _scaled(block: LetBlock, x: Any, k: Any) -> Any:
    if k == 1:
        return x
    return elementwise(block, as_tensor(x).shape, [x], lambda e: E.op(Op.MUL, flit(k), e))


def _addmm(c: Call) -> Tensor:
    bias = c.args[0]
    a, b = (c.block.cheap(_float(as_tensor(t))) for t in c.args[1:3])
    beta, alpha = c.kwargs.get("beta", 1), c.kwargs.get("alpha", 1)
    product = _scaled(c.block, matmul(c.block, a, b), alpha)
    if beta == 0:
        return product  # type: ignore[no-any-return]
    return elementwise(c.block, c.shape, [_scaled(c.block, bias, beta), product], _op(Op.ADD))


def _convolution(c: Call) -> Tensor:
    x, w = (c.block.cheap(_float(as_tensor(t))) for t in c.args[:2])
    bias = c.args[2]
    stride, padding, dilation, transposed, _, groups = c.args[3:9]
    if transposed:
        raise Unsupported("a transposed convolution")
    spatial = x.rank - 2
    if spatial < 1 or w.rank != x.rank or len(c.shape) != x.rank:
        raise Unsupported(f"a convolution of a rank-{x.rank} input (give batch, channels and spatial dimensions)")
    per_group_in, per_group_out = w.shape[1], w.shape[0] // groups
    kernel = w.shape[2:]
    size = x.shape[2:]

    def term(idx: Index) -> Expr:
        n, o, ts = idx[0], idx[1], idx[2:]
        cc = c.block.index_var()
        ks = [c.block.index_var() for _ in kernel]
        chan = cc if groups == 1 else iadd(imul(index_div(o, per_group_out), per_group_in), cc)
        pos = [
            iadd(iadd(imul(t, stride[d]), imul(k, dilation[d])), ic(-padding[d]))
            for d, (t, k) in enumerate(zip(ts, ks, strict=True))
        ]
        guards = [
            g for g in (index_in_range(p, size[d]) if padding[d] else None for d, p in enumerate(pos)) if g is not None
        ]
        if guards:
            # the reads before the test, at a position clamped into the input (see clamped)
            cond = guards[0]
            for g in guards[1:]:
                cond = E.op(Op.AND, cond, g)
            inside = [clamped(p, size[d]) if padding[d] else p for d, p in enumerate(pos)]
            body = c.block.share(
                x.at((n, chan, *inside)),
                lambda xv: c.block.share(
                    w.at((o, cc, *ks)), lambda wv: E.op(Op.IF, cond, E.op(Op.MUL, xv, wv), E.const(0.0))
                ),
            )
        else:
            body = E.op(Op.MUL, x.at((n, chan, *pos)), w.at((o, cc, *ks)))
        for k, n_k in zip(reversed(ks), reversed(kernel), strict=True):
            body = E.sumbuild(ic(n_k), k, body)
        return E.sumbuild(ic(per_group_in), cc, body)

    out = Tensor(c.shape, term, cheap=False, sums=True)
    if bias is None:
        return out
    b = c.block.cheap(as_tensor(bias))
    return Tensor(c.shape, lambda idx: E.op(Op.ADD, b.at((idx[1],)), out.at(idx)), cheap=False, sums=True)


# -- views -------------------------------------------------------------------------------------------
def _reshape(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    return view(x, c.shape, reshape_index(x.shape, c.shape), onto=True)


def _permute(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    dims = [dim_of(int(d), x.rank) for d in c.args[1]]

    def in_index(idx: Index) -> Index:
        out = [ic(0)] * x.rank
        for k, d in enumerate(dims):
            out[d] = idx[k]
        return tuple(out)

    return view(x, c.shape, in_index, onto=True)


def _expand(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    spread = broadcasts(x.shape, c.shape)
    if spread:
        x = c.block.cheap(x)
    return view(x, c.shape, broadcast_index(x.shape, c.shape), onto=not spread)


def _slice(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    d = dim_of(int(c.arg(1, "dim", 0)), x.rank)
    start, step = c.arg(2, "start"), int(c.arg(4, "step", 1))
    n = x.shape[d]
    s = 0 if start is None else int(start)
    s = max(0, min(n, s + n if s < 0 else s))

    def in_index(idx: Index) -> Index:
        return (*idx[:d], iadd(imul(idx[d], step), ic(s)), *idx[d + 1 :])

    return view(x, c.shape, in_index)


def _select(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    d = dim_of(int(c.args[1]), x.rank)
    i = int(c.args[2])
    i = i + x.shape[d] if i < 0 else i
    return view(x, c.shape, lambda idx: (*idx[:d], ic(i), *idx[d:]))


def _same(c: Call) -> Tensor:
    return as_tensor(c.args[0])


def to_copy(c: Call) -> Tensor:
    """A copy, or a conversion between the dtypes translated: float32 and float64 are both Floats
    (computed in double), an integer tensor to a float one is ``to_float``, a Bool one ``if``."""
    x = as_tensor(c.args[0])
    if x.elem is FLOAT and c.elem is not FLOAT:
        raise Unsupported(f"a conversion of a float tensor to {c.kwargs.get('dtype')} (torch truncates)")
    return converted(x, c.elem)


def _full(c: Call) -> Tensor:
    value = c.args[1]
    if not isinstance(value, int | float):
        raise Unsupported(f"a fill value of type {type(value).__name__}")
    return filled(c.shape, value, c.elem)


def _empty(c: Call) -> Tensor:
    """An uninitialised tensor (``empty_like``, before a ``fill_``): zeros, since torch's values are
    whatever memory held (reading them is the function's bug, and the check sees it)."""
    return filled(c.shape, 0, c.elem)


def _fill(c: Call) -> Tensor:
    value = c.args[1]
    if isinstance(value, Tensor):
        if value.rank:
            raise Unsupported("a fill value that is not 0-d")
        v = converted(value, c.elem)
        return Tensor(c.shape, lambda idx: v.at(()), cheap=v.cheap, elem=c.elem)
    return filled(c.shape, value, c.elem)


def _scalar_tensor(c: Call) -> Tensor:
    return filled((), c.args[0], c.elem)


#: The aten ops lowered here; those that are one value op of the language element-wise are lowered
#: from its row (frontends.aten_ops).
LOWERINGS: dict[str, Lowering] = {
    # element-wise arithmetic, broadcasting
    "maximum.default": lambda c: elementwise(
        c.block, c.shape, [c.args[0], c.args[1]], lambda a, b: nan_max(c.block, a, b), c.elem, c.elem
    ),
    "minimum.default": lambda c: elementwise(
        c.block, c.shape, [c.args[0], c.args[1]], lambda a, b: nan_min(c.block, a, b), c.elem, c.elem
    ),
    "pow.Tensor_Scalar": _pow_scalar,
    "sigmoid.default": float_unary(sigmoid),
    "relu.default": float_unary(lambda x: E.op(Op.MAX, x, E.const(0.0))),
    "rsqrt.default": float_unary(lambda x: E.op(Op.DIV, E.const(1.0), E.op(Op.SQRT, x))),
    "reciprocal.default": float_unary(lambda x: E.op(Op.DIV, E.const(1.0), x)),
    # comparisons and where
    "where.self": _where,
    # reductions
    "sum.default": _sum,
    "sum.dim_IntList": _sum,
    "mean.default": _mean,
    "mean.dim": _mean,
    "amax.default": _amax,
    "max.default": _amax,
    "amin.default": _amin,
    "min.default": _amin,
    "var.correction": lambda c: moments(c)[0],
    "_softmax.default": _softmax(log=False),
    "_log_softmax.default": _softmax(log=True),
    # products
    "mm.default": _mm,
    "bmm.default": _bmm,
    "mv.default": _mv,
    "dot.default": _dot,
    "addmm.default": _addmm,
    "convolution.default": _convolution,
    # views and copies
    "view.default": _reshape,
    "_unsafe_view.default": _reshape,
    "reshape.default": _reshape,
    "squeeze.dim": _reshape,
    "squeeze.dims": _reshape,
    "squeeze.default": _reshape,
    "unsqueeze.default": _reshape,
    "permute.default": _permute,
    "expand.default": _expand,
    "slice.Tensor": _slice,
    "select.int": _select,
    "clone.default": _same,
    "alias.default": _same,
    "lift_fresh_copy.default": _same,
    # constants
    "full.default": _full,
    "full_like.default": _full,
    "scalar_tensor.default": _scalar_tensor,
    "empty.memory_format": _empty,
    "empty_like.default": _empty,
    "empty_permuted.default": _empty,
    "fill.Scalar": _fill,
    "fill.Tensor": _fill,
}
