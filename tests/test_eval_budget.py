"""The interpreter refuses vectors beyond its allocation budget before allocating them, with one
error line naming the file, line and column of the expression; run-time errors are located likewise."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpp_backend.driver import BUDGET_VARIABLE, DEFAULT_BUDGET_MIB, compile_program
from knossos.cli import main
from knossos.errors import KsEvalError, KsUsageError
from knossos.interpreter import DEFAULT_MAX_ELEMENTS, Interpreter
from knossos.parser import parse_expr, parse_program

from conftest import ROOT, run_cli

#: The issue's case: a vector whose size comes from an argument (10^12 elements ran 22 minutes at 6 GB).
BIG = """\
(def helper (Vec Float) ((k : Integer))
  (build k (lam (i : Integer) (to_float i))))
(def f Float ((n : Integer))
  (let (k (mul n 1000))
    (sum (helper k))))
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(main, capsys, *argv)


def test_the_issue_case_is_refused_at_once_and_located(tmp_path: Path) -> None:
    path = tmp_path / "big.ks"
    path.write_text(BIG)
    done = subprocess.run(
        [sys.executable, "-m", "knossos", "eval", str(path), "f", "--args", "[1000000000]"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,  # a guard against the hang, not a speed target
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # the build inside the callee: line 2, column 3
    assert done.stderr.startswith(f"{path}:2:3: error: build of 1,000,000,000,000 elements")
    assert f"budget of {DEFAULT_MAX_ELEMENTS:,} vector elements" in done.stderr


def test_the_budget_counts_every_vector_of_an_evaluation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "nested.ks"
    # 3 rows of 4 elements, and the outer vector of 3: 15 elements in all
    path.write_text("(def f (Vec (Vec Float)) ((n : Integer))\n  (build n (lam (i : Integer) (constVec 4 1.0))))\n")
    code, out, _ = run(capsys, "eval", str(path), "f", "--args", "[3]", "--max-elements", "15")
    assert code == 0 and out.strip() == "[[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]"
    code, out, err = run(capsys, "eval", str(path), "f", "--args", "[3]", "--max-elements", "14")
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:2:31: error: constVec of 4 elements") and "budget of 14 " in err


@pytest.mark.parametrize(
    ("text", "col"),
    [
        ("(sum (constVec n 1.0))", 6),
        ("(sum (deltaVec n 0 1.0))", 6),
        ("(sumbuild n (lam (i : Integer) 1.0))", 1),
        ("(sum (build n (lam (i : Integer) 1.0)))", 6),
    ],
    ids=["constVec", "deltaVec", "sumbuild", "build"],
)
def test_every_allocating_op_is_bounded(capsys: pytest.CaptureFixture[str], text: str, col: int) -> None:
    expr = f"(let (n (mul 1000000 1000000)) {text})"
    code, out, err = run(capsys, "eval", "--expr", expr, "--args", "[]")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith(f"<expr>:1:{len('(let (n (mul 1000000 1000000)) ') + col}: error: ")
    assert "1,000,000,000,000 elements" in err


def test_no_budget_and_a_fresh_budget_per_evaluation() -> None:
    program = parse_program("(def f Float ((n : Integer)) (sum (constVec n 1.0)))\n")
    d = program.defs["f"]
    assert Interpreter(max_elements=None).call(d, [10**6]) == 10**6
    interpreter = Interpreter(max_elements=10)
    assert interpreter.call(d, [10]) == 10.0
    assert interpreter.call(d, [10]) == 10.0  # the budget is per evaluation, not per interpreter
    with pytest.raises(KsEvalError, match="budget of 10 "):
        interpreter.call(d, [11])


def test_other_run_time_errors_are_located(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "eval", "--expr", "(add 1.0 (index 5 (build 3 (lam (i : Integer) 1.0))))", "--args", "[]"
    )
    assert code == 1 and err.startswith("<expr>:1:10: error: index 5 is out of range")


@pytest.mark.parametrize("option", ["--max-elements", "--max-steps"])
@pytest.mark.parametrize("value", ["0", "-5", "x", "1e3"])
def test_bad_limits_are_usage_errors(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    code, out, err = run(capsys, "eval", "--expr", "(add x 1.0)", "--args", "[1.0]", option, value)
    assert code == 2 and out == "" and err.count("\n") == 1 and f"argument {option}" in err


def test_parse_expr_is_unchanged_by_positions() -> None:
    e, free = parse_expr("(add x (mul y 2.0))")
    assert [v.data for v in free] == ["x", "y"] and str(e) == "(add x (mul y 2.0))"


# -- the C++ driver ---------------------------------------------------------------------------------
CPP = "(def f Float ((n : Integer)) (sum (build n (lam (i : Integer) (to_float i)))))\n"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_the_cpp_driver_refuses_allocations_beyond_its_budget(cpp_cache: Path) -> None:
    compiled = compile_program(parse_program(CPP), ["f"])
    assert compiled.call("f", [1000]) == sum(range(1000))
    refused = compiled.run([("f", [10**12]), ("f", [10])])  # the process carries on after a refusal
    assert isinstance(refused[0], KsEvalError) and refused[1] == 45.0
    assert f"beyond the memory budget of {DEFAULT_BUDGET_MIB} MiB" in refused[0].message
    assert refused[0].pos is not None
    assert (refused[0].pos.line, refused[0].pos.col) == (1, 30)  # the def's body
    small = dataclasses.replace(compiled, budget_mib=1)
    with pytest.raises(KsEvalError, match="beyond the memory budget of 1 MiB"):
        small.call("f", [10**6])  # 8 MB of doubles
    assert small.call("f", [1000]) == sum(range(1000))


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_the_cpp_driver_takes_its_budget_from_the_environment(cpp_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUDGET_VARIABLE, "1")  # was overridden by the default budget of every CompiledProgram
    compiled = compile_program(parse_program(CPP), ["f"])
    with pytest.raises(KsEvalError, match="beyond the memory budget of 1 MiB"):
        compiled.call("f", [10**6])
    monkeypatch.setenv(BUDGET_VARIABLE, "-5")
    with pytest.raises(KsUsageError, match=f"{BUDGET_VARIABLE} must be a whole number of MiB"):
        compile_program(parse_program(CPP), ["f"])


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_the_text_of_a_lazy_result_is_within_the_budget(cpp_cache: Path) -> None:
    """(constVec n x) takes no arena memory, but its text n elements: refused before it is written."""
    source = "(def g (Vec (Tuple Float Integer)) ((n : Integer)) (constVec n (tuple 1.5 2)))\n"
    compiled = compile_program(parse_program(source), ["g"])
    refused = compiled.run([("g", [10**12]), ("g", [1])])
    assert isinstance(refused[0], KsEvalError) and refused[1] == [(1.5, 2)]
    assert f"bytes of text is beyond the memory budget of {DEFAULT_BUDGET_MIB} MiB" in refused[0].message
