"""What a learned search pays beyond plain search: torch only when a model is used, one thread for
search-sized batches, and the benchmark that compares the two."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gnn.model import ModelConfig, ValueNetwork
from gnn.model_file import save_model_file, value_function_from_file
from gnn.value import NetworkValue
from knossos.parser import parse_expr
from training.checkpoint import export_model

from conftest import ROOT

CHECK_IMPORTS = """
import runpy, sys
sys.argv = ["optimize.py", "--expr", "(div (mul x y) (add 1.0 (mul x y)))", "--rules", "binding_rules",
            "--budget", "50", "--quiet", "--json", "--model", sys.argv[1]]
try:
    runpy.run_path("optimize.py", run_name="__main__")
except SystemExit as done:
    assert not done.code, done.code
print("IMPORTED", sorted(m for m in ("torch", "torch_geometric") if m in sys.modules))
"""


def imported_by(model: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IMPORTS, model], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("IMPORTED"))
    return list(json.loads(line.removeprefix("IMPORTED ").replace("'", '"')))


def test_model_none_never_imports_torch() -> None:
    assert imported_by("none") == []


def test_a_model_imports_torch_but_not_torch_geometric() -> None:
    """torch_geometric takes seconds to import (it loads torch._dynamo): inference does without it."""
    assert imported_by("default") == ["torch"]


def test_search_sized_batches_run_on_one_thread_and_large_ones_on_more(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    network = ValueNetwork(ModelConfig(hidden=40, steps=2, depth=5))
    seen: list[int] = []
    forward = network.forward

    def recording(graphs: object) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return forward(graphs)  # type: ignore[arg-type]

    monkeypatch.setattr(network, "forward", recording)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        value = NetworkValue(network)
        exprs = [parse_expr("(div (mul x y) (add 1.0 (mul x y)))")[0]] * 16
        value.values(exprs, 5)
        value.one_thread_nodes = 10  # these 16 graphs are now a large batch
        value.values(exprs, 5)
        assert seen == [1, 2]
        assert torch.get_num_threads() == 2  # put back after each pass
    finally:
        torch.set_num_threads(before)


def test_the_default_model_benchmark_quick_mode_reports_every_model() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_default_model.py", "--quick", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    rows = {(r["model"], r["search"], r["budget"]): r for r in summary["searches"]}
    runs = [
        ("none", "astar"),
        ("default", "astar"),
        ("ggnn", "astar"),
        ("none", "lazy-astar"),
        ("default", "lazy-astar"),
    ]
    assert set(rows) == {(m, s, b) for m, s in runs for b in (20, 50)}
    for r in rows.values():
        assert r["expressions"] == 2 and 0 <= r["hits"] <= 2 and r["seconds"] > 0
    for model in ("default", "ggnn"):
        assert summary["startup"][model]["load_seconds"] > summary["startup"]["none"]["load_seconds"] > 0
        assert summary["busy_machine"][model]["one_thread_seconds"] > 0


def test_the_value_scale_multiplies_every_value() -> None:
    torch.manual_seed(0)
    network = ValueNetwork(ModelConfig(hidden=40, steps=2, depth=5))
    exprs = [parse_expr(t)[0] for t in ("(div (mul x y) (add 1.0 (mul x y)))", "(add x 1.0)")]
    full = NetworkValue(network).values(exprs, 7)
    assert np.allclose(NetworkValue(network, scale=0.25).values(exprs, 7), 0.25 * full)
    assert np.abs(full).max() > 0
    for bad in (-0.1, 1000.0, float("nan")):
        with pytest.raises(ValueError, match="value scale"):
            NetworkValue(network, scale=bad)


def test_a_checkpoint_carries_its_value_scale(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = ModelConfig(hidden=40, steps=1, depth=5)
    network = ValueNetwork(config)
    trained = tmp_path / "checkpoint.pt"
    state = {"model": network.state_dict(), "model_config": dataclasses.asdict(config)}
    save_model_file(trained, {**state, "config": {"search": {"value_scale": 0.6}}})
    assert value_function_from_file(trained).scale == 0.6  # the training's
    exported = tmp_path / "model.pt"
    export_model(trained, exported, value_scale=0.3)
    assert value_function_from_file(exported).scale == 0.3  # set on export
    assert value_function_from_file(exported, scale=0.9).scale == 0.9  # the command line's
    export_model(trained, exported)
    assert value_function_from_file(exported).scale == 0.6
    save_model_file(trained, state)
    assert value_function_from_file(trained).scale == 1.0  # from before value scales: the paper's A*
    with pytest.raises(ValueError, match="value scale"):
        export_model(trained, exported, value_scale=-1.0)


def test_export_averages_the_weights_of_several_epochs(tmp_path: Path) -> None:
    config = ModelConfig(hidden=40, steps=1, depth=5)
    paths = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        state = {"model": ValueNetwork(config).state_dict(), "model_config": dataclasses.asdict(config)}
        paths.append(tmp_path / f"epoch_{seed}.pt")
        save_model_file(paths[-1], state)
    out = tmp_path / "model.pt"
    done = subprocess.run(
        [sys.executable, "-m", "training.export", str(paths[0]), str(out), "--average-with", *map(str, paths[1:])],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    weights = [torch.load(p, weights_only=False)["model"] for p in paths]
    averaged = torch.load(out, weights_only=False)["model"]
    for key in averaged:
        assert torch.allclose(averaged[key], sum(w[key] for w in weights) / 3)
    other = tmp_path / "other.pt"
    small = ModelConfig(hidden=41, steps=1, depth=5)
    save_model_file(other, {"model": ValueNetwork(small).state_dict(), "model_config": dataclasses.asdict(small)})
    done = subprocess.run(
        [sys.executable, "-m", "training.export", str(paths[0]), str(out), "--average-with", str(other), "--force"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1 and "cannot average" in done.stderr and "Traceback" not in done.stderr


def test_the_default_model_plot_is_made_from_the_committed_results(tmp_path: Path) -> None:
    out = tmp_path / "default_model.png"
    done = subprocess.run(
        [sys.executable, "experiments/default_model/plot.py", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--models", "nosuch"], "no model file 'nosuch'"),
        (["--models", "default:beam"], "search 'beam' is not one of astar, lazy-astar"),
        (["--jobs", "0"], "--jobs: must be at least 1"),
    ],
)
def test_the_default_model_benchmark_refuses_bad_runs_in_one_line(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_default_model.py", "--quick", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert message in done.stderr.strip().splitlines()[-1]  # argparse's usage lines come before its error
