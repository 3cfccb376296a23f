"""experiments/fig7_walltime: run.py --quick and plot.py, run as users run them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

HERE = ROOT / "experiments" / "fig7_walltime"
VARIANTS = {
    "gemm": {"original", "baseline", "optimised", "hand i-k-j", "numpy"},
    "rev$conv1d": {"original", "baseline", "optimised", "gradient_rules plain", "gradient_rules model", "numpy"},
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: The quick run compiles every variant into a fresh cache of this module's own (conftest.cpp_cache).
pytestmark = pytest.mark.usefixtures("cpp_cache")


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    # os.environ carries the cpp_cache fixture's KNOSSOS_CPP_CACHE into the child
    return subprocess.run(
        [sys.executable, str(HERE / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fig7") / "results.jsonl"
    done = _run("run.py", "--quick", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_quick_run_writes_every_variant(quick_results: Path) -> None:
    rows = _rows(quick_results)
    keys = [(r["program"], json.dumps(r["size"], sort_keys=True), r["variant"]) for r in rows]
    assert len(keys) == len(set(keys)), "one row per (program, size, variant)"
    for program, variants in VARIANTS.items():
        mine = [r for r in rows if r["program"] == program]
        assert {r["variant"] for r in mine} == variants
        sizes = {r["x"] for r in mine}
        assert len(sizes) >= 2 and len(mine) == len(sizes) * len(variants)
    for r in rows:
        assert isinstance(r["min_s"], float) and r["min_s"] > 0
        assert isinstance(r["median_s"], float) and r["median_s"] >= r["min_s"]
        assert isinstance(r["calls"], int) and r["calls"] >= 1
        assert r["verified"] is True and r["agrees"] is True
        assert isinstance(r["revision"], str) and r["revision"]
        assert isinstance(r["cpu"], str) and r["cpu"]
        assert isinstance(r["flags"], list) and "-O3" in r["flags"]
        search = r["search"]
        assert isinstance(search, dict) and {"depth", "budget", "rules", "best_cost"} <= search.keys()


def test_rerun_skips_what_is_written(quick_results: Path) -> None:
    before = quick_results.read_text(encoding="utf-8")
    done = _run("run.py", "--quick", "--out", str(quick_results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert quick_results.read_text(encoding="utf-8") == before


def test_plot_writes_a_png(quick_results: Path) -> None:
    png = quick_results.with_suffix(".png")
    done = _run("plot.py", "--results", str(quick_results), "--out", str(png))
    assert done.returncode == 0, done.stdout + done.stderr
    assert png.read_bytes()[: len(PNG_MAGIC)] == PNG_MAGIC


@pytest.mark.parametrize("content", [None, "", "\n", "{not json\n"])
def test_plot_bad_results_is_one_line(tmp_path: Path, content: str | None) -> None:
    results = tmp_path / "results.jsonl"
    if content is not None:
        results.write_text(content, encoding="utf-8")
    done = _run("plot.py", "--results", str(results), "--out", str(tmp_path / "out.png"))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("plot.py: error: "), done.stderr
    assert not (tmp_path / "out.png").exists()
