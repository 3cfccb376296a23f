"""experiments/blas_test: the reference's best-known costs are read whole, the runner records what
it searched (resumable), and the table counts a def as reached by its body's cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.blas_test.figure import blas_test_table
from experiments.blas_test.run import reference_costs
from knossos.parser import load_program

from conftest import ROOT


def test_best_known_costs_of_blas_test() -> None:
    known = reference_costs()
    assert len(known) == 49 and sum(k.by == "rlo" for k in known.values()) == 30
    assert known["gemm"].start == 31904.4 and known["gemm"].best == 30501.7 and known["gemm"].by == "expert"


def run_quick(*argv: str) -> None:
    """experiments/blas_test/run.py --quick with ``argv``; it must succeed."""
    done = subprocess.run(
        [sys.executable, "experiments/blas_test/run.py", "--quick", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_quick_run_records_each_def_once() -> None:
    out = ROOT / "runs" / "quick" / "blas_test" / "searches.jsonl"
    out.unlink(missing_ok=True)
    for _ in range(2):  # the second run finds everything done
        run_quick()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["def_"] for r in rows] == ["float_matrix_multiply", "matrix_matrix_multiply", "vector_vector_add"]
    known = reference_costs()
    program = load_program(ROOT / "ksdata" / "programs" / "blas_test.kso")
    for r in rows:
        assert r["start_cost"] == known[r["def_"]].start  # whole-def costs, as the reference's
        d = program.defs[r["def_"]]
        offset = program.def_cost(d.name) - d.body.cost
        assert abs(r["best_cost"] - r["best_body_cost"] - offset) < 1e-6
        assert r["best_cost"] <= r["start_cost"] and r["evaluations"] <= 50


def test_the_committed_table_counts_reached_defs() -> None:
    """Each shown run's row in the summary counts the defs whose cell in that run's column is bold."""
    lines = blas_test_table().splitlines()
    runs = [cell.strip() for cell in lines[0].strip("|").split("|")[3::2]]
    rows = lines[2 : lines.index("")]
    assert len(rows) == 49 and runs
    summary = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in lines if line.count("|") == 5}
    for j, run in enumerate(runs):
        reached = sum("**" in line.strip("|").split("|")[3 + 2 * j] for line in rows)
        assert summary[run] == str(reached), run


def test_a_run_with_another_search_is_recorded_beside_astar(tmp_path: Path) -> None:
    out = tmp_path / "searches.jsonl"
    for search in ("astar", "beam"):
        run_quick("--search", search, "--out", str(out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["search"] for r in rows] == ["astar"] * 3 + ["beam"] * 3


def test_pruned_runs_are_recorded_apart_from_unpruned_ones() -> None:
    out = ROOT / "runs" / "quick" / "blas_test" / "searches.jsonl"
    out.unlink(missing_ok=True)
    run_quick()
    run_quick("--prune-commutes")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["prune_commutes"] for r in rows] == [False] * 3 + [True] * 3


def test_value_error_compares_a_models_predictions_with_what_search_reaches() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "experiments/blas_test/value_error.py",
            *("--models", "blas", "--defs", "amxpmy"),
            *("--budget", "300", "--steps", "2"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| amxpmy |"))
    _, _, states, spread, error, _ = row.split("|")
    assert int(states) > 0 and float(spread.replace(",", "")) >= 0
    assert float(error.split("(")[0].replace(",", "")) >= 0 and error.strip().endswith("%)")


@pytest.mark.parametrize(
    "argv",
    [
        ["experiments/blas_test/value_error.py", "--defs", "no_such_def"],
        ["experiments/blas_test/value_error.py", "--models", "no_such_model.pt", "--defs", "amxpmy"],
        ["experiments/blas_test/run.py", "--quick", "--models", "no_such_model.pt"],
    ],
    ids=["unknown-def", "missing-model", "run-missing-model"],
)
def test_bad_arguments_are_one_line_errors(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
