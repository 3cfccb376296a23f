"""A search between two saturation passes: ``saturate-astar``, ``saturate-lazy-astar``, ``saturate-pseudo-beam``.

1. **Saturate** every binder-free part of the start (:func:`search.egraph.parts.saturate_parts`):
   equality saturation does the arithmetic (reassociation, factoring, cancelling, folding) in one go,
   inside loop bodies too, where a rewrite-by-rewrite search needs many steps.
2. **Search** from there with the inner search (A*, lazy A* or pseudo-beam, plain or guided by ``spec.value``, the
   full rule set, ``spec.depth`` and ``spec.budget``): the structural moves saturation cannot make
   (inlining, fusion, sums and builds, lets).
3. **Saturate again** what the search found, if it found something cheaper: a fusion or an inlining
   opens arithmetic that the first pass could not see.

The result is the cheapest of the four expressions.  Each saturation pass has at most
:data:`SATURATION_NODES` e-nodes per part (``max_states`` too, where lower) and
:data:`SATURATION_ITERATIONS` iterations per part; the time and memory limits cover the whole run,
and the first pass may take at most :data:`FIRST_PASS_SHARE` of the time limit, so that the search
gets the rest whatever the pass meets (a part whose extraction takes minutes: writing out hundreds
of shared subexpressions as lets).
No rewrite sequence is kept when a saturation pass changed the expression (the e-graph keeps none):
``steps`` is then empty and a note says so; otherwise ``steps`` are the inner search's.  The graph is
the inner search's (the states it visited, from the saturated start).
"""

from __future__ import annotations

import time
from dataclasses import replace

from knossos.expr import Expr
from search.astar import astar
from search.egraph.parts import PartLimits, PartsReport, saturate_parts_report
from search.graph import SearchGraph
from search.lazy_astar import lazy_astar
from search.limits import Limits
from search.pseudo_beam import pseudo_beam
from search.result import SearchResult
from search.spec import Search, SearchSpec, ctrl_c_returns_best
from search.state import state_cost

#: The most e-nodes of one part's e-graph in a pass (the e-graph search's default budget).
SATURATION_NODES = 5000
#: The most iterations of one part's saturation (the e-graph search's default depth).
SATURATION_ITERATIONS = 10
#: The share of the time limit the first pass may take.
FIRST_PASS_SHARE = 0.5


def saturated(inner: Search, after: bool = True) -> Search:
    """``inner`` between saturation passes (``after``: the second pass too)."""

    def search(start: Expr, spec: SearchSpec) -> SearchResult:
        began = time.perf_counter()
        if spec.clock_started is None:
            spec = replace(spec, clock_started=began)  # one time limit for the passes and the search
        limits = Limits(spec.seconds, spec.max_states, spec.max_memory_mib, spec.clock_started)
        part_limits = PartLimits(min(SATURATION_NODES, spec.max_states), SATURATION_ITERATIONS)
        share = None if spec.seconds is None else FIRST_PASS_SHARE * spec.seconds
        stop = limits.stop
        notes: list[str] = []
        interrupted = False
        try:
            first, report = saturate_parts_report(
                start, spec.rules, replace(part_limits, seconds=share), spec.cost, stop
            )
        except KeyboardInterrupt:
            if not ctrl_c_returns_best():
                raise
            first, report, interrupted = start, PartsReport(stopped="interrupted"), True
        notes.append(_say("before the search", spec.cost(start), spec.cost(first), report))
        if interrupted or (report.stopped is not None and stop() is not None):  # not only its share of the time
            return _result(start, first, spec, None, notes, began, interrupted, complete=False)
        cut = report.stopped is not None
        found = inner(first, spec)
        notes.extend(found.notes)
        best = found.best
        if found.interrupted or any("stopped at" in n for n in found.notes):
            return _result(start, best, spec, found, notes, began, found.interrupted, complete=False)
        if after and best is not first:
            try:
                again, report = saturate_parts_report(best, spec.rules, part_limits, spec.cost, stop)
            except KeyboardInterrupt:
                if not ctrl_c_returns_best():
                    raise
                again, report, interrupted = best, PartsReport(stopped="interrupted"), True
            notes.append(_say("after the search", spec.cost(best), spec.cost(again), report))
            best = again
        complete = report.stopped is None and not cut
        return _result(start, best, spec, found, notes, began, interrupted, complete=complete)

    return search


def _say(when: str, before: float, after: float, report: PartsReport) -> str:
    text = (
        f"saturation {when}: {report.parts} parts, {report.improved} cheaper, {report.saturated} saturated, "
        f"{report.nodes:,} e-nodes; cost {before:g} -> {after:g}"
    )
    for limit in report.part_limits:
        text += f"; a part {limit}"
    if report.stopped is not None:
        text += f"; {report.stopped}, the best found so far"
    return text


def _result(
    start: Expr,
    best: Expr,
    spec: SearchSpec,
    found: SearchResult | None,
    notes: list[str],
    began: float,
    interrupted: bool,
    complete: bool,
) -> SearchResult:
    start_cost, best_cost = spec.cost(start), spec.cost(best)
    if best_cost > start_cost:  # never worse than the start
        best, best_cost = start, start_cost
    if found is not None and found.start is start and found.best is best:
        steps = found.steps  # no pass changed anything: the inner search's sequence stands
    else:
        steps = []
        if best is not start:
            notes.append("no rewrite sequence: saturation keeps none")
    graph = SearchGraph(start, spec.depth, state_cost(spec.cost)) if found is None else found.graph
    if spec.progress is not None:
        spec.progress(found.evaluations if found else 0, best_cost)
    return SearchResult(
        start=start,
        best=best,
        start_cost=start_cost,
        best_cost=best_cost,
        steps=steps,
        graph=graph,
        evaluations=found.evaluations if found else 0,
        expanded=found.expanded if found else 0,
        seconds=time.perf_counter() - began,
        interrupted=interrupted,
        complete=complete and (found is None or found.complete),
        notes=notes,
    )


saturate_astar = saturated(astar)
saturate_lazy_astar = saturated(lazy_astar)
saturate_pseudo_beam = saturated(pseudo_beam)
