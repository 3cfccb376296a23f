"""A vector of dot products along rows: what a sum of scaled columns becomes, interchanged.

A gradient's ``W^T dy`` is written as a sum of vectors, ``(sumbuild p (lam j (build m (lam k (mul
(index j dy) (index j (index k W))))))))``: each iteration adds a column of W, read at a stride.
The products pass turns a sum of vectors into a vector of sums where that makes a product for the
blocked loop nest (:func:`cpp_backend.products.interchange`); here the vector of sums is
``(build m (lam k (sumbuild p (lam j ...))))``, one dot product per element whose every read
walks along a row at the summed index, which the emitter vectorises (a sum of contiguous reads),
so that form is taken too.
"""

from __future__ import annotations

from cpp_backend.let_chains import peel_lets, wrap_lets
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op
from knossos.types import FLOAT, Kind

#: Terms larger than this are not looked at (the walks recurse).
_TERM_MOST = 400
#: What a dot product's term may be made of besides reads: arithmetic that vectorises.
_ARITHMETIC = frozenset({Op.CONST, Op.VAR, Op.INDEX, Op.ADD, Op.SUB, Op.MUL, Op.NEG})


def _inlined(e: Expr, lets: dict[str, Expr]) -> Expr | None:
    """``e`` with its lets inlined, or None where it has anything but lets, reads and arithmetic, or a
    let it does not use (dropped, its read would no longer be made: it could fail)."""
    if e.op is Op.LET:
        rhs = _inlined(e.args[1], lets)
        if rhs is None or e.args[0].data not in e.args[2].free:
            return None
        return _inlined(e.args[2], {**lets, e.args[0].data: rhs})
    if e.op is Op.VAR:
        return lets.get(e.data, e)
    if e.op not in _ARITHMETIC:
        return None
    args: list[Expr] = []
    for a in e.args:
        x = _inlined(a, lets)
        if x is None:
            return None
        args.append(x)
    return e.replace_args(tuple(args)) if args else e


def row_dots(e: Expr) -> Expr | None:
    """``e`` if it is ``(build m (lam k (sumbuild p (lam j t))))``, ``t`` a Float term of reads and
    arithmetic with no branch, reading at ``j`` only vectors invariant of ``j`` (a row, contiguous),
    and at least one so, every other read invariant of ``j``: with ``t``'s lets written where they
    are read (the emitter reads a row through a pointer where the read is written so), else None."""
    if e.op is not Op.BUILD:
        return None
    lets, body = peel_lets(e.args[2])
    if body.op is not Op.SUMBUILD or body.type is not FLOAT or body.args[2].size > _TERM_MOST:
        return None
    n, jv, t = body.args
    j = jv.data
    term = _inlined(t, {})
    if term is None:
        return None
    along = False
    for x in distinct_nodes(term):
        if x.op is not Op.INDEX or j not in x.free:
            continue
        i, v = x.args
        if i.op is not Op.VAR or i.data != j or j in v.free or v.type.kind is not Kind.VEC:
            return None
        along = True
    if not along:
        return None
    return e.replace_args((e.args[0], e.args[1], wrap_lets(lets, body.replace_args((n, jv, term)))))


__all__ = ["row_dots"]
