"""Zeros written as loops, recognised so that they cost nothing.

A reverse pass writes the zero cotangent of a vector ``e`` as loops over its shape,
``(build (size e) (lam i (build (size (index i e)) (lam j 0.0))))`` (:meth:`autodiff.tangent.Shapes.zero_like`),
and a branch's reverse pass gives the variables that only the other branch reads such a zero, in every
iteration of the loop around it.  Built element by element, that zero costs as much as ``e`` has
elements, per iteration (a whole attention tensor's, per element of its rotary embedding); the
runtime's ``ks::zero_like(e)`` is the same value read lazily (every element reads as zero), made in O(1).
"""

from __future__ import annotations

import math

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op


def zero_shaped(node: Expr) -> Expr | None:
    """The variable ``e`` when ``node`` is ``+0.0`` everywhere in the shape of ``e`` (a vector of
    vectors), written as nested ``build (size e) (lam i ...)`` over its elements down to Float ``+0.0``;
    else None."""
    if node.op is not Op.BUILD or node.args[0].op is not Op.SIZE:
        return None
    if node.args[2].op is Op.CONST:  # a Float vector's zero is a CONST ks::const_vec, which sums keep lazy
        return None
    e = node.args[0].args[0]
    if e.op is not Op.VAR or e.type is not node.type:
        return None
    return e if _zero_of(node, e) else None


def _zero_of(node: Expr, target: Expr) -> bool:
    if node.op is Op.CONST:
        return isinstance(node.data, float) and node.data == 0.0 and math.copysign(1.0, node.data) > 0
    if node.op is not Op.BUILD or node.args[0] is not E.op(Op.SIZE, target):
        return False
    i = node.args[1]
    return _zero_of(node.args[2], E.op(Op.INDEX, i, target))
