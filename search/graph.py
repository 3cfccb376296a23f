"""The explored graph of a search: every state reached, the edges of expanded states, the best state.

States are keyed by state (an expression, or a lazy state on deep programs: search/state.py); each remembers the most steps left it was reached with and the
(parent, action) of that visit, so a chain of parents always has strictly growing steps left and
replays from the start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from knossos.expr import Expr
from rules.actions import Action
from search.mdp import RewriteStep
from search.state import State, StateCost, expr_of


class ValueTargets(NamedTuple):
    """Algorithm 2's value targets of every reached state (see SearchGraph.value_targets)."""

    exprs: list[Expr]
    steps_left: np.ndarray
    table: np.ndarray
    explored: np.ndarray


@dataclass
class Reached:
    steps_left: int
    parent: State | None
    action: Action | None


class SearchGraph:
    def __init__(self, start: State, depth: int, cost: StateCost) -> None:
        self.start = start
        self.depth = depth
        self.cost = cost
        self.states: dict[State, Reached] = {start: Reached(depth, None, None)}
        #: Successor expressions of each expanded expression (the explored edges).
        self.edges: dict[State, list[State]] = {}
        self.best = start
        self.best_cost = cost(start)

    def steps_left(self, e: State) -> int:
        """Most steps left ``e`` was reached with; -1 if never reached."""
        r = self.states.get(e)
        return -1 if r is None else r.steps_left

    def reach(self, e: State, steps_left: int, parent: State, action: Action) -> bool:
        """Record reaching ``e`` from ``parent``; True if it is new or now has more steps left."""
        r = self.states.get(e)
        if r is not None and r.steps_left >= steps_left:
            return False
        self.states[e] = Reached(steps_left, parent, action)
        c = self.cost(e)
        if c < self.best_cost:  # ties keep the first found, which took no more steps
            self.best, self.best_cost = e, c
        return True

    @classmethod
    def joined(cls, first: SearchGraph, second: SearchGraph) -> SearchGraph:
        """One graph of two searches run one after the other, ``second`` from a state of ``first``.

        Steps left are counted to the end of both: a state of ``first`` gets ``second.depth`` more.
        A state reached in both keeps the visit with more steps left (so parent chains still lead
        back to ``first``'s start); edges are the union.
        """
        joined = cls(first.start, first.depth + second.depth, first.cost)
        joined.states = {e: Reached(r.steps_left + second.depth, r.parent, r.action) for e, r in first.states.items()}
        for e, r in second.states.items():
            mine = joined.states.get(e)
            if mine is None or r.steps_left > mine.steps_left:
                joined.states[e] = r
        joined.edges = {**first.edges}
        for e, children in second.edges.items():
            joined.edges[e] = list(dict.fromkeys([*joined.edges.get(e, []), *children]))
        for g in (first, second):
            if g.best_cost < joined.best_cost:
                joined.best, joined.best_cost = g.best, g.best_cost
        return joined

    def add_edges(self, e: State, children: list[State]) -> None:
        self.edges[e] = children

    def path(self, e: State) -> list[tuple[State, Action]]:
        """The (state before, action) pairs that lead from the start to ``e``."""
        out: list[tuple[State, Action]] = []
        while True:
            r = self.states[e]
            if r.parent is None or r.action is None:
                break
            out.append((r.parent, r.action))
            e = r.parent
        out.reverse()
        return out

    def steps(self, e: State) -> list[RewriteStep]:
        """The rewrite sequence from the start to ``e`` as (node, rule, cost after) steps."""
        path = self.path(e)
        if not path:
            return []
        afters = [parent for parent, _ in path[1:]] + [e]
        return [RewriteStep(a.node, a.rule.name, self.cost(after)) for (_, a), after in zip(path, afters, strict=True)]

    def value_targets(self) -> ValueTargets:
        """For every reached state: the largest cost drop reachable within ``t`` steps in this graph.

        ``table`` has shape ``(states, depth + 1)``; its column ``t`` is ``c(s) - min c(s')`` over
        the states ``s'`` reachable from ``s`` in at most ``t`` explored edges (column 0 is zero).
        Algorithm 2's target of ``s`` is the column of its steps left.  ``explored`` is how many of
        those columns the search looked into: the longest explored path from ``s``, at most its
        steps left (0 for a state never expanded, whose targets are zero only for want of looking).
        Computed backwards over the whole graph, ``depth`` rounds of one vectorised step.
        """
        states = list(self.states)
        index = {e: i for i, e in enumerate(states)}
        cost = np.array([self.cost(e) for e in states], dtype=np.float64)
        src: list[int] = []
        dst: list[int] = []
        for e, children in self.edges.items():
            i = index[e]
            for c in children:
                j = index.get(c)
                if j is not None:
                    src.append(i)
                    dst.append(j)
        s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        steps_left = np.array([self.states[e].steps_left for e in states], dtype=np.int64)
        best = cost.copy()  # cheapest cost reachable within t steps, t = 0
        table = np.zeros((len(states), self.depth + 1))
        has_path = np.ones(len(states), dtype=bool)  # an explored path of t edges starts here
        explored = np.zeros(len(states), dtype=np.int64)
        for t in range(1, self.depth + 1):
            nxt = best.copy()
            longer = np.zeros(len(states), dtype=bool)
            if len(s):
                np.minimum.at(nxt, s, best[d])
                np.logical_or.at(longer, s, has_path[d])
            best, has_path = nxt, longer
            table[:, t] = cost - best
            explored[has_path & (t <= steps_left)] = t
        return ValueTargets([expr_of(e) for e in states], steps_left, table, explored)
