"""Exhaustive breadth-first search to depth H, each expression once: the exact optimum when it ends.

Breadth-first order reaches every expression first with the most steps left it can have, so one
visit per expression is enough.  It gives up, saying so, when the number of distinct states passes
the budget (here a state limit, not value-function calls) or a limit of :mod:`search.limits`.
"""

from __future__ import annotations

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State


def exhaustive(start: Expr, spec: SearchSpec) -> SearchResult:
    run = SearchRun(start, spec)
    graph = run.graph
    level: list[State] = [run.start]
    stopped: str | None = None
    try:
        for t in range(spec.depth, 0, -1):
            following: list[State] = []
            for e in level:
                following.extend(run.expand(e, t))
                if run.stop():  # first: a limit may have cut this expansion short
                    stopped = f"{run.limits.note} (depth {spec.depth - t + 1} of {spec.depth}); the best found so far"
                    break
                if len(graph.states) > spec.budget:
                    stopped = f"stopped at the state limit of {spec.budget} distinct expressions (depth {spec.depth - t + 1} of {spec.depth})"
                    break
            run.evaluator.evaluations = len(graph.states)
            run.report()
            if stopped or not following:
                break
            level = following
    except KeyboardInterrupt:
        run.on_ctrl_c()
        stopped = "interrupted"
    return run.result(complete=stopped is None, notes=[stopped] if stopped else [])
