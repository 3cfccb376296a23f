"""Beam search: keep the ``width`` best states of each depth by A*'s priority, expand them all."""

from __future__ import annotations

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec

DEFAULT_WIDTH = 16


def beam(start: Expr, spec: SearchSpec, width: int = DEFAULT_WIDTH) -> SearchResult:
    run = SearchRun(start, spec)
    graph, evaluator, cost = run.graph, run.evaluator, spec.cost
    c0 = cost(start)
    evaluator([start])
    level = [start]
    try:
        for t in range(spec.depth, 0, -1):  # the states of `level` have t steps left
            candidates: list[Expr] = []
            for e in level:
                children = run.transitions.successors(e)
                graph.add_edges(e, [child for _, child in children])
                for action, child in children:
                    if graph.reach(child, t - 1, e, action):
                        candidates.append(child)
            room = evaluator.budget - evaluator.evaluations
            fresh = [c for c in dict.fromkeys(candidates) if not evaluator.known(c)]
            if len(fresh) > room:  # the budget ends inside this level: rank what it still covers
                allowed = set(fresh[: max(room, 0)])
                candidates = [c for c in candidates if evaluator.known(c) or c in allowed]
            if not candidates or t == 1:
                break
            rows = evaluator(candidates)
            ranked = sorted(range(len(candidates)), key=lambda i: (-(rows[i][t - 1] + c0 - cost(candidates[i])), i))
            level = list(dict.fromkeys(candidates[i] for i in ranked))[:width]
            run.report()
            if evaluator.exhausted:
                break
    except KeyboardInterrupt:
        run.interrupted = True
    return run.result()
