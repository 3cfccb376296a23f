"""Ops that torch implements in C++ with in-place steps on views, which the tracer refuses
(``lstm_cell``, ``gru_cell``: ``nn.LSTMCell``, ``nn.GRUCell``), and normalisations and reductions
kept whole rather than decomposed (``native_group_norm``, ``any``/``all``, ``linalg_vector_norm``,
``elu``, ``isnan``/``isinf``): lowered here from their definitions in ATen."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from frontends.aten import (
    Call,
    Lowering,
    Unsupported,
    amax_split,
    as_tensor,
    count,
    elementwise,
    matmul,
    moments_over,
    nan_max,
    nan_min,
    reduced_dims,
    sigmoid,
    sum_over,
    unary,
)
from frontends.aten_math import native
from frontends.tensor import (
    Index,
    LetBlock,
    Tensor,
    clamped,
    converted,
    flit,
    iadd,
    ic,
    imod,
    imul,
    index_in_range,
    literal_of,
    view,
)
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import BOOL, FLOAT, INTEGER


def _linear(block: LetBlock, x: Any, w: Any, b: Any) -> Tensor:
    """``x @ w.T + b`` of a batch ``x`` (B, I) and a weight (O, I), computed once."""
    xt, wt = block.cheap(converted(as_tensor(x), FLOAT)), block.cheap(converted(as_tensor(w), FLOAT))
    if xt.rank != 2 or wt.rank != 2:
        raise Unsupported(f"an input of rank {xt.rank} and a weight of rank {wt.rank}")
    product = matmul(block, xt, view(wt, (wt.shape[1], wt.shape[0]), lambda idx: (idx[1], idx[0])))
    if b is not None:
        product = elementwise(block, product.shape, [product, b], lambda p, q: E.op(Op.ADD, p, q))
    return block.materialise(product, "gates")


def _gate(x: Tensor, k: int, width: int) -> Tensor:
    """Columns ``k * width`` to ``(k + 1) * width`` of the gates."""
    return view(x, (x.shape[0], width), lambda idx: (idx[0], E.op(Op.ADD, idx[1], ic(k * width)) if k else idx[1]))


def lstm_cell(c: Call) -> tuple[Tensor, Tensor]:
    """``(h', c')``: ``gates = x W_ih^T + b_ih + h W_hh^T + b_hh`` cut into i, f, g, o;
    ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``."""
    x, (h, cell), w_ih, w_hh = c.args[0], c.args[1], c.args[2], c.args[3]
    b_ih, b_hh = c.arg(4, "b_ih"), c.arg(5, "b_hh")
    gi, gh = _linear(c.block, x, w_ih, b_ih), _linear(c.block, h, w_hh, b_hh)
    n = gi.shape[1] // 4
    gates = [
        elementwise(c.block, (gi.shape[0], n), [_gate(gi, k, n), _gate(gh, k, n)], lambda a, b: E.op(Op.ADD, a, b))
        for k in range(4)
    ]

    def new_cell(i: Expr, f: Expr, g: Expr, old: Expr) -> Expr:
        return E.op(Op.ADD, E.op(Op.MUL, sigmoid(f), old), E.op(Op.MUL, sigmoid(i), E.op(Op.TANH, g)))

    cy = c.block.materialise(elementwise(c.block, (gi.shape[0], n), [*gates[:3], cell], new_cell), "cell")
    hy = elementwise(c.block, cy.shape, [gates[3], cy], lambda o, cv: E.op(Op.MUL, sigmoid(o), E.op(Op.TANH, cv)))
    return hy, cy


def _gru_cell(c: Call) -> Tensor:
    """``n = tanh(gi_n + r gh_n)``, ``h' = n + z (h - n)``, with ``r``, ``z`` the sigmoids of the
    first two thirds of ``gi + gh`` (``gi = x W_ih^T + b_ih``, ``gh = h W_hh^T + b_hh``)."""
    x, h, w_ih, w_hh = c.args[0], c.args[1], c.args[2], c.args[3]
    b_ih, b_hh = c.arg(4, "b_ih"), c.arg(5, "b_hh")
    gi, gh = _linear(c.block, x, w_ih, b_ih), _linear(c.block, h, w_hh, b_hh)
    n = gi.shape[1] // 3
    shape = (gi.shape[0], n)

    def step(ir: Expr, hr: Expr, iz: Expr, hz: Expr, i_n: Expr, h_n: Expr, old: Expr) -> Expr:
        r = sigmoid(E.op(Op.ADD, ir, hr))
        z = sigmoid(E.op(Op.ADD, iz, hz))
        new = E.op(Op.TANH, E.op(Op.ADD, i_n, E.op(Op.MUL, r, h_n)))
        return c.block.share(new, lambda v: E.op(Op.ADD, v, E.op(Op.MUL, z, E.op(Op.SUB, old, v))))

    parts = [g for k in range(3) for g in (_gate(gi, k, n), _gate(gh, k, n))]
    return elementwise(c.block, shape, [*parts, as_tensor(h)], step)


def group_norm(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    """``native_group_norm(x, weight, bias, N, C, HxW, groups, eps)``: each group's channels
    normalised by their mean and ``rsqrt(var + eps)`` (no correction), then per channel scaled and
    shifted; the mean and rstd of shape (N, groups) kept."""
    x = c.block.cheap(converted(as_tensor(c.args[0]), FLOAT))
    weight, bias = c.args[1], c.args[2]
    n, channels, hw, groups = (int(v) for v in c.args[3:7])
    eps = float(c.args[7])
    per = channels // groups
    grouped = view(x, (n, groups, per * hw), _grouped_index(x.rank, per, hw, x.shape))
    var, mean = moments_over(c.block, grouped, [2], 0.0, False)
    rstd = c.block.materialise(
        unary(var, lambda e: E.op(Op.DIV, E.const(1.0), E.op(Op.SQRT, E.op(Op.ADD, e, flit(eps))))), "rstd"
    )
    mean = c.block.materialise(mean, "mean")

    def at(idx: Index) -> Expr:
        g = E.op(Op.DIV, idx[1], ic(per)) if per > 1 else idx[1]
        value = E.op(Op.MUL, E.op(Op.SUB, x.at(idx), mean.at((idx[0], g))), rstd.at((idx[0], g)))
        if weight is not None:
            value = E.op(Op.MUL, value, as_tensor(weight).at((idx[1],)))
        if bias is not None:
            value = E.op(Op.ADD, value, as_tensor(bias).at((idx[1],)))
        return value

    for p in (weight, bias):
        if p is not None and not as_tensor(p).cheap:
            raise Unsupported("a computed weight or bias")
    return Tensor(x.shape, at, cheap=False), mean, rstd


def _grouped_index(rank: int, per: int, hw: int, shape: tuple[int, ...]) -> Any:
    """The index of ``x`` (N, C, *spatial) at (n, group, k): channel ``group * per + k / hw``, the
    spatial position ``k mod hw`` split row-major."""
    spatial = shape[2:]

    def in_index(idx: Index) -> Index:
        n, g, k = idx
        chan = (
            E.op(Op.ADD, E.op(Op.MUL, g, ic(per)), E.op(Op.DIV, k, ic(hw)))
            if hw > 1
            else (E.op(Op.ADD, E.op(Op.MUL, g, ic(per)), k))
        )
        out: list[Expr] = [n, chan]
        rest = E.op(Op.SUB, k, E.op(Op.MUL, E.op(Op.DIV, k, ic(hw)), ic(hw))) if hw > 1 else ic(0)
        stride = hw
        for d in spatial:
            stride //= d
            out.append(
                E.op(Op.SUB, E.op(Op.DIV, rest, ic(stride)), E.op(Op.MUL, E.op(Op.DIV, rest, ic(stride * d)), ic(d)))
            )
        return tuple(out)

    return in_index


def batch_norm_batch_stats(c: Call) -> tuple[Tensor, Tensor, Tensor]:
    """``_native_batch_norm_legit.no_stats(x, weight, bias, training, momentum, eps)``: each
    channel (dimension 1) normalised by its mean and ``rsqrt(var + eps)`` over the other
    dimensions (no correction) of this batch, as ``F.instance_norm`` and a batch norm without
    running statistics compute; the mean and rstd per channel kept."""
    x = c.block.cheap(converted(as_tensor(c.args[0]), FLOAT))
    weight, bias, eps = c.args[1], c.args[2], float(c.args[5])
    if x.rank < 2:
        raise Unsupported(f"an input of rank {x.rank} (expected batch and channels)")
    red = [d for d in range(x.rank) if d != 1]
    var, mean = moments_over(c.block, x, red, 0.0, True)
    rstd = c.block.materialise(
        unary(var, lambda e: E.op(Op.DIV, E.const(1.0), E.op(Op.SQRT, E.op(Op.ADD, e, flit(eps))))), "rstd"
    )
    out = elementwise(c.block, x.shape, [x, mean, rstd], lambda a, m, r: E.op(Op.MUL, E.op(Op.SUB, a, m), r))
    per_channel = (x.shape[1],) + (1,) * (x.rank - 2)
    for param, o in ((weight, Op.MUL), (bias, Op.ADD)):
        if param is not None:
            p = view(as_tensor(param), per_channel, lambda idx: (idx[0],))
            out = elementwise(c.block, x.shape, [out, p], lambda a, q, o=o: E.op(o, a, q))
    flat = (x.shape[1],)
    return (
        out,
        view(mean, flat, lambda idx: (ic(0), idx[0], *(ic(0),) * (x.rank - 2))),
        view(rstd, flat, lambda idx: (ic(0), idx[0], *(ic(0),) * (x.rank - 2))),
    )


def _any_all(is_any: bool) -> Lowering:
    """``any``/``all`` (over dimensions or all): the count of Trues, compared with 0 or the count."""

    def low(c: Call) -> Tensor:
        x = converted(as_tensor(c.args[0]), BOOL)
        red = reduced_dims(x, c.arg(1, "dim"))
        total = sum_over(c.block, x, red, bool(c.arg(2, "keepdim", False)), c.shape)
        bound = 0 if is_any else count(x, red)
        o = Op.GT if is_any else Op.EQ
        return Tensor(c.shape, lambda idx: E.op(o, total.at(idx), ic(bound)), cheap=False, elem=BOOL)

    return low


def _vector_norm(c: Call) -> Tensor:
    """``linalg_vector_norm(x, ord, dim, keepdim)``: ``sqrt(sum x^2)`` for 2, ``sum |x|`` for 1,
    ``amax |x|`` for inf, ``sum(|x|^p)^(1/p)`` otherwise."""
    x = c.block.cheap(converted(as_tensor(c.args[0]), FLOAT))
    order = float(c.arg(1, "ord", 2))
    red = reduced_dims(x, c.arg(2, "dim"))
    keepdim = bool(c.arg(3, "keepdim", False))
    if c.kwargs.get("dtype") is not None:
        raise Unsupported("a norm with a dtype")
    if order == float("inf"):
        return amax_split(c.block, unary(x, lambda e: E.op(Op.ABS, e)), red, keepdim, c.shape)
    if order == 2.0:
        squares = unary(x, lambda e: E.op(Op.MUL, e, e))
        return unary(sum_over(c.block, squares, red, keepdim, c.shape), lambda e: E.op(Op.SQRT, e))
    if order == 1.0:
        return sum_over(c.block, unary(x, lambda e: E.op(Op.ABS, e)), red, keepdim, c.shape)
    if order <= 0:
        raise Unsupported(f"ord={order:g}")
    powers = unary(x, lambda e: E.op(Op.POW, E.op(Op.ABS, e), E.const(order)))
    return unary(sum_over(c.block, powers, red, keepdim, c.shape), lambda e: E.op(Op.POW, e, E.const(1.0 / order)))


def _elu(c: Call) -> Tensor:
    """``scale * x`` above 0, ``scale * alpha * expm1(x * input_scale)`` at or below."""
    x = converted(as_tensor(c.args[0]), FLOAT)
    alpha, scale, input_scale = (
        float(c.arg(k, name, 1.0)) for k, name in ((1, "alpha"), (2, "scale"), (3, "input_scale"))
    )

    def f(v: Expr) -> Expr:
        neg = E.op(Op.MUL, flit(scale * alpha), native("expm1", E.op(Op.MUL, v, flit(input_scale))))
        return E.op(Op.IF, E.op(Op.GT, v, E.const(0.0)), E.op(Op.MUL, flit(scale), v), neg)

    return unary(x, lambda e: c.block.share(e, f))


def _isnan(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    if x.elem is not FLOAT:
        return Tensor(x.shape, lambda idx: E.const(False), cheap=True, elem=BOOL)
    return Tensor(x.shape, lambda idx: c.block.share(x.at(idx), lambda v: E.op(Op.NE, v, v)), cheap=False, elem=BOOL)


def _isinf(c: Call) -> Tensor:
    x = as_tensor(c.args[0])
    if x.elem is not FLOAT:
        return Tensor(x.shape, lambda idx: E.const(False), cheap=True, elem=BOOL)
    return Tensor(x.shape, lambda idx: E.op(Op.EQ, E.op(Op.ABS, x.at(idx)), flit(float("inf"))), cheap=False, elem=BOOL)


def _pad(c: Call) -> Tensor:
    """``constant_pad_nd(x, pad, value)``: ``pad`` gives (before, after) for the last dimensions,
    last first; a negative pad crops."""
    x = c.block.cheap(as_tensor(c.args[0]))
    pad = [int(v) for v in c.arg(1, "pad")]
    value = c.arg(2, "value", 0)
    before = [0] * x.rank
    padded = [False] * x.rank
    for k in range(len(pad) // 2):
        before[x.rank - 1 - k] = pad[2 * k]
        padded[x.rank - 1 - k] = pad[2 * k] > 0 or pad[2 * k + 1] > 0

    def at(idx: Index) -> Expr:
        src = tuple(iadd(i, ic(-b)) for i, b in zip(idx, before, strict=True))
        guards = [
            g
            for q, n, p in zip(src, x.shape, padded, strict=True)
            if p
            for g in [index_in_range(q, n)]
            if g is not None
        ]
        if not guards:
            return x.at(src)
        cond = guards[0]
        for g in guards[1:]:
            cond = E.op(Op.AND, cond, g)
        inside = tuple(clamped(q, n) if p else q for q, n, p in zip(src, x.shape, padded, strict=True))
        return c.block.share(x.at(inside), lambda xv: E.op(Op.IF, cond, xv, literal_of(value, x.elem)))

    return Tensor(c.shape, at, cheap=False, elem=x.elem)


def _repeat(c: Call) -> Tensor:
    """``x.repeat(r0, ..., rk)``: the index modulo each dimension of ``x`` (leading new dimensions
    dropped)."""
    x = as_tensor(c.args[0])
    lead = len(c.shape) - x.rank

    def in_index(idx: Index) -> Index:
        return tuple(imod(i, n) for i, n in zip(idx[lead:], x.shape, strict=True))

    return view(x if all(r == 1 for r in c.args[1]) else c.block.cheap(x), c.shape, in_index)


def _clamp_tensor(c: Call) -> Tensor:
    """``clamp`` with tensor bounds: ``min(max(x, lo), hi)``, NaN where any is (as torch)."""
    x, lo, hi = c.args[0], c.arg(1, "min"), c.arg(2, "max")
    out = as_tensor(x)
    if lo is not None:
        out = elementwise(c.block, c.shape, [out, lo], lambda a, b: nan_max(c.block, a, b), c.elem, c.elem)
    if hi is not None:
        out = elementwise(c.block, c.shape, [out, hi], lambda a, b: nan_min(c.block, a, b), c.elem, c.elem)
    return out


def _window(c: Call) -> tuple[list[int], list[int], list[int]]:
    """The kernel, stride (the kernel's if empty) and padding of a 2-d pooling."""

    def two(v: Any) -> list[int]:
        out = [int(k) for k in (v if isinstance(v, list | tuple) else [v])]
        return out * 2 if len(out) == 1 else out

    kernel = two(c.args[1])
    return kernel, two(c.arg(2, "stride") or kernel), two(c.arg(3, "padding", 0))


def _padded(cond: Expr, fill: Expr) -> Callable[[Expr], Expr]:
    """An element read (at a clamped position) used where ``cond`` holds, ``fill`` elsewhere."""
    return lambda xv: E.op(Op.IF, cond, xv, fill)


def _pool_leaves(
    c: Call,
    x: Tensor,
    idx: Index,
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    fill: Expr,
    ceil: bool,
) -> list[Expr]:
    """The elements of the window at ``idx`` (``fill`` outside ``x``)."""
    spatial = len(kernel)
    lead = idx[: x.rank - spatial]
    leaves = []
    for ks in itertools.product(*(range(k) for k in kernel)):
        pos = [
            iadd(iadd(imul(o, s), ic(k * d)), ic(-p))
            for o, s, k, d, p in zip(idx[x.rank - spatial :], stride, ks, dilation, padding, strict=True)
        ]
        guards = [
            g
            for q, n in zip(pos, x.shape[x.rank - spatial :], strict=True)
            for g in [index_in_range(q, n)]
            if g is not None
        ]
        if guards:
            cond = guards[0]
            for g in guards[1:]:
                cond = E.op(Op.AND, cond, g)
            inside = [clamped(q, n) for q, n in zip(pos, x.shape[x.rank - spatial :], strict=True)]
            leaves.append(c.block.share(x.at((*lead, *inside)), _padded(cond, fill)))
        else:
            leaves.append(x.at((*lead, *pos)))
    return leaves


def max_pool(c: Call) -> tuple[Tensor, None]:
    """``max_pool2d_with_indices``: the largest element of each window (padding is -inf), a tree of
    NaN-propagating ``max``; the indices have no lowering."""
    x = c.block.cheap(converted(as_tensor(c.args[0]), FLOAT))
    kernel, stride, padding = _window(c)
    dilation = [int(v) for v in c.arg(4, "dilation", [1])]
    dilation = dilation * 2 if len(dilation) == 1 else dilation
    ceil = bool(c.arg(5, "ceil_mode", False))

    def at(idx: Index) -> Expr:
        leaves = _pool_leaves(c, x, idx, kernel, stride, padding, dilation, flit(float("-inf")), ceil)
        while len(leaves) > 1:
            pairs = [nan_max(c.block, leaves[k], leaves[k + 1]) for k in range(0, len(leaves) - 1, 2)]
            leaves = pairs + ([leaves[-1]] if len(leaves) % 2 else [])
        return leaves[0]

    return Tensor(c.shape, at, cheap=False), None


def _avg_pool(c: Call) -> Tensor:
    """``avg_pool2d`` with ``count_include_pad`` (the default): each window's sum over its size."""
    x = c.block.cheap(converted(as_tensor(c.args[0]), FLOAT))
    kernel, stride, padding = _window(c)
    ceil_mode, include_pad, divisor = (
        c.arg(4, "ceil_mode", False),
        c.arg(5, "count_include_pad", True),
        c.arg(6, "divisor_override"),
    )
    if ceil_mode or not include_pad:
        raise Unsupported("ceil_mode or count_include_pad=False")
    n = float(divisor or kernel[0] * kernel[1])

    def at(idx: Index) -> Expr:
        leaves = _pool_leaves(c, x, idx, kernel, stride, padding, [1, 1], E.const(0.0), False)
        total = leaves[0]
        for leaf in leaves[1:]:
            total = E.op(Op.ADD, total, leaf)
        return E.op(Op.DIV, total, E.const(n))

    return Tensor(c.shape, at, cheap=False)


def floor_div(block: LetBlock, a: Expr, b: Expr) -> Expr:
    """Integer division rounding down, as Python's and torch's ``//``: the language's truncates
    towards zero, one less where the signs differ and the division is not exact."""

    def rounded(u: Expr, v: Expr) -> Expr:
        def adjust(q: Expr) -> Expr:
            inexact = E.op(Op.NE, E.op(Op.MUL, q, v), u)
            signs_differ = E.op(Op.NE, E.op(Op.LT, u, ic(0)), E.op(Op.LT, v, ic(0)))
            return E.op(Op.IF, E.op(Op.AND, inexact, signs_differ), E.op(Op.SUB, q, ic(1)), q)

        return block.share(E.op(Op.DIV, u, v), adjust)

    return block.share(a, lambda u: block.share(b, lambda v: rounded(u, v)))


def _integers(c: Call) -> list[Tensor]:
    ts = [as_tensor(a, INTEGER) for a in c.args[:2]]
    if c.elem is not INTEGER or any(t.elem is not INTEGER for t in ts):
        raise Unsupported("floats (the language has no floor; integers only)")
    return ts


def _div_mode(c: Call) -> Tensor:
    """``div(a, b, rounding_mode=...)`` of integers: ``floor`` (``//``) or ``trunc``."""
    mode = c.kwargs.get("rounding_mode")
    ts = _integers(c)
    if mode == "trunc":
        return elementwise(c.block, c.shape, ts, lambda a, b: E.op(Op.DIV, a, b), INTEGER, INTEGER)
    if mode != "floor":
        raise Unsupported(f"rounding_mode={mode!r}")
    return elementwise(c.block, c.shape, ts, lambda a, b: floor_div(c.block, a, b), INTEGER, INTEGER)


def _remainder(c: Call) -> Tensor:
    """``a % b`` of integers: ``a - (a // b) * b``, the sign of ``b`` (Python's and torch's)."""
    ts = _integers(c)

    def rem(a: Expr, b: Expr) -> Expr:
        return c.block.share(
            a, lambda u: c.block.share(b, lambda v: E.op(Op.SUB, u, E.op(Op.MUL, floor_div(c.block, u, v), v)))
        )

    return elementwise(c.block, c.shape, ts, rem, INTEGER, INTEGER)


COMPOSITE_LOWERINGS: dict[str, Lowering] = {
    "div.Tensor_mode": _div_mode,
    "div.Scalar_mode": _div_mode,
    "floor_divide.default": lambda c: _div_mode(Call(c.block, c.args, {"rounding_mode": "floor"}, c.shape, c.elem)),
    "remainder.Scalar": _remainder,
    "remainder.Tensor": _remainder,
    "constant_pad_nd.default": _pad,
    "repeat.default": _repeat,
    "clamp.Tensor": _clamp_tensor,
    "clamp_min.Tensor": lambda c: _clamp_tensor(Call(c.block, (c.args[0], c.args[1], None), {}, c.shape, c.elem)),
    "avg_pool2d.default": _avg_pool,
    "gru_cell.default": _gru_cell,
    "any.default": _any_all(True),
    "any.dim": _any_all(True),
    "any.dims": _any_all(True),
    "all.default": _any_all(False),
    "all.dim": _any_all(False),
    "all.dims": _any_all(False),
    "linalg_vector_norm.default": _vector_norm,
    "elu.default": _elu,
    "isnan.default": _isnan,
    "isinf.default": _isinf,
}
