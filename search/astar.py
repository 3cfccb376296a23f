"""Deep A* (the paper's Algorithm 2) and greedy best-first search.

Priority ``f(s) = V(s) + (c(s0) - c(s))`` (equation 3): the estimated reduction still reachable in
the state's steps left plus the reduction already made.  The closed list keeps, per expression, the
most steps left it was reached with; an expression reached again with more steps left is queued and
expanded again.  New states wait in a batch until at least ``batch_size`` of them (or the frontier
is empty), then go to the value function together.  Search stops when the value function has been
asked about ``budget`` expressions, or nothing is left to expand, or at a limit of :mod:`search.limits`.

Among states of equal priority the one with the fewest steps left, i.e. the deepest, is expanded
first, then the earliest queued: on a plateau of equal cost the search follows one path down rather
than widening across the plateau (as the reference implementation's heap does).
"""

from __future__ import annotations

import heapq

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State
from search.value import ZeroValue


def astar(start: Expr, spec: SearchSpec) -> SearchResult:
    run = SearchRun(start, spec)
    graph, evaluator = run.graph, run.evaluator
    frontier: list[tuple[float, int, int, State]] = []  # (-f, steps left, order of insertion, state)
    pending: list[tuple[State, int]] = [(run.start, spec.depth)]
    order = 0
    try:
        while not run.stop():
            if pending and (len(pending) >= spec.batch_size or not frontier):
                if evaluator.exhausted:
                    break
                for priority, t, e in run.evaluate_waiting(pending):
                    heapq.heappush(frontier, (-priority, t, order, e))
                    order += 1
                run.report()
            if not frontier:
                break
            _, t, _, e = heapq.heappop(frontier)
            if graph.steps_left(e) > t:
                continue
            reached = run.expand(e, t)
            if t > 1:  # children with no steps left are reached, not queued
                pending.extend((child, t - 1) for child in reached)
    except KeyboardInterrupt:
        run.on_ctrl_c()
    return run.result()


def greedy(start: Expr, spec: SearchSpec) -> SearchResult:
    """Greedy best-first: A* with ``f(s) = c(s0) - c(s)``, i.e. the zero value function."""
    from dataclasses import replace

    return astar(start, replace(spec, value=ZeroValue()))
