"""benchmarks/bench_gradients.py: its pieces on tiny sizes (the original and the baseline at N = 3, the
skipping of slow variants, the rewrite path's programs, the learned contender's absence), and the
whole script's quick mode (slow)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_gradients as bg
from knossos.parser import load_program
from knossos.program import Def, Program
from rules.sets import get_rule_set
from search.astar import astar

from conftest import ROOT


@pytest.fixture(scope="module")
def conv1d() -> tuple[Program, Def]:
    program = load_program(bg.PROGRAM)
    return program, program.defs[bg.DEF_NAME]


def test_original_and_baseline_at_n3(conv1d: tuple[Program, Def], cpp_cache: Path, tmp_path: Path) -> None:
    program, d = conv1d
    variants = bg.base_variants(program, d)
    bg.compile_all(variants)
    timer = bg.Timer(seconds=0.01, rounds=1, max_seconds=2.0)
    rows = timer.time_size(variants, bg.n_size(3))
    assert [r["variant"] for r in rows] == ["original", "baseline", "numpy"]
    assert [r["kind"] for r in rows] == ["original", "baseline", "numpy"]
    for r in rows:
        assert r["verified"] and r["agrees"] and not r["skipped"] and not bg.failed(r)
        assert r["min_s"] > 0 and r["runs"] >= 1 and r["reference"] == "original"
        assert r["size"] == {"kernels": [3, 3, 3], "image": [3, 3], "d$r": [3, 3]} and r["n"] == 3
    original, baseline, _ = rows
    assert original["cost"] == d.body.cost and baseline["cost"] < original["cost"]
    assert 0 < original["sized_cost"] < original["cost"]  # vectors of 3, not the reference's 16
    assert set(timer.last) == {"original", "baseline"}

    rho = bg.rank_correlation(rows[:2], "cost")
    assert rho is not None and rho[1] == 2 and (rho[0] in (-1.0, 1.0) or math.isnan(rho[0]))
    assert bg.rank_correlation(rows[:1], "cost") is None

    out = tmp_path / "sub" / "bench.jsonl"
    bg.write_rows(out, rows)
    back = [json.loads(line) for line in out.read_text().splitlines()]
    assert back == rows
    assert [p.name for p in out.parent.iterdir()] == ["bench.jsonl"]  # no temporary left


def test_a_variant_predicted_too_slow_is_skipped(conv1d: tuple[Program, Def]) -> None:
    program, d = conv1d
    variants = bg.base_variants(program, d)
    timer = bg.Timer(seconds=0.01, rounds=1, max_seconds=2.0)
    timer.last = {"original": (3.0, 0.1), "baseline": (3.0, 0.001)}
    keep, skip = timer.plan(variants, bg.n_size(6))  # 0.1 s * 2^7 = 12.8 s; 0.001 s * 2^7 = 0.128 s
    assert [v.label for v in keep] == ["baseline"]
    assert skip == {"original": pytest.approx(12.8)}
    row = bg.variant_row(variants[0], bg.n_size(6), None, "baseline", skip["original"])
    assert row["skipped"] and row["min_s"] is None and row["predicted_s"] == pytest.approx(12.8)
    assert not bg.failed(row)


def test_sizes_and_growth() -> None:
    assert [s.label for s in bg.sizes_of(quick=False, fig7=False)] == ["N=8", "N=12", "N=16"]
    quick = bg.sizes_of(quick=True, fig7=True)
    assert [s.n for s in quick] == [4, 6, None, None, None, None, None]
    assert quick[-1].label == "k=8 l=8 kn=5 n=512"
    assert quick[-1].scale == pytest.approx((8 * 8 * 5 * 512) ** 0.25)
    assert quick[-1].size.label() == {"kernels": [8, 8, 5], "image": [8, 512], "d$r": [8, 512]}
    assert [s.label for s in bg.sizes_of(quick=False, fig7=False, only_fig7=True)] == [
        f"k=8 l=8 kn=5 n={n}" for n in (32, 64, 128, 256, 512)
    ]
    assert bg.growth_exponent(1.0, 128.0, 8, 16) == pytest.approx(7.0)
    assert bg.growth_exponent(None, 1.0, 8, 16) is None


def test_path_points() -> None:
    assert bg.path_points(10, 4) == [(1, 2), (2, 4), (3, 6), (4, 8)]
    assert bg.path_points(2, 4) == [(2, 1)]  # steps 0 and 2 are the ends, step 1 once
    assert bg.path_points(0, 4) == []


def test_path_variants_replay_the_best_path(conv1d: tuple[Program, Def]) -> None:
    program, d = conv1d
    settings = bg.Settings("astar", "ml_rules_no_bind+zero_tensor_rules", 40, 30.0, budget=2000)
    result = astar(d.body, settings.plan().spec())
    assert len(result.steps) >= 5
    contender = bg.Contender("astar", dataclasses.asdict(settings), result)
    states = bg.replay(d.body, result.steps, get_rule_set(settings.rules))
    assert states[0] is d.body and states[-1] == result.best
    path = bg.path_variants(program, d, contender, 4)
    assert [v.label for v in path] == [f"path {k}/5" for k in range(1, 5)]
    for v in path:
        step = v.info["path"]["step"]
        assert v.kind == "path" and v.d.body == states[step] and v.info["path"]["steps"] == len(result.steps)
    [best] = bg.contender_variants(program, d, [contender])
    assert best.d.body == result.best and best.info["search"]["best_cost"] == result.best_cost
    assert best.info["search"]["search"] == "astar" and best.info["search"]["budget"] == 2000


def test_a_missing_model_is_one_line_and_no_contender(
    conv1d: tuple[Program, Def], capsys: pytest.CaptureFixture[str]
) -> None:
    _, d = conv1d
    assert bg.model_contender(d.body, bg.parse_args(["--model", "none", "--seconds-search", "1"])) is None
    assert capsys.readouterr().out == ""
    assert bg.model_contender(d.body, bg.parse_args(["--model", "no_such_model_here", "--seconds-search", "1"])) is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no_such_model_here" in out and "skipped" in out


def test_arguments() -> None:
    quick = bg.parse_args(["--quick", "--model", "none"])
    assert quick.seconds_search == 5.0 and quick.out == bg.QUICK_RESULTS and quick.model == "none"
    full = bg.parse_args([])
    assert full.seconds_search == 60.0 and full.out == bg.RESULTS and full.rules == "gradient_rules"
    assert full.depth == 150 and full.model == "gradients" and full.max_seconds_per_call == 2.0


@pytest.mark.slow
def test_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_gradients.py"),
            "--quick",
            "--model",
            "none",
            "--seconds-search",
            "2",
            "--rounds",
            "1",
            "--seconds",
            "0.02",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["size_label"] for r in rows} == {"N=4", "N=6"}
    labels = [r["variant"] for r in rows if r["size_label"] == "N=4"]
    assert labels[:4] == ["original", "baseline", "astar", "pseudo-beam"] and labels[-1] == "numpy"
    assert all(r["verified"] and r["agrees"] for r in rows)
    assert all(r["revision"] and r["search"]["seconds"] == 2.0 for r in rows if r["kind"] == "search")
    assert "Spearman(cost, time)" in done.stdout and "growth exponent" in done.stdout
