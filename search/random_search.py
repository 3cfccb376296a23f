"""Random search: uniformly random rollouts of ``depth`` rewrites from the start, until the budget.

Each distinct state a rollout visits counts as one evaluation (it is sent to the value function,
whose answer random search ignores), so that budgets compare with A*'s.  Rollouts can keep to states
already seen (a small expression has few), so search also stops after ``budget`` rollouts (or at a limit of :mod:`search.limits`).
"""

from __future__ import annotations

import random

from knossos.expr import Expr
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.state import State


def random_search(start: Expr, spec: SearchSpec) -> SearchResult:
    run = SearchRun(start, spec)
    graph, evaluator = run.graph, run.evaluator
    rng = random.Random(spec.seed)
    evaluator([run.start])
    rollouts = 0
    try:
        while not evaluator.exhausted and rollouts < spec.budget and not run.stop():
            rollouts += 1
            e: State = run.start
            moved = False
            for t in range(spec.depth, 0, -1):
                if run.stop():
                    break
                children = run.transitions.successors(e, run.stop_check())
                if not children or run.stop():  # a cut-short list would bias the choice
                    break
                action, child = children[rng.randrange(len(children))]
                graph.reach(child, t - 1, e, action)
                evaluator([child])
                moved = True
                e = child
                if evaluator.exhausted:
                    break
            run.report()
            if not moved:  # the start has no rewrites at all
                break
    except KeyboardInterrupt:
        run.on_ctrl_c()
    return run.result()
