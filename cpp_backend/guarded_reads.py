"""Guarded reads moved back into the loops that use them, before the products pass looks at a body.

Autodiff moves a loop-invariant read out of its loop under a guard that the loop runs
(:mod:`autodiff.hoist`), so that a loop of no iterations still reads nothing:

    (let (t (if (gt n 0) (let (t_1 (index k W)) t_1) (build 0 (lam (i : Integer) 0.0))))
      ... (sumbuild n (lam j ... (index j t) ...)) ...)

Its reverse pass keeps the guard.  The products' patterns (:mod:`cpp_backend.products`) want the
reads written out in the term, ``(index j (index k W))``, and refuse a let with a branch in a loop's
lets, so a product whose operand was hoisted so never reached the blocked nest (a gradient's
``W^T dY`` computed as scalar loops down columns).  Where every use of ``t`` is inside loops whose
sizes are the guard's (``n`` above: the guard holds wherever the use is evaluated), ``t`` is the
read itself there: the let is dropped and the read written at each use.  A read evaluated where it
is used fails where and only where the guarded one's use would have: in a loop of no iterations
neither is evaluated, and in one that runs both read the same row.  Only reads (``index``, ``size``,
``get`` of variables and constants) move: a row is an alias in the C++ (no copy), and the emitter's
loop-invariant code motion reads it once per loop again.  The placeholder the guard makes in the
other branch (an empty vector, a zero) is pure, so not evaluating it changes nothing.
"""

from __future__ import annotations

from cpp_backend.let_chains import peel_lets, wrap_lets
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op

#: A read moved into loops has at most this many nodes.
_READ_MAX = 12
_READ_OPS = frozenset({Op.INDEX, Op.SIZE, Op.GET, Op.VAR, Op.CONST})
_PLACEHOLDER_OPS = frozenset({Op.CONST, Op.BUILD, Op.LAM, Op.VAR, Op.TUPLE})
_BINDERS = {Op.LET: 0, Op.LAM: 0, Op.BUILD: 1, Op.SUMBUILD: 1}
_ZERO = E.const(0)
#: Ops under which a read may not be made: a let's value with one does not show its reads succeeded.
_BRANCHING = frozenset({Op.IF, Op.BUILD, Op.SUMBUILD, Op.LAM, Op.LET, Op.CALL, Op.APPLY, Op.AND, Op.OR})


def sink_guarded_reads(root: Expr) -> Expr:
    """``root`` with every guarded read (module docstring) whose uses are all where its guards hold
    (inside loops of the guards' sizes, or branches that test them) replaced by the read at its uses."""
    holding = _holding(root)
    if not holding:
        return root
    memo: dict[tuple[int, frozenset[Expr], frozenset[str]], Expr] = {}

    def walk(e: Expr, known: frozenset[Expr], indices: frozenset[str]) -> Expr:
        """``e`` rewritten, where the sizes ``known`` are positive and ``indices`` are loops' indices."""
        if id(e) not in holding:
            return e
        key = (id(e), known, indices)
        done = memo.get(key)
        if done is not None:
            return done
        if e.op is Op.LET:
            lets, body = peel_lets(e)
            inner = indices - {v.data for v, _ in lets}
            before = _known_before(lets, known)
            rest = walk(body, before[-1], inner)
            for (v, rhs), at in zip(reversed(lets), reversed(before[:-1]), strict=True):
                new_rhs = walk(rhs, at, indices)
                sunk = _sunk(v, new_rhs, rest, at, inner)
                rest = sunk if sunk is not None else wrap_lets([(v, new_rhs)], rest)
            out = rest
        elif e.op in (Op.BUILD, Op.SUMBUILD):
            size, i, body = e.args
            new_body = walk(body, _unbound(known | {size}, i.data), indices | {i.data})
            out = e if new_body is body else e.replace_args((size, i, new_body))
        elif e.op is Op.IF and cond_holds(e.args[0], known):  # (a guard that holds here: its branch)
            out = walk(e.args[1], known, indices)
            while out.op is Op.LET and out.args[2] is out.args[0]:  # (let (x r) x) is r
                out = out.args[1]
        elif e.op is Op.IF:
            cond, then, other = e.args
            positive = _positive(cond, indices)
            new_then = walk(then, known if positive is None else known | {positive}, indices)
            new_other = walk(other, known, indices)
            out = e if (new_then, new_other) == (then, other) else e.replace_args((cond, new_then, new_other))
        elif e.op is Op.LAM:
            new_body = walk(e.args[1], _unbound(known, e.args[0].data), indices - {e.args[0].data})
            out = e if new_body is e.args[1] else e.replace_args((e.args[0], new_body))
        else:
            args = tuple(walk(a, known, indices) for a in e.args)
            out = e.replace_args(args) if any(a is not b for a, b in zip(args, e.args, strict=True)) else e
        memo[key] = out
        return out

    try:
        return walk(root, frozenset(), frozenset())
    except RecursionError:  # (a term nested past Python's stack around a guarded read: left as it is)
        return root


def _holding(root: Expr) -> set[int]:
    """The ids of the nodes of ``root`` with a let of a guarded read or a guard's test in them."""
    candidates = {
        id(x)
        for x in distinct_nodes(root)
        if (x.op is Op.LET and guarded_read(x.args[1]) is not None) or (x.op is Op.IF and cond_holds(x.args[0], None))
    }
    if not candidates:
        return set()
    holding: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:  # (post-order on an explicit stack: deep terms need no recursion)
        e, ready = stack.pop()
        if ready:
            if id(e) in candidates or any(id(a) in holding for a in e.args):
                holding.add(id(e))
            done.add(id(e))
        elif id(e) not in done:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if id(a) not in done)
    return holding


def cond_holds(cond: Expr, known: frozenset[Expr] | None) -> bool:
    """Whether ``cond`` is ``(gt n 0)`` for a size ``n`` known positive (in ``known``; None: any)."""
    return cond.op is Op.GT and cond.args[1] is _ZERO and (known is None or cond.args[0] in known)


def _unbound(known: frozenset[Expr], name: str) -> frozenset[Expr]:
    """``known`` under a binder of ``name``: the facts about another value of that name dropped."""
    return frozenset(x for x in known if name not in x.free)


def _known_before(lets: list[tuple[Expr, Expr]], known: frozenset[Expr]) -> list[frozenset[Expr]]:
    """The sizes known positive before each let of a chain and after the last: ``known``, and the
    sizes of the vectors that an earlier let read at a literal index for certain (``(size (index 0
    v))``: ``v`` has an element, so ``(size v)`` and the variables bound to it are positive)."""
    out = [known]
    sizes: dict[Expr, list[Expr]] = {}  # (size v) -> the variables bound to it
    for v, rhs in lets:
        facts: set[Expr] = set()
        if not any(x.op in _BRANCHING for x in distinct_nodes(rhs)):  # (every read of it is made)
            for x in distinct_nodes(rhs):
                if x.op is Op.INDEX and x.args[0].op is Op.CONST and x.args[0].data >= 0:
                    size = E.op(Op.SIZE, x.args[1])
                    facts |= {size, *sizes.get(size, [])}
        now = _unbound(out[-1] | facts, v.data)
        sizes = {k: [w for w in ws if w.data != v.data] for k, ws in sizes.items() if v.data not in k.free}
        if rhs.op is Op.SIZE and v.data not in rhs.free:
            sizes.setdefault(rhs, []).append(v)
            if rhs in now:
                now |= {v}
        out.append(now)
    return out


def _positive(cond: Expr, indices: frozenset[str]) -> Expr | None:
    """The size that ``cond`` holding shows positive: ``n`` of ``(gt n 0)``, or of ``(lt i n)`` for an
    enclosing loop's index ``i`` (at least 0); None for any other test."""
    if cond.op is Op.GT and cond.args[1] is _ZERO:
        return cond.args[0]
    if cond.op is Op.LT and cond.args[0].op is Op.VAR and cond.args[0].data in indices:
        return cond.args[1]
    return None


def guarded_read(rhs: Expr) -> tuple[list[Expr], Expr] | None:
    """``rhs`` as (the sizes ``n`` of its guards ``(gt n 0)``, outermost first; the read), where it is
    a read under guards that the loops it came out of run; None otherwise."""
    sizes: list[Expr] = []
    while True:
        while rhs.op is Op.LET and rhs.args[2] is rhs.args[0]:  # (let (x r) x) is r
            rhs = rhs.args[1]
        if rhs.op is not Op.IF:
            break
        cond, then, other = rhs.args
        if cond.op is not Op.GT or cond.args[1] is not _ZERO or not _placeholder(other):
            return None
        sizes.append(cond.args[0])
        rhs = then
    if not sizes or rhs.size > _READ_MAX or any(x.op not in _READ_OPS for x in distinct_nodes(rhs)):
        return None
    if not any(x.op is Op.INDEX for x in distinct_nodes(rhs)):
        return None
    return sizes, rhs


def _placeholder(e: Expr) -> bool:
    """Whether ``e`` is a pure constant value: a literal, an empty vector, a tuple of them."""
    return not e.free and all(x.op in _PLACEHOLDER_OPS for x in distinct_nodes(e))


def _sunk(v: Expr, rhs: Expr, body: Expr, known: frozenset[Expr], indices: frozenset[str]) -> Expr | None:
    """``body`` with the guarded read ``rhs`` of ``v`` written at each use, or None where some use
    may be evaluated where a guard's size is not known positive (``known`` around the let), or a
    binder in ``body`` binds ``v`` or a name the read or a guard's size mentions (no capture)."""
    found = guarded_read(rhs)
    if found is None or v.data not in body.free:
        return None
    sizes, read = found
    if not _uses_inside(body, v.data, frozenset(id(s) for s in sizes if s not in known), indices):
        return None
    avoid = {v.data}.union(read.free, *(s.free for s in sizes))
    if any(x.op in _BINDERS and x.args[_BINDERS[x.op]].data in avoid for x in distinct_nodes(body)):
        return None
    return _replace_var(body, v.data, read)


def _uses_inside(root: Expr, name: str, needed: frozenset[int], indices: frozenset[str]) -> bool:
    """Whether every free use of ``name`` in ``root`` is where each size of ``needed`` (ids of interned
    size expressions) is known positive: inside a loop over it, or in the first branch of a test
    that shows it (:func:`_positive`; ``indices``: the enclosing loops' indices)."""
    stack: list[tuple[Expr, frozenset[int], frozenset[str]]] = [(root, needed, indices)]
    while stack:
        e, left, ixs = stack.pop()
        if name not in e.free or not left:
            continue
        if e.op is Op.VAR:
            return False
        if e.op in (Op.BUILD, Op.SUMBUILD):
            size, i, body = e.args
            stack += [(size, left, ixs), (body, left - {id(size)}, ixs | {i.data})]
        elif e.op is Op.IF:
            cond, then, other = e.args
            positive = _positive(cond, ixs)
            inside = left if positive is None else left - {id(positive)}
            stack += [(cond, left, ixs), (then, inside, ixs), (other, left, ixs)]
        else:
            if e.op in (Op.LET, Op.LAM) and e.args[0].data in ixs:
                ixs = ixs - {e.args[0].data}  # (a loop's index shadowed)
            stack += [(a, left, ixs) for a in e.args]
    return True


def _replace_var(root: Expr, name: str, new: Expr) -> Expr:
    """``root`` with every occurrence of the variable ``name`` replaced by ``new`` (the caller has
    checked that nothing in ``root`` binds ``name`` or a name of ``new``), on an explicit stack."""
    done: dict[int, Expr] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        e, ready = stack.pop()
        if ready:
            args = tuple(done[id(a)] for a in e.args)
            changed = any(a is not b for a, b in zip(args, e.args, strict=True))
            done[id(e)] = e.replace_args(args) if changed else e
        elif id(e) not in done:
            if name not in e.free:
                done[id(e)] = e
            elif e.op is Op.VAR:
                done[id(e)] = new
            else:
                stack.append((e, True))
                stack.extend((a, False) for a in e.args if id(a) not in done)
    return done[id(root)]


__all__ = ["guarded_read", "sink_guarded_reads"]
