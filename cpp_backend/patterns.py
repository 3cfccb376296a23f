"""Patterns over expressions, in the manner of PyPM: nodes, alternates, guards, captures.

A pattern describes a subgraph; :func:`match` yields every way (alternates are tried in order, with
backtracking) in which an expression fits it, as the bindings it makes: a :class:`Cap` binds any
node, a :class:`Bound` the name of a bound variable (every later ``Bound`` of that name must be an
occurrence of the same variable), an :class:`Alt` the label of the alternate taken, and a
:class:`Where` keeps only the bindings its guard accepts.  Matching looks through variables bound by
the ``lets`` given (a scalar term written as a chain of lets matches as if they were inlined), so a
pattern says what is computed, not how the program names the parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from knossos.expr import Expr
from knossos.ops import Op

#: What a match binds: capture names to nodes, bound-variable names to the variable's name, alternates'
#: names to the label taken.
Captures = dict[str, object]


class Pat:
    """A pattern (see the subclasses)."""


@dataclass(frozen=True)
class Cap(Pat):
    """Any node, bound to ``name`` (a name bound already must be the same node)."""

    name: str


@dataclass(frozen=True)
class Bound(Pat):
    """An occurrence (or the binding) of a variable, its name bound to ``name``."""

    name: str


@dataclass(frozen=True)
class Node(Pat):
    """A node of ``op`` whose operands match ``args`` (a binder's variable is an operand)."""

    op: Op
    args: tuple[Pat, ...]


@dataclass(frozen=True)
class Alt(Pat):
    """The first of ``options`` (label, pattern) that matches, then the next on backtracking; the label
    taken is bound to ``name``."""

    name: str
    options: tuple[tuple[str, Pat], ...]


@dataclass(frozen=True)
class Where(Pat):
    """``pat``, where ``test`` accepts its bindings."""

    pat: Pat
    test: Callable[[Captures], bool]


def node(op: Op, *args: Pat) -> Node:
    return Node(op, args)


def alt(name: str, **options: Pat) -> Alt:
    return Alt(name, tuple(options.items()))


def match(
    pat: Pat, e: Expr, lets: Mapping[str, Expr] | None = None, given: Captures | None = None
) -> Iterator[Captures]:
    """Every binding (extending ``given``) under which ``e`` fits ``pat``; a variable of ``lets``
    (name -> its right-hand side) stands for its right-hand side wherever a :class:`Node` is wanted."""
    yield from _match(pat, e, dict(given or {}), lets or {})


def first(pat: Pat, e: Expr, lets: Mapping[str, Expr] | None = None, given: Captures | None = None) -> Captures | None:
    """The first match of ``pat`` in ``e``, or None."""
    return next(match(pat, e, lets, given), None)


def _match(pat: Pat, e: Expr, b: Captures, lets: Mapping[str, Expr]) -> Iterator[Captures]:
    if isinstance(pat, Cap):
        have = b.get(pat.name)
        if have is None:
            yield {**b, pat.name: e}
        elif have is e:
            yield b
    elif isinstance(pat, Bound):
        if e.op is Op.VAR:
            have = b.get(pat.name)
            if have is None:
                yield {**b, pat.name: e.data}
            elif have == e.data:
                yield b
    elif isinstance(pat, Node):
        while e.op is Op.VAR and e.data in lets and pat.op is not Op.VAR:
            e = lets[e.data]
        if e.op is pat.op and len(e.args) == len(pat.args):
            yield from _match_args(pat.args, e.args, 0, b, lets)
    elif isinstance(pat, Alt):
        for label, option in pat.options:
            for found in _match(option, e, b, lets):
                yield {**found, pat.name: label}
    elif isinstance(pat, Where):
        for found in _match(pat.pat, e, b, lets):
            if pat.test(found):
                yield found
    else:
        raise TypeError(f"not a pattern: {pat!r}")


def _match_args(
    pats: tuple[Pat, ...], args: tuple[Expr, ...], k: int, b: Captures, lets: Mapping[str, Expr]
) -> Iterator[Captures]:
    if k == len(pats):
        yield b
        return
    for found in _match(pats[k], args[k], b, lets):
        yield from _match_args(pats, args, k + 1, found, lets)
