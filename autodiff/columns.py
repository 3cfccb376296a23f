"""Reads of a matrix transposed to its loops, ``(index i (index j V))``: their cotangent as one gather.

A loop nest ``i``, then loops summed over (``k``), then ``j`` that reads ``V[j][i]`` (the element
``i`` of the row ``t = (index j V)``) reads each element once per iteration of the loops between: the
index map (i, j) -> (j, i) is invertible, so the cotangent of ``V`` is the *gather*

    build (size V) (lam j' (build (size (index j' V)) (lam i
      (if (lt i n_i) (let <i's body> (sumbuild n_k (lam k (let <k's body>
        (if (lt j' n_j) (let (j j') <j's body> d$elem) 0.0))))) 0.0))))

made once, where the record of ``t`` alone would be a one-hot row per iteration, added into a
matrix-sized accumulator at a stride (JAX transposes a gather so; Dex's "Getting to the point").
The bodies are computed again in the gather, so a record goes this way only where what its
element needs from them has no loop (a read, a product of two: a constant per element), and only
where each loop of the nest binds the next one directly (no branch between) and ``V`` comes from
outside the nest: then the record is consumed by the loop over ``i`` for certain
(:func:`nest_path` checks it where the record is made).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autodiff.anf import Bind, Block, Branch, Loop, Names, value_expr
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, vec

#: A matrix of Floats, the only type of ``V`` taken here (its element's zero is 0.0).
MATRIX = vec(vec(FLOAT))


@dataclass
class Column:
    """The cotangent of ``V[j][i]`` for every ``j``: ``part``, bound in the reverse body of the loop
    over ``j`` (the first of ``loops``); the loops after it are summed over, out to the loop over
    ``at`` (``i``), which gathers it."""

    v: Expr
    at: Expr
    part: Expr
    loops: list[tuple[Loop, Block]] = field(default_factory=list)


def _bound(b: Block) -> set[str]:
    return {x.var.data for x in b.binds}


def nest_path(stack: list[tuple[Block, Block]], enclosing: dict[int, Loop], v: Expr, j: Expr, i: Expr) -> bool:
    """Whether the record at ``i`` of ``(index j v)``, made in the block on top of ``stack`` (forward
    blocks and their reverse blocks, innermost last), can become a :class:`Column`: that block is the
    body of the loop over ``j``, each block out from it is the body of a loop binding the previous
    loop directly, up to the loop over ``i``; none binds ``v`` or ``i``; and what the record's
    element needs from the reverse blocks (see :func:`cheap_element`) is checked by the caller."""
    if v.type is not MATRIX or j.op is not Op.VAR or i.op is not Op.VAR or i.data == j.data:
        return False
    inner = enclosing.get(id(stack[-1][0])) if stack else None
    if inner is None or inner.index.data != j.data or v.data in _bound(stack[-1][0]):
        return False
    for b, _ in reversed(stack[:-1]):
        loop = enclosing.get(id(b))
        if loop is None or v.data in _bound(b) or not any(x.value is inner for x in b.binds):
            return False
        if loop.index.data == i.data:
            return True
        inner = loop
    return False


def cheap_element(stack: list[tuple[Block, Block]], part: Expr, depth: int) -> bool:
    """Whether ``part`` (bound in the innermost reverse block) needs no loop or branch with loops from
    the ``depth`` innermost reverse blocks of ``stack`` (the gather computes them again per element)."""
    needed = set(part.free)
    for _, out in reversed(stack[-depth:]):
        for x in reversed(out.binds):
            if x.var.data not in needed:
                continue
            if isinstance(x.value, Loop) or (isinstance(x.value, Branch) and _has_loop(x.value)):
                return False
            needed.update(value_expr(x.value).free)
    return True


def _has_loop(branch: Branch) -> bool:
    return any(isinstance(x.value, (Loop, Branch)) for b in (branch.then, branch.other) for x in b.binds)


def depth_to(stack: list[tuple[Block, Block]], enclosing: dict[int, Loop], i: Expr) -> int:
    """How many blocks of ``stack``, innermost first, down to the body of the loop over ``i``."""
    for k, (b, _) in enumerate(reversed(stack), 1):
        loop = enclosing.get(id(b))
        if loop is not None and loop.index.data == i.data:
            return k
    raise AssertionError("nest_path found the loop")  # pragma: no cover


def gather(names: Names, out: Block, col: Column, loop: Loop, body: Block) -> Expr:
    """The cotangent of ``col.v`` (bound in ``out``): ``col`` gathered by ``loop`` (over ``col.at``),
    whose reverse body is ``body`` (the structure in the module docstring)."""
    v = col.v
    (first, first_body), *between = col.loops
    jj = E.var(names.fresh(first.index.data), INTEGER)
    zero = E.const(0.0)
    # innermost: the loop over j's body at j = jj, where jj is in its range
    core = Block([Bind(first.index, jj), *first_body.binds], col.part)
    elem = Block()
    elem.result = names.bind(elem, Branch(E.op(Op.LT, jj, first.n), core, Block([], zero)), "d$elem")
    for mid, mid_body in between:  # the loops between, summed over
        summed = Block([*mid_body.binds, *elem.binds], elem.result)
        elem = Block()
        elem.result = names.bind(elem, Loop(Op.SUMBUILD, mid.n, mid.index, summed), f"d${v.data}")
    at_i = Block([*body.binds, *elem.binds], elem.result)
    element = Block()
    element.result = names.bind(element, Branch(E.op(Op.LT, loop.index, loop.n), at_i, Block([], zero)), "d$elem")
    row = Block()
    width = names.bind(row, E.op(Op.SIZE, E.op(Op.INDEX, jj, v)), "t")
    row.result = names.bind(row, Loop(Op.BUILD, width, loop.index, element), f"d${v.data}")
    size = names.bind(out, E.op(Op.SIZE, v), "t")
    return names.bind(out, Loop(Op.BUILD, size, jj, row), f"d${v.data}")
