"""A let bound to a tuple of scalars that is only taken apart, as one let per element taken.

Reverse mode writes the cotangents of a term's operands as one tuple, chosen by the term's test and
taken apart after it::

    (let (d$if (if t (let ((d$a (mul dr b)) (d$b (mul dr a))) (tuple d$a d$b)) (tuple 0.0 0.0)))
      ... (get$2$2 d$if) ...)

A tuple is no Float: the passes that move loops (``cpp_backend.products``' interchange) stop at it.
Each ``get$k$n`` becomes a let of the k-th element, taken through the tests and lets that choose the
tuple (``(if t (let (...) d$b) 0.0)``); the lets are kept (each computes as before), and an element
not taken must be a variable, a constant or Float arithmetic of them (dropping it drops no
computation that could fail).
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import Expr, distinct_nodes, names_in
from knossos.op_table import ARITHMETIC
from knossos.ops import Op
from knossos.types import Kind

#: A tuple's term (the tests and lets that choose it) has at most this many nodes.
_MAX = 200


#: Float arithmetic, which cannot fail: an element made of it (over variables and constants) may be dropped.
_FLOAT_ARITHMETIC = ARITHMETIC | {Op.NEG}


def _droppable(a: Expr) -> bool:
    """Whether not computing ``a`` drops nothing that could fail: variables, constants, Float arithmetic."""
    return all(
        x.op in (Op.VAR, Op.CONST) or (x.op in _FLOAT_ARITHMETIC and x.type.kind is Kind.FLOAT)
        for x in distinct_nodes(a)
    )


def _element(t: Expr, k: int) -> Expr | None:
    """The ``k``-th element (1-based) of the tuple that ``t`` evaluates to, through tests and lets;
    None where ``t`` is built otherwise or drops an element that could fail (:func:`_droppable`)."""
    if t.op is Op.TUPLE:
        if any(not _droppable(a) for n, a in enumerate(t.args, 1) if n != k):
            return None
        return t.args[k - 1]
    if t.op is Op.IF:
        a, b = _element(t.args[1], k), _element(t.args[2], k)
        return None if a is None or b is None else E.op(Op.IF, t.args[0], a, b)
    if t.op is Op.LET:
        body = _element(t.args[2], k)
        return None if body is None else E.let(t.args[0], t.args[1], body)
    return None


def _taken(v: Expr, body: Expr) -> set[int] | None:
    """The elements of ``v`` that ``body`` takes, or None where it uses ``v`` otherwise (or rebinds it)."""
    taken: set[int] = set()
    for x in distinct_nodes(body):
        if x.op is Op.GET and x.args[0] is v:
            taken.add(x.data[0])
        elif any(a is v for a in x.args):  # (a binder's variable is an operand too: a rebinding)
            return None
    return taken


def _taken_apart(x: Expr) -> bool:
    return x.op is Op.GET and x.args[0].op in (Op.IF, Op.LET, Op.TUPLE)


def split_tuple_lets(root: Expr) -> Expr:
    """``root`` with each let of a tuple of scalars that is only taken apart split (module docstring),
    and each element taken of such a tuple's term (``(get$2$2 (if t (tuple a b) (tuple 0.0 0.0)))``,
    where a search substituted the let) as that element's term."""
    if not any(_candidate(x) or _taken_apart(x) for x in distinct_nodes(root)):
        return root
    used = set(names_in(root))
    memo: dict[int, Expr] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:  # children first, on an explicit stack (deep let chains need no recursion)
        x, ready = stack.pop()
        if id(x) in memo:
            continue
        if not ready:
            stack.append((x, True))
            stack.extend((a, False) for a in x.args)
            continue
        args = tuple(memo[id(a)] for a in x.args)
        y = x.replace_args(args) if any(a is not b for a, b in zip(args, x.args, strict=True)) else x
        if _candidate(y):
            memo[id(x)] = _split(y, used) or y
        elif _taken_apart(y) and y.args[0].size <= _MAX:
            memo[id(x)] = _element(y.args[0], y.data[0]) or y  # a let of it substituted by a search
        else:
            memo[id(x)] = y
    return memo[id(root)]


def _candidate(x: Expr) -> bool:
    return (
        x.op is Op.LET
        and x.args[1].type.kind is Kind.TUPLE
        and x.args[1].size <= _MAX
        and all(c.kind in (Kind.FLOAT, Kind.INTEGER, Kind.BOOL) for c in x.args[1].type.children)
    )


def _split(x: Expr, used: set[str]) -> Expr | None:
    v, rhs, body = x.args
    taken = _taken(v, body)
    if taken is None:
        return None
    swap: dict[int, Expr] = {}
    lets: list[tuple[Expr, Expr]] = []
    for k in sorted(taken):
        e = _element(rhs, k)
        if e is None:
            return None
        n = 0
        while f"{v.data}${k}_{n}" in used:
            n += 1
        used.add(f"{v.data}${k}_{n}")
        kv = E.var(f"{v.data}${k}_{n}", e.type)
        lets.append((kv, e))
        swap[k] = kv
    out = _substitute_gets(body, v, swap)
    if v.data in out.free:  # (used otherwise: the body is the tuple itself, say)
        return None
    for kv, e in reversed(lets):
        out = E.let(kv, e, out)
    return out


def _substitute_gets(e: Expr, v: Expr, swap: dict[int, Expr]) -> Expr:
    memo: dict[int, Expr] = {}
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        x, ready = stack.pop()
        if id(x) in memo:
            continue
        if x.op is Op.GET and x.args[0] is v:
            memo[id(x)] = swap[x.data[0]]
            continue
        if v.data not in x.free:
            memo[id(x)] = x
            continue
        if not ready:
            stack.append((x, True))
            stack.extend((a, False) for a in x.args)
            continue
        memo[id(x)] = x.replace_args(tuple(memo[id(a)] for a in x.args))
    return memo[id(e)]


__all__ = ["split_tuple_lets"]
