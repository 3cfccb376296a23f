"""Deep A* (the paper's Algorithm 2) and greedy best-first search.

Priority ``f(s) = V(s) + (c(s0) - c(s))`` (equation 3): the estimated reduction still reachable in
the state's steps left plus the reduction already made.  The closed list keeps, per expression, the
most steps left it was reached with; an expression reached again with more steps left is queued and
expanded again.  New states wait in a batch until at least ``batch_size`` of them (or the frontier
is empty), then go to the value function together.  Search stops when the value function has been
asked about ``budget`` expressions, or nothing is left to expand.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.value import ZeroValue


def astar(start: Expr, spec: SearchSpec) -> SearchResult:
    run = SearchRun(start, spec)
    graph, evaluator, cost = run.graph, run.evaluator, spec.cost
    c0 = cost(start)
    frontier: list[tuple[float, int, Expr, int]] = []  # (-f, order of insertion, expression, steps left)
    pending: list[tuple[Expr, int]] = [(start, spec.depth)]
    order = 0
    try:
        while True:
            if pending and (len(pending) >= spec.batch_size or not frontier):
                if evaluator.exhausted:
                    break
                batch = _within_budget(pending, evaluator.budget - evaluator.evaluations, evaluator.known)
                pending.clear()
                for (e, t), row in zip(batch, evaluator([e for e, _ in batch]), strict=True):
                    if graph.steps_left(e) > t:
                        continue  # reached again with more steps left: that visit is queued instead
                    heapq.heappush(frontier, (-(row[t] + c0 - cost(e)), order, e, t))
                    order += 1
                run.report()
            if not frontier:
                break
            _, _, e, t = heapq.heappop(frontier)
            if graph.steps_left(e) > t:
                continue
            children = run.transitions.successors(e)
            graph.add_edges(e, [child for _, child in children])
            for action, child in children:
                if graph.reach(child, t - 1, e, action) and t > 1:
                    pending.append((child, t - 1))
    except KeyboardInterrupt:
        run.interrupted = True
    return run.result()


def greedy(start: Expr, spec: SearchSpec) -> SearchResult:
    """Greedy best-first: A* with ``f(s) = c(s0) - c(s)``, i.e. the zero value function."""
    from dataclasses import replace

    return astar(start, replace(spec, value=ZeroValue()))


def _within_budget(
    pending: list[tuple[Expr, int]], room: int, is_known: Callable[[Expr], bool]
) -> list[tuple[Expr, int]]:
    """``pending`` cut so that it asks the value function about at most ``room`` new expressions."""
    out: list[tuple[Expr, int]] = []
    new: set[Expr] = set()
    for e, t in pending:
        if not is_known(e) and e not in new:
            if len(new) >= room:
                continue
            new.add(e)
        out.append((e, t))
    return out
