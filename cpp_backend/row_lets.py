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

from cpp_backend.let_chains import peel_lets, wrap_lets
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op
from knossos.substitution import substitute
from knossos.types import Kind, vec

#: A row's rest is substituted into only up to this many nodes (a bound on the work; past it the row stays a let).
_SUBST_MAX = 400
_BINDERS = {Op.LET: 0, Op.LAM: 0, Op.BUILD: 1, Op.SUMBUILD: 1}


class _Capture(Exception):
    """A binder would capture a name that an inlined read mentions."""


def _safe(e: Expr, bounds: dict[str, Expr]) -> bool:
    """Whether ``e`` is a read that cannot fail: a variable, a constant, the size of a safe read, or
    ``(index v M)`` of a safe ``M`` and a loop variable ``v`` below ``(size M)``."""
    while True:
        if e.op in (Op.VAR, Op.CONST):
            return True
        if e.op is Op.SIZE:
            e = e.args[0]
        elif e.op is Op.INDEX and e.args[0].op is Op.VAR and bounds.get(e.args[0].data) is e.args[1]:
            e = e.args[1]
        else:
            return False


def _inline_reads(e: Expr, env: dict[str, Expr], bounds: dict[str, Expr]) -> Expr:
    """``e`` with every let whose right-hand side (its reads inlined) is :func:`_safe` inlined: a read
    that cannot fail, computed where it is used instead (so the product's reads are written out, as
    the patterns want them).  ``bounds``: loop variable -> the vector whose size bounds it."""
    if e.op is Op.VAR:
        return env.get(e.data, e)
    at = _BINDERS.get(e.op)
    if at is None:
        return e.replace_args(tuple(_inline_reads(a, env, bounds) for a in e.args)) if e.args else e
    name = e.args[at].data
    if any(name in x.free for x in (*env.values(), *bounds.values())):
        raise _Capture
    inner_env = {k: v for k, v in env.items() if k != name}
    inner_bounds = {k: v for k, v in bounds.items() if k != name}
    if e.op is Op.LET:
        rhs = _inline_reads(e.args[1], env, bounds)
        if _safe(rhs, bounds):
            return _inline_reads(e.args[2], {**inner_env, name: rhs}, inner_bounds)
        if _read(rhs) and name not in rhs.free:  # the let stays, failing as before; its uses read it anew
            return E.let(e.args[0], rhs, _inline_reads(e.args[2], {**inner_env, name: rhs}, inner_bounds))
        return E.let(e.args[0], rhs, _inline_reads(e.args[2], inner_env, inner_bounds))
    if e.op is Op.LAM:
        return e.replace_args((e.args[0], _inline_reads(e.args[1], inner_env, inner_bounds)))
    size = _inline_reads(e.args[0], env, bounds)
    if size.op is Op.SIZE and _safe(size.args[0], bounds):
        inner_bounds[name] = size.args[0]
    return e.replace_args((size, e.args[1], _inline_reads(e.args[2], inner_env, inner_bounds)))


def _read(e: Expr) -> bool:
    """Whether ``e`` is a chain of reads: sizes and indexes by atoms of a variable."""
    while e.op in (Op.SIZE, Op.INDEX):
        if e.op is Op.INDEX and e.args[0].op not in (Op.VAR, Op.CONST):
            return False
        e = e.args[-1]
    return e.op is Op.VAR


#: Ops whose evaluation runs a loop or makes a vector (what :func:`straight_line` refuses).
LOOPING = frozenset({Op.BUILD, Op.SUMBUILD, Op.SUM, Op.CALL, Op.APPLY, Op.LAM, Op.CONSTVEC, Op.DELTAVEC})
#: A scalar let moved into each element of a hoisted build has at most this many nodes.
_SCALAR_MAX = 40


def straight_line(e: Expr) -> bool:
    """Whether evaluating ``e`` runs no loop and makes no vector (reads of vectors are fine)."""
    for x in distinct_nodes(e):
        if x.op in LOOPING or x.op in (Op.TUPLE, Op.ASSERT):
            return False
        if x.op not in (Op.INDEX, Op.VAR, Op.SIZE, Op.GET) and x.type.kind in (Kind.VEC, Kind.TUPLE):
            return False
    return True


def _scalar(e: Expr) -> bool:
    """Whether ``e`` is a small scalar computed without loops (a row's ``(sqrt (to_float width))``)."""
    if e.size > _SCALAR_MAX or e.type.kind in (Kind.VEC, Kind.TUPLE):
        return False
    stack = [e]
    while stack:
        x = stack.pop()
        if x.op in LOOPING or x.op in (Op.TUPLE, Op.ASSERT, Op.LET, Op.IF):
            return False
        stack.extend(x.args)
    return True


def _hoistable(n: Expr, iv: Expr, lets: list[tuple[Expr, Expr]], rhs: Expr) -> Expr | None:
    """``(build n (lam i rhs))`` with the row's earlier ``lets`` that are reads inlined and those that
    are small scalars moved into each element (or term) of ``rhs`` (the emitter computes them once per
    row, as loop invariants; the row still evaluates them all, failing as before) and, inside
    ``rhs``, the lets that are reads that cannot fail inlined; None where ``rhs`` needs an earlier
    let that is neither, or a name would be captured."""
    if rhs.size > _SUBST_MAX or len({v.data for v, _ in lets}) < len(lets):
        return None  # (a row that binds a name twice: its lets are told apart by name below)
    bounds = {iv.data: n.args[0]} if n.op is Op.SIZE and _safe(n.args[0], {}) else {}
    env: dict[str, Expr] = {}
    moved: list[tuple[Expr, Expr]] = []
    other: set[str] = set()
    try:
        for v, r in lets:
            env.pop(v.data, None)
            other.discard(v.data)
            if r.size > _SUBST_MAX:
                other.add(v.data)
                continue
            r = _inline_reads(r, env, bounds)
            if v.data in r.free or other & r.free:
                other.add(v.data)
            elif _read(r) and not {m.data for m, _ in moved} & r.free:
                env[v.data] = r
            elif _scalar(r):
                moved.append((v, r))
            else:
                other.add(v.data)
        if other & rhs.free:
            return None
        out = _inline_reads(rhs, env, bounds)
    except _Capture:
        return None
    used: list[tuple[Expr, Expr]] = []
    needed = set(out.free)
    for v, r in reversed(moved):  # (with those that they read)
        if v.data in needed:
            used.insert(0, (v, r))
            needed |= r.free
    if used:  # into each element: the inner loop's size must not need them, nor its variable hide them
        size, var, elem = out.args
        names = {v.data for v, _ in used}
        if names & size.free or var.data in names or any(var.data in r.free for _, r in used):
            return None
        for v, r in reversed(used):
            elem = E.let(v, r, elem)
        out = out.replace_args((size, var, elem))
    return E.build(n, iv, out)


def _first_product(
    n: Expr, iv: Expr, lets: list[tuple[Expr, Expr]], reaches: Callable[[Expr], bool]
) -> tuple[int, Expr] | None:
    """The first of ``lets`` whose right-hand side is a vector built by a loop that depends on the
    earlier lets only through reads that cannot fail (inlined), and that as a build over the rows
    reaches the blocked nest: its place and that build; or None."""
    for at, (_, rhs) in enumerate(lets):
        if rhs.op in (Op.BUILD, Op.SUMBUILD) and rhs.type.kind is Kind.VEC:
            whole = _hoistable(n, iv, lets[:at], rhs)
            if whole is not None and reaches(whole):
                return at, whole
    return None


def hoist_row_let(
    e: Expr, fresh: Callable[[], str], small: Callable[[Expr], bool], reaches: Callable[[Expr], bool]
) -> Expr | None:
    """``e`` = ``(build n (lam i LETS rest))`` with the first let of ``LETS`` whose right-hand side is a
    build depending on no earlier let and ``reaches(build n (lam i rhs))`` (a product that reaches
    the blocked nest) hoisted (see the module docstring); None where there is none."""
    if e.op not in (Op.BUILD, Op.SUMBUILD) or not small(e.args[0]):
        return None
    n, iv, body = e.args
    lets, body = peel_lets(body)
    found = _first_product(n, iv, lets, reaches)
    if found is None and lets and body.op in (Op.BUILD, Op.SUMBUILD) and body.type.kind is Kind.VEC:
        # the row's value itself a loop after its lets (a search's tidying removed the let that held
        # it): hoisted as if let-bound, ``(let (h body) h)``, so that a row written either way reaches
        # the blocked nest (with no lets before it, the build is a nest as it is: nothing to hoist)
        h = E.var(fresh(), body.type)
        found = _first_product(n, iv, [*lets, (h, body)], reaches)
        lets, body = ([*lets, (h, body)], h) if found is not None else (lets, body)
    if found is None:
        return None
    at, whole = found
    h, rhs = lets[at]
    big = E.var(fresh(), vec(rhs.type))
    row = E.op(Op.INDEX, iv, big)
    rest = body
    for v, r in reversed(lets[at + 1 :]):
        rest = E.let(v, r, rest)
    rest = substitute(rest, h.data, row) if rest.size <= _SUBST_MAX else E.let(h, row, rest)
    for v, r in reversed(lets[:at]):
        rest = E.let(v, r, rest)
    if e.op is Op.BUILD and rest is row:  # the rows themselves (a tape of the rows' values)
        return whole
    return E.let(big, whole, E.build(n, iv, rest) if e.op is Op.BUILD else E.sumbuild(n, iv, rest))


def hoist_row_chain(
    e: Expr, fresh: Callable[[], str], small: Callable[[Expr], bool], reaches: Callable[[Expr], bool]
) -> Expr | None:
    """``e`` = ``(build n (lam i LETS P))`` or ``(sumbuild n (lam i LETS P))``, ``P`` a loop (or the last
    let's, which ``P`` names), whose lets compute a vector with loops that ``P`` reads (reverse mode's
    ``d$s`` of a softmax row, then ``P`` its product with the row of ``q``): the lets up to the last
    one with a loop hoisted as one build over the rows, a tape ``H`` of that let's values,

        (let (H (build n (lam i LETS[..k] v_k))) (build n (lam i LETS'[v_k := (index i H)] P)))

    ``LETS'`` the lets that ``P`` still needs, where the nest is then a product that reaches the
    blocked nest; None otherwise.  Every let the row evaluated is evaluated, in ``H`` (the ones
    ``LETS'`` keeps again: pure, the same values), so the same calls fail, possibly in another order."""
    if e.op not in (Op.BUILD, Op.SUMBUILD) or e.type.kind is not Kind.VEC or not small(e.args[0]):
        return None
    n, iv, body = e.args
    lets, product = peel_lets(body)
    if product.op is Op.VAR and lets and lets[-1][0] is product:
        lets, product = lets[:-1], lets[-1][1]
    if product.op not in (Op.BUILD, Op.SUMBUILD) or len({v.data for v, _ in lets}) < len(lets):
        return None
    looping = [k for k, (_, rhs) in enumerate(lets) if not straight_line(rhs)]
    if not looping or iv.data in {v.data for v, _ in lets}:
        return None
    k = looping[-1]
    v_k, rhs_k = lets[k]
    if rhs_k.type.kind is not Kind.VEC:
        return None
    big = E.var(fresh(), vec(rhs_k.type))
    whole = E.build(n, iv, wrap_lets(lets[: k + 1], v_k))
    later = lets[k + 1 :]  # (kept whether read or not: H does not evaluate them)
    needed = set(product.free).union(*(rhs.free for _, rhs in later))
    live: list[tuple[Expr, Expr]] = []
    for v, rhs in reversed([*lets[:k], (v_k, E.op(Op.INDEX, iv, big))]):  # (the others: evaluated in H)
        if v.data in needed:
            live.insert(0, (v, rhs))
            needed = (needed - {v.data}) | set(rhs.free)
    live += later
    if any(not straight_line(rhs) for _, rhs in live):
        return None
    rows = E.build(n, iv, wrap_lets(live, product)) if e.op is Op.BUILD else E.sumbuild(n, iv, wrap_lets(live, product))
    if not reaches(rows):
        return None
    return E.let(big, whole, rows)


def share_hoisted(root: Expr, prefix: str) -> Expr:
    """``root`` with the matrices hoisted (variables named ``prefix``...) at the top of the right-hand
    sides of its outermost let chain moved into that chain, and each computed once where several
    are the same (sibling sums over the rows that compute one product, as reverse mode writes them:
    rev$mlp's dh = dy w2 in each of dx, dw1, db1).  They were evaluated at that point of the chain
    already, so the values and failures are those of the first."""
    chain, body = peel_lets(root)
    out: list[tuple[Expr, Expr]] = []
    seen: dict[int, Expr] = {}
    keep: list[Expr] = []  # (the keys' nodes stay alive)
    shared = False
    for v, rhs in chain:
        x = rhs
        while x.op is Op.LET and x.args[0].data.startswith(prefix):
            big, whole = x.args[0], x.args[1]
            have = seen.get(id(whole))
            rest = x.args[2]
            if have is not None:
                rest, shared = substitute(rest, big.data, have), True
            else:
                seen[id(whole)] = big
                keep.append(whole)
                out.append((big, whole))
            x = rest
        out.append((v, x))
    if not shared:
        return root
    for v, rhs in reversed(out):
        body = E.let(v, rhs, body)
    return body


__all__ = ["hoist_row_chain", "hoist_row_let", "share_hoisted"]
