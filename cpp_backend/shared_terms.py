"""Lets for the subterms that a loop-free term computes more than once.

A product's operand computed from its loop variables (a gradient's element-wise chain) reaches the
transposed copy of :func:`cpp_backend.products.transpose` with its lets inlined, so a value the lets
computed once is written wherever it was read: sigmoid's derivative computes ``exp (neg x)`` three
times per element.  Nodes are interned, so such repeats are one node: binding each, children first,
by a let computes it once again.  Only strictly evaluated subterms are bound (never one under an
``if``, ``and`` or ``or``, which might not run): each is evaluated by the term anyway.
"""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.let_chains import wrap_lets
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import Kind

_LAZY = frozenset({Op.IF, Op.AND, Op.OR})


def share_repeats(term: Expr, fresh: Callable[[str], str]) -> Expr:
    """``term`` with every scalar subterm it evaluates more than once bound by a let (names from
    ``fresh``), children first; ``term`` itself where nothing repeats.  ``term`` binds nothing."""
    uses: dict[int, int] = {}
    order: list[Expr] = []  # children before parents
    stack: list[tuple[Expr, bool]] = [(term, False)]
    while stack:
        x, done = stack.pop()
        if done:
            order.append(x)
            continue
        uses[id(x)] = uses.get(id(x), 0) + 1
        if uses[id(x)] > 1 or x.op in _LAZY or x.op in (Op.CONST, Op.VAR):
            continue
        if x.op in (Op.LET, Op.LAM, Op.BUILD, Op.SUMBUILD):
            return term  # binds a variable: left as it is
        stack.append((x, True))
        stack.extend((a, False) for a in reversed(x.args))
    repeated = [x for x in order if uses[id(x)] > 1 and x.type.kind not in (Kind.VEC, Kind.TUPLE)]
    if not repeated:
        return term
    lets: list[tuple[Expr, Expr]] = []
    bound: dict[int, Expr] = {}

    def rebuilt(x: Expr) -> Expr:
        """``x`` with the repeats already bound read from their variables."""
        memo: dict[int, Expr] = {}
        work: list[tuple[Expr, bool]] = [(x, False)]
        while work:
            y, ready = work.pop()
            if id(y) in memo:
                continue
            if y is not x and id(y) in bound:
                memo[id(y)] = bound[id(y)]
            elif y.op in _LAZY or not y.args:
                memo[id(y)] = y  # not looked into: no repeat of it was bound
            elif not ready:
                work.append((y, True))
                work.extend((a, False) for a in y.args)
            else:
                args = tuple(memo[id(a)] for a in y.args)
                memo[id(y)] = y.replace_args(args) if any(a is not b for a, b in zip(args, y.args, strict=True)) else y
        return memo[id(x)]

    for x in repeated:
        v = E.var(fresh("ks$cse"), x.type)
        lets.append((v, rebuilt(x)))
        bound[id(x)] = v
    return wrap_lets(lets, rebuilt(term))
