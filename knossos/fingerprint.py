"""Fingerprints: a structural hash that follows the replacement of one subtree in constant time.

A fingerprint is a pair of numbers modulo the prime ``P = 2**61 - 1``:

    fp(node) = base(op, data, type) + sum over children i of  M(op, i) . fp(child i)

with ``M(op, i)`` a fixed pseudo-random 2 x 2 matrix per op and child index.  The hash is linear in
each child, so replacing a node whose path from the root crosses the edges ``e1 .. ek`` changes the
root's fingerprint by ``M(e1) ... M(ek) . (fp(new) - fp(old))``: a search can name a child of a deep
program without building the child's spine (see :mod:`rules.lazy_children`).  Matrices, not
numbers, because their products do not commute: with a number per edge, ``b`` and ``c`` of
``(add (add a b) (add c d))`` would weigh alike, and swapping them would keep the hash.  Unlike the
interning's alpha-hash, names count: alpha-variants have different fingerprints.
"""

from __future__ import annotations

import random
from typing import Final

from knossos.alpha import PRIME
from knossos.node import Expr
from knossos.ops import Op

#: A 2 x 2 matrix (row by row) and a vector modulo PRIME.
Matrix = tuple[int, int, int, int]
Vector = tuple[int, int]
IDENTITY: Final[Matrix] = (1, 0, 0, 1)

_matrices: dict[tuple[Op, int], Matrix] = {}
_draw = random.Random(0x4B6E6F73)  # fixed: the same matrices in every process


def edge_matrix(op: Op, index: int) -> Matrix:
    """The matrix of the edge from an ``op`` node to its child ``index``."""
    key = (op, index)
    m = _matrices.get(key)
    if m is None:
        m = (_draw.randrange(1, PRIME), _draw.randrange(1, PRIME), _draw.randrange(1, PRIME), _draw.randrange(1, PRIME))
        _matrices[key] = m
    return m


def compose(a: Matrix, b: Matrix) -> Matrix:
    """The matrix product ``a . b``."""
    return (
        (a[0] * b[0] + a[1] * b[2]) % PRIME,
        (a[0] * b[1] + a[1] * b[3]) % PRIME,
        (a[2] * b[0] + a[3] * b[2]) % PRIME,
        (a[2] * b[1] + a[3] * b[3]) % PRIME,
    )


def moved(root: Vector, scale: Matrix, old: Vector, new: Vector) -> Vector:
    """``root`` after a node of fingerprint ``old``, weighed ``scale`` from the root, became ``new``."""
    du, dv = new[0] - old[0], new[1] - old[1]
    return ((root[0] + scale[0] * du + scale[1] * dv) % PRIME, (root[1] + scale[2] * du + scale[3] * dv) % PRIME)


def _base(node: Expr) -> Vector:
    data = node.data
    if node.op is Op.CONST and isinstance(data, float):
        data = data.hex()  # 0.0 and -0.0 are different constants
    elif node.op is Op.CALL:
        data = data.h
    h = hash((int(node.op), data, node.type.h))
    return h % PRIME, hash((h, 0x6670)) % PRIME


class Fingerprints:
    """Fingerprints of nodes, remembered per node for the life of this object (one search)."""

    def __init__(self) -> None:
        self._memo: dict[Expr, Vector] = {}

    def __call__(self, root: Expr) -> Vector:
        """The fingerprint of ``root``: work only for the nodes not seen before (iterative)."""
        memo = self._memo
        found = memo.get(root)
        if found is not None:
            return found
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            if node in memo:
                continue
            if not children_done:
                stack.append((node, True))
                stack.extend((child, False) for child in node.args if child not in memo)
                continue
            u, v = _base(node)
            op = node.op
            for i, child in enumerate(node.args):
                a, b, c, d = edge_matrix(op, i)
                x, y = memo[child]
                u += a * x + b * y
                v += c * x + d * y
            memo[node] = (u % PRIME, v % PRIME)
        return memo[root]
