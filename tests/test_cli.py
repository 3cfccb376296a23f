"""The knossos command on good input: check, print, cost, eval, with files and with --expr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from knossos.cli import main
from knossos.parser import load_program

from conftest import PROGRAM_FILES, PROGRAMS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_reports_each_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", *map(str, PROGRAM_FILES))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == len(PROGRAM_FILES)
    blas = next(line for line in lines if "blas_test.kso" in line)
    prog = load_program(PROGRAMS / "blas_test.kso")
    assert blas.endswith(f": ok: {len(prog.defs)} defs, {len(prog.edefs)} edefs, {prog.node_count()} nodes")


def test_check_continues_past_a_bad_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.ks"
    bad.write_text("(def f Float ((x : Float)) (add x 1))\n")
    code, out, err = run(capsys, "check", str(bad), str(PROGRAMS / "gelu.kso"))
    assert code == 1
    assert "gelu.kso: ok" in out
    assert err.strip() == f"{bad}:1:28: error: 'add' cannot combine Float and Integer"


def test_cost_json_and_human(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cost", str(PROGRAMS / "blas_test.kso"), "--def", "gemm", "--json")
    assert code == 0 and json.loads(out) == {"defs": {"gemm": 31904.4}, "bodies": {"gemm": 31903.5}}
    code, out, _ = run(capsys, "cost", str(PROGRAMS / "gelu.kso"))
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["def", "cost", "body"]
    assert lines[-2].split() == ["rev$gelu", "90.4", "90"] and "optimize.py rewrites and reports" in lines[-1]
    # the body is what optimize.py starts from
    code, out, _ = run(capsys, "cost", str(PROGRAMS / "blas_test.kso"), "--def", "gemm")
    assert out.splitlines()[1].split() == ["gemm", "31904.4", "31903.5"]
    code, out, _ = run(capsys, "cost", "--expr", "(mul (add x y) (add x y))", "--json")
    assert json.loads(out) == {"cost": 4.0}


def test_cost_with_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cost", str(PROGRAMS / "blas_test.kso"), "--def", "dot", "--size", "x=1000", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["sizes"] == {"x": 1000}
    assert result["defs"]["dot"] > 50 * 80.4
    code, _, err = run(capsys, "cost", str(PROGRAMS / "blas_test.kso"), "--def", "dot", "--size", "zz=3")
    assert code == 1 and "zz" in err


def test_print_is_parseable_and_stable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "print", str(PROGRAMS / "conv1d_rev_test.kso"))
    assert code == 0
    printed = tmp_path / "printed.ks"
    printed.write_text(out)
    assert load_program(printed).defs["rev$conv1d"] == load_program(PROGRAMS / "conv1d_rev_test.kso").defs["rev$conv1d"]
    code, again, _ = run(capsys, "print", str(printed))
    assert again == out
    code, out, _ = run(capsys, "print", "--expr", "(let ((a (add x 1.0)) (b (mul a a))) b)")
    assert out.strip() == "(let (a (add x 1.0)) (let (b (mul a a)) b))"


def test_eval_def_and_expr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text(json.dumps([0.5, [[1, 2], [3, 4]], [[1, 0], [0, 1]], 2.0, [[1, 1], [1, 1]]]))
    code, out, _ = run(capsys, "eval", str(PROGRAMS / "blas_test.kso"), "gemm", "--args", str(args))
    assert code == 0 and json.loads(out) == [[2.5, 3.0], [3.5, 4.0]]
    code, out, _ = run(capsys, "eval", str(PROGRAMS / "gelu.kso"), "rev$gelu", "--args", '[{"tuple": [1.0, 1.0]}]')
    assert code == 0 and abs(json.loads(out) - 1.0829) < 1e-3
    code, out, _ = run(capsys, "eval", str(PROGRAMS / "gelu.kso"), "rev$mul", "--args", '[{"tuple": [2.0, 3.0]}, 1.0]')
    assert json.loads(out) == {"tuple": [3.0, 2.0]}
    code, out, _ = run(capsys, "eval", "--expr", "(tuple (add x 1.0) (mul x y))", "--args", '{"x": 2, "y": 3}')
    assert json.loads(out) == {"tuple": [3.0, 6.0]}
    code, out, _ = run(capsys, "eval", "--expr", "(div y x)", "--args", "[2.0, 3.0]")  # in order of appearance
    assert json.loads(out) == pytest.approx(2.0 / 3.0)


def test_python_dash_m_and_console_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "knossos", "cost", "--expr", "(add x 1.0)"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == "1.0"
    done = subprocess.run([sys.executable, "-m", "knossos", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "check" in done.stdout


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    _, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "cost")
    assert code == 1 and err.strip() == 'knossos: error: give a FILE or --expr "(...)"'
