"""Pruning commutations that enable nothing (search/symmetry.py)."""

from __future__ import annotations

import pytest

from knossos.expr import Expr
from knossos.parser import parse_expr
from rules.sets import get_rule_set
from search.mdp import Transitions
from search.symmetry import CommuteFilter, is_commutation

RULES = get_rule_set("ml_rules_no_bind")


def expr(text: str) -> Expr:
    return parse_expr(text)[0]


def children(start: Expr, prune: bool) -> list[tuple[str, Expr]]:
    return [(a.rule.name, c) for a, c in Transitions(RULES, prune_commutes=prune).successors(start)]


def test_the_commutations_of_the_paper_rules_are_commute_add_and_commute_mul() -> None:
    assert sorted(r.name for r in RULES.rules if is_commutation(r)) == ["commute_add", "commute_mul"]


def test_canonical_forms_ignore_the_order_of_commutative_operands_only() -> None:
    canonical = CommuteFilter(RULES).canonical
    assert canonical(expr("(add (mul b a) c)")) is canonical(expr("(add c (mul a b))"))
    assert canonical(expr("(sub x y)")) is not canonical(expr("(sub y x)"))
    assert canonical(expr("(add (add a b) c)")) is not canonical(expr("(add a (add b c))"))
    # under a binder, and whatever the bound variable is called
    one = expr("(build 4 (lam (i : Integer) (add (to_float i) x)))")
    other = expr("(build 4 (lam (j : Integer) (add x (to_float j))))")
    assert canonical(one) is canonical(other)


def test_a_commutation_that_enables_nothing_is_pruned_and_nothing_else_is() -> None:
    start = expr("(add (mul x y) (div z 2.0))")
    full, pruned = children(start, False), children(start, True)
    assert {n for n, _ in full} >= {"commute_add", "commute_mul"}
    assert [c for n, c in full if not n.startswith("commute")] == [c for n, c in pruned]


@pytest.mark.parametrize(
    ("text", "enabled"),
    [
        ("(mul x 0.0)", "mul_zero"),  # (mul 0 a) -> 0 needs the zero first
        ("(mul (sub 0.0 s) x)", "mul_by_sub"),  # (mul a (sub b c)): rot's first steps
        ("(add (mul b a) (mul a c))", "add_of_muls"),  # (add (mul a b) (mul a c)): the parent's rule
    ],
)
def test_a_commutation_that_lets_another_rule_match_is_kept(text: str, enabled: str) -> None:
    start = expr(text)
    kept = [c for n, c in children(start, True) if n.startswith("commute")]
    assert kept, "the enabling commutation was pruned"
    assert any(n == enabled for c in kept for n, _ in children(c, False))
    assert all(n != enabled for n, _ in children(start, False))


def test_a_commutation_whose_parent_rule_then_gives_a_new_result_is_kept() -> None:
    """assoc_add_add matches (add (add a b) c) before and after swapping a and b, but gives
    (add a (add b c)) before and (add b (add a c)) after: a different expression."""
    start = expr("(add (add a (mul x y)) c)")
    kept = [c for n, c in children(start, True) if n == "commute_add"]
    assert expr("(add (add (mul x y) a) c)") in kept
