"""The rules at the edges of machine arithmetic (issue 31, item 3).

Rules hold in exact arithmetic; programs compute with IEEE doubles and 64-bit Integers (overflow is an
error in the interpreter).  Each arithmetic rule is checked on its own left-hand side, its holes
variables, over a grid of extreme values (``INT_MAX``, ``INT_MIN``, ``±1e308``, infinities, NaN,
``-0.0``, subnormals): wherever the original evaluates, the rewrite must give the same value (NaN for
NaN, the sign of a zero aside), unless the rule is not strict and either its domain check (the one the
property harness uses) says the domain is violated there, or the difference is rounding (at most
``1e-12`` of the largest intermediate value).  A strict rule gets no exemption at all.  A rule whose
stated domain is too wide therefore fails here.

Also: the issue's three reproducers through ``rules.actions.apply`` and the interpreter, and the
``strict:`` rule sets that leave out every rule that may change a value.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from test_rules_properties import DOMAIN_CHECKS, DomainSite, contexts, ev, float_leaves, subterm_values

from knossos.arith import INT_MAX, INT_MIN
from knossos.cli import main
from knossos.errors import KsError, KsEvalError
from knossos.expr import Expr, node_at
from knossos.parser import parse_program
from knossos.values import isclose
from rules.actions import Action, actions, apply, site_at
from rules.arithmetic import ALGEBRAIC, CONSTANT_FOLDING, DIV_BY_SELF, FLOAT_ONLY
from rules.log_exp import LOG_EXP_RULES
from rules.rule import FoldRule, Rule, TableRule
from rules.rule_set import RuleSet
from rules.sets import RULE_SETS, all_rules, get_rule_set, unsafe_int

from conftest import ROOT

REL, ABS = 1e-9, 1e-12
FLOAT_EDGES = (0.0, -0.0, 1.0, -2.5, 1e308, -1e308, 7e307, math.inf, -math.inf, math.nan, 5e-324, 1e-300, 710.0, -746.0)
INT_EDGES = (0, 1, -1, 7, INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1, 2**32, -(2**32))
#: Rules the grid must reach: every table rule over scalars of the arithmetic, log/exp and if families.
GRID_RULES = {r.name for r in [*ALGEBRAIC, *FLOAT_ONLY, DIV_BY_SELF, *LOG_EXP_RULES] if isinstance(r, TableRule)} | {
    "if_true",
    "if_false",
    "if_return_p",
    "if_both_same",
    "eq_self",
}


# -- the grid ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """A rule's left-hand side over variables of one type, and where the rule rewrites its root."""

    rule: Rule
    type_name: str
    root: Expr
    action: Action
    holes: tuple[str, ...]


def _lhs_text(lhs: str, type_name: str) -> str:
    """The pattern as an expression: holes become variables, number literals take the type."""
    text = lhs.replace("?", "")
    if type_name == "Float":
        text = re.sub(r"(?<![\w.])(-?\d+)(?![\w.])", r"\1.0", text)
    return text


def _case(rule: TableRule, type_name: str) -> Case | None:
    holes = tuple(sorted(set(re.findall(r"\?(\w+)", rule.lhs_text))))
    params = " ".join(f"({h} : {'Bool' if h == 'p' else type_name})" for h in holes)
    for ret in ("Float", "Integer", "Bool"):
        try:
            program = parse_program(f"(def target {ret} ({params}) {_lhs_text(rule.lhs_text, type_name)})")
        except KsError:
            continue
        root = program.defs["target"].body
        found = [a for a in actions(root, RuleSet("one", [rule])) if a.node == 0]
        return Case(rule, type_name, root, found[0], holes) if found else None
    return None


@cache
def grid_cases() -> list[Case]:
    """The cases of every table rule, the Integer-overflow rules with the opt-in (``unsafe-int:``): the
    grid checks what each says of its domain, Integers included."""
    cases = []
    for r in unsafe_int(all_rules):
        if isinstance(r, TableRule):
            cases += [c for t in ("Float", "Integer") if (c := _case(r, t)) is not None]
    return cases


def _values(hole: str, type_name: str) -> tuple[Any, ...]:
    if hole == "p":
        return (True, False)
    return FLOAT_EDGES if type_name == "Float" else INT_EDGES


def _rounding(case: Case, env: dict[str, Any], before: Any, after: Any) -> bool:
    """Both finite Floats, apart by at most 1e-12 of the largest intermediate value (reassociation)."""
    if not (isinstance(before, float) and isinstance(after, float) and math.isfinite(before + after)):
        return False
    rewritten = apply(case.root, case.action)
    values = subterm_values(case.root, [env]) + subterm_values(rewritten, [env])
    magnitude = max([1.0, *(abs(x) for v in values for x in float_leaves(v) if math.isfinite(x))])
    return abs(before - after) <= 1e-12 * magnitude


def _domain_violated(case: Case, env: dict[str, Any]) -> bool:
    check = DOMAIN_CHECKS.get(case.rule.name)
    if check is None or case.rule.domain is None:
        return False
    site = site_at(case.root, 0)
    rewrite = case.rule.apply(site)
    assert rewrite is not None
    target, replacement = rewrite
    envs = contexts(case.root, 0, env)
    assert envs is not None
    return check(DomainSite(case.rule, site, target, node_at(case.root, target), replacement, envs, envs))


def grid_failures(case: Case) -> list[str]:
    """Every grid point where the rewrite changes the value and nothing the rule states explains it."""
    after_expr = apply(case.root, case.action)
    out = []
    for point in itertools.product(*(_values(h, case.type_name) for h in case.holes)):
        env = dict(zip(case.holes, point, strict=True))
        try:
            before = ev(case.root, env)
        except KsEvalError:
            continue  # nothing to keep: the rewrite may compute a value
        try:
            after: Any = ev(after_expr, env)
        except KsEvalError as err:
            after = err
        if not isinstance(after, KsEvalError) and isclose(before, after, REL, ABS):
            continue
        if not case.rule.strict and (_rounding(case, env, before, after) or _domain_violated(case, env)):
            continue
        out.append(f"{case.rule.name} on {case.type_name}s {env}: {before!r} became {after!r}")
    return out


def test_the_grid_reaches_every_arithmetic_rule() -> None:
    assert {c.rule.name for c in grid_cases()} >= GRID_RULES


@pytest.mark.parametrize("name", sorted(GRID_RULES))
def test_rule_keeps_values_at_the_edges_or_says_where_not(name: str) -> None:
    cases = [c for c in grid_cases() if c.rule.name == name]
    failures = [f for c in cases for f in grid_failures(c)]
    assert not failures, f"{len(failures)} point(s), the first: {failures[0]}"


def test_a_wrong_domain_fails_the_grid() -> None:
    """The grid has teeth: with its domain check switched off, a factoring rule fails at the edges."""
    (case,) = [c for c in grid_cases() if c.rule.name == "add_of_muls" and c.type_name == "Integer"]
    saved = DOMAIN_CHECKS["add_of_muls"]
    DOMAIN_CHECKS["add_of_muls"] = lambda ds: False
    try:
        assert grid_failures(case)
    finally:
        DOMAIN_CHECKS["add_of_muls"] = saved


FOLD_LITERALS = {
    "Float": ("0.0", "-0.0", "1.0", "-2.5", "1e308", "-1e308", "5e-324", "710.0", "-746.0"),
    "Integer": ("0", "1", "-1", "9223372036854775807", "-9223372036854775808", "4294967296"),
}


@pytest.mark.parametrize("rule", [r for r in all_rules if isinstance(r, FoldRule)], ids=lambda r: r.name)
def test_folding_computes_what_run_time_would(rule: FoldRule) -> None:
    """A fold (strict) gives the value run time gives, or does not fold; extreme literals included."""
    assert rule.heads is not None
    (op,) = rule.heads
    arity = 1 if rule.name in ("cprop_log", "cprop_exp", "cprop_sqrt") else 2
    folded = 0
    for type_name, literals in FOLD_LITERALS.items():
        if arity == 1 and type_name == "Integer":
            continue
        for args in itertools.product(literals, repeat=arity):
            text = f"({op.name.lower()} {' '.join(args)})"
            try:
                program = parse_program(f"(def target Bool () (eq {text} {text}))")
            except KsError:
                continue
            root = program.defs["target"].body.args[0]
            for action in actions(root, RuleSet("one", [rule])):
                try:
                    before = ev(root, {})
                except KsEvalError:
                    before = None
                assert before is not None and isclose(before, ev(apply(root, action), {}), 0.0, 0.0), text
                folded += 1
    assert folded


# -- the reproducers -----------------------------------------------------------------------------
REPRODUCERS = [
    # (rule, type, expression, inputs, value before, what the rewrite gives)
    ("add_of_muls", "Integer", "(add (mul a b) (mul a c))", (0, INT_MAX, 1), 0, "Integer overflow"),
    ("assoc_add_add", "Integer", "(add (add a b) c)", (INT_MAX, -1, 1), INT_MAX, "Integer overflow"),
    ("add_of_muls", "Float", "(add (mul a b) (mul a c))", (0.0, 1e308, 1e308), 0.0, math.nan),
]


def _reproducer(rule: str, type_name: str, text: str, rules: str = "unsafe-int:ml_rules") -> tuple[Expr, Action]:
    program = parse_program(f"(def target {type_name} ((a : {type_name}) (b : {type_name}) (c : {type_name})) {text})")
    root = program.defs["target"].body
    (action,) = [a for a in actions(root, get_rule_set(rules)) if a.rule.name == rule and a.node == 0]
    return root, action


def _root(type_name: str, text: str) -> Expr:
    program = parse_program(f"(def target {type_name} ((a : {type_name}) (b : {type_name}) (c : {type_name})) {text})")
    return program.defs["target"].body


@pytest.mark.parametrize(("rule", "type_name", "text", "inputs", "before", "after"), REPRODUCERS)
def test_reproducers_change_the_value_outside_the_stated_domain(
    rule: str, type_name: str, text: str, inputs: tuple[Any, ...], before: Any, after: Any
) -> None:
    root, action = _reproducer(rule, type_name, text)
    env = dict(zip("abc", inputs, strict=True))
    assert ev(root, env) == before
    rewritten = apply(root, action)
    if isinstance(after, str):
        with pytest.raises(KsEvalError, match=after):
            ev(rewritten, env)
    else:
        assert math.isnan(ev(rewritten, env))
    # what the rule says: not strict, a domain that names the edge, and its check sees it here
    assert not action.rule.strict
    assert action.rule.domain is not None and "finite" in action.rule.domain and "overflow" in action.rule.domain
    case = Case(action.rule, type_name, root, action, ("a", "b", "c"))
    assert _domain_violated(case, env)


@pytest.mark.parametrize(("rule", "type_name", "text", "inputs", "before", "after"), REPRODUCERS)
def test_strict_rule_sets_leave_the_reproducers_alone(
    rule: str, type_name: str, text: str, inputs: tuple[Any, ...], before: Any, after: Any
) -> None:
    root, _ = _reproducer(rule, type_name, text)
    env = dict(zip("abc", inputs, strict=True))
    strict = get_rule_set("strict:ml_rules")
    assert rule not in strict
    for action in actions(root, strict):
        assert ev(apply(root, action), env) == before


@pytest.mark.parametrize("name", sorted(RULE_SETS))
def test_no_named_set_overflows_an_integer_by_default(name: str) -> None:
    """Issue 44, item 7: without the opt-in, no rule of any named set rewrites Integer arithmetic it may
    overflow (the Integer reproducers get no action of theirs); Floats keep the rules (the Float reproducer
    still does), and ``unsafe-int:`` gives them back on Integers."""
    rules = get_rule_set(name)
    for rule, type_name, text, *_ in REPRODUCERS:
        at_root = {a.rule.name for a in actions(_root(type_name, text), rules) if a.node == 0}
        if type_name == "Integer":
            assert rule not in at_root
        elif rule in rules:
            assert rule in at_root
        if rule in rules:
            unsafe = {a.rule.name for a in actions(_root(type_name, text), get_rule_set(f"unsafe-int:{name}"))}
            assert rule in unsafe


def test_every_integer_overflow_rule_leaves_integers_alone_by_default() -> None:
    """Every grid case on Integers of an Integer-overflow rule (found with the opt-in) has no action of the
    rule without it; on Floats the rule acts as before; the opt-in changes nothing else."""
    guarded = [r for r in all_rules if r.int_overflow]
    assert {r.name for r in guarded} >= {"add_of_muls", "assoc_add_add", "sumbuild_of_sum", "sumbuild_swap"}
    for case in grid_cases():
        default = all_rules.rule(case.rule.name)
        found = [a for a in actions(case.root, RuleSet("one", [default])) if a.node == 0]
        assert bool(found) == (case.type_name == "Float" or not default.int_overflow), (case.rule.name, case.type_name)
    assert [r.name for r in unsafe_int(all_rules) if r is not all_rules.rule(r.name)] == [r.name for r in guarded]
    assert all(not r.strict and r.domain for r in guarded)


def test_the_opt_in_is_a_prefix_of_every_rule_set_name() -> None:
    unsafe = get_rule_set("unsafe-int:ml_rules_no_bind+zero_tensor_rules")
    assert unsafe.name == "unsafe-int:ml_rules_no_bind+zero_tensor_rules"
    assert [r.name for r in unsafe] == [r.name for r in get_rule_set("ml_rules_no_bind+zero_tensor_rules")]
    assert get_rule_set("unsafe-int:ml_rules").rule("add_of_muls") is get_rule_set("unsafe-int:all_rules").rule(
        "add_of_muls"
    )  # one opted-in row, so that opted-in sets combine
    assert [r.name for r in get_rule_set("strict:unsafe-int:ml_rules")] == [
        r.name for r in get_rule_set("strict:ml_rules")
    ]
    with pytest.raises(KsError, match="unsafe-int:"):
        get_rule_set("unsafe-int:nope")


def test_strict_sets_keep_only_strict_rules_and_the_named_sets_are_whole() -> None:
    for name, full in RULE_SETS.items():
        strict = get_rule_set(f"strict:{name}")
        assert strict.name == f"strict:{name}"
        assert [r.name for r in strict] == [r.name for r in full if r.strict]
    assert len(get_rule_set("ml_rules")) == 63 and len(get_rule_set("simplify_rules")) == 35
    assert len(get_rule_set("strict:ml_rules_no_bind+zero_tensor_rules")) == len(
        [r for r in get_rule_set("ml_rules_no_bind+zero_tensor_rules") if r.strict]
    )


def test_every_rule_states_a_domain_or_is_strict() -> None:
    """No rule is silent: it either changes no value on any input (strict) or says where it may."""
    silent = [r.name for r in all_rules if not r.strict and r.domain is None]
    assert not silent


def test_constant_folding_is_strict() -> None:
    assert all(r.strict for r in CONSTANT_FOLDING)


def test_docs_table_is_the_rules() -> None:
    """docs/rules.md lists every rule with its strictness, whether it rewrites Integers by default and its
    domain, as the code states them."""
    text = (ROOT / "docs" / "rules.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ((?:yes|no) \| .*) \|$", text, re.MULTILINE))
    expected = {
        r.name: f"{'yes' if r.strict else 'no'} | {'opt-in' if r.int_overflow else 'yes'} | {r.domain or 'every input'}"
        for r in all_rules
    }
    assert rows == expected


def test_knossos_rules_lists_strict_sets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--set", "strict:simplify_rules", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["strict:simplify_rules"]
    assert listed and all(r["strict"] for r in listed)
    assert "add_of_muls" not in {r["name"] for r in listed} and "commute_add" in {r["name"] for r in listed}
