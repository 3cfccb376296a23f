"""A flat, non-recursive wire form of expressions, used for pickling.

Pickle would otherwise recurse once per nesting level.  The wire form lists the distinct nodes in
post-order, each as ``(op, data, type, child numbers)``; shared subterms are listed once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knossos.interning import const, make, var
from knossos.node import Expr
from knossos.ops import Op
from knossos.types import Type

Wire = list[tuple[int, Any, Type | None, tuple[int, ...]]]


def expr_to_wire(root: Expr) -> Wire:
    return exprs_to_wire([root])[0]


def exprs_to_wire(roots: Sequence[Expr]) -> tuple[Wire, list[int]]:
    """Several expressions as one wire form (a subterm any of them share is listed once: a search's
    states differ in a few nodes each), and the number of each root in it."""
    numbers: dict[int, int] = {}
    out: Wire = []
    return out, [_add(root, numbers, out) for root in roots]


def _add(root: Expr, numbers: dict[int, int], out: Wire) -> int:
    """List the nodes of ``root`` not yet in ``out``, post-order; its number."""
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in numbers:
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.args) if id(a) not in numbers)
            continue
        leaf_type = node.type if node.op in (Op.CONST, Op.VAR) else None
        out.append((int(node.op), node.data, leaf_type, tuple(numbers[id(a)] for a in node.args)))
        numbers[id(node)] = len(out) - 1
    return numbers[id(root)]


def expr_from_wire(wire: Wire) -> Expr:
    return _build(wire)[-1]


def exprs_from_wire(wire: Wire, roots: Sequence[int]) -> list[Expr]:
    """The expressions :func:`exprs_to_wire` listed."""
    built = _build(wire)
    return [built[i] for i in roots]


def _build(wire: Wire) -> list[Expr]:
    built: list[Expr] = []
    for op_code, data, leaf_type, children in wire:
        op = Op(op_code)
        if op is Op.CONST:
            built.append(const(data))
        elif op is Op.VAR:
            assert leaf_type is not None
            built.append(var(data, leaf_type))
        else:
            built.append(make(op, tuple(built[i] for i in children), data))
    return built
