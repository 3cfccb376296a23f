"""Beam search: keep the ``width`` best states of each depth by A*'s priority, expand them all (until a limit of
:mod:`search.limits`: then the best state reached so far)."""

from __future__ import annotations

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State

DEFAULT_WIDTH = 16


def beam(start: Expr, spec: SearchSpec, width: int = DEFAULT_WIDTH) -> SearchResult:
    run = SearchRun(start, spec)
    evaluator, cost = run.evaluator, run.cost
    c0 = run.start_cost
    evaluator([run.start])
    level: list[State] = [run.start]
    try:
        for t in range(spec.depth, 0, -1):  # the states of `level` have t steps left
            candidates = []
            for e in level:
                if run.stop():
                    break
                candidates.extend(run.expand(e, t))
            if run.stop():
                break
            # the budget may end inside this level: rank what it still covers
            candidates = evaluator.affordable(candidates, lambda c: c)
            if not candidates or t == 1:
                break
            rows = evaluator(candidates)
            ranked = sorted(range(len(candidates)), key=lambda i: (-(rows[i][t - 1] + c0 - cost(candidates[i])), i))
            level = list(dict.fromkeys(candidates[i] for i in ranked))[:width]
            run.report()
            if evaluator.exhausted:
                break
    except KeyboardInterrupt:
        run.on_ctrl_c()
    return run.result()
