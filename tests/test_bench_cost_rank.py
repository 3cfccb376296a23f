"""benchmarks/bench_cost_rank.py (do the cost models rank like the clock?) through its entry point at the
suite's tiny shapes, and the rank correlation it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_cost_rank import LAYERS, agreement, main, spearman_rho
from ksdata.torch_suite import SUITE


def test_quick_run_times_the_variants_and_rescores_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["--quick", "--layers", "MSELoss", "--variants", "2", "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["layer"] == "MSELoss" and row["size"] == "fast" and row["revision"] and row["wrong"] == []
    assert 1 <= len(row["variants"]) <= 2 and row["variants"][0]["label"] == "written"
    for v in row["variants"]:
        assert v["seconds"] > 0 and v["wall_seconds"] > 0 and v["def"].startswith("(def rev$layer")
        assert set(v["costs"]) == {"reference", "alloc", "alloc_sized", "sized"}
    models = {"reference", "alloc", "alloc_sized", "sized"}
    assert set(row["rho"]) == set(row["agreement"]) == set(row["cheapest_vs_written"]) == models
    # a second run skips the layer; --rescore recosts the stored defs without timing them
    assert main(["--quick", "--layers", "MSELoss", "--variants", "2", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 1
    capsys.readouterr()
    assert main(["--quick", "--rescore", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("MSELoss: rho then")


def test_spearman_ranks() -> None:
    assert spearman_rho([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman_rho([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman_rho([1, 1, 2], [5, 6, 7]) == pytest.approx(0.8660254)  # ties share their mean rank
    assert spearman_rho([1, 2], [1, 2]) is None and spearman_rho([1, 1, 1], [1, 2, 3]) is None


def test_agreement_looks_only_at_clearly_different_times() -> None:
    times = [1.0, 1.01, 2.0]  # the first two differ by noise
    assert agreement([5.0, 1.0, 9.0], times) == 1.0  # both clear pairs ordered right; the noisy pair ignored
    assert agreement([9.0, 1.0, 5.0], times) == 0.5  # (1.01, 2.0) right, (1.0, 2.0) wrong
    assert agreement([5.0, 5.0, 5.0], times) == 0.5 and agreement([1.0, 2.0], [1.0, 1.01]) is None


def test_an_unknown_layer_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--layers", "NoSuchLayer"]) == 2
    assert capsys.readouterr().err.strip() == "error: no layer named 'NoSuchLayer' (ksdata.torch_suite.SUITE)"


def test_the_layers_are_in_the_suite() -> None:
    assert all(name in SUITE for name in LAYERS)
