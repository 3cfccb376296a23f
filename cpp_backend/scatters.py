"""A sum of one-hots at a shifted index, as a vector that gathers its terms.

Reverse mode writes the cotangent of a convolution's input as one-hots at the read's index, summed
over the output positions ``t`` and the kernel offsets:

    sum_{t,k} (deltaVec W (clamp (t + d k - p)) (if (valid t k) v 0.0))

Element ``u`` of that sum adds the terms whose index is ``u``: where the index is ``s + a0`` for a
summed variable ``s`` (its coefficient 1) and the rest ``a0`` free of ``s``, the one term of each
other iteration at ``s = u - a0`` (if that ``s`` is in its loop's range):

    build W (lam u (sum_k (let (s (sub u a0)) (if (0 <= s < n) (if (eq index u) v 0.0) 0.0))))

A clamped index (``frontends.tensor.clamped``: ``(max 0 (if (lt a N) a N-1))``) is ``a`` wherever
the term's test holds (the test bounds ``a`` to ``0 <= a < N``), and elsewhere the term is 0.0: only
those zeros are not added (a sum of -0.0 terms may end +0.0 where it ended -0.0).  The terms are
computed only at the iterations that reach an element, so every read of the terms is probed at
every iteration of its own loops (``convolutions.probes``): a read that failed still fails.
"""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.convolutions import made_reads, probes
from cpp_backend.patterns import Cap, first, node
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import INTEGER

#: A clamped read's index: ``(max 0 (if (lt a N) a M))`` (M = N - 1, checked).
CLAMPED = node(Op.MAX, Cap("zero"), node(Op.IF, node(Op.LT, Cap("a"), Cap("N")), Cap("a"), Cap("M")))
#: A tested term: ``(if g v 0.0)`` (through lets: the caller resolves them).
TESTED = node(Op.IF, Cap("g"), Cap("v"), Cap("else"))


def _shift(a: Expr, s: str) -> Expr | None:
    """``a0`` where ``a`` is ``s + a0`` (``s`` once, added, not multiplied), or None."""
    if a.op is Op.VAR and a.data == s:
        return E.const(0)
    if s not in a.free:
        return None
    if a.op is Op.ADD:
        left, right = a.args
        if s in left.free and s not in right.free:
            rest = _shift(left, s)
            return None if rest is None else E.op(Op.ADD, rest, right)
        if s in right.free and s not in left.free:
            rest = _shift(right, s)
            return None if rest is None else E.op(Op.ADD, left, rest)
        return None
    if a.op is Op.SUB and s in a.args[0].free and s not in a.args[1].free:
        rest = _shift(a.args[0], s)
        return None if rest is None else E.op(Op.SUB, rest, a.args[1])
    return None


def _conjuncts(g: Expr) -> list[Expr]:
    return _conjuncts(g.args[0]) + _conjuncts(g.args[1]) if g.op is Op.AND else [g]


def _affine(index: Expr, value: Expr) -> Expr | None:
    """The unclamped index ``a`` of a term ``value`` at ``index``: ``index`` itself, or a clamp of ``a``
    where ``value`` is 0.0 unless its test bounds ``a`` into the clamp's range."""
    b = first(CLAMPED, index)
    if b is None:
        return index
    a, n, m, zero = (b[x] for x in ("a", "N", "M", "zero"))
    assert isinstance(a, Expr) and isinstance(n, Expr) and isinstance(m, Expr) and isinstance(zero, Expr)
    if not (zero.op is Op.CONST and zero.data == 0 and n.op is Op.CONST and m.op is Op.CONST and m.data == n.data - 1):
        return None
    t = first(TESTED, value)
    if t is None:
        return None
    g, other = t["g"], t["else"]
    assert isinstance(g, Expr) and isinstance(other, Expr)
    if other.op is not Op.CONST or other.data != 0.0:
        return None
    parts = _conjuncts(g)
    if E.op(Op.GTE, a, E.const(0)) not in parts or E.op(Op.LT, a, n) not in parts:
        return None
    return a


def gather_one_hots(
    one_hot: Expr,
    sums: list[tuple[Expr, Expr]],
    lets: list[tuple[Expr, Expr]],
    resolve: Callable[[Expr], Expr],
    loops: list[tuple[Expr, Expr]],
    fresh: Callable[[str], str],
) -> tuple[Expr, Expr, Expr, list[Expr]] | None:
    """``one_hot`` = ``(deltaVec W index v)``, summed over ``sums`` (size, variable) under ``lets``
    (variable, right-hand side; ``resolve`` inlines them into a term), as element ``u`` of the gather
    (module docstring): (W, u, the element's term with the lets inside, the checks that every read
    of the terms is made as before).  ``loops``: every loop around the term, outermost first (the
    probes' ranges).  None where the index is no shifted summed variable."""
    width, index, value = one_hot.args
    a = _affine(resolve(index), resolve(value))
    if a is None:
        return None
    for n, s in reversed(sums):
        a0 = _shift(a, s.data)
        if a0 is None or any(s.data in n2.free for n2, _ in sums):
            continue
        u = E.var(fresh("ks$u"), INTEGER)
        term: Expr = E.op(Op.IF, E.op(Op.EQ, index, u), value, E.const(0.0))
        for v, rhs in reversed(lets):
            term = E.let(v, rhs, term)
        in_range = E.op(Op.AND, E.op(Op.GTE, s, E.const(0)), E.op(Op.LT, s, n))
        term = E.let(s, E.op(Op.SUB, u, a0), E.op(Op.IF, in_range, term, E.const(0.0)))
        whole: Expr = value
        for v, rhs in reversed(lets):
            whole = E.let(v, rhs, whole)
        reads = made_reads(whole)
        checks = None if reads is None else probes(reads, loops, fresh)
        if checks is None:
            return None
        return width, u, term, checks
    return None


__all__ = ["CLAMPED", "gather_one_hots"]
