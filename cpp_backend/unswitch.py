"""A branch on a loop-invariant test, taken out of a sum of vectors (loop unswitching).

A gradient adds a vector of the size its loop reads into one of the size of the vector read, padded
where they differ: in ``(sumbuild p (lam j (let ((t (size image))) (if (eq k t) plain padded)))))``
the test is the same in every iteration, but as written it sits inside the sum, so the sum of
vectors the products pass turns into a vector of sums (:func:`cpp_backend.products.interchange`)
is the branch, not the plain build, and the padded one it then takes puts a test and checked reads
inside every dot product.  Here the sum becomes ``(let ((t (size image))) (if (eq k t) (sumbuild p
(lam j plain)) (sumbuild p (lam j padded))))``: one loop per branch, each as written.  The products
pass does it only where the interchange does not apply to the sum as it is (a test that varies with
an enclosing loop is one the interchange checks for all of its iterations at once, and a branch
between that loop and the sum would hide the product) and does apply to an arm's sum.

Only tests that cannot fail and cost a constant move (comparisons and Integer arithmetic of
literals, variables bound outside the loop, and the sizes of such variables, through the lets at
the head of the loop's body that compute them), so values and errors are those of the loop as
written: the test is evaluated once even where the loop runs no iteration, which changes nothing
since it has no effect.  The loop's body is copied (two loops for one): only bodies up to
:data:`_BODY_MOST` nodes are, so that nested unswitching stays small.
"""

from __future__ import annotations

from cpp_backend.let_chains import peel_lets, wrap_lets
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import Kind

#: Larger loop bodies keep their branches (each unswitching copies the body once).
_BODY_MOST = 400
#: What a moved test (and a let it reads) may be made of: none of these can fail.
_SAFE = frozenset({Op.CONST, Op.VAR, Op.EQ, Op.NE, Op.LT, Op.LTE, Op.GT, Op.GTE, Op.AND, Op.OR, Op.ADD, Op.SUB, Op.MUL})


def _safe(e: Expr) -> bool:
    """Whether evaluating ``e`` cannot fail and has no cost but a constant (Integer or Bool values)."""
    if e.op is Op.SIZE:
        return e.args[0].op is Op.VAR
    if e.op not in _SAFE or e.type.kind not in (Kind.INTEGER, Kind.BOOL):
        return False
    return all(_safe(a) for a in e.args)


def unswitch(e: Expr) -> Expr:
    """``e``, a sum of vectors whose body is lets then a branch on a loop-invariant test, as that
    branch over two sums (see the module docstring); ``e`` itself otherwise."""
    if e.op is not Op.SUMBUILD or e.type.kind is not Kind.VEC or e.args[2].size > _BODY_MOST:
        return e
    n, i, body = e.args
    lets, last = peel_lets(body)
    if last.op is Op.VAR and lets and lets[-1][0] is last and lets[-1][1].op is Op.IF:
        branch, lets = lets[-1][1], lets[:-1]
    elif last.op is Op.IF:
        branch = last
    else:
        return e
    names = [v.data for v, _ in lets]
    if len(set(names)) < len(names) or i.data in names or n.free & set(names):
        return e  # (a name bound twice, or the count's own: moving lets out could capture)
    # the lets the test reads (invariant and safe themselves), moved out with it
    variant = {i.data}
    moved: list[tuple[Expr, Expr]] = []
    kept: list[tuple[Expr, Expr]] = []
    for v, rhs in lets:
        if _safe(rhs) and not variant & rhs.free:
            moved.append((v, rhs))
        else:
            kept.append((v, rhs))
            variant.add(v.data)
    cond, then, other = branch.args
    if not _safe(cond) or variant & cond.free:
        return e
    needed = set(cond.free)
    for v, rhs in reversed(moved):
        if v.data in needed:
            needed |= rhs.free
    outside = [(v, rhs) for v, rhs in moved if v.data in needed]
    inside = [(v, rhs) for v, rhs in lets if all(v is not w for w, _ in outside)]
    loops = [E.sumbuild(n, i, wrap_lets(inside, arm)) for arm in (then, other)]
    return wrap_lets(outside, E.op(Op.IF, cond, *loops))


__all__ = ["unswitch"]
