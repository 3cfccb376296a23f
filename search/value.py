"""What search needs from a value function, and the zero value function that ships with search.

A value function estimates, for an expression, the largest cost reduction reachable within ``t``
more rewrites, for every ``t`` in ``0..depth``, and does so for a whole batch of expressions in one
call (a neural network is far cheaper per expression in batches).  Search wraps it in an
:class:`Evaluator`, which caches per search state (search/state.py) and counts the evaluations that make up the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np

from knossos.expr import Expr
from search.state import State, expr_of

_T = TypeVar("_T")


class ValueFunction(Protocol):
    """Anything with this method can guide search (the GGNN of :mod:`gnn` is one)."""

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        """Array of shape ``(len(exprs), depth + 1)``: row ``i``, column ``t`` estimates the cost
        reduction reachable from ``exprs[i]`` within ``t`` steps."""
        ...


#: The largest value scale accepted: search orders states by ``c(s0) - c(s) + scale * V(s)``, and
#: beyond this the cost so far hardly counts.
MAX_VALUE_SCALE = 100.0


def check_value_scale(scale: float) -> float:
    """``scale``, or a ValueError saying why it cannot weight a value function (NaN included)."""
    if not 0.0 <= scale <= MAX_VALUE_SCALE:
        raise ValueError(f"the value scale must be in [0, {MAX_VALUE_SCALE:g}], not {scale!r}")
    return scale


class ZeroValue:
    """Estimates no reduction anywhere: A* with it is greedy best-first on the cost so far."""

    def values(self, exprs: Sequence[Expr], depth: int) -> np.ndarray:
        return np.zeros((len(exprs), depth + 1))


class Evaluator:
    """A value function with a per-state cache and an evaluation budget.

    ``evaluations`` counts the distinct states sent to the value function; search stops when it
    reaches ``budget``.  Rows are read-only views of the cache.  A lazy state's expression is built
    for the value function, except for the zero value function, which does not look at it.
    """

    def __init__(self, value: ValueFunction, depth: int, budget: int) -> None:
        self.value = value
        self.depth = depth
        self.budget = budget
        self.evaluations = 0
        self.batches = 0
        self._cache: dict[State, np.ndarray] = {}

    @property
    def exhausted(self) -> bool:
        return self.evaluations >= self.budget

    @property
    def room(self) -> int:
        """How many more expressions the value function may be asked about."""
        return max(self.budget - self.evaluations, 0)

    def affordable(self, items: Sequence[_T], state_of: Callable[[_T], State]) -> list[_T]:
        """``items`` (in order) without those whose new state would go past the budget."""
        room = self.room
        out: list[_T] = []
        new: set[State] = set()
        for item in items:
            e = state_of(item)
            if e not in self._cache and e not in new:
                if len(new) >= room:
                    continue
                new.add(e)
            out.append(item)
        return out

    def known(self, e: State) -> bool:
        return e in self._cache

    def __call__(self, states: Sequence[State]) -> list[np.ndarray]:
        """The value rows of ``states``, evaluating the ones not cached in one batch."""
        todo = list(dict.fromkeys(e for e in states if e not in self._cache))
        if todo:
            if isinstance(self.value, ZeroValue):
                table = np.zeros((len(todo), self.depth + 1))
            else:
                table = np.asarray(self.value.values([expr_of(e) for e in todo], self.depth), dtype=np.float64)
            if table.shape != (len(todo), self.depth + 1):
                raise ValueError(
                    f"the value function returned shape {table.shape}, expected {(len(todo), self.depth + 1)}"
                )
            table.setflags(write=False)
            for e, row in zip(todo, table, strict=True):
                self._cache[e] = row
            self.evaluations += len(todo)
            self.batches += 1
        return [self._cache[e] for e in states]
