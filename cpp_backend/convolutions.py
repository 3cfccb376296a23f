"""Contractions whose operands are read through shifted (affine, padded) indices, as one matrix
product on gathered windows.

A convolution and its weight gradient are sums of products whose reads are not a matrix's rows:

    y[b][o][t]  = bias[o] + sum_{c,k} (if (valid t k) (mul x[b][c][clamp(t s + k d - p)] w[o][c][k]) 0.0)
    dw[o][c][k] = sum_{b,t} (if (valid t k) (mul dy[b][o][t] x[b][c][clamp(t s + k d - p)]) 0.0)

(a padded read is clamped into range and its term tested, as ``frontends.tensor.clamped`` writes it).
Each is a nest of builds (the outputs) over a sum (nested sums: the contracted loops) of a product of
two reads, each read depending on some outputs and on every contracted loop.  Numbering the outputs
each read depends on (its rows) and the contracted loops (the columns) makes each read a matrix:
copied once (a gather: im2col for the input of a convolution, the padded edges written as zeros), the
nest is the product of the two copies in the blocked nest's shape (``cpp_backend.products``), and
each output element reads its entry.  The copies cost the size of the operands' windows, the product
its multiply-adds; the blocked kernel does the rest.

Meaning is kept where it can be checked: each copy makes its read under the tests the nest made it
under (a let's read whatever the tests are; a copy that would make reads the nest does not make is
refused), loops that run no term read nothing, reads the nest made and the product does not (a let
the term no longer uses) are made by probes over their own loops and tests, row lengths chosen by
loops are the first row's under a check, and a padded term is a product with a zero only where the
other operand is finite (``0.0 * inf`` is NaN, the test's 0.0 is not): otherwise the nest computes
as written.  The sums are added in another order, so the pass runs only where the order is free (not
under ``KS_EXACT_ORDER``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cpp_backend.patterns import Cap, Pat, Where, first, node
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type, vec

#: Ops of an index or of a test of one: integer arithmetic and comparisons of loop variables.
_INDEX_OPS = frozenset(
    {Op.CONST, Op.VAR, Op.ADD, Op.SUB, Op.MUL, Op.MAX, Op.IF, Op.LT, Op.LTE, Op.GT, Op.GTE, Op.EQ, Op.NE, Op.AND, Op.OR}
)
#: Ops through which an element's sum is an operand (``(add (index o bias) (sumbuild ...))``).
_STRICT = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.NEG})
#: Ops of a term's lets that can be dropped once the term is inlined (a dropped read is probed).
_PURE = _INDEX_OPS | {Op.INDEX, Op.SIZE, Op.TUPLE, Op.GET, Op.NEG, Op.TO_FLOAT}
#: A term inlined has at most this many nodes; a size evaluated again, at most _SMALL.
_TERM_MAX = 400
_SMALL = 8

_ZERO = Where(Cap("zero"), lambda b: isinstance(b["zero"], Expr) and b["zero"].op is Op.CONST and b["zero"].data == 0.0)
#: A term: a product of two reads (under the tests of :data:`_TESTED`).
_TERM: Pat = node(Op.MUL, Cap("x"), Cap("y"))
#: A tested term (a padded read), the test's else 0.0.
_TESTED: Pat = node(Op.IF, Cap("g"), Cap("t"), _ZERO)


@dataclass(frozen=True)
class _Read:
    """``(index a_m ... (index a_1 base))``: ``base`` invariant in the loops, the indices loop-free."""

    expr: Expr
    loops: frozenset[str]  # the loop variables its indices use
    shifted: bool  # an index is more than a loop variable


def _index_term(e: Expr) -> bool:
    """Whether ``e`` is integer arithmetic and tests (a division only by a positive constant: a
    strided output position), which cannot fail."""
    return all(
        n.op in _INDEX_OPS or (n.op is Op.DIV and n.args[1].op is Op.CONST and n.args[1].data > 0)
        for n in distinct_nodes(e)
    )


def _pure(e: Expr) -> bool:
    """Whether evaluating ``e`` can fail only in a read (which the probes make)."""
    return all(n.op in _PURE or (n.op is Op.DIV and _index_term(n)) for n in distinct_nodes(e))


def _read(e: Expr, loop_vars: frozenset[str]) -> _Read | None:
    """``e`` as an operand: a read, or a read scaled by loop-invariant factors (a gradient's
    ``(mul (index ...) 0.5)``), which the copy computes as it is; None otherwise."""
    x = e
    while x.type is FLOAT and x.op in (Op.MUL, Op.DIV, Op.NEG):
        if x.op is Op.NEG:
            x = x.args[0]
            continue
        a, c = x.args
        if x.op is Op.MUL and not a.free & loop_vars:
            a, c = c, a
        if c.free & loop_vars:
            return None
        x = a
    used: set[str] = set()
    shifted = False
    while x.op is Op.INDEX and x.args[0].free & loop_vars:
        if not _index_term(x.args[0]):
            return None
        used |= x.args[0].free & loop_vars
        shifted = shifted or x.args[0].op is not Op.VAR
        x = x.args[1]
    if x.free & loop_vars or e.type is not FLOAT:
        return None
    return _Read(e, frozenset(used), shifted)


#: The tests under which a term is evaluated: (test, the branch taken: True for then).
Path = tuple[tuple[Expr, bool], ...]


def _inline(e: Expr, lets: dict[str, Expr], made: list[tuple[Expr, Path]], path: Path = ()) -> Expr | None:
    """``e`` with its lets inlined and each ``get`` of a tuple (through tests) taken; the right-hand
    side of every let goes to ``made`` with the tests under which it is evaluated (the caller probes
    its reads).  None where ``e`` holds anything but lets, reads, tuples and arithmetic."""
    if e.op is Op.LET:
        rhs = _inline(e.args[1], lets, made, path)
        if rhs is None:
            return None
        made.append((rhs, path))
        return _inline(e.args[2], {**lets, e.args[0].data: rhs}, made, path)
    if e.op is Op.VAR:
        return lets.get(e.data, e)
    if e.op in (Op.BUILD, Op.SUMBUILD, Op.SUM, Op.LAM, Op.CALL, Op.APPLY, Op.CONSTVEC, Op.DELTAVEC, Op.ASSERT):
        return None
    if not e.args:
        return e
    args: list[Expr] = []
    for k, a in enumerate(e.args):
        under = path
        if k > 0 and e.op is Op.IF:
            under = (*path, (args[0], k == 1))
        elif k > 0 and e.op in (Op.AND, Op.OR):
            under = (*path, (args[0], e.op is Op.AND))
        x = _inline(a, lets, made, under)
        if x is None:
            return None
        args.append(x)
    if e.op is Op.GET:
        return _project(args[0], e.data[0])
    return e.replace_args(tuple(args))


def inlined(term: Expr) -> Expr | None:
    """``term`` (lets, reads, tests and arithmetic) with its lets inlined and each ``get`` of a tuple
    taken; None where it holds more."""
    return _inline(term, {}, [])


def made_reads(term: Expr) -> list[tuple[Expr, Path]] | None:
    """The reads that evaluating ``term`` (lets, reads, tests and arithmetic) makes, each with the tests
    under which it is made (the outermost of each chain of indices); None where ``term`` holds more."""
    made: list[tuple[Expr, Path]] = []
    core = _inline(term, {}, made)
    if core is None:
        return None
    return _made([*made, (core, ())], [])


def _project(t: Expr, k: int) -> Expr | None:
    if t.op is Op.TUPLE:
        return t.args[k - 1]
    if t.op is Op.IF:
        a, b = _project(t.args[1], k), _project(t.args[2], k)
        return None if a is None or b is None else E.op(Op.IF, t.args[0], a, b)
    return None


def _made(made: list[tuple[Expr, Path]], copied: list[tuple[Expr, Path]]) -> list[tuple[Expr, Path]]:
    """The reads that ``made`` makes (the outermost of each chain, with its tests), but those the copies
    make wherever the nest makes them (``copied``: a read, and the tests the copy makes it under)."""
    skip = {id(x): p for x, p in copied}
    found: dict[tuple[int, Path], tuple[Expr, Path]] = {}
    always = {id(x) for d, path in made if not path for x in distinct_nodes(d)}
    for d, path in made:
        for x in distinct_nodes(d):
            if id(x) in skip and path[: len(skip[id(x)])] == skip[id(x)]:
                continue
            if x.op is Op.INDEX and not (path and id(x) in always):
                found[(id(x), path)] = (x, path)
    inner = {(id(x.args[1]), path) for x, path in found.values()}
    return sorted((v for k, v in found.items() if k not in inner), key=lambda v: v[0].size)


def _operand_sum(elem: Expr) -> Expr | None:
    """The Float sum that ``elem`` adds (through strict arithmetic, no binders), or None."""
    if elem.op is Op.SUMBUILD and elem.type is FLOAT:
        return elem
    if elem.op in _STRICT:
        found = [s for s in (_operand_sum(a) for a in elem.args) if s is not None]
        return found[0] if len(found) == 1 else None
    return None


def _replace(e: Expr, old: Expr, new: Expr) -> Expr:
    if e is old:
        return new
    if e.op not in _STRICT:
        return e
    return e.replace_args(tuple(_replace(a, old, new) for a in e.args))


def _at_zero(e: Expr, names: frozenset[str]) -> Expr:
    """``e`` (small, binder-free) with the variables ``names`` replaced by 0."""
    if e.op is Op.VAR:
        return _i(0) if e.data in names else e
    return e.replace_args(tuple(_at_zero(a, names) for a in e.args)) if e.args else e


def _all_equal(loops: list[tuple[Expr, Expr]], n: Expr, first_row: Expr) -> Expr:
    """The check that ``n`` is ``first_row`` at every iteration of ``loops`` (Bool, counted)."""
    count: Expr = E.op(Op.IF, E.op(Op.EQ, n, first_row), _i(0), _i(1))
    for m, v in reversed(loops):
        count = E.sumbuild(m, v, count)
    return E.op(Op.EQ, count, _i(0))


def _runs(loops: list[tuple[Expr, Expr]], ragged: dict[int, Expr]) -> list[Expr]:
    """Checks, in order, that every loop runs, each row length checked once the loops before it run."""
    out: list[Expr] = []
    for pos, (n, _) in enumerate(loops):
        if pos in ragged:
            out.append(ragged[pos])
        out.append(E.op(Op.GT, n, _i(0)))
    return out


def _i(n: int) -> Expr:
    return E.const(n)


def guarded(checks: list[Expr], fast: Expr, original: Expr) -> Expr:
    """``fast`` where the ``checks`` (in order) hold, else ``original``: ``(if checks fast original)``,
    without the checks that comparisons of literals make true (``(gt 128 0)``), and as
    ``(assert checks fast)`` where every check left is a probe (:func:`probes`), which holds or fails
    with its read's error, never false: then ``original`` is never run, and is not emitted (a
    product's whole loop nest again, g++'s time)."""
    runtime = [c for c in checks if not _literal_true(c)]
    if not runtime:
        return fast
    if all(_never_false(c) for c in runtime):
        return E.op(Op.ASSERT, _and(runtime), fast)
    return E.op(Op.IF, _and(runtime), fast, original)


def _literal_true(c: Expr) -> bool:
    if c.op is Op.AND:
        return all(_literal_true(a) for a in c.args)
    if c.op not in _COMPARE or not all(a.op is Op.CONST and a.type is INTEGER for a in c.args):
        return False
    return bool(_COMPARE[c.op](c.args[0].data, c.args[1].data))


_COMPARE: dict[Op, Callable[[int, int], bool]] = {
    Op.GT: lambda a, b: a > b,
    Op.GTE: lambda a, b: a >= b,
    Op.LT: lambda a, b: a < b,
    Op.LTE: lambda a, b: a <= b,
    Op.EQ: lambda a, b: a == b,
}


def _never_false(c: Expr) -> bool:
    """Whether ``c`` is ``(eq N 0)`` where every value ``N`` can take is a literal 0 (through sums,
    lets and tests), the one other being a branch never taken, ``(if (gt x x) 1 0)``: a probe."""
    return c.op is Op.EQ and _is_zero(c.args[1]) and _zero_valued(c.args[0])


def _is_zero(e: Expr) -> bool:
    return e.op is Op.CONST and e.type is INTEGER and e.data == 0


def _zero_valued(e: Expr) -> bool:
    if e.op in (Op.SUMBUILD, Op.LET):
        return _zero_valued(e.args[2])
    if e.op is Op.IF:
        cond, then, other = e.args
        if cond.op is Op.GT and cond.args[0] is cond.args[1]:
            return _zero_valued(other)  # (x > x is false, for a NaN too)
        return _zero_valued(then) and _zero_valued(other)
    return _is_zero(e)


def _and(conds: list[Expr]) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = E.op(Op.AND, out, c)
    return out


def flat(loops: list[tuple[Expr, Expr]]) -> tuple[Expr, Expr]:
    """The number of iterations of ``loops`` (size, variable) and the flat position of the current one."""
    count: Expr = _i(1)
    pos: Expr = _i(0)
    for n, v in loops:
        count = E.op(Op.MUL, count, n) if count is not E.const(1) else n
        pos = E.op(Op.ADD, E.op(Op.MUL, pos, n), v) if pos is not E.const(0) else v
    return count, pos


def decode(position: Expr, loops: list[tuple[Expr, Expr]], body: Expr, fresh: Callable[[str], str]) -> Expr:
    """``body`` with the variables of ``loops`` bound to the iteration whose flat position is ``position``
    (in ``[0, product of the sizes)``): one division per loop but the outermost, each quotient bound
    once (the emitter computes every occurrence of a term again)."""
    binds: list[tuple[Expr, Expr]] = []
    q = position
    for n, v in reversed(loops[1:]):
        quotient = E.var(fresh("ks$q"), INTEGER)
        binds += [(quotient, E.op(Op.DIV, q, n)), (v, E.op(Op.SUB, q, E.op(Op.MUL, quotient, n)))]
        q = quotient
    if loops:
        binds.append((loops[0][1], q))
    for v, rhs in reversed(binds):
        body = E.let(v, rhs, body)
    return body


def _nest(loops: list[tuple[Expr, Expr]], body: Expr, op: Op = Op.SUMBUILD) -> Expr:
    for n, v in reversed(loops):
        body = E.build(n, v, body) if op is Op.BUILD else E.sumbuild(n, v, body)
    return body


def probes(
    reads: list[tuple[Expr, Path]], loops: list[tuple[Expr, Expr]], fresh: Callable[[str], str]
) -> list[Expr] | None:
    """For each of ``reads`` (binder-free terms of the variables of ``loops``, size and variable,
    outermost first, and of invariants; each with the tests under which it is made), a check that
    evaluates it at every iteration of the loops it and its tests use (and those their sizes use)
    where its tests hold: it fails where the loops that made the read fail.  Each check holds; the
    caller evaluates them only where every loop runs.  None where a read is of another kind, or of
    variables bound inside the loops.  The checks cost what the reads do, not the nest: a read whose
    tests use loops it does not (a weight's read under an output position's padding test) is made
    where they hold at some iteration of those, counted once per iteration of the loops the tests
    share with it; a read made whatever the tests are reads each vector of its chain once."""
    bound = {v.data for _, v in loops}
    out: list[Expr] = []
    for read, path in reads:
        terms = [read] + [c for c, _ in path]
        if read.type.kind not in (Kind.VEC, Kind.FLOAT, Kind.INTEGER) or not all(_pure(t) for t in terms):
            return None
        need = {x for t in terms for x in t.free & bound}
        for n, v in reversed(loops):
            if v.data in need:
                need |= n.free & bound
        if any(n.free & bound - need for n, v in loops if v.data in need):
            return None  # (a size of a later loop: not in nesting order)
        x = E.var(fresh("ks$probe"), read.type)
        seen = E.op(Op.SIZE, x) if read.type.kind is Kind.VEC else x
        check = E.op(Op.IF, E.op(Op.GT, seen, seen), _i(1), _i(0))
        probe: Expr = E.let(x, read, check)
        mine = set(read.free & bound)
        others = [(n, v) for n, v in loops if v.data in need - mine]
        if others and not any(n.free & bound for n, v in loops if v.data in need):
            # Loops that only the tests use (a padded read's output positions, for a read of a
            # weight): the read is made where the tests hold at some iteration of them, counted
            # once for each iteration of the read's loops that the tests use (those loops first).
            count: Expr = _i(1)
            for c, taken in reversed(path):
                count = E.op(Op.IF, c, count, _i(0)) if taken else E.op(Op.IF, c, _i(0), count)
            count = _nest(others, count)
            tested = {x for c, _ in path for x in c.free & mine}
            outer = [(n, v) for n, v in loops if v.data in tested]
            rest = [(n, v) for n, v in loops if v.data in mine - tested]
            body = _nest(outer, E.op(Op.IF, E.op(Op.GT, count, _i(0)), _nest(rest, probe), _i(0)))
        elif not path and not any(n.free & bound for n, v in loops if v.data in need):
            body = _chain_probe(read, [(n, v) for n, v in loops if v.data in need], x, check, fresh)
        else:
            body = probe
            for c, taken in reversed(path):
                body = E.op(Op.IF, c, body, _i(0)) if taken else E.op(Op.IF, c, _i(0), body)
            body = _nest([(n, v) for n, v in loops if v.data in need], body)
        out.append(E.op(Op.EQ, body, _i(0)))
    return out


def _chain_probe(read: Expr, loops: list[tuple[Expr, Expr]], x: Expr, check: Expr, fresh: Callable[[str], str]) -> Expr:
    """The count of ``check`` (of ``x``, bound to ``read``) over ``loops`` (of sizes free of them),
    each read of the chain ``(index a_m ... (index a_1 base))`` made once its loops are bound: the
    loops in the order the chain uses them, and every loop runs (the caller's guard), so the same
    reads are made, each as few times as it can be."""
    chain: list[Expr] = []
    e = read
    while e.op is Op.INDEX:
        chain.append(e)
        e = e.args[1]
    chain.reverse()
    names = [E.var(fresh("ks$row"), r.type) for r in chain[:-1]] + [x]
    placed: set[str] = set()
    steps: list[tuple[str, tuple[Expr, Expr]]] = []  # ("loop", (size, var)) | ("let", (var, read))
    for k, r in enumerate(chain):
        uses = r.args[0].free
        for n, v in loops:
            if v.data in uses and v.data not in placed:
                placed.add(v.data)
                steps.append(("loop", (n, v)))
        inner = names[k - 1] if k else r.args[1]
        steps.append(("let", (names[k], E.op(Op.INDEX, r.args[0], inner))))
    steps += [("loop", lv) for lv in loops if lv[1].data not in placed]
    body = check
    for kind, (a, b) in reversed(steps):
        body = E.sumbuild(a, b, body) if kind == "loop" else E.let(a, b, body)
    return body


def holds_everywhere(cond: Expr, loops: list[tuple[Expr, Expr]]) -> Expr | None:
    """The check that ``cond`` (binder-free, loop-free) holds at every iteration of the ``loops`` (size
    and variable, outermost first) that it uses (and those their sizes use); None where it uses
    variables of loops out of nesting order."""
    bound = {v.data for _, v in loops}
    need = set(cond.free & bound)
    for n, v in reversed(loops):
        if v.data in need:
            need |= n.free & bound
    if any(n.free & bound - need for n, v in loops if v.data in need):
        return None
    count = _nest([(n, v) for n, v in loops if v.data in need], E.op(Op.IF, cond, _i(0), _i(1)))
    return E.op(Op.EQ, count, _i(0))


def _nonfinite(m: Expr, rows: Expr, cols: Expr) -> Expr:
    """How many elements of the matrix ``m`` (``rows`` x ``cols``) are infinite or NaN."""
    i, j, x = E.var("ks$r", INTEGER), E.var("ks$c", INTEGER), E.var("ks$x", FLOAT)
    row = E.var("ks$row", vec(FLOAT))
    ok = E.op(Op.EQ, E.op(Op.SUB, x, x), E.const(0.0))
    elem = E.let(x, E.op(Op.INDEX, j, row), E.op(Op.IF, ok, _i(0), _i(1)))
    return E.sumbuild(rows, i, E.let(row, E.op(Op.INDEX, i, m), E.sumbuild(cols, j, elem)))  # (a row read once)


def gathered_product(e: Expr, fresh: Callable[[str], str]) -> Expr | None:
    """``e``, a nest of builds over a sum of products of two shifted reads (see the module docstring),
    as the product of two gathered copies, computing ``e`` as written where a check fails; or None
    where ``e`` is no such nest.  ``fresh`` gives unused variable names."""
    outs: list[tuple[Expr, Expr]] = []
    body = e
    while body.op is Op.BUILD:
        outs.append((body.args[0], body.args[1]))
        body = body.args[2]
    elem = body
    total = _operand_sum(elem) if elem.type is FLOAT else None
    if not outs or total is None:
        return None
    sums: list[tuple[Expr, Expr]] = []
    term = total
    while term.op is Op.SUMBUILD and term.type is FLOAT:
        sums.append((term.args[0], term.args[1]))
        term = term.args[2]
    loops = outs + sums
    loop_vars = frozenset(v.data for _, v in loops)
    if len(loop_vars) < len(loops) or any(n.size > _SMALL or n.type is not INTEGER for n, _ in loops):
        return None
    # A row's length chosen by outer loops (a gradient's ``(size (index i w))``) is taken as the
    # first row's, checked (after the loops before it are known to run) to be every row's.
    ragged: dict[int, Expr] = {}
    for pos, (n, v) in enumerate(loops):
        if n.free & loop_vars:
            outer = {x.data for _, x in loops[:pos]}
            if not n.free & loop_vars <= outer or n.op is not Op.SIZE:
                return None
            first_row = _at_zero(n, loop_vars)
            before = [(m, x) for m, x in loops[:pos] if x.data in n.free]
            ragged[pos] = _all_equal(before, n, first_row)
            loops[pos] = (first_row, v)
    outs, sums = loops[: len(outs)], loops[len(outs) :]
    if term.size > _TERM_MAX:
        return None
    made: list[tuple[Expr, Path]] = []
    core = _inline(term, {}, made)
    if core is None or core.size > _TERM_MAX:
        return None
    tests: list[Expr] = []
    while (b := first(_TESTED, core)) is not None:  # nested tests (a padded row in a padded read)
        assert isinstance(b["g"], Expr) and isinstance(b["t"], Expr)
        tests.append(b["g"])
        core = b["t"]
    b = first(_TERM, core)
    if b is None:
        return None
    x, y = b["x"], b["y"]
    g = _and(tests) if tests else None
    assert isinstance(x, Expr) and isinstance(y, Expr) and (g is None or isinstance(g, Expr))
    rx, ry = _read(x, loop_vars), _read(y, loop_vars)
    if rx is None or ry is None or not (rx.shifted or ry.shifted or len(sums) > 1):
        return None  # (reads of rows and columns over one sum: products.py's transposes)
    sum_vars = frozenset(v.data for _, v in sums)
    out_vars = loop_vars - sum_vars
    if not (sum_vars <= rx.loops and sum_vars <= ry.loops) or rx.loops & ry.loops & out_vars:
        return None
    if not (rx.loops & out_vars and ry.loops & out_vars and (rx.loops | ry.loops) >= out_vars):
        return None
    g_vars: frozenset[str] = frozenset()
    if g is not None:
        g_vars = frozenset(g.free & loop_vars)
        if g.type is not BOOL or not _index_term(g):
            return None
        if not (g_vars <= rx.loops or g_vars <= ry.loops):
            return None
    # The left operand holds the outermost output.
    first_out = outs[0][1].data
    left, right = (rx, ry) if first_out in rx.loops else (ry, rx)
    a_loops = [(n, v) for n, v in outs if v.data in left.loops]
    b_loops = [(n, v) for n, v in outs if v.data in right.loops]
    runs = _and(_runs(loops, ragged))
    na, fa = flat(a_loops)
    nb, fb = flat(b_loops)
    nj, _ = flat(sums)

    def made_under(r: _Read) -> int | None:
        """How many of the tests (outermost first) the nest makes ``r`` under: 0 for a let's read
        made whatever they are, all for a read of the term only; None where it is made otherwise."""
        paths = [p for d, p in made if any(x is r.expr for x in distinct_nodes(d))]
        if not paths:
            return len(tests)
        path = min(paths, key=len)
        prefix = tuple((t, True) for t in tests[: len(path)])
        return len(path) if path == prefix else None

    def tested(r: _Read) -> bool:
        return g is not None and g_vars <= r.loops and not (r is right and g_vars <= left.loops)

    def gathered(r: _Read) -> Expr:
        """The copy's element: the read made under the tests the nest made it under, 0.0 where the
        term's tests fail (a test of the contracted loops alone is applied to the left operand)."""
        under = made_under(r)
        assert under is not None
        if not tested(r):
            return r.expr
        w = E.var(fresh("ks$w"), FLOAT)
        rest = tests[under:]
        element: Expr = E.let(w, r.expr, E.op(Op.IF, _and(rest), w, E.const(0.0))) if rest else r.expr
        return E.op(Op.IF, _and(tests[:under]), element, E.const(0.0)) if under else element

    for r in (left, right):
        under = made_under(r)
        if under is None or (not tested(r) and under):
            return None  # (a copy would make reads the nest does not make, or miss some it makes)

    ia, ja, jb, kb = (E.var(fresh(f"ks${s}"), INTEGER) for s in ("gi", "gj", "gj", "gk"))
    mat: Type = vec(vec(FLOAT))
    ca, cb, cc = (E.var(fresh(f"ks${s}"), mat) for s in ("ca", "cb", "cc"))
    sized = E.op(Op.IF, runs, na, _i(0))
    # A row's loops are decoded once per row, outside the loop over its columns.
    copy_a = E.build(sized, ia, decode(ia, a_loops, E.build(nj, ja, decode(ja, sums, gathered(left), fresh)), fresh))
    sized_j = E.op(Op.IF, runs, nj, _i(0))
    copy_b = E.build(sized_j, jb, decode(jb, sums, E.build(nb, kb, decode(kb, b_loops, gathered(right), fresh)), fresh))
    i, k, j = (E.var(fresh(f"ks${s}"), INTEGER) for s in ("i", "k", "j"))
    product = E.build(
        na,
        i,
        E.build(
            nb,
            k,
            E.sumbuild(
                nj, j, E.op(Op.MUL, E.op(Op.INDEX, j, E.op(Op.INDEX, i, ca)), E.op(Op.INDEX, k, E.op(Op.INDEX, j, cb)))
            ),
        ),
    )
    entry = E.op(Op.INDEX, fb, E.op(Op.INDEX, fa, cc))
    fast = _nest(outs, _replace(elem, total, entry), Op.BUILD)
    checks = [runs]
    if g is not None:  # a tested term: the other operand's zeros multiply finite values only
        other = cb if g_vars <= left.loops else ca
        rows, cols = (nj, nb) if other is cb else (na, nj)
        checks.append(E.op(Op.EQ, _nonfinite(other, rows, cols), _i(0)))
    # The reads made whatever the tests are probed, but those the copies make as they are.
    copied = []
    for r in (left, right):
        under = made_under(r)
        assert under is not None
        copied.append((r.expr, tuple((t, True) for t in tests[:under])))
    probed = probes(_made(made, copied), loops, fresh)
    if probed is None:
        return None
    checks += probed  # (after ``runs``: evaluated only where every loop runs)
    if not all(_pure(d) for d, _ in made):
        return None
    return E.let(ca, copy_a, E.let(cb, copy_b, guarded(checks, E.let(cc, product, fast), e)))


__all__ = ["Path", "decode", "flat", "gathered_product", "holds_everywhere", "inlined", "made_reads", "probes"]
