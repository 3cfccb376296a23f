"""benchmarks/bench_layers.py (issue 45's layer benchmark) through its entry point, at the suite's tiny
shapes: the rows it appends, the agreement it checks, resuming, and the tables made from its rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_layers import LAYERS, main
from experiments.layers.figure import summary
from ksdata.torch_suite import SUITE, available


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_quick_run_measures_a_layer_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["--quick", "--layers", "RNNCell", "--no-torch-compile", "--out", str(out)]) == 0
    (row,) = _rows(out)
    assert row["layer"] == "RNNCell" and row["size"] == "fast" and row["repo"] == "pytorch/pytorch"
    assert row["error_written"] <= 1e-8 and row["error_optimised"] <= 1e-8  # type: ignore[operator]
    for key in ("eager_s", "written_s", "optimised_s", "optimise_s", "compile_written_s", "end_to_end_s"):
        assert row[key] > 0, key  # type: ignore[operator]
    assert "torch_compile_s" not in row and row["revision"]
    # a second run skips the layer already measured
    assert main(["--quick", "--layers", "RNNCell", "--no-torch-compile", "--out", str(out)]) == 0
    assert len(_rows(out)) == 1
    assert "already in" in capsys.readouterr().err


def test_an_unknown_layer_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--layers", "NoSuchLayer"]) == 2
    assert capsys.readouterr().err.strip() == "error: no layer named 'NoSuchLayer' (ksdata.torch_suite.SUITE)"


def test_the_default_layers_are_in_the_suite() -> None:
    assert len(LAYERS) >= 12 and all(name in SUITE for name in LAYERS)


def test_the_summary_names_the_layers_that_miss_the_targets() -> None:
    def row(layer: str, optimised: float, optimise_s: float = 10.0) -> dict[str, object]:
        return {
            "layer": layer, "revision": "abcdef0", "date": "2026-11-28", "seconds_limit": 30.0,
            "eager_s": 1.0, "written_s": 10.0, "optimised_s": optimised, "torch_compile_s": 1.0,
            "optimise_s": optimise_s, "compile_optimised_s": 1.0, "error_written": 0.0, "error_optimised": 0.0,
        }  # fmt: skip

    text = "\n".join(summary([row("a", 0.5), row("b", 8.0, optimise_s=40.0)]))  # type: ignore[list-item]
    assert "geometric mean **2x**, median **4.25x**" in text
    assert "- over 2x eager: 1 of 2 (b)" in text
    assert "- over 30 s of optimisation: 1 of 2 (b)" in text
    assert "- median at most 1x eager: missed" in text
    assert "- geometric mean no slower than torch.compile: missed" in text


@pytest.mark.slow
def test_quick_run_of_every_layer_with_torch_compile(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["--quick", "--out", str(out)]) == 0
    rows = _rows(out)
    assert {r["layer"] for r in rows} == {n for n in LAYERS if available(SUITE[n])}
    assert all("torch_compile_s" in r for r in rows)
