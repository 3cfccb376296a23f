"""The rewrite MDP: states are (expression, steps left), actions are rule applications.

The reward of a step is the drop in cost, ``c(s) - c(s')``.  Transitions are deterministic and do not
depend on the steps left, so the successors of an expression are computed once per search and
cached (A* expands an expression again when it is reached with more steps left).
"""

from __future__ import annotations

from dataclasses import dataclass

from knossos.cost_models import CostFunction, reference_cost
from knossos.expr import Expr
from rules.actions import Action, StopCheck, children
from rules.rule_set import RuleSet
from search.idle_inlines import IdleInlineFilter
from search.symmetry import CommuteFilter

#: The reference cost model (the default of every search); the others are in knossos.cost_models.
rlo_cost = reference_cost
__all__ = ["CostFunction", "Step", "Transitions", "rlo_cost"]


@dataclass(frozen=True)
class Step:
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
        self._children: dict[Expr, list[tuple[Action, Expr]]] = {}
        #: Expressions whose successors were computed (cache misses).
        self.expanded = 0

    def successors(self, e: Expr, stop: StopCheck | None = None) -> list[tuple[Action, Expr]]:
        """Every (action, resulting expression) of ``e``, in the order of :func:`rules.actions.actions`.

        ``stop`` (see :func:`rules.actions.children`) may cut the enumeration short: the prefix is
        returned and not cached, since it is not every successor.
        """
        found = self._children.get(e)
        if found is None:
            stopped = False

            def check(child: Expr) -> bool:
                nonlocal stopped
                stopped = stop is not None and stop(child)
                return stopped

            found = children(e, self.rules, None if stop is None else check)
            for kept in self.filters:
                found = [(a, c) for a, c in found if kept.keep(e, a, c)]
            if not stopped:
                self._children[e] = found
            self.expanded += 1
        return found

    def reward(self, before: Expr, after: Expr) -> float:
        return self.cost(before) - self.cost(after)
