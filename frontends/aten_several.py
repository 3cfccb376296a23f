"""Core ATen ops with several results (``split``, ``max.dim``, ``var_mean``...).

A lowering here gives one entry per result of the op, in torch's order: a :class:`Tensor`, or None
for a result that has no lowering (``max.dim``'s indices: an int64 tensor, refused where it is used).
The tracer reads each result through an ``operator.getitem`` node, as ``torch.export`` does, so an op
whose results are not all expressible is refused only when the function uses the missing one.
Ops with several results and no lowering here (``sort``, ``topk``, ``cummax``, ``kthvalue``...) are
refused by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from frontends.aten import (
    Call,
    Lowering,
    Unsupported,
    amax_over,
    as_tensor,
    dim_of,
    elementwise,
    moments,
    moments_over,
    unary,
)
from frontends.aten_composite import batch_norm_batch_stats, group_norm, lstm_cell, max_pool
from frontends.aten_index import nll_loss
from frontends.folds import tree_reduce
from frontends.tensor import Index, LetBlock, Tensor, converted, flit, iadd, ic, reshape_index, view
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER

Results = Sequence[Tensor | None]
SeveralLowering = Callable[[Call], Results]


def _pieces(block: LetBlock, x: Tensor, sizes: Sequence[int], dim: int) -> list[Tensor]:
    """``x`` cut along ``dim`` into consecutive pieces of these sizes (views).  Where there are several
    and ``x`` is computed (a product: a GRU cell's three gates from one ``linear``), it is computed
    once, whole, and the pieces read it: views of it would compute each piece's elements on their
    own, reading the weights' rows at an offset, and a product whose rows are read so (and its
    gradient's, one-hots at an offset) reaches no blocked loop nest."""
    d = dim_of(dim, x.rank)
    if len(sizes) > 1:
        x = block.cheap(x, "piece")
    if sum(sizes) != x.shape[d] or any(n < 0 for n in sizes):
        raise Unsupported(f"pieces of sizes {list(sizes)} of a dimension of size {x.shape[d]}")
    out: list[Tensor] = []
    start = 0
    for n in sizes:

        def in_index(idx: Index, s: int = start) -> Index:
            return (*idx[:d], iadd(idx[d], ic(s)), *idx[d + 1 :])

        out.append(view(x, (*x.shape[:d], n, *x.shape[d + 1 :]), in_index))
        start += n
    return out


def _split(c: Call) -> Results:
    x = as_tensor(c.args[0])
    size, dim = int(c.arg(1, "split_size")), int(c.arg(2, "dim", 0))
    n = x.shape[dim_of(dim, x.rank)]
    if size <= 0:
        raise Unsupported(f"a split size of {size}")
    return _pieces(c.block, x, [min(size, n - s) for s in range(0, n, size)] or [0], dim)


def _split_with_sizes(c: Call) -> Results:
    x = as_tensor(c.args[0])
    return _pieces(c.block, x, [int(n) for n in c.arg(1, "split_sizes")], int(c.arg(2, "dim", 0)))


def _extremum(largest: bool) -> SeveralLowering:
    """``max.dim``/``min.dim``: the values (``amax``; ``min`` as ``-amax(-x)``) and their indices
    (:func:`arg_extreme`)."""

    def lower(c: Call) -> Results:
        x = c.block.cheap(_numbers(as_tensor(c.args[0])))
        d, keepdim = dim_of(int(c.args[1]), x.rank), bool(c.arg(2, "keepdim", False))
        values = c.block.materialise(extreme(c.block, x, d, keepdim, c.shape, largest), "extreme")
        return (values, arg_extreme(c.block, x, d, keepdim, values))

    return lower


def extreme(block: LetBlock, x: Tensor, d: int, keepdim: bool, shape: tuple[int, ...], largest: bool) -> Tensor:
    if largest:
        return amax_over(block, x, [d], keepdim, shape)
    negated = block.materialise(unary(x, lambda e: E.op(Op.NEG, e), x.elem), "neg")
    return unary(amax_over(block, negated, [d], keepdim, shape), lambda e: E.op(Op.NEG, e), x.elem)


def arg_extreme(
    block: LetBlock,
    x: Tensor,
    d: int,
    keepdim: bool,
    values: Tensor,
    allowed: Callable[[Index, Expr], Expr] | None = None,
) -> Tensor:
    """The first index along ``d`` where ``x`` is its extreme ``values`` (a NaN's, where the extreme is
    NaN, as torch): the Integer ``min`` over the matching indices (those ``allowed``, a Bool of the
    output index and the index along ``d``, where given), reduced in loops (:func:`tree_reduce`)."""
    n = x.shape[d]
    kept = tuple(1 if k == d else m for k, m in enumerate(x.shape))

    def out_index(idx: Index) -> Index:  # values' index of x's element at idx
        return (*idx[:d], ic(0), *idx[d + 1 :]) if keepdim else (*idx[:d], *idx[d + 1 :])

    def leaf(idx: Index) -> Expr:
        xk, v, k = x.at(idx), values.at(out_index(idx)), idx[d]
        same = E.op(Op.OR, E.op(Op.EQ, xk, v), E.op(Op.AND, E.op(Op.NE, v, v), E.op(Op.NE, xk, xk)))
        if allowed is not None:
            same = E.op(Op.AND, allowed(out_index(idx), k), same)
        return E.op(Op.IF, same, k, ic(n))

    flags = Tensor(x.shape, leaf, cheap=False, elem=INTEGER)  # each read once: left lazy
    first = tree_reduce(block, flags, d, lambda a, b: _imin(block, a, b), "first")
    return first if keepdim else view(first, values.shape, reshape_index(kept, values.shape))


#: The largest ``k`` of ``topk`` (each of the k rounds reads the whole dimension).
MAX_TOPK = 16


def _topk(c: Call) -> Results:
    """``topk(x, k, dim, largest, sorted)``: k rounds of the extreme over the elements not chosen
    yet (those become -inf, and are never an index again), so ties and NaNs (the largest, as in
    torch) come out as torch's; the values and the indices."""
    x = c.block.cheap(_numbers(as_tensor(c.args[0])))
    k, d = int(c.arg(1, "k")), dim_of(int(c.arg(2, "dim", -1)), x.rank)
    largest, ordered = bool(c.arg(3, "largest", True)), bool(c.arg(4, "sorted", True))
    if not ordered and k > 1:
        raise Unsupported("sorted=False (torch's order is unspecified)")
    if k > MAX_TOPK:
        raise Unsupported(f"k={k} (at most {MAX_TOPK})")
    bottom = E.const(-(2**63)) if x.elem is INTEGER else flit(float("-inf"))
    source = x
    if not largest:  # the largest of -x, a NaN (torch's largest) the smallest of all
        x = c.block.materialise(
            unary(
                x, lambda e: c.block.share(e, lambda v: E.op(Op.IF, E.op(Op.NE, v, v), bottom, E.op(Op.NEG, v))), x.elem
            ),
            "neg",
        )
    kept = tuple(1 if j == d else n for j, n in enumerate(x.shape))
    chosen: list[Tensor] = []
    for _ in range(k):
        before = list(chosen)

        def taken(idx: Index, j: Expr, before: list[Tensor] = before) -> Expr | None:
            at_kept = (*idx[:d], ic(0), *idx[d + 1 :])
            conds = [E.op(Op.EQ, j, t.at(at_kept)) for t in before]
            if not conds:
                return None
            out = conds[0]
            for cond in conds[1:]:
                out = E.op(Op.OR, out, cond)
            return out

        def masked_at(idx: Index, taken: Any = taken) -> Expr:
            cond = taken(idx, idx[d])
            return x.at(idx) if cond is None else E.op(Op.IF, cond, bottom, x.at(idx))

        masked = c.block.materialise(Tensor(x.shape, masked_at, cheap=False, elem=x.elem), "rest")
        top = c.block.materialise(amax_over(c.block, masked, [d], True, kept), "top")

        def allowed(idx: Index, j: Expr, taken: Any = taken) -> Expr:
            cond = taken(idx, j)
            return E.const(True) if cond is None else E.op(Op.IF, cond, E.const(False), E.const(True))

        chosen.append(c.block.materialise(arg_extreme(c.block, masked, d, True, top, allowed), "top_index"))

    def index_at(idx: Index) -> Expr:
        at_kept = (*idx[:d], ic(0), *idx[d + 1 :])

        def pick(r: int) -> Expr:
            if r == len(chosen) - 1:
                return chosen[r].at(at_kept)
            return E.op(Op.IF, E.op(Op.EQ, idx[d], ic(r)), chosen[r].at(at_kept), pick(r + 1))

        return pick(0)

    indices = c.block.materialise(Tensor(c.shape, index_at, cheap=False, elem=INTEGER), "topk_index")
    values = Tensor(
        c.shape, lambda idx: source.at((*idx[:d], indices.at(idx), *idx[d + 1 :])), cheap=False, elem=source.elem
    )
    return (values, indices)


def _sort(c: Call) -> Results:
    """``sort(x, dim, descending)`` (``stable`` too) of at most :data:`MAX_TOPK` elements: ``topk``
    of all of them, which keeps equal elements in their order (a stable sort)."""
    x = as_tensor(c.args[0])
    stable = "stable" in c.kwargs
    dim = int(c.kwargs.get("dim", c.args[1] if len(c.args) > 1 and not stable else -1))
    descending = bool(c.kwargs.get("descending", c.args[2] if len(c.args) > 2 and not stable else False))
    n = x.shape[dim_of(dim, x.rank)] if x.rank else 1
    if n > MAX_TOPK:
        raise Unsupported(f"a sort of {n} elements (at most {MAX_TOPK}: it is unrolled)")
    return _topk(Call(c.block, (x, n, dim, descending, True), {}, c.shape, c.elem))


def _numbers(x: Tensor) -> Tensor:
    """``x`` with Integer elements kept, Bools made Floats."""
    return x if x.elem is INTEGER else converted(x, FLOAT)


def _imin(block: LetBlock, a: Expr, b: Expr) -> Expr:
    """The smaller of two Integers (the earlier index)."""
    return block.share(a, lambda u: block.share(b, lambda w: E.op(Op.IF, E.op(Op.LTE, u, w), u, w)))


def _argmax(largest: bool) -> Lowering:
    """``argmax``/``argmin`` along a dimension (over all elements: refused)."""

    def lower(c: Call) -> Tensor:
        x = c.block.cheap(_numbers(as_tensor(c.args[0])))
        dim = c.arg(1, "dim")
        if dim is None:
            raise Unsupported("an argmax over all elements (give a dimension)")
        d, keepdim = dim_of(int(dim), x.rank), bool(c.arg(2, "keepdim", False))
        values = c.block.materialise(extreme(c.block, x, d, keepdim, c.shape, largest), "extreme")
        return arg_extreme(c.block, x, d, keepdim, values)

    return lower


def _layer_norm(c: Call) -> Results:
    """``native_layer_norm``: ``(x - mean) * rsqrt(var + eps) * weight + bias`` over the last
    dimensions (variance without correction), and the mean and ``rsqrt(var + eps)`` kept."""
    x = c.block.cheap(as_tensor(c.args[0]))
    normalized, weight, bias, eps = c.args[1], c.arg(2, "weight"), c.arg(3, "bias"), float(c.arg(4, "eps"))
    red = list(range(x.rank - len(normalized), x.rank))
    var, mean = moments_over(c.block, x, red, 0.0, True)
    rstd = c.block.materialise(
        unary(var, lambda e: E.op(Op.DIV, E.const(1.0), E.op(Op.SQRT, E.op(Op.ADD, e, flit(eps))))), "rstd"
    )
    out = elementwise(c.block, x.shape, [x, mean, rstd], lambda a, m, r: E.op(Op.MUL, E.op(Op.SUB, a, m), r))
    for param, o in ((weight, Op.MUL), (bias, Op.ADD)):
        if param is not None:
            out = elementwise(c.block, x.shape, [out, param], lambda a, p, o=o: E.op(o, a, p))
    return (out, mean, rstd)


def _batch_norm_eval(c: Call) -> Results:
    """``_native_batch_norm_legit_no_training`` (``F.batch_norm`` with ``training=False``): the
    running statistics of dimension 1, ``(x - mean) / sqrt(var + eps) * weight + bias``; its other two
    results are empty tensors."""
    x = as_tensor(c.args[0])
    weight, bias, mean, var = c.args[1], c.args[2], as_tensor(c.args[3]), as_tensor(c.args[4])
    eps = float(c.arg(6, "eps"))
    if x.rank < 2:
        raise Unsupported(f"an input of rank {x.rank} (expected batch and channels)")
    per_channel = (x.shape[1],) + (1,) * (x.rank - 2)  # dimension 1, broadcast against x

    def channel(t: Any) -> Tensor:
        t = as_tensor(t)
        return view(t, per_channel, lambda idx: (idx[0],))

    def normalise(a: Expr, m: Expr, v: Expr) -> Expr:
        return E.op(Op.DIV, E.op(Op.SUB, a, m), E.op(Op.SQRT, E.op(Op.ADD, v, flit(eps))))

    out = elementwise(c.block, x.shape, [x, channel(mean), channel(var)], normalise)
    for param, o in ((weight, Op.MUL), (bias, Op.ADD)):
        if param is not None:
            out = elementwise(c.block, x.shape, [out, channel(param)], lambda a, p, o=o: E.op(o, a, p))
    return (out, None, None)


#: Ops with one result lowered here (beside the several results they share code with).
ARG_LOWERINGS: dict[str, Lowering] = {"argmax.default": _argmax(largest=True), "argmin.default": _argmax(largest=False)}

SEVERAL: dict[str, SeveralLowering] = {
    "split.Tensor": _split,
    "split_with_sizes.default": _split_with_sizes,
    "max.dim": _extremum(largest=True),
    "min.dim": _extremum(largest=False),
    "var_mean.correction": moments,
    "native_layer_norm.default": _layer_norm,
    "_native_batch_norm_legit_no_training.default": _batch_norm_eval,
    "nll_loss_forward.default": nll_loss,
    "lstm_cell.default": lstm_cell,
    "native_group_norm.default": group_norm,
    "max_pool2d_with_indices.default": max_pool,
    "_native_batch_norm_legit.no_stats": batch_norm_batch_stats,
    "topk.default": _topk,
    "sort.default": _sort,
    "sort.stable": _sort,
}
