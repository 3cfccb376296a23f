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
    # --slow-call 0: every compiled gradient counts as too slow to call again, timed by its checked call
    args = ["--quick", "--layers", "Linear", "--no-torch-compile", "--slow-call", "0", "--out", str(out)]
    assert main(args) == 0
    (row,) = _rows(out)
    assert row["layer"] == "Linear" and row["size"] == "fast" and row["repo"] == "pytorch/pytorch"
    assert row["status"] == "ok" and row["caps"]["slow_call"] == 0  # type: ignore[index]
    assert row["error_written"] <= 1e-8 and row["error_optimised"] <= 1e-8  # type: ignore[operator]
    for key in ("eager_s", "written_s", "optimised_s", "optimise_s", "compile_written_s", "end_to_end_s"):
        assert row[key] > 0, key  # type: ignore[operator]
    assert row["calls"] == {"written_s": 1, "optimised_s": 1, "eager_s": row["calls"]["eager_s"]}  # type: ignore[index]
    assert row["calls"]["eager_s"] > 3  # type: ignore[index]  # PyTorch's are timed for 0.5 s in each round
    assert "torch_compile_s" not in row and row["revision"]
    assert "timed by one call: written, optimised" in capsys.readouterr().err
    # a second run skips the layer already measured
    assert main(args) == 0
    assert len(_rows(out)) == 1
    assert "already in" in capsys.readouterr().err


def test_a_step_past_its_cap_is_a_row_that_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    # g++ cannot finish in 10 ms: the layer stops at its first compilation, with what it measured before
    assert main(["--quick", "--layers", "RNNCell", "--compile-limit", "0.01", "--out", str(out)]) == 1
    (row,) = _rows(out)
    assert row["status"] == "compile_written_timed_out" and row["reason"] == "ran past its cap of 0.01 s"
    assert row["optimise_s"] > 0 and row["translate_s"] > 0 and "eager_s" not in row  # type: ignore[operator]
    err = capsys.readouterr().err
    assert "RNNCell: compile_written_timed_out: ran past its cap of 0.01 s" in err
    assert "error: not measured to the end: RNNCell (compile_written_timed_out)" in err
    # the table shows the layer and why it has no times
    text = "\n".join(summary(_rows(out)))  # type: ignore[arg-type]
    assert text.startswith("0 of 1 layers measured to the end.")
    assert "RNNCell: compile_written_timed_out (ran past its cap of 0.01 s)" in text


def test_a_failed_row_is_kept_until_asked_to_redo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    args = ["--quick", "--layers", "MSELoss", "--step-limit", "0.000001", "--out", str(out)]
    assert main(args) == 1
    assert [r["status"] for r in _rows(out)] == ["translate_timed_out"]
    assert main(args) == 1  # not measured again: the cap would stop it again
    assert len(_rows(out)) == 1 and "already in" in capsys.readouterr().err
    assert main([*args, "--redo-failed"]) == 1
    assert [r["status"] for r in _rows(out)] == ["translate_timed_out"] * 2


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
    assert "not measured" not in text

    stopped = {
        "layer": "c",
        "seconds_limit": 30.0,
        "status": "call_optimised_timed_out",
        "reason": "ran past its cap of 120 s",
    }
    text = "\n".join(summary([row("a", 0.5), row("b", 8.0), stopped]))  # type: ignore[list-item]
    assert text.startswith("2 of 3 layers measured to the end (revision abcdef0")
    assert "geometric mean **2x**" in text  # over the layers measured to the end
    assert (
        "- not measured to the end (a step failed or ran past its cap): 1 of 3 "
        "(c: call_optimised_timed_out (ran past its cap of 120 s))"
    ) in text


@pytest.mark.slow
def test_quick_run_of_every_layer_with_torch_compile(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    code = main(["--quick", "--out", str(out)])
    rows = _rows(out)
    # every layer has its row: measured to the end, or saying which step stopped it and why (g++ on
    # some layers' gradients runs past its cap on a loaded machine); the exit status says which
    assert [r["layer"] for r in rows] == [n for n in LAYERS if available(SUITE[n])]
    stopped = [r for r in rows if r["status"] != "ok"]
    # (Llama attention's rotary cos/sin are float32 in transformers: 3-8e-8 from autograd's, as documented)
    disagree = [r for r in rows if r["status"] == "ok" and max(r["error_written"], r["error_optimised"]) > 1e-8]
    assert code == (1 if stopped or disagree else 0)
    assert all("torch_compile_s" in r for r in rows if r["status"] == "ok")
    assert all(str(r["status"]).endswith(("_timed_out", "_failed")) and r["reason"] for r in stopped)
