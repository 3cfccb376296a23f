"""Reads of a vector in consecutive chunks: ``(index (add (mul o c) j) v)`` in a loop over ``j < c``.

A flattened dimension nested into two loops (``frontends.flat_loops``: GroupNorm's group of 32 channels
as ``o`` groups of ``c`` channels) reads element ``o c + j`` of ``v``.  Its index is computed in the
loop, so the reverse pass would give ``v`` a one-hot per element, summed (a dense accumulator of all
of ``v`` per group).  But over ``j < c`` the loop reads chunk ``o`` of ``v`` (its elements
``[o c, o c + c)``) once each: its cotangent is the gather ``build c (lam j d$elem)``, an element
record of ``v`` seen as a vector of chunks, at ``o``.  Where ``o`` is an enclosing loop's index that
record gathers again, and the vector of chunks is flattened back into ``v``'s shape, once (JAX
transposes a reshape so; Dex keeps the index set's structure).
"""

from __future__ import annotations

from autodiff.anf import Block, Branch, Loop, Names
from autodiff.tangent import Shapes
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import INTEGER


def chunk_index(k: Expr, loop: Loop, values: dict[str, Expr], bound: set[str]) -> Expr | None:
    """``o`` where the index ``k`` (an atom; ``values``: the loop body's bindings of ops, ``bound``: all
    its variables) is ``o c + j`` with ``j`` the loop's index, ``c`` the loop's size (an Integer
    literal) and ``o`` an atom bound outside the loop; None otherwise."""
    if k.op is not Op.VAR or loop.n.op is not Op.CONST or not isinstance(loop.n.data, int):
        return None
    e = values.get(k.data)
    if e is None or e.op is not Op.ADD:
        return None
    for scaled, j in (e.args, e.args[::-1]):
        if j.op is not Op.VAR or j.data != loop.index.data or scaled.op is not Op.MUL:
            continue
        for o, c in (scaled.args, scaled.args[::-1]):
            ok = c.op is Op.CONST and c.data == loop.n.data and o.op in (Op.VAR, Op.CONST)
            if ok and (o.op is Op.CONST or (o.data not in bound and o.data != loop.index.data)):
                return o
    return None


def flatten(names: Names, shapes: Shapes, out: Block, v: Expr, c: int, chunks: Expr, count: Expr) -> Expr:
    """The cotangent of ``v`` (bound in ``out``) whose element ``o c + j`` is element ``j`` of chunk ``o``
    of ``chunks`` (``count`` chunks of ``c``), zero past them: its variable."""
    k = E.var(names.fresh("i"), INTEGER)
    inside = Block()
    q = names.bind(inside, E.op(Op.DIV, k, E.const(c)), "t")
    row = names.bind(inside, E.op(Op.INDEX, q, chunks), "d$chunk")
    inside.result = names.bind(inside, E.op(Op.INDEX, E.op(Op.SUB, k, E.op(Op.MUL, q, E.const(c))), row), "d$elem")
    past = Block([], shapes.zero_like(E.op(Op.INDEX, k, v)))
    element = Block()
    covered = E.op(Op.LT, k, E.op(Op.MUL, count, E.const(c)))
    element.result = names.bind(element, Branch(covered, inside, past), "d$elem")
    size = names.bind(out, E.op(Op.SIZE, v), "t")
    return names.bind(out, Loop(Op.BUILD, size, k, element), f"d${v.data}")


__all__ = ["chunk_index", "flatten"]
