"""Tidying a search's result for people to read: the lets a search leaves behind, removed.

Searches stop where the cost stops falling much, so their results keep lets a reader trips on:
``(let (x x) ...)``, ``(let (v (size x)) v)``, a let whose variable is never used.  :func:`tidy`
removes them with three of the rules, so that every tidying is an ordinary rewrite step (it replays
from the start with the search's steps, and keeps the meaning on every input: the three are strict):

* ``let_recover``: ``(let (v e) v)`` -> ``e``;
* ``delete_let``: a let whose variable its body does not use -> its body;
* ``inline_let`` of a let whose value is a variable (``(let (x y) ... x ...)``), occurrence by
  occurrence, after which the let is dead.

Each step lowers the cost or keeps it (a variable for a variable), and removes a let or an occurrence
of one, so tidying ends; :func:`tidy_until` also ends at the search's time or memory limit, with the
steps made so far.
"""

from __future__ import annotations

from knossos.cost_models import CostFunction
from knossos.expr import Expr, path_to
from knossos.ops import Op
from rules.actions import Action, actions, apply
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.limits import Stop
from search.mdp import RewriteStep

#: Tidying gives up on expressions larger than this (each step walks the expression).
MAX_NODES = 20_000
#: ... and after this many steps.
_MAX_STEPS = 1_000

_ALL = get_rule_set("all_rules")
_RULES = RuleSet("tidy", [_ALL.rule(n) for n in ("let_recover", "delete_let", "inline_let")])


def tidy(e: Expr, cost: CostFunction) -> tuple[Expr, list[tuple[RewriteStep, Expr]]]:
    """``e`` without identity, variable-valued and dead lets, and the steps that made it, each with
    the subexpression it rewrote."""
    out, steps, _ = tidy_until(e, cost, None)
    return out, steps


def tidy_until(
    e: Expr, cost: CostFunction, stop: Stop | None
) -> tuple[Expr, list[tuple[RewriteStep, Expr]], str | None]:
    """:func:`tidy`, stopping with the steps made so far once ``stop`` (the search's time and memory
    limits, looked at before each action tried: trying one walks the expression) gives a note, which
    is returned third (None: not stopped)."""
    steps: list[tuple[RewriteStep, Expr]] = []
    while e.size <= MAX_NODES and len(steps) < _MAX_STEPS:
        action = None
        for a in actions(e, _RULES):
            note = stop() if stop is not None else None
            if note is not None:
                return e, steps, note
            if _tidies(e, a):
                action = a
                break
        if action is None:
            break
        after = apply(e, action)
        if cost(after) > cost(e):  # never: the three rules do not add cost here; kept as a guard
            break
        steps.append((RewriteStep(action.node, action.rule.name, cost(after)), path_to(e, action.node)[1]))
        e = after
    return e, steps, None


def _tidies(e: Expr, action: Action) -> bool:
    """Whether ``action`` is a tidying: any let_recover or delete_let, and inline_let only of a
    variable (what replaces the occurrence is then a variable too)."""
    if action.rule.name != "inline_let":
        return True
    ancestors, occurrence = path_to(e, action.node)
    name = occurrence.data
    for node, _, _ in reversed(ancestors):  # the innermost let binding the name
        if node.op is Op.LET and node.args[0].data == name:
            return node.args[1].op is Op.VAR
    return False
