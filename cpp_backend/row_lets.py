"""Products computed row by row inside a let, hoisted into one matrix computed before the row loop.

A layer written per row, ``(build n (lam i (let (h (build m (lam o ... (sumbuild p (lam k x[i][k] *
w[o][k])) ...))) rest)))``, computes its product one row at a time, so the register-blocked nest
(which computes several rows ``i`` at once, see :mod:`cpp_backend.products`) is not reached.  Where the
let's right-hand side depends on the row only through ``i`` (no earlier let of the row), it is
hoisted:

    (let (H (build n (lam i rhs))) (build n (lam i rest[h := (index i H)])))

``H``'s nest is then a product in the blocked shape (or one the pass puts in it), and so may ``rest``
with ``h`` read from ``H`` (an MLP's second layer).  The same values are computed: the language is
pure, ``n`` is a small pure expression evaluated twice, and every right-hand side that the original
evaluates (one per row, whatever the row's value) is evaluated, all before the rows' rests instead
of interleaved, so the same calls fail, possibly with another of their errors first.  ``(index i
H)`` cannot fail (``i < n``, the size of ``H``).
"""

from __future__ import annotations

from collections.abc import Callable

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import vec

#: A row's rest is substituted into (recursively) only up to this many nodes.
_SUBST_MAX = 400
_BINDERS = {Op.LET: 0, Op.LAM: 0, Op.BUILD: 1, Op.SUMBUILD: 1}


def _substitute(e: Expr, name: str, new: Expr, avoid: frozenset[str]) -> Expr | None:
    """``e`` with the free occurrences of ``name`` replaced by ``new``; None where ``e`` binds
    ``name`` or a name of ``avoid`` (``new``'s free variables) anywhere (no capture, no shadowing)."""
    if name not in e.free:
        return e
    if e.op is Op.VAR:
        return new
    at = _BINDERS.get(e.op)
    if at is not None and (e.args[at].data == name or e.args[at].data in avoid):
        return None
    args = []
    for k, a in enumerate(e.args):
        if k == at:
            args.append(a)
            continue
        x = _substitute(a, name, new, avoid)
        if x is None:
            return None
        args.append(x)
    return e.replace_args(tuple(args))


def _first_product(n: Expr, iv: Expr, lets: list[tuple[Expr, Expr]], reaches: Callable[[Expr], bool]) -> int | None:
    """The first of ``lets`` whose right-hand side is a build that depends on no earlier let and, as a
    build over the rows, reaches the blocked nest; or None."""
    earlier: set[str] = set()
    for at, (h, rhs) in enumerate(lets):
        if rhs.op is Op.BUILD and not earlier & rhs.free and reaches(E.build(n, iv, rhs)):
            return at
        earlier.add(h.data)
    return None


def hoist_row_let(
    e: Expr, fresh: Callable[[str], str], small: Callable[[Expr], bool], reaches: Callable[[Expr], bool]
) -> Expr | None:
    """``e`` = ``(build n (lam i LETS rest))`` with the first let of ``LETS`` whose right-hand side is a
    build depending on no earlier let and ``reaches(build n (lam i rhs))`` (a product that reaches
    the blocked nest) hoisted (see the module docstring); None where there is none."""
    if e.op is not Op.BUILD or not small(e.args[0]):
        return None
    n, iv, body = e.args
    lets: list[tuple[Expr, Expr]] = []
    while body.op is Op.LET:
        lets.append((body.args[0], body.args[1]))
        body = body.args[2]
    at = _first_product(n, iv, lets, reaches)
    if at is None:
        return None
    h, rhs = lets[at]
    whole = E.build(n, iv, rhs)
    big = E.var(fresh("ks$rows"), vec(rhs.type))
    row = E.op(Op.INDEX, iv, big)
    rest = body
    for v, r in reversed(lets[at + 1 :]):
        rest = E.let(v, r, rest)
    inlined = None
    if rest.size <= _SUBST_MAX:
        inlined = _substitute(rest, h.data, row, frozenset({iv.data, big.data}))
    rest = E.let(h, row, rest) if inlined is None else inlined
    for v, r in reversed(lets[:at]):
        rest = E.let(v, r, rest)
    return E.let(big, whole, E.build(n, iv, rest))


__all__ = ["hoist_row_let"]
