"""What optimize.py runs with no --model (app/models.py default_pipeline), and the benchmark that
compares it with plain A* and pruned pseudo-beam on every program def."""

from __future__ import annotations

from app.models import ARITHMETIC, PROGRAM, default_pipeline, trained_search
from knossos.parser import parse_expr, parse_program
from ksbench.default_programs import summary
from search.registry import get_search


def expr(text: str):  # type: ignore[no-untyped-def]
    return parse_expr(text)[0]


def test_a_program_gets_the_wide_deep_search_and_arithmetic_the_short_one() -> None:
    arithmetic = expr("(let (y (mul x x)) (add y (div y x)))")
    loop = expr("(sumbuild 4 (lam (i : Integer) (mul x (to_float i))))")
    function = expr("(let (f (lam (z : Float) (mul z x))) (f 2.0))")
    vector = parse_program("(def f Float ((v : Vec Float)) (add (index 0 v) 1.0))", "v.ks").defs["f"].body
    assert default_pipeline(arithmetic) is ARITHMETIC and default_pipeline(expr("(add (exp x) 1.0)")) is ARITHMETIC
    assert default_pipeline(loop) is PROGRAM and default_pipeline(function) is PROGRAM
    assert default_pipeline(vector) is PROGRAM
    program = parse_program(
        "(def sq Float ((x : Float)) (mul x x)) (def f Float ((x : Float)) (add (sq x) 1.0))", "p.ks"
    )
    assert default_pipeline(program.defs["f"].body) is PROGRAM  # a call of a def: loops may be inside
    assert (ARITHMETIC.search, ARITHMETIC.budget, PROGRAM.search, PROGRAM.depth) == (
        "saturate-astar",
        300,
        "saturate-pseudo-beam",
        99,
    )
    assert all(get_search(p.search) is not None for p in (ARITHMETIC, PROGRAM))


def test_no_model_takes_the_pipeline_of_the_start_unless_a_search_is_named() -> None:
    loop = expr("(sumbuild 4 (lam (i : Integer) (mul x (to_float i))))")
    t = trained_search(None, start=loop)
    assert (t.search, t.depth, t.budget, t.prune_commutes, t.prune_inlines) == (
        "saturate-pseudo-beam",
        99,
        5000,
        True,
        True,
    )
    t = trained_search(None, start=loop, search="astar")
    assert (t.search, t.depth, t.budget, t.prune_commutes, t.prune_inlines) == ("astar", 10, 5000, False, False)
    t = trained_search(None, start=expr("(add x 1.0)"))
    assert (t.search, t.budget) == ("saturate-astar", 300)


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
