"""benchmarks/bench_cheap_gradients.py on two defs in quick mode: rows with both times, the ratio and
the check against the interpreter; a partial run keeps the other rows of the results file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_cheap_gradients as bench


def test_quick_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.jsonl"
    other = {"file": "backend.ks", "def": "axpby", "generator": "before", "f_s": 1e-6, "rev_s": 1e-3, "ratio": 1e3}
    out.write_text(json.dumps(other) + "\n")
    code = bench.main(
        ["--quick", "--seconds", "0.01", "--only", "layers.ks:matmul", "backend.ks:axpby", "--out", str(out)]
    )
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    mine = {r["def"]: r for r in rows if r["generator"] == "current"}
    assert sorted(mine) == ["axpby", "matmul"]
    for r in mine.values():
        assert r["verified"] is True and r["f_s"] > 0 and r["rev_s"] > 0 and r["ratio"] == r["rev_s"] / r["f_s"]
    assert other in [{k: r[k] for k in other} for r in rows if r["generator"] == "before"]
    printed = capsys.readouterr().out
    assert "layers.ks:matmul" in printed and "rev$ within 5x" in printed
    assert "1e+03" in printed or "1000.0" in printed  # the before row's ratio beside the current one


def test_sizes_of_the_layers() -> None:
    size = bench.Case(bench.LAYERS, None, bench.LAYER_SIZES).size("matmul", quick=True)
    assert size.named == {"x": (8, 64), "w": (64, 64)}


def test_defs_whose_assertions_tie_lengths_are_measured(tmp_path: Path) -> None:
    # gmm's l is the strict lower triangle of a D x D matrix: every vector at one length failed the
    # def's own assertion ("failed at n=64: assertion failed"), so neither def was measured
    out = tmp_path / "bench.jsonl"
    only = ["gmm_train.kso:gmm_knossos_makeQ", "gmm_train.kso:gmm_knossos_gmm_objective"]
    assert bench.main(["--quick", "--seconds", "0.01", "--only", *only, "--out", str(out)]) == 0
    rows = {r["def"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(rows) == ["gmm_knossos_gmm_objective", "gmm_knossos_makeQ"]
    for r in rows.values():
        assert "error" not in r, r["error"]
        assert r["verified"] is True and r["rev_s"] > 0
    assert rows["gmm_knossos_makeQ"]["size"] == {"q": 16, "l": 120, "n": 16}
