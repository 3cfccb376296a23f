"""Pseudo-beam search (sweeps down the depths): each sweep expands the best unexpanded state at every
depth in turn, from the start's depth down to the last, then starts again at the top.

A beam of fixed width keeps only its ``width`` best states of each depth and forgets the rest, so a
step that is uphill now but opens a large reduction later (inline a let-bound matrix into an
``index``, then ``index_of_build``) is dropped whenever enough cheaper steps exist; GEMM's fusions
need exactly such steps.  Here every state reached stays queued at its depth: the k-th sweep expands
the k-th best state of each depth, so the uphill state is expanded once the sweeps have used the
better ones, and its children (back down in cost) rank at the top of the next depth at once.  Sweeps
go on until the evaluation budget is spent, so the budget, not a width, sets how wide the search is.
The reference implementation searched its BLAS programs this way.

Priority within a depth is A*'s (equation 3): ``V(s) + c(s0) - c(s)``.  As in A*, an expression is
expanded only with the most steps left it was reached with.
"""

from __future__ import annotations

import heapq

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State


def pseudo_beam(start: Expr, spec: SearchSpec) -> SearchResult:
    run = SearchRun(start, spec)
    graph, evaluator = run.graph, run.evaluator
    # queued[t]: states with t steps left, as (-priority, order of insertion, expression)
    queued: list[list[tuple[float, int, State]]] = [[] for _ in range(spec.depth + 1)]
    pending: list[tuple[State, int]] = [(run.start, spec.depth)]
    order = 0

    def evaluate_pending() -> None:
        nonlocal order
        for priority, t, e in run.evaluate_waiting(pending):
            heapq.heappush(queued[t], (-priority, order, e))
            order += 1
        run.report()

    def best_current(queue: list[tuple[float, int, State]], t: int) -> State | None:
        """The best state of ``queue`` still to be expanded with ``t`` steps left."""
        while queue:
            _, _, e = heapq.heappop(queue)
            if graph.steps_left(e) == t:
                return e
        return None

    try:
        while not run.stop():
            expanded = False
            for t in range(spec.depth, 0, -1):
                if pending and (len(pending) >= spec.batch_size or not queued[t]):
                    if evaluator.exhausted:
                        return run.result()  # as A*: the budget is spent when new states wait for it
                    evaluate_pending()
                e = best_current(queued[t], t)
                if e is None:
                    continue
                reached = run.expand(e, t)
                if t > 1:  # children with no steps left are reached, not queued
                    pending.extend((child, t - 1) for child in reached)
                expanded = True
                if run.stop():
                    break
            if not expanded and not pending:
                break  # every queue is empty
    except KeyboardInterrupt:
        run.on_ctrl_c()
    return run.result()
