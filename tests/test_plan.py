"""search/plan.py: one plan type and one run, which optimize.py, compile_def and training all call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.compiled import optimise_def
from app.optimize_cli import main as optimize_main
from knossos.alloc_cost import AllocCost
from knossos.cost_models import reference_cost
from knossos.errors import KsUsageError
from knossos.parser import load_program, parse_expr
from knossos.printer import format_expr
from search.plan import Plan, run
from search.settings import SearchSettings
from training.search_jobs import SearchJob, run_search

from conftest import PROGRAMS, run_cli

BLAS = PROGRAMS / "blas_test.kso"


def test_compile_def_optimises_as_optimize_py_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same plan and the same run: app.compiled.compile_optimised's def is optimize.py's result, tidied alike."""
    program = load_program(BLAS)
    for name in ("gemv", "vector_vector_add"):
        d = program.defs[name]
        argv = [str(BLAS), "--def", name, "--rules", "ml_rules_no_bind", "--json", "--quiet"]
        code, out, err = run_cli(optimize_main, capsys, *argv)
        assert code == 0, err
        assert format_expr(optimise_def(program, d, "ml_rules_no_bind").body) == json.loads(out)["best"]
    # a search that stops early leaves lets that only tidying removes: both remove them
    src = tmp_path / "lets.ks"
    src.write_text(
        "(def f Float ((x : Float) (y : Float)) (let (w y) (let (v (mul x w)) (add (mul v v) (let (z x) (div z w))))))"
    )
    code, out, err = run_cli(optimize_main, capsys, str(src), "--model", "none", "--budget", "1", "--json", "--quiet")
    report = json.loads(out)
    assert code == 0 and any(n.startswith("tidied: ") for n in report["notes"])
    d = load_program(src).defs["f"]
    assert format_expr(optimise_def(load_program(src), d, "none", budget=1).body) == report["best"]


def test_run_tidies_only_when_the_plan_says_so() -> None:
    start = parse_expr("(let (v (mul x y)) (let (w y) (add x w)))")[0]
    plan = Plan(rules="binding_rules").overridden(algorithm="astar", depth=2, budget=20)
    untidied, tidied = run(start, plan), run(start, plan.overridden(tidy=True))
    assert tidied.best is parse_expr("(add x y)")[0] and tidied.searched_best is untidied.best
    assert untidied.searched_best is None and not untidied.tidied
    assert len(tidied.tidied) == len(tidied.steps) - len(untidied.steps) > 0
    assert any(n.startswith("tidied: ") for n in tidied.notes)


def test_sizes_go_to_the_alloc_cost_model_only() -> None:
    plan = Plan(search=SearchSettings(cost="alloc"), sizes={"x": (3, 4)})
    cost = plan.cost()
    assert isinstance(cost, AllocCost) and cost.sizes == {"x": (3, 4)}
    assert Plan().cost() is reference_cost
    with pytest.raises(KsUsageError, match="--size is for --cost alloc, not the reference cost model"):
        Plan(sizes={"x": 3}).cost()


def test_two_phase_takes_its_first_rule_set_from_the_plan() -> None:
    d = load_program(BLAS).defs["gemm_climbed_mat_y"]
    plan = Plan(rules="ml_rules_no_bind").overridden(algorithm="two-phase", depth=6, budget=200)
    assert plan.spec().first_phase_rules.name == "phase1"
    paper = run(d.body, plan)
    other = run(d.body, plan.overridden(first_phase_rules="binding_rules"))
    assert paper.best_cost < other.best_cost  # phase1's loop rules open what binding_rules cannot


def test_a_training_job_runs_its_plan() -> None:
    start = parse_expr("(add (div (mul x y) (add 1.0 (mul x y))) (mul x y))")[0]
    plan = Plan(rules="binding_simplify_rules", search=SearchSettings(depth=6, budget=5000))
    outcome = run_search(SearchJob(start, plan.overridden(algorithm="beam", budget=40)), None)
    direct = run(start, plan.overridden(algorithm="beam", budget=40))
    assert (outcome.best_cost, outcome.evaluations) == (direct.best_cost, direct.evaluations)
    assert outcome.evaluations <= 40
