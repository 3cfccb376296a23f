"""A chain of lets, taken apart and put back: what the products' rewrites do to a loop's body before
they look at what the lets scope."""

from __future__ import annotations

from collections.abc import Sequence

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op

#: (variable, right-hand side) of each let of a chain, outermost first.
Lets = list[tuple[Expr, Expr]]


def peel_lets(e: Expr) -> tuple[Lets, Expr]:
    """``e``'s chain of lets, outermost first, and what they scope."""
    lets: Lets = []
    while e.op is Op.LET:
        lets.append((e.args[0], e.args[1]))
        e = e.args[2]
    return lets, e


def wrap_lets(lets: Sequence[tuple[Expr, Expr]], body: Expr) -> Expr:
    """``body`` under the chain ``lets`` (outermost first): the inverse of :func:`peel_lets`."""
    for v, rhs in reversed(lets):
        body = E.let(v, rhs, body)
    return body
