"""What optimize.py runs with no --model (search/plan.py Plan.default_for, choose_plan), and the benchmark
that compares it with plain A* and pruned pseudo-beam on every program def."""

from __future__ import annotations

import pytest

from knossos.parser import parse_expr, parse_program
from ksbench.default_programs import summary
from search.plan import ARITHMETIC_PLAN, PROGRAM_PLAN, Plan, choose_plan
from search.registry import get_search
from search.settings import SearchSettings
from search.value import ZeroValue


def expr(text: str):  # type: ignore[no-untyped-def]
    return parse_expr(text)[0]


def test_a_program_gets_the_wide_deep_search_and_arithmetic_the_short_one() -> None:
    arithmetic = expr("(let (y (mul x x)) (add y (div y x)))")
    loop = expr("(sumbuild 4 (lam (i : Integer) (mul x (to_float i))))")
    function = expr("(let (f (lam (z : Float) (mul z x))) (f 2.0))")
    vector = parse_program("(def f Float ((v : Vec Float)) (add (index 0 v) 1.0))", "v.ks").defs["f"].body

    def default_pipeline(e):  # type: ignore[no-untyped-def]
        return Plan.default_for(None, e)

    assert (
        default_pipeline(arithmetic) is ARITHMETIC_PLAN
        and default_pipeline(expr("(add (exp x) 1.0)")) is ARITHMETIC_PLAN
    )
    assert default_pipeline(loop) is PROGRAM_PLAN and default_pipeline(function) is PROGRAM_PLAN
    assert default_pipeline(vector) is PROGRAM_PLAN
    program = parse_program(
        "(def sq Float ((x : Float)) (mul x x)) (def f Float ((x : Float)) (add (sq x) 1.0))", "p.ks"
    )
    assert default_pipeline(program.defs["f"].body) is PROGRAM_PLAN  # a call of a def: loops may be inside
    a, p = ARITHMETIC_PLAN.search, PROGRAM_PLAN.search
    assert (a.algorithm, a.budget, p.algorithm, p.depth) == (
        "saturate-astar",
        300,
        "saturate-pseudo-beam",
        99,
    )
    assert all(get_search(p.search.algorithm) is not None for p in (ARITHMETIC_PLAN, PROGRAM_PLAN))


def test_no_model_takes_the_pipeline_of_the_start_unless_a_search_is_named() -> None:
    loop = expr("(sumbuild 4 (lam (i : Integer) (mul x (to_float i))))")
    t = choose_plan(loop).search
    assert (t.algorithm, t.depth, t.budget, t.prune_commutes, t.prune_inlines) == (
        "saturate-pseudo-beam",
        99,
        5000,
        True,
        True,
    )
    t = choose_plan(loop, algorithm="astar").search
    assert (t.algorithm, t.depth, t.budget, t.prune_commutes, t.prune_inlines) == ("astar", 10, 5000, False, False)
    t = choose_plan(expr("(add x 1.0)")).search
    assert (t.algorithm, t.budget) == ("saturate-astar", 300)


def test_a_given_setting_wins_over_the_model_which_wins_over_the_default() -> None:
    """One place decides: what the caller gives, then what the model says, then the default."""

    class Trained(ZeroValue):
        rules: str | None = "binding_rules"
        settings = SearchSettings(algorithm="beam", depth=7, budget=99)

    loop = expr("(sumbuild 4 (lam (i : Integer) (mul x (to_float i))))")
    p = choose_plan(loop, None, Trained())
    assert (p.rules, p.search.algorithm, p.search.depth, p.search.budget) == ("binding_rules", "beam", 7, 99)
    p = choose_plan(loop, None, Trained(), depth=3, rules="ml_rules", seconds=2.0, tidy=True)
    assert (p.rules, p.search.depth, p.search.budget, p.seconds, p.tidy) == ("ml_rules", 3, 99, 2.0, True)
    p = choose_plan(loop, None, ZeroValue())  # a model named none: the plain defaults, not the def's
    assert (p.rules, p.search) == ("ml_rules", SearchSettings())
    p = choose_plan(loop, None, None, budget=None)  # None is "not given"
    assert p is PROGRAM_PLAN
    with pytest.raises(TypeError, match="not a setting of a plan: colour"):
        choose_plan(loop, colour="red")


def test_the_benchmark_summary_names_the_defs_where_the_default_is_worse() -> None:
    rows = [
        {"program": "p", "def_": d, "engine": e, "best_cost": c, "seconds": 1.0}
        for d, e, c in [
            ("f", "default", 5.0),
            ("f", "astar", 6.0),
            ("g", "default", 7.0),
            ("g", "astar", 6.5),
        ]
    ]
    text = summary(rows)
    assert "| p | default | 2 | 12.0 | 2.0 |  |" in text
    assert "|  | astar | 2 | 12.5 | 2.0 | 1 (g) |" in text
