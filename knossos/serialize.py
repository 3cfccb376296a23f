"""A flat, non-recursive wire form of expressions, used for pickling.

Pickle would otherwise recurse once per nesting level.  The wire form lists the distinct nodes in
post-order, each as ``(op, data, type, child numbers)``; shared subterms are listed once.
"""

from __future__ import annotations

from typing import Any

from knossos import expr as E
from knossos.ops import Op
from knossos.types import Type

Wire = list[tuple[int, Any, Type | None, tuple[int, ...]]]


def expr_to_wire(root: E.Expr) -> Wire:
    numbers: dict[int, int] = {}
    out: Wire = []
    stack: list[tuple[E.Expr, bool]] = [(root, False)]
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
    return out


def expr_from_wire(wire: Wire) -> E.Expr:
    built: list[E.Expr] = []
    for op_code, data, leaf_type, children in wire:
        op = Op(op_code)
        if op is Op.CONST:
            built.append(E.const(data))
        elif op is Op.VAR:
            assert leaf_type is not None
            built.append(E.var(data, leaf_type))
        else:
            built.append(E.make(op, tuple(built[i] for i in children), data))
    return built[-1]
