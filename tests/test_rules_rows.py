"""Rule rows: patterns with rest holes and any-index gets, rows with appliers, conditions at the site."""

from __future__ import annotations

import pytest

from knossos import expr as E
from knossos.errors import KsSyntaxError
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER
from rules.actions import site_at
from rules.pattern import match_pattern, parse_pattern
from rules.rule import ApplierRule, Rule, TableRule, builds, condition, rule
from rules.sets import all_rules

X, Y, N = E.var("x", FLOAT), E.var("y", FLOAT), E.var("n", INTEGER)


def test_a_rest_hole_matches_a_tuple_of_any_length_and_binds_the_tuple() -> None:
    pattern = parse_pattern("(add (tuple ?as...) ?b)")
    for elements in [(X,), (X, Y), (X, Y, X)]:
        t = E.tuple_(*elements)
        found = match_pattern(pattern, E.op(Op.ADD, t, t))
        assert found is not None and found["as"] is t and found["b"] is t
    assert match_pattern(pattern, E.op(Op.ADD, X, Y)) is None


def test_a_get_pattern_matches_every_index() -> None:
    pattern = parse_pattern("(get$?i$?n (tuple ?es...))")
    t = E.tuple_(X, Y)
    for i in (1, 2):
        found = match_pattern(pattern, E.get(i, 2, t))
        assert found == {"es": t}


@pytest.mark.parametrize("text", ["(add ?a... ?b)", "(tuple ?a ?b...)", "?a...", "(get$?i$?n ?a ?b)"])
def test_a_rest_hole_is_only_a_tuple_pattern_s_one_argument(text: str) -> None:
    with pytest.raises(KsSyntaxError):
        parse_pattern(text)


@pytest.mark.parametrize(
    ("lhs", "rhs"), [("(tuple ?a...)", "?a"), ("(get$?i$?n ?t)", "?t"), ("(add ?a ?b)", "(tuple ?a...)")]
)
def test_a_table_row_refuses_what_only_an_applier_can_build(lhs: str, rhs: str) -> None:
    with pytest.raises(ValueError, match="applier"):
        rule("bad", lhs, rhs)


def test_an_applier_row_takes_its_texts_and_heads_from_its_pattern() -> None:
    r = rule(
        "double",
        "(add ?a ?a)",
        builds("(mul 2 ?a)", lambda site, b: E.op(Op.MUL, E.const(2.0), b["a"])),
        condition("float", lambda a: a.type is FLOAT, "?a"),
    )
    assert isinstance(r, ApplierRule)
    assert (r.lhs_text, r.rhs_text, r.conditions_text, r.heads) == (
        "(add ?a ?a)",
        "(mul 2 ?a)",
        ("float(?a)",),
        frozenset({Op.ADD}),
    )
    e = E.op(Op.ADD, X, X)
    site = site_at(e, 0)
    found = r.match(site)
    assert found == {"a": X}
    assert r.rewrite(site, found) == (0, E.op(Op.MUL, E.const(2.0), X))
    assert r.match(site_at(E.op(Op.ADD, X, Y), 0)) is None


def test_an_applier_row_checks_its_conditions_name_bound_holes() -> None:
    with pytest.raises(ValueError, match="unbound"):
        rule("bad", "(add ?a ?b)", builds("?a", lambda site, b: b["a"]), condition("c", lambda c: True, "?c"))


def test_a_condition_at_the_site_reads_the_scope() -> None:
    seen: list[set[str]] = []
    r = rule(
        "in_scope",
        "(add ?a ?b)",
        builds("?a", lambda site, b: b["a"]),
        condition("scoped", lambda site, a: seen.append(set(site.scope)) or True, "?a", at_site=True),
    )
    e = E.let(E.var("y", FLOAT), X, E.op(Op.ADD, E.var("y", FLOAT), X))
    assert r.match(site_at(e, 3)) is not None
    assert seen == [{"y"}]
    with pytest.raises(ValueError, match="not shallow"):
        condition("bad", lambda site, a: True, "?a", at_site=True, shallow=True)


def test_rows_write_their_left_side_once() -> None:
    """Every row's left text is its pattern; only coded rules (Rule subclasses) write theirs by hand."""
    rows = [r for r in all_rules if isinstance(r, (TableRule, ApplierRule))]
    assert all(r.lhs_text == r.lhs_text.strip() and parse_pattern(r.lhs_text) == r.lhs for r in rows)
    coded = sorted(r.name for r in all_rules if type(r).__mro__[1] is Rule)
    assert coded == [
        "add_zero_vec",
        "if_zero_inward",
        "inline_call",
        "inline_let",
        "lift_bind",
        "lift_if",
        "new_bind",
        "sumbuild_of_let_build",
    ]
