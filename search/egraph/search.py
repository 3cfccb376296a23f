"""``search(start, spec)`` by equality saturation: the start goes into an e-graph, the rules of
``spec.rules`` that translate (:mod:`search.egraph.translate`) saturate it, and the cheapest
expression under the reference cost model comes out (:mod:`search.egraph.extract`).

The settings are read as an e-graph's limits: ``spec.budget`` is the most e-nodes (``max_states``
too, when lower), ``spec.depth`` the most iterations (each applies every match at once, so H of
them cover at least every sequence of H rewrites), ``seconds`` and ``max_memory_mib`` as for every
search.  At a limit the e-graph is rebuilt and extracted as it is, ``complete`` is False and a note
says which limit; a time or memory limit reached while building, rebuilding or extracting it leaves
the start as the best (no extraction was finished).  No value function is used, and no rewrite sequence is kept: ``steps`` is empty.
"""

from __future__ import annotations

from knossos.errors import KsUsageError
from knossos.expr import Expr
from search.egraph.extract import dag_choice, tree_choice, write_out
from search.egraph.graph import EGraph
from search.egraph.saturate import Saturation, SaturationLimits, saturate
from search.egraph.translate import translate_rules
from search.graph import Reached
from search.limits import LimitReached, Stop
from search.result import SearchResult
from search.spec import SearchRun, SearchSpec
from search.value import ZeroValue


def egraph(start: Expr, spec: SearchSpec) -> SearchResult:
    rules = translate_rules(spec.rules)
    if not rules.rewrites and not rules.folds and not rules.let_rules:
        raise KsUsageError(
            f"the e-graph search can run none of the rules of {spec.rules.name} "
            "(it takes table rules without binders, constant folding and the let rules)"
        )
    run = SearchRun(start, spec)
    g = EGraph(folds=rules.folds)
    stop = run.limits.stop
    node_limit = min(spec.budget, spec.max_states)
    limits = SaturationLimits(node_limit, spec.depth, stop)
    start_cost = spec.cost(start)

    def progress(size: int) -> None:
        if spec.progress is not None:
            spec.progress(size, start_cost)

    notes: list[str] = []
    stopped: str | None = None  # a limit reached outside saturation's iterations: the start is the best
    best = start
    interrupted = False
    done: Saturation | None = None
    try:
        root = g.add_expr(start, stop)
        g.rebuild(stop)
        try:
            done = saturate(g, rules.rewrites, limits, progress)
        except KeyboardInterrupt:  # extract what the e-graph holds
            run.on_ctrl_c()
            g.rebuild(stop)
            interrupted = True
        best = _extract(g, root, start, spec, stop)
    except LimitReached as reached:
        stopped = reached.note
    size = f"{g.size:,} e-nodes in {len(g.classes):,} e-classes"
    if rules.left_out:
        notes.append(f"rules the e-graph cannot run, left out: {', '.join(rules.left_out)}")
    if not isinstance(spec.value, ZeroValue):
        notes.append("the e-graph search uses no value function")
    notes.append("no rewrite sequence: the e-graph keeps none")
    if stopped is not None:
        notes.append(f"not saturated: {stopped} ({size}, not extracted); the best found so far")
    elif interrupted:
        notes.append(f"interrupted after {size}")
    elif done is not None and done.saturated:
        notes.append(f"saturated after {done.iterations} iterations: {size}")
    elif done is not None:
        notes.append(f"not saturated: {done.stopped} ({size}); the best found so far")
    if best is not start:
        run.graph.states[best] = Reached(0, None, None)
        run.graph.best, run.graph.best_cost = best, spec.cost(best)
    return run.result(complete=stopped is None and done is not None and done.saturated, notes=notes)


def _extract(g: EGraph, root: int, start: Expr, spec: SearchSpec, stop: Stop) -> Expr:
    """The cheapest of the start and the two extractions, by ``spec.cost`` (the reference's by default)."""
    tree, trees = tree_choice(g, stop)
    root = g.find(root)
    candidates = [start]
    avoid = start.free
    for choice in (tree, dag_choice(g, trees, stop)):
        out = write_out(root, choice, avoid, spec.cost, stop)
        if out is not None:
            candidates.append(out)
    return min(candidates, key=spec.cost)
