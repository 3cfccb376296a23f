"""``knossos optimize`` and ``knossos train`` (app/commands.py): optimize.py and train.py as
subcommands of the one command, through its entry points; the scripts stay and give the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.optimize_cli import main as optimize_main
from knossos.cli import main as knossos_main

from conftest import PROGRAMS, ROOT, run_cli, without_seconds

BLAS = str(PROGRAMS / "blas_test.kso")


pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # (tests/conftest.py)


def test_knossos_optimize_reports_what_optimize_py_does(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [BLAS, "--def", "vector_vector_add", "--json", "--quiet"]
    code, out, err = run_cli(knossos_main, capsys, "optimize", *argv)
    assert code == 0, err
    code, script_out, _ = run_cli(optimize_main, capsys, *argv)
    assert code == 0
    ours, script = json.loads(out), json.loads(script_out)
    assert without_seconds(ours) == without_seconds(script)
    assert ours["search"] == "saturate-pseudo-beam" and ours["best_cost"] <= ours["start_cost"]


def test_knossos_optimize_writes_the_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.ks"
    code, _, err = run_cli(
        knossos_main, capsys, "optimize", BLAS, "--def", "vector_vector_add", "-o", str(out), "--quiet"
    )
    assert code == 0, err
    assert "(def vector_vector_add" in out.read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--expr", "x", "--def", "f"], "knossos optimize: error: give either FILE --def NAME or --expr, not both"),
        (["--expr", "x", "--rules", "nope"], "knossos optimize: error: unknown rule set 'nope'"),
        (["--expr", "x", "--size", "x=3"], "--size is for --cost alloc, not the reference cost model"),
    ],
)
def test_knossos_optimize_errors_are_one_line_and_name_the_subcommand(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(knossos_main, capsys, "optimize", *argv)
    assert code == 1 and not out
    assert len(err.strip().splitlines()) == 1 and message in err


def test_knossos_help_lists_optimize_and_train(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(knossos_main, capsys, "--help")
    assert code == 0 and "optimize" in out and "train" in out
    code, out, _ = run_cli(knossos_main, capsys, "train", "--help")
    assert code == 0 and "usage: knossos train" in out and "--resume" in out


def _knossos(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "knossos.cli", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_knossos_train_trains_and_optimize_uses_its_model(tmp_path: Path) -> None:
    tiny = ["training.epochs=1", "search.budget=20", "search.test_budget=20", "model.hidden=48", "model.steps=1"]
    tiny += ["training.exprs_per_epoch=2"]
    sets = [a for kv in tiny for a in ("--set", kv)]
    done = _knossos("train", "configs/bootstrap.yaml", "--out", str(tmp_path / "run"), "--quiet", *sets)
    assert done.returncode == 0, done.stderr
    epochs = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in epochs] == [1]
    checkpoint = str(tmp_path / "run" / "checkpoint.pt")
    done = _knossos("optimize", "--expr", "(div (div 1.0 x) (add 1.0 (div 1.0 x)))", "--model", checkpoint, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["model"] == checkpoint and report["rules"] == "binding_simplify_rules"
    done = _knossos("train", "configs/bootstrap.yaml", "--repetitions", "0")
    assert done.returncode == 1 and done.stderr.strip() == (
        "knossos train: error: --repetitions must be at least 1 and at most 256 (one process each), not 0"
    )
