"""Walking expressions: every node in pre-order or each distinct node once, the names in a node, and the path to a node by number.

A node's *number* is its place in :func:`preorder`; rules, actions and the command line name nodes
by it.  Every walk here is iterative, so depth is no problem.
"""

from __future__ import annotations

from collections.abc import Iterator

from knossos.node import Expr
from knossos.ops import Op


def preorder(root: Expr) -> Iterator[Expr]:
    """Every node in pre-order (children left to right); node ``i`` of this walk has number ``i``."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if node.args:
            stack.extend(reversed(node.args))


Ancestors = list[tuple[Expr, int, int]]  # (ancestor, its pre-order number, index of the child on the way)


def distinct_nodes(root: Expr) -> Iterator[Expr]:
    """Every distinct node of ``root`` once (a subtree shared by several parents is walked once), in
    no particular order: for questions about what a term holds, not where."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(node.args)


def names_in(root: Expr) -> set[str]:
    """Every variable name in ``root``, free or bound (shared subtrees walked once)."""
    names: set[str] = set()
    for node in distinct_nodes(root):
        if node.op is Op.VAR:
            names.add(node.data)
    return names


def path_to(root: Expr, number: int) -> tuple[Ancestors, Expr]:
    """The node with pre-order number ``number`` and its ancestors from the root down: the one walk
    to a node that :func:`node_at`, :func:`knossos.rebuild.replace_at` and the rules' sites share."""
    if not 0 <= number < root.size:
        raise IndexError(f"node {number} is out of range (the expression has {root.size} nodes)")
    path: Ancestors = []
    node, node_number, remaining = root, 0, number
    while remaining:
        remaining -= 1  # step into the children
        child_number = node_number + 1
        for i, child in enumerate(node.args):
            if remaining < child.size:
                path.append((node, node_number, i))
                node, node_number = child, child_number
                break
            remaining -= child.size
            child_number += child.size
    return path, node


def node_at(root: Expr, number: int) -> Expr:
    """The node with pre-order number ``number``."""
    return path_to(root, number)[1]
