"""Search states: expressions, or, on deep programs, lazy states that build their expression on demand.

A search keys its graph, its value cache and its queues by state.  On most programs a state is the
(interned) expression itself.  On a program :data:`LAZY_DEPTH` or more nodes deep, building every child of an
expansion costs the square of the depth (each child rebuilds its path to the root), so there a state
is a :class:`LazyState`: its parent, the rewrite, its fingerprint and its cost, computed without the
child (:mod:`rules.lazy_children`).  It builds its expression only when the search expands it, sends
it to a value function or returns it.  Lazy states are equal when their fingerprints are: names
count, so two alpha-variants of one expression may be two states (the expression is still built once).
"""

from __future__ import annotations

from collections.abc import Callable

from knossos.cost_models import CostFunction
from knossos.expr import Expr, replace_at
from knossos.fingerprint import Fingerprints, Vector
from rules.lazy_children import Sketch

#: Searches from a start at least this deep (nodes on its longest path) use lazy states.  Every
#: shipped program and expression set is shallower (the deepest, 58), so their results do not change.
LAZY_DEPTH = 128


class LazyState:
    """An expression named by its fingerprint, built from its parent's when first asked for."""

    __slots__ = ("_expr", "_parent", "_sketch", "cost", "key")

    def __init__(
        self, key: Vector, cost: float, expr: Expr | None, parent: LazyState | None, sketch: Sketch | None
    ) -> None:
        self.key = key
        #: Reference cost of the expression.
        self.cost = cost
        self._expr = expr
        self._parent = parent
        self._sketch = sketch

    @classmethod
    def of(cls, e: Expr, fingerprints: Fingerprints) -> LazyState:
        """``e`` itself, as a lazy state (a search's start)."""
        return cls(fingerprints(e), e.cost, e, None, None)

    @classmethod
    def child(cls, parent: LazyState, sketch: Sketch) -> LazyState:
        return cls(sketch.key, sketch.cost, None, parent, sketch)

    @property
    def built(self) -> bool:
        return self._expr is not None

    @property
    def expr(self) -> Expr:
        """The expression (built on first use; the parent and the rewrite are then let go)."""
        if self._expr is None:
            assert self._parent is not None and self._sketch is not None
            self._expr = replace_at(self._parent.expr, self._sketch.target, self._sketch.replacement)
            self._parent = self._sketch = None
        return self._expr

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyState) and other.key == self.key

    def __repr__(self) -> str:
        return f"LazyState({self.key[0]:#x}:{self.key[1]:#x}, cost={self.cost:g})"


State = Expr | LazyState
StateCost = Callable[[State], float]


def expr_of(state: State) -> Expr:
    """The expression of ``state`` (built if it is a lazy state not built yet)."""
    return state.expr if isinstance(state, LazyState) else state


def state_cost(cost: CostFunction) -> StateCost:
    """``cost`` as a function of states; a lazy state brings its own (reference) cost."""

    def of(state: State) -> float:
        return state.cost if isinstance(state, LazyState) else cost(state)

    return of


def reaches_depth(root: Expr, at_least: int) -> bool:
    """Whether ``root`` has a path of at least ``at_least`` nodes (iterative; stops when it finds one)."""
    if root.size < at_least:
        return False
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth >= at_least:
            return True
        stack.extend((child, depth + 1) for child in node.args if child.size + depth >= at_least)
    return False
