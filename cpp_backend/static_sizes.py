"""Sizes known when the code is emitted: a let-bound vector built with literal counts.

A guarded rewrite checks at run time the sizes its kernel assumes, and keeps the nest as written
for when a check fails (:mod:`cpp_backend.batched`, :mod:`cpp_backend.products`).  Many of those
sizes are not run-time facts at all: in ``(let (t (build 16 (lam i (build 64 (lam k ..))))) ..)``
every row of ``t`` has 64 elements, so ``(eq (size (index i t)) 64)`` holds wherever ``t``'s row
``i`` exists.  A check proved so is not made, and where none is left the fallback nest is not
emitted: it was g++'s time (the whole product nest again; MultiheadAttention's gradient carried two).

Only literal counts are recorded, and only for names bound once in the def (one ``let``, no
``lam`` or parameter of the same name), so a free occurrence anywhere means that binding and a
recorded count does not depend on what the binding's free variables are.  (Nodes are interned up to
alpha-equivalence, so a subtree may carry the binder names of another program parsed earlier in the
process: a name then bound twice is not known, which costs a fallback, never a wrong proof.)  A ``size`` of rows
that do not exist fails in the check as in the code it guards (which reads the same rows), so a
check dropped changes no error either.
"""

from __future__ import annotations

from collections import Counter

from knossos.expr import Expr, distinct_nodes
from knossos.ops import Op

#: A vector's counts by depth, outermost first (None: not a literal, or not the same in every row).
Shape = tuple[int | None, ...]


class StaticSizes:
    """The literal counts of the vectors that a def's lets bind (see the module docstring)."""

    def __init__(self, root: Expr) -> None:
        binders: Counter[str] = Counter(root.free)
        lets: dict[str, Expr] = {}
        for x in distinct_nodes(root):
            if x.op in (Op.LET, Op.LAM) and x.args[0].op is Op.VAR:
                binders[x.args[0].data] += 1
                if x.op is Op.LET:
                    lets[x.args[0].data] = x.args[1]
        self._rhs = {name: rhs for name, rhs in lets.items() if binders[name] == 1}
        self._shapes: dict[str, Shape] = {}
        self._open: set[str] = set()

    def size(self, e: Expr) -> int | None:
        """The value of ``e`` where it is a literal, or the size of rows of a let-bound vector whose
        count at that depth is one literal (``(size (index i (index j t)))``); else None."""
        if e.op is Op.CONST and isinstance(e.data, int) and not isinstance(e.data, bool):
            return e.data
        if e.op is not Op.SIZE:
            return None
        shape = self._shape(e.args[0])
        return shape[0] if shape else None

    def holds(self, cond: Expr) -> bool:
        """Whether the check ``cond`` (a comparison of sizes, or a conjunction of them) is true
        wherever it can be evaluated, by the sizes known here."""
        if cond.op is Op.AND:
            return all(self.holds(a) for a in cond.args)
        if cond.op not in (Op.EQ, Op.GT, Op.GTE):
            return False
        a, b = (self.size(x) for x in cond.args)
        if a is None or b is None:
            return False
        return a == b if cond.op is Op.EQ else a > b if cond.op is Op.GT else a >= b

    def _shape(self, e: Expr) -> Shape:
        """The counts of the vector ``e`` evaluates to, by depth, as far as they are known."""
        while e.op in (Op.LET, Op.ASSERT):  # (a let chain's value: its body, peeled without recursion)
            e = e.args[-1]
        if e.op is Op.INDEX:
            return self._shape(e.args[1])[1:]
        if e.op is Op.VAR:
            return self._var_shape(e.data)
        if e.op is Op.BUILD:  # (build n i body)
            n = e.args[0]
            count = n.data if n.op is Op.CONST and isinstance(n.data, int) else None
            return (count, *self._shape(e.args[2]))
        if e.op is Op.IF:
            a, b = self._shape(e.args[1]), self._shape(e.args[2])
            return tuple(x if x == y else None for x, y in zip(a, b, strict=False))
        return ()

    def _var_shape(self, name: str) -> Shape:
        if name in self._shapes:
            return self._shapes[name]
        rhs = self._rhs.get(name)
        if rhs is None or name in self._open:  # (a parameter, a loop variable, or bound more than once)
            return ()
        self._open.add(name)
        shape = self._shape(rhs)
        self._open.discard(name)
        self._shapes[name] = shape
        return shape


__all__ = ["StaticSizes"]
