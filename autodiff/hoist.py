"""Loop-invariant bindings moved out of their loops, before the reverse pass is made.

``(build n (lam i (sumbuild m (lam j (mul (index j (index i W)) (index j x))))))`` reads the row
``(index i W)`` in every iteration of the ``j`` loop.  Left there, the reverse pass of the ``j`` loop
gives ``W`` a part in each of its iterations; moved out to the ``i`` loop's body, the ``j`` loop reads
the row at its own index, and its cotangent is a gather (:mod:`autodiff.reverse`) whose rows the ``i``
loop gathers in turn.  The emitted C++ computes loop invariants once anyway; what this changes is the
shape of the derivative.

Only bindings that cannot fail move, since a loop of no iterations evaluates nothing: Float
arithmetic and comparisons, ``size``, ``get``, ``tuple``, ``to_float``, and ``(index i v)`` where
``i`` is the index of an enclosing loop over ``(size v)``.  Nothing moves out of a branch.
"""

from __future__ import annotations

from autodiff.anf import Bind, Block, Branch, Loop
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT

#: Ops that never fail when their operands are scalars (Floats: IEEE; comparisons: any scalar).
_SCALAR = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG, Op.EXP, Op.LOG, Op.TANH, Op.SQRT, Op.POW, Op.ABS, Op.MAX})
_COMPARE = frozenset({Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE, Op.AND, Op.OR, Op.TO_FLOAT})
_ANY = frozenset({Op.CONST, Op.VAR, Op.SIZE, Op.GET, Op.TUPLE})


class Hoister:
    def __init__(self) -> None:
        #: The one-op values of the bindings seen, by variable name (names are unique in a def).
        self.values: dict[str, Expr] = {}
        #: Loop indices known to be in range of a vector: index name -> the vector variable.
        self.ranges: dict[str, Expr] = {}

    def block(self, b: Block) -> None:
        """Move the invariant bindings of every loop in ``b`` (nested ones first) out of it, in place."""
        binds: list[Bind] = []
        for bind in b.binds:
            value = bind.value
            if isinstance(value, Loop):
                binds += self._loop(value)
            elif isinstance(value, Branch):
                self.block(value.then)
                self.block(value.other)
            else:
                self.values[bind.var.data] = value
            binds.append(bind)
        b.binds = binds

    def _loop(self, loop: Loop) -> list[Bind]:
        """The bindings moved out of ``loop``'s body (which keeps the others)."""
        n = loop.n
        size = self.values.get(n.data) if n.op is Op.VAR else None
        if size is not None and size.op is Op.SIZE and size.args[0].op is Op.VAR:
            self.ranges[loop.index.data] = size.args[0]
        self.block(loop.body)
        local = {loop.index.data}
        kept: list[Bind] = []
        moved: list[Bind] = []
        for bind in loop.body.binds:
            value = bind.value
            if isinstance(value, Expr) and not (value.free & local) and self._safe(value):
                moved.append(bind)
            else:
                kept.append(bind)
                local.add(bind.var.data)
        loop.body.binds = kept
        return moved

    def _safe(self, e: Expr) -> bool:
        """Whether evaluating ``e`` cannot fail (see the module docstring)."""
        stack = [e]
        while stack:
            node = stack.pop()
            op = node.op
            if op in _ANY:
                pass
            elif op in _SCALAR or op in _COMPARE:
                if not all(a.type.is_scalar for a in node.args):
                    return False
                if op in _SCALAR and node.type is not FLOAT:
                    return False  # Integer arithmetic can overflow
            elif op is Op.INDEX:
                k, v = node.args
                known = self.ranges.get(k.data) if k.op is Op.VAR else None
                if known is None or v.op is not Op.VAR or known.data != v.data:
                    return False
            else:
                return False
            stack.extend(node.args)
        return True


def hoist(b: Block) -> Block:
    """``b`` with its loops' invariant bindings moved out (in place; returned for convenience)."""
    Hoister().block(b)
    return b
