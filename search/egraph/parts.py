"""Equality saturation on the binder-free parts of an expression: the step the searches of
:mod:`search.saturated` take before and after a plain or learned search.

A *part* is a maximal subterm with no ``lam``, ``build`` or ``sumbuild`` in it (lets are allowed:
the e-graph inlines them and extraction binds shared subexpressions again).  Inside a loop, the
body is a part whose index (and any variable bound around it) is a free variable of the part: an
opaque leaf the e-graph never looks into.  Binders are never crossed: a rewrite runs inside one part,
and a part is replaced by an expression with the same free variables (or fewer) and the same type,
so the binders around it bind what they bound before.

Each part is saturated in its own e-graph by the rules of the set that translate
(:mod:`search.egraph.translate`), at most ``nodes`` e-nodes and ``iterations`` iterations per part,
and replaced by its cheapest extraction when that costs less than the part (its cost taken alone,
by the search's cost function).  A time or memory limit (``stop``) ends the pass between parts or
inside one (building, saturating, rebuilding or extracting its e-graph); the parts done by then are
kept, and a part stopped before its extraction is written out stays as it was.  The whole result is kept only if it costs less than
the start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from rules.rule_set import RuleSet
from search.egraph.extract import dag_choice, tree_choice, write_out
from search.egraph.graph import EGraph
from search.egraph.saturate import SaturationLimits, saturate
from search.egraph.translate import Translation, translate_rules
from search.limits import LimitReached, check_stop
from search.mdp import CostFunction, rlo_cost

#: Ops a part cannot hold: binders whose variable is not a let's.
LOOPS = frozenset({Op.LAM, Op.BUILD, Op.SUMBUILD})


@dataclass(frozen=True)
class PartLimits:
    #: The most e-nodes in one part's e-graph.
    nodes: int = 5000
    #: The most iterations for one part.
    iterations: int = 10
    #: Seconds for the whole pass (None: no limit).
    seconds: float | None = None


@dataclass
class PartsReport:
    """What a pass did."""

    #: Parts with at least one operation (leaves are not saturated).
    parts: int = 0
    #: Parts replaced by something cheaper.
    improved: int = 0
    #: Parts whose e-graph saturated.
    saturated: int = 0
    #: E-nodes built over all parts.
    nodes: int = 0
    #: The largest e-graph of one part.
    largest: int = 0
    #: Why the pass stopped before every part was done (None: it was not stopped).
    stopped: str | None = None
    #: Limit notes of parts that did not saturate (node or iteration limits), at most one per kind.
    part_limits: list[str] = field(default_factory=list)


#: Translations by rule set (a rewrite caches its conditions, so one serves every pass).
_TRANSLATIONS: dict[int, tuple[RuleSet, Translation]] = {}


def translation(rules: RuleSet) -> Translation:
    found = _TRANSLATIONS.get(id(rules))
    if found is None or found[0] is not rules:
        found = _TRANSLATIONS[id(rules)] = (rules, translate_rules(rules))
    return found[1]


def saturate_parts(
    expr: Expr,
    rules: RuleSet,
    limits: PartLimits | None = None,
    cost: CostFunction = rlo_cost,
    stop: Callable[[], str | None] | None = None,
) -> Expr:
    """``expr`` with every binder-free part replaced by its cheapest form under saturation."""
    return saturate_parts_report(expr, rules, limits, cost, stop)[0]


def saturate_parts_report(
    expr: Expr,
    rules: RuleSet,
    limits: PartLimits | None = None,
    cost: CostFunction = rlo_cost,
    stop: Callable[[], str | None] | None = None,
) -> tuple[Expr, PartsReport]:
    """:func:`saturate_parts` and what it did.  ``stop``: a limit beyond ``limits`` (time, memory) to
    check now and then, returning a note once reached."""
    limits = limits or PartLimits()
    report = PartsReport()
    rules_t = translation(rules)
    if not rules_t.rewrites and not rules_t.folds:
        return expr, report
    deadline = None if limits.seconds is None else time.perf_counter() + limits.seconds

    def other() -> str | None:
        if deadline is not None and time.perf_counter() > deadline:
            return f"stopped at the saturation time limit of {limits.seconds:g} s"
        return stop() if stop is not None else None

    def part(e: Expr) -> Expr:
        if report.stopped is not None or not e.args:
            return e
        note = other()
        if note is not None:
            report.stopped = note
            return e
        report.parts += 1
        better, g_size, done = _saturate_one(e, rules_t, limits, cost, other)
        report.nodes += g_size
        report.largest = max(report.largest, g_size)
        if done.saturated:
            report.saturated += 1
        elif done.stopped is not None:
            if done.stopped.startswith("stopped at the limit of") or "iteration limit" in done.stopped:
                kind = done.stopped.split(" of ")[0]
                if not any(n.startswith(kind) for n in report.part_limits):
                    report.part_limits.append(done.stopped)
            else:
                report.stopped = done.stopped
        if better is not e:
            report.improved += 1
        return better

    out = map_parts(expr, part)
    if cost(out) >= cost(expr):
        return expr, report
    return out, report


def _saturate_one(
    e: Expr, rules: Translation, limits: PartLimits, cost: CostFunction, other: Callable[[], str | None]
) -> tuple[Expr, int, _Done]:
    g = EGraph(folds=rules.folds)
    best = e
    try:
        root = g.add_expr(e, other)
        g.rebuild(other)
        done = saturate(g, rules.rewrites, SaturationLimits(limits.nodes, limits.iterations, other))
        tree, trees = tree_choice(g, other)
        r = g.find(root)
        for choice in (tree, dag_choice(g, trees, other)):
            out = write_out(r, choice, e.free, cost, other)
            if out is not None and out.type == e.type and out.free <= e.free and cost(out) < cost(best):
                best = out
            check_stop(other)
    except LimitReached as reached:  # the part as it is, or the tree extraction if done in time
        return best, g.size, _Done(False, reached.note)
    return best, g.size, _Done(done.saturated, done.stopped)


@dataclass(frozen=True)
class _Done:
    saturated: bool
    stopped: str | None


def parts(expr: Expr) -> list[Expr]:
    """The maximal binder-free subterms of ``expr`` (with at least one operation), outermost first,
    left to right; a subterm that occurs twice is listed once."""
    found: list[Expr] = []

    def collect(e: Expr) -> Expr:
        if e.args and e not in seen:
            seen.add(e)
            found.append(e)
        return e

    seen: set[Expr] = set()
    map_parts(expr, collect)
    return found


def map_parts(expr: Expr, f: Callable[[Expr], Expr]) -> Expr:
    """``expr`` with each maximal binder-free subterm ``p`` replaced by ``f(p)`` (each distinct subterm
    once), binding occurrences of variables left as they are.  Iterative: deep expressions are fine."""
    loops = _has_loop(expr)
    done: dict[int, Expr] = {}  # id of a node -> its result (nodes are interned: one id per expression)
    keep: list[Expr] = []  # keeps the ids above alive
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        e, children_done = stack.pop()
        if id(e) in done:
            continue
        if not loops[id(e)]:
            done[id(e)] = f(e)
            keep.append(e)
            continue
        bound = BINDERS[e.op][0] if e.op in BINDERS else -1
        if not children_done:
            stack.append((e, True))
            stack.extend((a, False) for i, a in enumerate(e.args) if i != bound)
            continue
        args = tuple(a if i == bound else done[id(a)] for i, a in enumerate(e.args))
        done[id(e)] = e.replace_args(args)
        keep.append(e)
    return done[id(expr)]


def _has_loop(expr: Expr) -> dict[int, bool]:
    """Whether each node (by id) has a lam, build or sumbuild in it."""
    out: dict[int, bool] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        e, children_done = stack.pop()
        if id(e) in out:
            continue
        if not children_done:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args if id(a) not in out)
            continue
        out[id(e)] = e.op in LOOPS or any(out[id(a)] for a in e.args)
    return out
