"""Two-phase search (the paper's GEMM and CNN setting): the first phase's rules (``phase1`` by default) for the first H/2
steps, then the full rule set from the best expression found, for the remaining steps.

Each phase is an A* search with half of the budget; the result joins the two rewrite sequences and
the two explored graphs (so that value targets cover both phases, with steps left counted to the end).
The time limit covers both phases; the state and memory limits hold for each.
"""

from __future__ import annotations

import time
from dataclasses import replace

from knossos.expr import Expr
from search.astar import astar
from search.graph import SearchGraph
from search.result import SearchResult
from search.spec import SearchSpec


def two_phase(start: Expr, spec: SearchSpec) -> SearchResult:
    if spec.clock_started is None:
        spec = replace(spec, clock_started=time.perf_counter())  # one time limit for both phases
    first_depth = max(spec.depth // 2, 1)
    first_budget = max(spec.budget // 2, 1)
    first = astar(start, replace(spec, rules=spec.first_phase_rules, depth=first_depth, budget=first_budget))
    if first.interrupted or first.notes or spec.depth - first_depth < 1 or first.evaluations >= spec.budget:
        return first  # interrupted, at a limit, or nothing left for a second phase
    rest = replace(spec, depth=spec.depth - first_depth, budget=spec.budget - first.evaluations)
    second = astar(first.best, rest)
    return replace(
        second,
        graph=SearchGraph.joined(first.graph, second.graph),
        start=start,
        start_cost=first.start_cost,
        steps=first.steps + second.steps,
        evaluations=first.evaluations + second.evaluations,
        expanded=first.expanded + second.expanded,
        seconds=first.seconds + second.seconds,
        notes=first.notes + second.notes,
    )
