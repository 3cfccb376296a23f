"""Reading a tensor at indices held in an Integer tensor: ``embedding``, ``index_select``, ``gather``,
indexing with a tensor (``x[idx]``, ``aten.index.Tensor``) and ``nll_loss_forward`` (what
``F.cross_entropy`` and ``F.nll_loss`` become, ``ignore_index`` and class weights included).

An integer tensor is a ``Vec`` of Integers; its elements are index expressions.  The tensor read
and the index tensor are made cheap first (each is read at many places).  An index out of range is
an error in torch; here it is one of the interpreter (and undefined in the compiled C++), on inputs
torch refuses anyway.
"""

from __future__ import annotations

from typing import Any

from frontends.aten import Call, Lowering, Unsupported, as_tensor, dim_of
from frontends.tensor import Index, Tensor, broadcast_index, ic
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER


def _indices(block: Any, t: Any) -> Tensor:
    x = as_tensor(t)
    if x.elem is not INTEGER:
        raise Unsupported("indices that are not an integer tensor")
    return block.cheap(x)  # type: ignore[no-any-return]


def _wrapped(block: Any, i: Expr, n: int) -> Expr:
    """A negative index counts from the end, as in ``x[idx]``."""
    return block.share(i, lambda v: E.op(Op.IF, E.op(Op.LT, v, ic(0)), E.op(Op.ADD, v, ic(n)), v))  # type: ignore[no-any-return]


def _embedding(c: Call) -> Tensor:
    """``weight[indices[i...], j]``: the rows of ``weight`` that ``indices`` names."""
    weight, idx = c.block.cheap(as_tensor(c.args[0])), _indices(c.block, c.args[1])
    if weight.rank != 2:
        raise Unsupported(f"a weight of rank {weight.rank}")
    k = idx.rank
    return Tensor(c.shape, lambda out: weight.at((idx.at(out[:k]), out[k])), cheap=False, elem=weight.elem)


def _index_select(c: Call) -> Tensor:
    x, idx = c.block.cheap(as_tensor(c.args[0])), _indices(c.block, c.args[2])
    d = dim_of(int(c.args[1]), x.rank)
    if idx.rank > 1:
        raise Unsupported(f"an index of rank {idx.rank}")

    def at(out: Index) -> Expr:
        pick = idx.at((out[d],)) if idx.rank else idx.at(())
        return x.at((*out[:d], pick, *out[d + 1 :]))

    return Tensor(c.shape, at, cheap=False, elem=x.elem)


def _gather(c: Call) -> Tensor:
    """``out[i] = x[i with dimension d replaced by index[i]]``."""
    x, idx = c.block.cheap(as_tensor(c.args[0])), _indices(c.block, c.args[2])
    d = dim_of(int(c.args[1]), x.rank)
    return Tensor(c.shape, lambda out: x.at((*out[:d], idx.at(out), *out[d + 1 :])), cheap=False, elem=x.elem)


def _index(c: Call) -> Tensor:
    """``x[..., idx, ...]``: integer index tensors (broadcast together) at some dimensions, the others
    taken whole; the indexed dimensions' result goes where the first one was when they are adjacent,
    first otherwise (numpy's rule, torch's)."""
    x = c.block.cheap(as_tensor(c.args[0]))
    given = list(c.args[1])
    places = [k for k, t in enumerate(given) if t is not None]
    if not places:
        raise Unsupported("no index tensor")
    idxs = {k: _indices(c.block, given[k]) for k in places}
    adjacent = places == list(range(places[0], places[-1] + 1))
    rest = [k for k in range(x.rank) if k not in places]
    n_rest_before = places[0] if adjacent else 0
    brank = len(c.shape) - len(rest)
    bshape = c.shape[n_rest_before : n_rest_before + brank]
    maps = {k: broadcast_index(idxs[k].shape, bshape) for k in places}

    def at(out: Index) -> Expr:
        b = out[n_rest_before : n_rest_before + brank]
        others = list(out[:n_rest_before]) + list(out[n_rest_before + brank :])
        full: list[Expr] = []
        for k in range(x.rank):
            if k in idxs:
                full.append(_wrapped(c.block, idxs[k].at(maps[k](b)), x.shape[k]))
            else:
                full.append(others.pop(0))
        return x.at(tuple(full))

    return Tensor(c.shape, at, cheap=False, elem=x.elem)


INDEX_LOWERINGS: dict[str, Lowering] = {
    "embedding.default": _embedding,
    "index_select.default": _index_select,
    "gather.default": _gather,
    "index.Tensor": _index,
}


def nll_loss(c: Call) -> tuple[Tensor, Tensor]:
    """``nll_loss_forward(input, target, weight, reduction, ignore_index)``: ``-weight[t] * input[i, t]``
    per sample (0 where ``t`` is ``ignore_index``), then none / mean over the weights / sum, and the
    total weight of the samples counted."""
    x, target = c.block.cheap(as_tensor(c.args[0])), _indices(c.block, c.args[1])
    weight, reduction, ignore = c.args[2], int(c.args[3]), int(c.args[4])
    w = c.block.cheap(as_tensor(weight)) if weight is not None else None
    if x.elem is not FLOAT or x.rank not in (1, 2):
        raise Unsupported(f"an input of rank {x.rank} (give batch and classes)")
    batched = x.rank == 2

    def parts(i: Expr | None) -> tuple[Expr, Expr]:
        """(the sample's loss, its weight), for sample ``i`` (None when unbatched)."""
        t = target.at((i,) if i is not None else ())

        def of(tv: Expr) -> tuple[Expr, Expr]:
            wt = w.at((tv,)) if w is not None else E.const(1.0)
            value = x.at((i, tv) if i is not None else (tv,))
            skip = E.op(Op.EQ, tv, ic(ignore))
            return (
                E.op(Op.IF, skip, E.const(0.0), E.op(Op.NEG, E.op(Op.MUL, wt, value))),
                E.op(Op.IF, skip, E.const(0.0), wt),
            )

        return of(t)

    def loss_at(out: Index) -> Expr:
        return parts(out[0] if batched else None)[0]

    losses = c.block.materialise(Tensor(target.shape, loss_at, cheap=False), "nll")
    n = x.shape[0] if batched else 1

    def summed(k: int) -> Expr:
        if not batched:
            return parts(None)[k] if k else losses.at(())
        i = c.block.index_var()
        return E.sumbuild(ic(n), i, parts(i)[1] if k else losses.at((i,)))

    total_weight = c.block.materialise(Tensor((), lambda out: summed(1), cheap=False), "total_weight")
    if reduction == 0:
        return losses, total_weight
    total = Tensor((), lambda out: summed(0), cheap=False)
    if reduction == 2:
        return total, total_weight
    if reduction != 1:
        raise Unsupported(f"reduction {reduction}")
    return Tensor((), lambda out: E.op(Op.DIV, total.at(()), total_weight.at(())), cheap=False), total_weight
