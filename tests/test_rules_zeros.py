"""The zero-tensor rules (rules/zeros.py) on the program they are for, and the sets they are in.

Each rule's meaning on random expressions, its golden rewrites and its domain are checked with
every other rule's (test_rules_properties.py, test_rules_golden.py); here: the ``+`` syntax that
joins them to a paper set, that the paper's sets are as before, and that A* with them removes the
zero tensors of ``rev$conv1d`` while every step keeps the interpreter's value.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from knossos.errors import KsUsageError
from knossos.interpreter import Interpreter
from knossos.parser import load_program, parse_expr
from knossos.values import isclose
from rules.actions import Action, actions, apply
from rules.baseline import simplify_def
from rules.sets import all_rules, get_rule_set, ml_rules, ml_rules_no_bind, zero_tensor_rules
from rules.zeros import is_zero
from search.astar import astar
from search.spec import SearchSpec

from conftest import random_value

PROGRAMS = Path(__file__).resolve().parent.parent / "ksdata" / "programs"
ZERO_RULES = {"add_zero_vec", "build_of_delta"}


def test_sets_join_with_plus() -> None:
    joined = get_rule_set("ml_rules_no_bind+zero_tensor_rules")
    assert joined.name == "ml_rules_no_bind+zero_tensor_rules"
    assert [r.name for r in joined] == [r.name for r in ml_rules_no_bind] + [r.name for r in zero_tensor_rules]
    with pytest.raises(KsUsageError, match="unknown rule set 'zeros' in 'ml_rules\\+zeros'"):
        get_rule_set("ml_rules+zeros")
    with pytest.raises(KsUsageError, match="unknown rule set '' in 'ml_rules\\+'"):
        get_rule_set("ml_rules+")


def test_paper_sets_do_not_have_them() -> None:
    assert {r.name for r in zero_tensor_rules} == ZERO_RULES
    assert len(ml_rules) == 63 and len(ml_rules_no_bind) == 59
    assert not ZERO_RULES & {r.name for r in ml_rules}
    assert {r.name for r in all_rules} >= ZERO_RULES


@pytest.mark.parametrize(
    ("text", "zero"),
    [
        ("(build 2 (lam (i : Integer) (constVec i 0.0)))", True),
        ("(tuple (deltaVec 3 1 0.0) (if (gt x 0.0) 0 (mul 0 2)))", False),  # a mul is not looked into
        ("(tuple (deltaVec 3 1 0.0) (if (gt x 0.0) 0 -0))", True),
        ("(let (a (constVec 3 0.0)) (build 2 (lam (i : Integer) a)))", True),  # a let inside e is looked through
        ("(build 2 (lam (a : Integer) (let (b (to_float a)) b)))", False),  # its value is not zero
        ("(let (a 1.0) (build 2 (lam (a : Integer) 0.0)))", True),
        ("(build 2 (lam (i : Integer) (to_float (sub i i))))", False),
    ],
)
def test_is_zero_reads_structure(text: str, zero: bool) -> None:
    e, _ = parse_expr(text)
    assert is_zero(e) is zero


def test_astar_removes_the_zero_tensors_of_conv1d() -> None:
    program = load_program(PROGRAMS / "conv1d_rev_test.kso")
    d = program.defs["rev$conv1d"]
    start = simplify_def(d).body
    rules = get_rule_set("ml_rules_no_bind+zero_tensor_rules")
    result = astar(start, SearchSpec(rules, 40, 2000))
    used = {s.rule for s in result.steps}
    assert used >= ZERO_RULES
    # the baseline's cost is 3.34e9, its adds of zero tensors most of it; without them 6.5e8
    assert result.best_cost < start.cost / 4
    assert not [a for a in actions(result.best, rules) if a.rule.name == "add_zero_vec"]

    rng = random.Random(5)
    envs = [{p.name: random_value(p.type, rng) for p in d.params} for _ in range(2)]
    interpreter = Interpreter(max_steps=10**8)
    expected = [interpreter.eval_expr(d.body, env) for env in envs]
    e = start
    for step in result.steps:  # every intermediate program computes the same gradient
        e = apply(e, Action(step.node, rules.rule(step.rule)))
        if step.rule in ZERO_RULES:
            for env, value in zip(envs, expected, strict=True):
                assert isclose(value, interpreter.eval_expr(e, env), 1e-9, 1e-12), f"after {step}"
    assert e is result.best
