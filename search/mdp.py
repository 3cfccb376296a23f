"""The rewrite MDP: states are (expression, steps left), actions are rule applications.

The reward of a step is the drop in cost, ``c(s) - c(s')``.  Transitions are deterministic and do not
depend on the steps left, so the successors of an expression are computed once per search and
cached (A* expands an expression again when it is reached with more steps left).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knossos.cost_models import CostFunction, reference_cost
from knossos.expr import Expr
from knossos.fingerprint import Fingerprints
from rules.actions import Action, children
from rules.lazy_children import Sketch, sketch_children
from rules.rule import Scope, Site
from rules.rule_set import RuleSet
from search.idle_inlines import IdleInlineFilter
from search.state import LazyState, State, state_cost
from search.symmetry import CommuteFilter

#: Asked after each child is made, with the child: True stops the enumeration.
StateStop = Callable[[State], bool]

#: The reference cost model (the default of every search); the others are in knossos.cost_models.
rlo_cost = reference_cost
__all__ = ["CostFunction", "RewriteStep", "StateStop", "Transitions", "rlo_cost"]


@dataclass(frozen=True)
class RewriteStep:
    """One rewrite of a sequence: rule ``rule`` at node ``node``, giving an expression of ``cost``."""

    node: int
    rule: str
    cost: float

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "rule": self.rule, "cost": round(self.cost, 6)}


class Transitions:
    """Successors of expressions under one rule set, cached for the lifetime of a search."""

    def __init__(
        self, rules: RuleSet, cost: CostFunction = rlo_cost, prune_commutes: bool = False, prune_inlines: bool = False
    ) -> None:
        self.rules = rules
        self.cost = cost
        #: What decides which children to drop: commutations that enable nothing (search/symmetry.py),
        #: uphill inlines that open nothing (search/idle_inlines.py).  None of them: every child is kept.
        self.filters: list[CommuteFilter | IdleInlineFilter] = []
        if prune_commutes:
            self.filters.append(CommuteFilter(rules))
        if prune_inlines:
            self.filters.append(IdleInlineFilter(rules, cost))
        self._children: dict[State, list[tuple[Action, State]]] = {}
        self.state_cost = state_cost(cost)
        #: Names the children of lazy states (search/state.py), made when the first is expanded.
        self._fingerprints: Fingerprints | None = None
        #: Expressions whose successors were computed (cache misses).
        self.expanded = 0

    def start(self, e: Expr, lazy: bool) -> State:
        """The state of a search from ``e``: ``e`` itself, or, ``lazy``, a lazy state of it.

        Lazy states carry reference costs, so they need the reference cost model."""
        if not lazy:
            return e
        if self.cost is not reference_cost:
            raise ValueError("lazy states need the reference cost model")
        self._fingerprints = Fingerprints()
        return LazyState.of(e, self._fingerprints)

    def successors(self, e: State, stop: StateStop | None = None) -> list[tuple[Action, State]]:
        """Every (action, resulting state) of ``e``, in the order of :func:`rules.actions.actions`.

        ``stop`` (see :func:`rules.actions.children`) may cut the enumeration short: the prefix is
        returned and not cached, since it is not every successor.
        """
        found: list[tuple[Action, State]] | None = self._children.get(e)
        if found is None:
            stopped = False

            def check(child: State) -> bool:
                nonlocal stopped
                if stop is not None and stop(child):
                    stopped = True
                    return True
                return False

            if isinstance(e, LazyState):
                found = self._lazy_successors(e, None if stop is None else check)
            else:
                made = children(e, self.rules, None if stop is None else check)
                found = []
                for a, c in made:  # a filter costs each child: the limits are looked at after each
                    if all(kept.keep(e, a, c) for kept in self.filters):
                        found.append((a, c))
                    if check(c):
                        break
            if not stopped:
                self._children[e] = found
            self.expanded += 1
        return found

    def _lazy_successors(self, e: LazyState, stop: StateStop | None) -> list[tuple[Action, State]]:
        assert self._fingerprints is not None
        out: list[tuple[Action, State]] = []

        def made(sketch: Sketch) -> bool:  # asked after every sketch
            child = LazyState.child(e, sketch)
            out.append((sketch.action, child))
            return stop is not None and stop(child)

        filters = self.filters

        def kept(site: Site, parent_scope: Scope | None, sketch: Sketch) -> bool:
            return all(f.keep_sketch(site, parent_scope, sketch) for f in filters)

        sketch_children(e.expr, self.rules, self._fingerprints, made, kept if filters else None)
        return out

    def reward(self, before: State, after: State) -> float:
        return self.state_cost(before) - self.state_cost(after)
