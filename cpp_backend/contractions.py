"""A full contraction of three operands, ``sum_{i,k,j} x(i,k) y(j,k) z(i,j)``, as a product first.

Reverse mode gives a scale of a product (``alpha`` of ``alpha A B``) the cotangent

    (sumbuild l (lam i (sumbuild n (lam k (sumbuild m (lam j
      (mul (mul (index k (index i dC)) (index k (index j B))) (index j (index i A))))))))))

a triple loop of scalar terms, the product's cost without its blocked kernel (and ``B`` read down its
columns).  Summed over ``k`` first, the factors that read ``k`` are a matrix product, ``P = dC B^T``,
and what is left is the element-wise dot product of ``P`` with ``A``:

    (let (P (build l (lam i (build m (lam j (sumbuild n (lam k (mul x y)))))))))
      (sumbuild l (lam i (sumbuild m (lam j (mul z (index j (index i P))))))))

which :mod:`cpp_backend.products` blocks (its reads transposed or computed once there).  The terms
are the same products, added in another order (so not under exact order).  The new code reads every
factor at every iteration where the original read it as long as every loop runs, which is checked
(the original runs otherwise); every let of the loops is a factor's read or Float arithmetic on them.
"""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.convolutions import guarded
from cpp_backend.let_chains import peel_lets
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op
from knossos.types import FLOAT, vec

#: A term (its lets inlined) has at most this many nodes.
_TERM_MAX = 200
_LOOPING = frozenset({Op.BUILD, Op.SUMBUILD, Op.SUM, Op.CALL, Op.APPLY, Op.LAM, Op.CONSTVEC, Op.DELTAVEC, Op.LET})
_SAFE = frozenset({Op.VAR, Op.CONST, Op.INDEX, Op.SIZE, Op.GET, Op.MUL, Op.ADD, Op.SUB, Op.NEG})


def contraction(
    e: Expr, fresh: Callable[[str], str], rewrite: Callable[[Expr], Expr], blocked: Callable[[Expr], bool]
) -> Expr | None:
    """``e``, a sum over three loops of a product of factors (module docstring), as the element-wise
    dot product of one operand with the product of the other two, under the check that every loop
    runs; None where ``e`` is no such sum or the product would not reach the blocked nest
    (``blocked`` of ``rewrite`` of it, the products pass)."""
    if e.op is not Op.SUMBUILD or e.type is not FLOAT:
        return None
    loops: list[tuple[Expr, Expr]] = []
    resolved: dict[str, Expr] = {}
    rhss: list[Expr] = []
    body = e
    while True:
        lets, body = _unwrapped(body)
        for v, rhs in lets:
            if rhs.size > _TERM_MAX or any(x.op in _LOOPING for x in distinct_nodes(rhs)):
                return None
            r = _resolve(rhs, resolved)
            if r is None:
                return None
            resolved[v.data] = r
            rhss.append(r)
        if body.op is not Op.SUMBUILD or body.type is not FLOAT or len(loops) == 3:
            break
        loops.append((body.args[0], body.args[1]))
        body = body.args[2]
    term = _resolve(body, resolved) if len(loops) == 3 else None
    if term is None or any(x.op not in _SAFE for x in distinct_nodes(term)):
        return None
    names = {v.data for _, v in loops}
    if len(names) < 3 or any(n.size > 8 or n.free & names or n.free & set(resolved) for n, _ in loops):
        return None
    factors = _factors(term)
    for c in (1, 2, 0):  # the index summed first: the middle loop's, then the others
        (na, a), (nb, b) = (loops[x] for x in range(3) if x != c)
        nc, cv = loops[c]
        z = [f for f in factors if cv.data not in f.free]
        p = [f for f in factors if cv.data in f.free]
        if not z or not p or not all(f.free & {a.data, b.data} for f in p):
            continue
        pm = E.var(fresh("ks$pm"), vec(vec(FLOAT)))
        product = E.build(na, a, E.build(nb, b, E.sumbuild(nc, cv, _times(p))))
        product = rewrite(product)
        if not blocked(product):
            continue
        dot = E.op(Op.MUL, _times(z), E.op(Op.INDEX, b, E.op(Op.INDEX, a, pm)))
        fast = E.let(pm, product, E.sumbuild(na, a, E.sumbuild(nb, b, dot)))
        subterms = {id(x) for x in distinct_nodes(term)}
        if not all(_kept(r, subterms) for r in rhss):
            return None
        return guarded([E.op(Op.GT, n, E.const(0)) for n, _ in loops], fast, e)
    return None


def _unwrapped(e: Expr) -> tuple[list[tuple[Expr, Expr]], Expr]:
    """``e``'s lets and what they scope, ``(let (x r) x)`` taken as ``r`` (the lets of ``r`` added)."""
    lets, body = peel_lets(e)
    while lets and body.op is Op.VAR and body is lets[-1][0] and body.data not in lets[-1][1].free:
        body = lets.pop()[1]
        more, body = peel_lets(body)
        lets += more
    return lets, body


def _resolve(e: Expr, lets: dict[str, Expr]) -> Expr | None:
    """``e`` (binder-free) with the variables of ``lets`` replaced by their right-hand sides; None where
    it grows past :data:`_TERM_MAX` or binds a name."""
    if e.op is Op.VAR:
        return lets.get(e.data, e)
    if not e.args:
        return e
    if e.op in _LOOPING or e.size > _TERM_MAX:
        return None
    args = []
    for x in e.args:
        r = _resolve(x, lets)
        if r is None:
            return None
        args.append(r)
    out = e.replace_args(tuple(args))
    return out if out.size <= _TERM_MAX else None


def _factors(term: Expr) -> list[Expr]:
    """The factors of a tree of Float ``mul``s, left to right."""
    if term.op is Op.MUL and term.type is FLOAT:
        return _factors(term.args[0]) + _factors(term.args[1])
    return [term]


def _times(factors: list[Expr]) -> Expr:
    out = factors[0]
    for f in factors[1:]:
        out = E.op(Op.MUL, out, f)
    return out


def _kept(r: Expr, subterms: set[int]) -> bool:
    """Whether the dropped let's ``r`` is read by the new code, a variable or its size, or Float
    arithmetic on those (which cannot fail)."""
    if id(r) in subterms or r.op is Op.VAR or (r.op is Op.SIZE and r.args[0].op is Op.VAR):
        return True
    return r.op in (Op.MUL, Op.ADD, Op.SUB) and r.type is FLOAT and all(_kept(a, subterms) for a in r.args)


__all__ = ["contraction"]
