"""Pruning uphill inlines that open nothing (search/idle_inlines.py)."""

from __future__ import annotations

import pytest

from knossos.expr import Expr
from knossos.parser import parse_expr
from rules.sets import get_rule_set
from search.mdp import Transitions

RULES = get_rule_set("ml_rules_no_bind")


def inlines(text: str, prune: bool) -> list[tuple[int, float]]:
    """(node, cost change) of every inline_let child of ``text``."""
    start: Expr = parse_expr(text)[0]
    kept = Transitions(RULES, prune_inlines=prune).successors(start)
    return [(a.node, c.cost - start.cost) for a, c in kept if a.rule.name == "inline_let"]


def test_a_size_copied_into_a_loop_is_pruned() -> None:
    """Both inlines of n raise the cost (+1 at the build, +16 in its body), neither is the last
    occurrence, and neither lets another rule match where it lands."""
    text = "(lam (v : (Vec Float)) (let (n (size v)) (build n (lam (i : Integer) (add (to_float n) (index i v))))))"
    full = inlines(text, False)
    assert len(full) == 2 and all(change > 0 for _, change in full)
    assert inlines(text, True) == []


@pytest.mark.parametrize(
    "text",
    [
        # the vector lands in (size _) and (index 2 _): size_of_build and index_of_build match there
        "(let (w (build 10 (lam (i : Integer) (to_float i)))) (add (to_float (size w)) (index 2 w)))",
        # the only occurrence: delete_let follows
        "(let (y (mul x x)) (add y 1.0))",
    ],
    ids=["opens-a-fusion", "last-occurrence"],
)
def test_an_uphill_inline_that_opens_a_rule_or_uses_up_the_variable_is_kept(text: str) -> None:
    full = inlines(text, False)
    assert full and all(change > 0 for _, change in full)
    assert inlines(text, True) == full


def test_an_inline_that_costs_nothing_is_kept() -> None:
    text = "(let (k 3) (build k (lam (i : Integer) (add (to_float i) (to_float k)))))"
    full = inlines(text, False)
    assert full and all(change <= 0 for _, change in full)
    assert inlines(text, True) == full


def lam_body_inlines(text: str, prune: bool) -> list[tuple[int, float]]:
    """As :func:`inlines`, of the body of ``(lam (v : (Vec Float)) text)``, so that ``text`` is the root."""
    start: Expr = parse_expr(f"(lam (v : (Vec Float)) {text})")[0].args[1]
    kept = Transitions(RULES, prune_inlines=prune).successors(start)
    return [(a.node, c.cost - start.cost) for a, c in kept if a.rule.name == "inline_let"]


LOOP_WITH_SIZE = "(let (n (size v)) (build 8 (lam (i : Integer) (add (to_float n) (index i v)))))"


def test_using_up_an_outermost_let_inside_a_loop_is_pruned() -> None:
    """n's only use is in the loop: inlining it and deleting the let costs more than keeping it, and
    the let is the root, so its deletion frees nothing above it."""
    full = lam_body_inlines(LOOP_WITH_SIZE, False)
    assert len(full) == 1 and full[0][1] > 0
    assert lam_body_inlines(LOOP_WITH_SIZE, True) == []


def test_using_up_an_outermost_let_outside_loops_is_kept() -> None:
    """Inline then delete_let is downhill when the one use is outside any loop."""
    text = "(let (y (mul (index 0 v) 2.0)) (add y 1.0))"
    full = lam_body_inlines(text, False)
    assert len(full) == 1 and full[0][1] > 0
    assert lam_body_inlines(text, True) == full


def test_using_up_a_let_that_something_consumes_is_kept() -> None:
    """The same let as w's value: deleting it leaves w a bare build, which index_of_build needs."""
    text = f"(let (w {LOOP_WITH_SIZE}) (index 2 w))"
    full = lam_body_inlines(text, False)
    uphill = [pair for pair in full if pair[1] > 0]
    assert uphill and all(pair in lam_body_inlines(text, True) for pair in uphill)
