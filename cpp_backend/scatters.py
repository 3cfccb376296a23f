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

from cpp_backend.convolutions import holds_everywhere, made_reads, probes
from cpp_backend.let_chains import wrap_lets
from cpp_backend.patterns import Cap, first, node
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Kind

#: A clamped read's index: ``(max 0 (if (lt a N) a M))`` (M = N - 1, checked).
CLAMPED = node(Op.MAX, Cap("zero"), node(Op.IF, node(Op.LT, Cap("a"), Cap("N")), Cap("a"), Cap("M")))
#: A tested term: ``(if g v 0.0)`` (through lets: the caller resolves them).
TESTED = node(Op.IF, Cap("g"), Cap("v"), Cap("else"))


def _shift(a: Expr, s: str) -> tuple[int, Expr] | None:
    """(c, a0) where ``a`` is ``c s + a0`` (``s`` once, added, times a positive constant ``c``), or None."""
    if a.op is Op.VAR and a.data == s:
        return 1, E.const(0)
    if s not in a.free:
        return None
    if a.op is Op.MUL:
        k, x = a.args if a.args[0].op is Op.CONST else a.args[::-1]
        if k.op is not Op.CONST or not isinstance(k.data, int) or k.data < 1 or s not in x.free:
            return None
        inner = _shift(x, s)
        return None if inner is None else (inner[0] * k.data, E.op(Op.MUL, k, inner[1]))
    if a.op is Op.ADD:
        left, right = a.args
        if s in left.free and s not in right.free:
            rest = _shift(left, s)
            return None if rest is None else (rest[0], E.op(Op.ADD, rest[1], right))
        if s in right.free and s not in left.free:
            rest = _shift(right, s)
            return None if rest is None else (rest[0], E.op(Op.ADD, left, rest[1]))
        return None
    if a.op is Op.SUB and s in a.args[0].free and s not in a.args[1].free:
        rest = _shift(a.args[0], s)
        return None if rest is None else (rest[0], E.op(Op.SUB, rest[1], a.args[1]))
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


def one_hots_inside(lets: list[tuple[Expr, Expr]], body: Expr) -> tuple[list[tuple[Expr, Expr]], Expr]:
    """``lets`` (variable, right-hand side) and a one-hot ``body`` of a sum the last let computes,
    ``(let (z (sumbuild p (lam s B))) (deltaVec n i z))``, as the sum of one-hots
    ``(sumbuild p (lam s (deltaVec n i B)))``, the lets of ``B`` outside the inner one-hots (one-hots
    are linear; ``n`` and ``i`` are pure, evaluated at each term); unchanged otherwise."""
    if not lets or body.op is not Op.DELTAVEC or body.args[2] is not lets[-1][0]:
        return lets, body
    z, total = lets[-1]
    n, i, _ = body.args
    if total.op is not Op.SUMBUILD or total.type.kind is not Kind.VEC or z.data in n.free | i.free:
        return lets, body
    p, s, inner = total.args
    if s.data in n.free | i.free:
        return lets, body
    inner_lets: list[tuple[Expr, Expr]] = []
    while inner.op is Op.LET:
        inner_lets.append((inner.args[0], inner.args[1]))
        inner = inner.args[2]
    while inner_lets and inner.op is Op.VAR and inner is inner_lets[-1][0]:
        inner = inner_lets.pop()[1]  # (let (x r) x) is r
    if any(v.data in n.free | i.free for v, _ in inner_lets):
        return lets, body
    one_hot: Expr = E.op(Op.DELTAVEC, n, i, inner)
    for v, rhs in reversed(inner_lets):
        one_hot = E.let(v, rhs, one_hot)
    return lets[:-1], E.sumbuild(p, s, one_hot)


def gather_one_hots(
    one_hot: Expr,
    sums: list[tuple[Expr, Expr]],
    lets: list[tuple[Expr, Expr]],
    resolve: Callable[[Expr], Expr],
    loops: list[tuple[Expr, Expr]],
    fresh: Callable[[str], str],
    original: Expr | None = None,
) -> tuple[list[tuple[Expr, Expr]], Expr, list[Expr]] | None:
    """``one_hot`` = ``(deltaVec W index v)`` (or one-hots of one-hots: an element of a matrix), summed
    over ``sums`` (size, variable) under ``lets`` (variable, right-hand side; ``resolve`` inlines them
    into a term), as the element of the gather (module docstring): (the gather's loops, size and
    variable; the element's term with the lets inside; the checks that every read of the terms is made
    as before).  ``loops``: every loop around the term, outermost first (the probes' ranges).  None
    where an index is no shifted summed variable.  ``original``: the terms (with their lets) whose
    reads the checks probe, where ``one_hot`` and ``lets`` compute them otherwise (default: those)."""
    hots: list[tuple[Expr, Expr]] = []
    value = one_hot
    while value.op is Op.DELTAVEC:
        hots.append((value.args[0], value.args[1]))
        value = value.args[2]
    if value.type is not FLOAT:
        return None
    whole = wrap_lets(lets, value)
    seen = resolve(value)
    eliminated: list[tuple[Expr, Expr, int, Expr]] = []  # (s, u, c, a0): s = (u - a0) / c
    gather: list[tuple[Expr, Expr]] = []
    same: list[Expr] = []
    uniform: list[Expr] = []
    done: dict[int, Expr] = {}  # a resolved index -> its element's variable
    for width, index in hots:
        a = _affine(resolve(index), seen)
        if a is None:
            return None
        for _, s in sums:  # the outermost first: the output positions, not the kernel's offsets
            shifted = _shift(a, s.data)
            if shifted is None or any(s is e[0] for e in eliminated) or any(s.data in n2.free for n2, _ in sums):
                continue
            c, a0 = shifted
            if any(e[0].data in a0.free for e in eliminated):
                continue
            u = E.var(fresh("ks$u"), INTEGER)
            eliminated.append((s, u, c, a0))
            break
        else:
            return None
        wide = _swap(resolve(width), done)  # a row's length at the element's row
        if gather and set(wide.free) & {x.data for _, x in gather}:
            # One-hots of rows of several lengths fail to add (their zero rows are the term's
            # length): the gather is taken only where every row has the first row's length.
            first = _swap(wide, {id(x): E.const(0) for _, x in gather})
            every = holds_everywhere(E.op(Op.EQ, wide, first), loops + gather)
            if every is None:
                return None
            uniform.append(every)
        gather.append((wide, u))
        done[id(resolve(index))] = u
        same.append(E.op(Op.EQ, index, u))
    term: Expr = E.op(Op.IF, _all(same), value, E.const(0.0))
    # The lets of the eliminated variables go under the tests that they are in range; the others stay
    # outside, made at every iteration as the nest made them.
    moved = {s.data for s, _, _, _ in eliminated}
    inside, outside = [], []
    for v, rhs in lets:
        if rhs.free & moved:
            moved.add(v.data)
            inside.append((v, rhs))
        else:
            outside.append((v, rhs))
    for v, rhs in reversed(inside):
        term = E.let(v, rhs, term)
    tests: list[Expr] = []
    for s, _, _, _ in eliminated:
        n = next(n for n, v in sums if v is s)
        tests += [E.op(Op.GTE, s, E.const(0)), E.op(Op.LT, s, n)]
    term = E.op(Op.IF, _all(tests), term, E.const(0.0))
    for s, u, c, a0 in reversed(eliminated):
        offset = E.op(Op.SUB, u, a0)
        if c == 1:
            term = E.let(s, offset, term)
        else:  # (u - a0) a multiple of c
            q = E.op(Op.DIV, offset, E.const(c))
            divides = E.op(Op.EQ, E.op(Op.MUL, E.const(c), q), offset)
            term = E.let(s, q, E.op(Op.IF, divides, term, E.const(0.0)))
    for v, rhs in reversed(outside):
        term = E.let(v, rhs, term)
    reads = made_reads(whole if original is None else original)
    checks = None if reads is None else probes(reads, loops, fresh)
    if checks is None:
        return None
    return gather, term, uniform + checks


def _all(conds: list[Expr]) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = E.op(Op.AND, out, c)
    return out


def _swap(e: Expr, done: dict[int, Expr]) -> Expr:
    """``e`` (small) with the subterms of ``done`` (by id) replaced by their variables."""
    if id(e) in done:
        return done[id(e)]
    return e.replace_args(tuple(_swap(a, done) for a in e.args)) if e.args else e


__all__ = ["CLAMPED", "gather_one_hots"]
