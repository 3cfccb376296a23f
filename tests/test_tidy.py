"""search/tidy.py: the lets a search leaves behind are removed by rewrite steps that replay and keep values."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from app.optimize_cli import main
from knossos.cost_models import reference_cost
from knossos.interpreter import evaluate
from knossos.parser import parse_expr
from knossos.printer import format_expr
from rules.actions import Action, apply
from rules.sets import get_rule_set
from search.tidy import tidy, tidy_until

from conftest import run_cli

CASES = [
    ("(let (x x) (add x 1.0))", "(add x 1.0)"),
    ("(let (v (mul x y)) v)", "(mul x y)"),
    ("(let (v (mul x y)) (let (w y) (add x w)))", "(add x y)"),
    ("(let (v (mul x y)) (add v v))", "(let (v (mul x y)) (add v v))"),  # a let worth keeping stays
    ("(let (w y) (let (y 2.0) (mul w y)))", None),  # the inner y would capture: renamed, not captured
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_tidy_removes_identity_variable_and_dead_lets_and_keeps_values(text: str, want: str | None) -> None:
    e = parse_expr(text)[0]
    out, steps = tidy(e, reference_cost)
    if want is not None:  # the same node (names are alpha-interned: whichever variant came first prints)
        assert out is parse_expr(want)[0]
    assert out.cost <= e.cost and all(a.cost >= b.cost for (a, _), (b, _) in itertools.pairwise(steps))
    # the steps replay, and every step keeps the value
    rules = get_rule_set("all_rules")
    rng = random.Random(0)
    replayed = e
    for step, _ in steps:
        replayed = apply(replayed, Action(step.node, rules.rule(step.rule)))
    assert replayed is out
    names = sorted(e.free)
    for _ in range(5):
        values = {n: rng.uniform(-3.0, 3.0) for n in names}
        assert evaluate(out, values) == evaluate(e, values)


def test_optimize_tidies_its_result_with_steps_that_replay(capsys: pytest.CaptureFixture[str]) -> None:
    text = "(let (a x) (let (b (mul x x)) (add a 1.0)))"
    argv = ["--expr", text, "--search", "astar", "--model", "none", "--budget", "1", "--depth", "1", "--json"]
    code, out, _ = run_cli(main, capsys, *argv, "--quiet")
    report = json.loads(out)
    assert code == 0 and report["best"] == "(add x 1.0)" and any("tidied" in n for n in report["notes"])
    e = parse_expr(text)[0]
    rules = get_rule_set("all_rules")
    for step in report["steps"]:
        e = apply(e, Action(step["node"], rules.rule(step["rule"])))
    assert format_expr(e) == report["best"] and report["steps"][-1]["cost"] == report["best_cost"]
    code, out, _ = run_cli(main, capsys, *argv, "--quiet", "--no-tidy")
    assert json.loads(out)["best"] != "(add x 1.0)"


def test_tidying_stops_at_the_limit_with_the_steps_made_so_far() -> None:
    """Each step tried walks the expression: tidying looks at the search's limits before each."""
    e = parse_expr("(let (a x) (let (b y) (let (c z) (add a (add b c)))))")[0]
    whole, steps = tidy(e, reference_cost)
    looks = 0

    def stop() -> str | None:
        nonlocal looks
        looks += 1
        return "stopped at the time limit of 1 s" if looks > 1 else None

    out, some, note = tidy_until(e, reference_cost, stop)
    assert note == "stopped at the time limit of 1 s" and looks == 2
    assert len(some) == 1 < len(steps) and out is not e and out.cost <= e.cost
    assert tidy_until(out, reference_cost, None)[0] is whole  # the rest of the way, unstopped
