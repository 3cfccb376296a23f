"""A* with deferred evaluation: a state goes to the value function when it reaches the top of the
frontier, not when it is generated.

Eager A* (:mod:`search.astar`) evaluates every child of every state it expands, so a budget of ``B``
evaluations expands about ``B`` / (children per state) states, and most evaluations go to children
that are never expanded.  Here a new child is queued with an estimate that needs no network call:
its parent's value one step shorter, plus the reduction already made at the child,

    f~(c) = c(s0) - c(c) + V(p)[t - 1]        (exact for the zero value function)

When an unevaluated state reaches the top, it and the next unevaluated states at the top, up to
``batch`` in all, are evaluated together and queued again at their own priority
``f(s) = c(s0) - c(s) + V(s)[t]`` (equation 3); an evaluated state at the top is expanded.  The
budget counts expressions sent to the value function, as in eager A*, so each evaluation is spent
on a state the search is about to expand.  The price is time: the search expands far more states
per evaluation, and generating children is what a search spends its time on besides the network.

Ties, the closed list and the limits are eager A*'s: among equal priorities the fewest steps left
first, then the earliest queued; a state reached again with more steps left is queued again.
"""

from __future__ import annotations

import heapq
from itertools import count

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State

#: A frontier entry: (-priority, steps left, order of insertion, expression, whether the priority
#: is the state's own value rather than its parent's estimate).
Entry = tuple[float, int, int, State, bool]


def lazy_astar(start: Expr, spec: SearchSpec, batch: int | None = None) -> SearchResult:
    """Lazy A* from ``start``, evaluating ``batch`` states together (None: the spec's ``lazy_batch``)."""
    if batch is None:
        batch = spec.lazy_batch
    if batch < 1:
        raise ValueError(f"the batch must be at least 1, not {batch}")
    run = SearchRun(start, spec)
    graph, evaluator, cost = run.graph, run.evaluator, run.cost
    c0 = run.start_cost
    frontier: list[Entry] = []
    order = count()

    def push(priority: float, t: int, e: State, evaluated: bool) -> None:
        heapq.heappush(frontier, (-priority, t, next(order), e, evaluated))

    def push_evaluated(group: list[tuple[int, State]]) -> None:
        for (t, e), row in zip(group, evaluator([e for _, e in group]), strict=True):
            push(row[t] + c0 - cost(e), t, e, True)

    def unevaluated_at_top(first: tuple[int, State]) -> list[tuple[int, State]]:
        """``first`` and the next unevaluated states at the top, up to ``batch``; evaluated
        entries passed over go back."""
        group, passed = [first], []
        while len(group) < batch and frontier:
            entry = heapq.heappop(frontier)
            _, t, _, e, evaluated = entry
            if graph.steps_left(e) > t:
                continue  # stale: queued again with more steps left
            if evaluated or evaluator.known(e):
                passed.append(entry)
            else:
                group.append((t, e))
        for entry in passed:
            heapq.heappush(frontier, entry)
        return group

    try:
        push_evaluated([(spec.depth, run.start)])
        while frontier and not run.stop():
            _, t, _, e, evaluated = heapq.heappop(frontier)
            if graph.steps_left(e) > t:
                continue
            if not evaluated:
                if not evaluator.known(e) and evaluator.exhausted:
                    break
                group = [(t, e)] if evaluator.known(e) else unevaluated_at_top((t, e))
                push_evaluated(evaluator.affordable(group, lambda g: g[1]))
                run.report()
                continue
            (row,) = evaluator([e])
            for child in run.expand(e, t):
                if t > 1:  # children with no steps left are reached, not queued
                    if evaluator.known(child):
                        push_evaluated([(t - 1, child)])
                    else:
                        push(row[t - 1] + c0 - cost(child), t - 1, child, False)
    except KeyboardInterrupt:
        run.on_ctrl_c()
    return run.result()
