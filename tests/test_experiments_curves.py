"""The learning-curve figures (fig5_generalisation, fig5_bootstrap, fig6_blas, fig6_cnn, fig6_gradients, fig9_search)
run end to end in --quick mode through the same entry points users run, resume without redoing work,
and plot."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

FIGURES = ["fig5_generalisation", "fig5_bootstrap", "fig6_blas", "fig6_cnn", "fig6_gradients", "fig9_search"]

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def script(figure: str, action: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "experiments", figure, action, *args]
    return subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("figure", FIGURES)
def test_quick_run_resume_and_plot(figure: str, tmp_path: Path) -> None:
    exp = importlib.import_module(f"experiments.{figure}.experiment").EXPERIMENT.quick()
    done = script(figure, "run", "--quick", "--quiet", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    results = tmp_path / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    kinds = {(r["kind"], r["agent"]) for r in rows}
    assert {("baseline", b.name) for b in exp.baselines} <= kinds
    assert ("reference", "initial") in kinds
    assert exp.ksc_baseline == (("reference", "ksc_baseline") in kinds)
    # every agent at every budget, at the last epoch at least; every row has the code revision
    agent_rows = [r for r in rows if r["kind"] == "agent"]
    last = max(r["epoch"] for r in agent_rows)
    assert {(r["agent"], r["budget"]) for r in agent_rows if r["epoch"] == last} == {
        (a.name, b) for a in exp.agents for b in exp.budgets
    }
    initial = next(r["total"] for r in rows if r["agent"] == "initial")
    for r in rows:
        assert r["revision"]
        assert r["total"] == pytest.approx(sum(r["costs"]))
        assert r["total"] <= initial + 1e-9  # no search ends above its start
    assert (tmp_path / "runs" / f"{exp.agents[0].run_name}_seed0" / "weights" / f"epoch_{last:03d}.pt").is_file()

    before = results.read_text()
    again = script(figure, "run", "--quick", "--quiet", "--out", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert results.read_text() == before  # everything was there: nothing measured twice

    # --no-train records what the runs hold without training: the same agent rows come back
    checkpoint = tmp_path / "runs" / f"{exp.agents[0].run_name}_seed0" / "checkpoint.pt"
    stamp = checkpoint.stat().st_mtime_ns
    results.unlink()
    recorded = script(figure, "run", "--quick", "--quiet", "--out", str(tmp_path), "--no-train")
    assert recorded.returncode == 0, recorded.stderr
    again_rows = [json.loads(line) for line in results.read_text().splitlines()]
    key = ("kind", "agent", "seed", "epoch", "budget")
    assert {tuple(r[k] for k in key): r["total"] for r in again_rows if r["kind"] == "agent"} == {
        tuple(r[k] for k in key): r["total"] for r in agent_rows
    }
    assert checkpoint.stat().st_mtime_ns == stamp

    png = tmp_path / "figure.png"
    plotted = script(figure, "plot", "--results", str(results), "--out", str(png))
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_results_is_a_one_line_error(tmp_path: Path) -> None:
    done = script("fig5_generalisation", "plot", "--results", str(tmp_path / "none.jsonl"))
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0
    assert "plot.py: error: no results file" in done.stderr


def test_parallel_training_gives_the_same_results(tmp_path: Path) -> None:
    """--jobs 2 trains fig9's two shared runs (A* and MCTS) at once; the rows equal a sequential run's."""
    key = ("kind", "agent", "seed", "epoch", "budget", "total")
    rows = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}"
        done = script("fig9_search", "run", "--quick", "--quiet", "--out", str(out), "--jobs", jobs)
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in (out / "runs").iterdir()) == ["ggnn_seed0", "mcts_seed0"]
        lines = (out / "results.jsonl").read_text().splitlines()
        rows[jobs] = sorted(tuple(json.loads(line)[k] for k in key) for line in lines)
    assert rows["1"] == rows["2"] and len(rows["1"]) >= 4


def test_jobs_must_be_positive() -> None:
    done = script("fig9_search", "run", "--quick", "--jobs", "0")
    assert done.returncode == 2 and "--jobs must be at least 1" in done.stderr


def test_a_results_file_reads_old_rows_with_the_default_of_a_newer_field(tmp_path: Path) -> None:
    from ksbench.results import ResultsFile

    path = tmp_path / "rows.jsonl"
    path.write_text('{"model": "none", "index": 0, "cost": 3}\n{"model": "none", "search": "beam", "index": 0}\n')
    results = ResultsFile(path, ("model", "search", "index"), {"search": "astar"})
    assert results.has(model="none", search="astar", index=0) and results.has(model="none", search="beam", index=0)
    assert [r["search"] for r in results] == ["astar", "beam"]
    assert path.read_text().count("astar") == 0  # read, not rewritten
