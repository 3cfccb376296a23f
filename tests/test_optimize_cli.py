"""optimize.py: JSON and human output, defs of program files, and one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from app.optimize_cli import main
from knossos.interpreter import call_def
from knossos.parser import load_program, parse_expr, parse_program
from knossos.values import isclose
from rules.actions import Action, apply
from rules.sets import get_rule_set

from conftest import PROGRAMS, ROOT, run_cli

BLAS = str(PROGRAMS / "blas_test.kso")
FIRST = "(div (add (mul 2.0 (add x y)) (add x y)) (mul x 2.0))"
JSON_KEYS = {"start_cost", "best_cost", "steps", "best", "evaluations", "expanded", "seconds"}


def optimize(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "optimize.py", *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(main, capsys, *argv)


def test_expr_json_through_a_process() -> None:
    done = optimize("--expr", FIRST, "--rules", "binding_rules", "--search", "astar", "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    result: dict[str, Any] = json.loads(lines[0])
    assert set(result) >= JSON_KEYS
    assert result["start_cost"] == 9.0 and result["best_cost"] == pytest.approx(8.1)
    assert result["evaluations"] == 5000 and result["expanded"] > 0 and result["seconds"] >= 0
    assert result["interrupted"] is False and result["complete"] is True
    steps = result["steps"]
    assert isinstance(steps, list) and 0 < len(steps) <= 10
    assert all(set(s) == {"node", "rule", "cost"} for s in steps)
    # the steps replay to the printed best, with the printed costs
    rules = get_rule_set("binding_rules")
    e = parse_expr(FIRST)[0]
    for s in steps:
        e = apply(e, Action(s["node"], rules.rule(s["rule"])))
        assert round(e.cost, 6) == s["cost"]
    assert e is parse_expr(result["best"])[0]
    assert steps[-1]["cost"] == result["best_cost"]


def test_expr_json_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--expr", FIRST, "--rules", "binding_rules", "--json", "--quiet")
    assert code == 0 and err == ""
    result = json.loads(out)
    assert result["best_cost"] == pytest.approx(8.1) and result["start_cost"] == 9.0


def test_settings_reach_the_search(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--expr", FIRST, "--rules", "binding_rules", "--budget", "37", "--json", "--quiet")
    assert code == 0 and json.loads(out)["evaluations"] == 37
    code, out, _ = run(capsys, "--expr", FIRST, "--rules", "binding_rules", "--depth", "2", "--json", "--quiet")
    result = json.loads(out)
    assert code == 0 and len(result["steps"]) <= 2 and result["best_cost"] == 9.0  # 8.1 needs six steps
    code, out, _ = run(
        capsys, "--expr", FIRST, "--rules", "binding_rules", "--search", "exhaustive", "--budget", "10", "--json"
    )
    result = json.loads(out)
    assert code == 0 and result["complete"] is False


def test_def_of_a_program_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, BLAS, "--def", "gemm", "--rules", "ml_rules_no_bind", "--budget", "200", "--json", "--quiet"
    )
    assert code == 0 and err == ""
    result = json.loads(out)
    gemm = load_program(BLAS).defs["gemm"]
    assert result["start_cost"] == pytest.approx(gemm.body.cost, abs=1e-6)
    assert result["best_cost"] < result["start_cost"] and result["evaluations"] <= 200
    assert result["steps"] and result["steps"][-1]["cost"] == result["best_cost"]


def test_def_of_a_program_human(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, BLAS, "--def", "axpy", "--rules", "ml_rules_no_bind", "--budget", "200", "--quiet")
    assert code == 0 and err == ""
    first, *rest = out.splitlines()
    assert first.startswith("cost 104.7 -> ") and "evaluations" in first and "steps" in first
    text = out[out.index("(def") :]
    assert text.startswith("(def axpy (Vec Float)")
    # the printed def parses, next to the defs it calls, and is cheaper
    renamed = text.replace("(def axpy ", "(def axpy_optimised ", 1)
    program = parse_program((PROGRAMS / "blas_test.kso").read_text() + "\n" + renamed, "out.ks")
    original, optimised = program.defs["axpy"], program.defs["axpy_optimised"]
    assert optimised.body.cost < original.body.cost
    assert f"-> {optimised.body.cost:g} " in first
    args = [1.5, [1.0, 2.0, 3.0], [0.5, -1.0, 4.0]]
    assert isclose(call_def(original, *args), call_def(optimised, *args))
    assert any("inline_call" in line for line in rest)


def test_expr_human(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--expr", "(add (mul (div 1.0 x) x) (mul 1.0 x))", "--rules", "simplify_rules", "--search", "astar"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("cost 7 -> 1 (-6) in 4 steps")
    assert parse_expr(lines[-1])[0].cost == 1.0


def test_the_default_is_saturation_around_plain_search(capsys: pytest.CaptureFixture[str]) -> None:
    """No --model or --search: without loops saturate-astar at 300 evaluations; with loops
    saturate-pseudo-beam, depth 99, 5000, the prunings on; --json says what ran."""
    code, out, _ = run(capsys, "--expr", FIRST, "--rules", "binding_rules", "--json", "--quiet")
    result = json.loads(out)
    assert code == 0 and result["search"] == "saturate-astar" and result["model"] == "none"
    assert result["rules"] == "binding_rules" and result["budget"] == 300 and result["evaluations"] <= 300
    assert result["best_cost"] == pytest.approx(8.1)
    code, out, _ = run(capsys, BLAS, "--def", "axpy", "--rules", "ml_rules_no_bind", "--json", "--quiet")
    result = json.loads(out)
    assert (result["search"], result["depth"], result["budget"]) == ("saturate-pseudo-beam", 99, 5000)
    assert result["prune_commutes"] and result["prune_inlines"] and result["best_cost"] < result["start_cost"]
    code, out, _ = run(capsys, "--expr", FIRST, "--budget", "40", "--json", "--quiet")
    assert json.loads(out)["budget"] == 40
    code, out, _ = run(capsys, "--expr", FIRST, "--search", "astar", "--json", "--quiet")
    result = json.loads(out)
    assert result["search"] == "astar" and result["budget"] == 5000 and result["rules"] == "ml_rules"
    code, out, _ = run(capsys, "--expr", FIRST, "--model", "none", "--json", "--quiet")  # plain A*, as before
    result = json.loads(out)
    assert result["search"] == "astar" and result["model"] == "none" and result["budget"] == 5000


def test_a_model_brings_its_rules_search_and_depth(capsys: pytest.CaptureFixture[str]) -> None:
    """--model blas without --rules runs the rules it was trained with (ml_rules_no_bind), not ml_rules."""
    argv = [BLAS, "--def", "axpy", "--model", "blas", "--budget", "30", "--json", "--quiet"]
    code, out, _ = run(capsys, *argv)
    result = json.loads(out)
    assert code == 0 and result["model"] == "blas" and result["rules"] == "ml_rules_no_bind"
    assert result["search"] == "pseudo-beam" and result["depth"] == 99 and result["prune_commutes"] is True
    assert result["best_cost"] < result["start_cost"]


def test_program_with_one_def_needs_no_def(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "one.ks"
    f.write_text("(def f Float (x : Float) (add (mul x 1.0) 0.0))\n")
    code, out, _ = run(capsys, str(f), "--rules", "simplify_rules", "--budget", "50", "--json", "--quiet")
    assert code == 0 and json.loads(out)["best"] == "x"


MISSING = "no_such_file.kso"


@pytest.mark.parametrize(
    ("argv", "message", "exit_code"),
    [
        (["--expr", FIRST, "--search", "nope"], "unknown search 'nope'", 1),
        (["--expr", FIRST, "--rules", "nope"], "unknown rule set 'nope'", 1),
        (["--expr", FIRST, "--depth", "0"], "argument --depth: must be at least 1, not 0", 2),
        (["--expr", FIRST, "--budget", "-1"], "argument --budget: must be at least 1, not -1", 2),
        (["--expr", FIRST, "--budget", "many"], "'many' is not a whole number", 2),
        (["--expr", "(add x"], "never closed", 1),
        (["--expr", "(frobnicate x)"], "frobnicate", 1),
        ([MISSING], "no such file", 1),
        ([BLAS], "pick one with --def NAME", 1),
        ([BLAS, "--def", "nope"], "no def named 'nope'", 1),
        (["--expr", FIRST, "--model", "no_such_model.pt"], "no model file 'no_such_model.pt'", 1),
        (["--expr", FIRST, "--def", "axpy"], "not both", 1),
        ([BLAS, "--expr", FIRST], "not both", 1),
        ([], "give a FILE or --expr", 1),
    ],
    ids=[
        "search",
        "rules",
        "depth0",
        "budget-1",
        "budget-word",
        "unbalanced",
        "unknown-op",
        "missing-file",
        "several-defs",
        "unknown-def",
        "missing-model",
        "def-and-expr",
        "file-and-expr",
        "nothing",
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, exit_code: int
) -> None:
    code, out, err = run(capsys, *argv, "--quiet")
    assert code == exit_code and out == ""
    assert err.count("\n") == 1 and ": error: " in err and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--expr", FIRST, "--search", "nope"],
        ["--expr", FIRST, "--depth", "0"],
        [MISSING],
        [BLAS, "--def", "nope"],
        ["--expr", FIRST, "--model", "no_such_model.pt"],
    ],
    ids=["search", "depth0", "missing-file", "unknown-def", "missing-model"],
)
def test_bad_input_through_a_process(argv: list[str]) -> None:
    done = optimize(*argv)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and ": error: " in done.stderr and "Traceback" not in done.stderr


def test_random_search_on_a_small_expression_ends() -> None:
    """Fewer distinct expressions within the depth than the budget: the search must still end."""
    try:
        done = optimize("--expr", "(add x 0.0)", "--rules", "simplify_rules", "--search", "random", "--json", timeout=5)
    except subprocess.TimeoutExpired:
        pytest.fail("optimize.py --search random did not end within 5 s")
    assert done.returncode == 0 and json.loads(done.stdout)["best_cost"] == 0.0


def test_human_output_says_what_ran_and_where_each_step_acts(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(ROOT / "examples" / "bindgen_test_8.ks"), "--rules", "binding_rules", "--model", "ggnn"]
    code, out, _ = run(capsys, *argv, "--budget", "300")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("cost 12 -> 8.1 (-3.9) in 10 steps by astar, --model ggnn;")
    # a step names its rule, the cost after it and the subexpression it rewrote
    assert lines[1].split() == ["1.", "new_bind", "cost", "12.1", "at", "node", "9:", "(mul", "x", "y)"]
    assert "-o OUT.ks writes" in lines[11] and "--bench" in lines[11] and lines[12].startswith("(def f Float")
    code, out, _ = run(capsys, "--expr", "(mul x 2.0)", "--rules", "simplify_rules")
    assert code == 0 and out.startswith("cost 2 -> 2 (no change) in 0 steps by saturate-astar;")


def test_an_unknown_model_lists_the_shipped_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--expr", "(add x 0.0)", "--model", "foo")
    assert code == 1 and "one of blas, " in err and ", default, ggnn, gradients, " in err and err.count("\n") == 1
