"""Log-scale cost normalisation, and the search defaults a checkpoint carries to optimize.py."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gnn.model import ModelConfig
from gnn.model_file import save_model_file, search_settings_of, value_function_from_file
from gnn.networks import build_network, value_function
from gnn.normalization import check_normalization, from_network, to_network
from gnn.sample import Sample
from knossos.errors import KsUsageError
from knossos.parser import parse_expr
from search.settings import SearchSettings
from training.config import load_config
from training.fit import Fitter

from conftest import ROOT


def test_log_targets_are_the_drop_of_log1p_cost_and_convert_back() -> None:
    assert to_network("none", 1000.0, 10.0) == 10.0
    assert to_network("log", 9.0, 5.0) == pytest.approx(np.log(10.0) - np.log(5.0))
    # halving 1 + cost is one target whatever the cost's size
    assert to_network("log", 2e9 + 1, 1e9 + 1) == pytest.approx(np.log(2.0))
    assert to_network("log", 21.0, 11.0) == pytest.approx(np.log(2.0))
    costs = np.array([9.0, 2e9, 0.5])
    reductions = np.array([[0.0, 5.0], [0.0, 1.5e9], [0.0, 0.5]])
    logs = np.array([[to_network("log", c, v) for v in row] for c, row in zip(costs, reductions)])
    assert np.allclose(from_network("log", costs, logs), reductions)
    assert np.array_equal(from_network("none", costs, reductions), reductions)
    assert to_network("log", 3.0, 10.0) == pytest.approx(np.log(4.0))  # never below a cost of 0
    with pytest.raises(ValueError, match="cost normalization"):
        check_normalization("sqrt")
    with pytest.raises(ValueError, match="cost normalization"):
        ModelConfig(cost_normalization="sqrt")


def test_a_log_network_fits_log_targets_and_searches_in_cost_units() -> None:
    e = parse_expr("(div (mul x y) (add 1.0 (mul x y)))")[0]
    sample = Sample(e, 3, 2.0, shorter=(1.0,))
    c = e.cost
    fitted = sample.fitted(5, "log")
    assert [t for t, _ in fitted] == [1, 3]
    assert [v for _, v in fitted] == pytest.approx(
        [np.log1p(c) - np.log1p(c - 1.0), (np.log1p(c) - np.log1p(c - 2.0)) / 3]
    )
    for kind in ("ggnn", "tree"):
        torch.manual_seed(0)
        net = build_network(ModelConfig(hidden=40, steps=1, depth=5, kind=kind, cost_normalization="log"))
        fitter = Fitter(net, lr=3e-3, batch_size=1)
        fitter.fit([sample], 300, np.random.default_rng(0))
        row = value_function(net).values([e], 5)[0]
        assert row[3] == pytest.approx(2.0, abs=0.1)  # a cost reduction again
        assert row[1] == pytest.approx(1.0, abs=0.1)


def test_configs_take_the_normalization_and_refuse_unknown_ones() -> None:
    config = load_config(ROOT / "configs" / "bootstrap.yaml", ["model.cost_normalization=log"])
    assert config.model.cost_normalization == "log"
    with pytest.raises(KsUsageError, match=r"model\.cost_normalization"):
        load_config(ROOT / "configs" / "bootstrap.yaml", ["model.cost_normalization=sqrt"])


def _checkpoint(tmp_path: Path, search: dict[str, object] | None) -> Path:
    torch.manual_seed(0)
    config = ModelConfig(hidden=40, depth=7, kind="tree")
    net = build_network(config)
    state: dict[str, object] = {"model": net.state_dict(), "model_config": dataclasses.asdict(config)}
    if search is not None:
        state["config"] = {"search": search}
    path = tmp_path / "model.pt"
    save_model_file(path, state)
    return path


def test_a_checkpoint_carries_the_search_and_depth_it_was_trained_for(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path, {"depth": 7, "test_algorithm": "beam"})
    value = value_function_from_file(path)
    assert value.settings == SearchSettings(algorithm="beam", test_algorithm="beam", depth=7)
    assert value.rules is None
    # an export without its config: the network's depth, the other settings their defaults
    assert search_settings_of({"model_config": {"depth": 4}}) == SearchSettings(depth=4)
    pruned = {"depth": 7, "test_algorithm": "beam", "prune_commutes": True}
    assert search_settings_of({"model_config": {"depth": 7}, "config": {"search": pruned}}).prune_commutes


def _optimise(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "optimize.py", "--expr", "(div (mul x 2.0) (mul x 2.0))", "--json", "--quiet", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_optimize_takes_the_models_search_and_depth_unless_told(tmp_path: Path) -> None:
    path = str(_checkpoint(tmp_path, {"depth": 1, "test_algorithm": "beam"}))
    # depth 1 is one rewrite: (div e e) -> 1.0 needs one, so both reach 1.0; the search is the model's
    assert _optimise("--model", path)["search"] == "beam"
    assert _optimise("--model", path, "--search", "astar")["search"] == "astar"
    assert _optimise("--model", path)["depth"] == 1
    assert _optimise("--model", path, "--depth", "3")["depth"] == 3
    assert _optimise()["search"] == "saturate-astar" and _optimise()["depth"] == 10  # the default without a model
    assert _optimise("--model", path)["prune_commutes"] is False


def test_optimize_prunes_as_the_model_was_trained_unless_told(tmp_path: Path) -> None:
    search = {"depth": 1, "test_algorithm": "beam", "prune_commutes": True, "prune_inlines": True}
    path = str(_checkpoint(tmp_path, search))
    trained = _optimise("--model", path)
    assert trained["prune_commutes"] is True and trained["prune_inlines"] is True
    told = _optimise("--model", path, "--no-prune-commutes", "--no-prune-inlines")
    assert told["prune_commutes"] is False and told["prune_inlines"] is False
    plain = _optimise("--prune-commutes")
    assert plain["prune_commutes"] is True and plain["prune_inlines"] is False


# -- fitting to a plateau ------------------------------------------------------------------------
def _samples() -> list[Sample]:
    texts = ["(div (mul x y) (add 1.0 (mul x y)))", "(add x 1.0)", "(mul (div x y) (div x y))", "(div x x)"]
    return [Sample(parse_expr(t)[0], 3, float(k)) for k, t in enumerate(texts * 3)]


def test_fitting_to_a_plateau_stops_when_the_held_out_loss_stalls() -> None:
    torch.manual_seed(0)
    net = build_network(ModelConfig(hidden=40, depth=5, kind="tree"))
    frozen = Fitter(net, lr=0.0)  # nothing can improve: stop after `patience` passes, weights unchanged
    before = {k: v.clone() for k, v in net.state_dict().items()}
    report = frozen.fit_to_plateau(_samples(), 50, 3, np.random.default_rng(0))
    assert (report.passes, report.best_pass) == (3, 0)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_fitting_to_a_plateau_keeps_the_best_passes_weights() -> None:
    torch.manual_seed(0)
    net = build_network(ModelConfig(hidden=40, depth=5, kind="tree"))
    fitter = Fitter(net, lr=1e-2, batch_size=4)
    samples = _samples()
    rng = np.random.default_rng(1)
    report = fitter.fit_to_plateau(samples, 40, 5, rng)
    assert 1 <= report.best_pass <= report.passes <= 40
    # the held-out tenth is drawn first from rng's state, so it can be drawn again
    held = [samples[i] for i in np.random.default_rng(1).permutation(len(samples))[: max(1, len(samples) // 10)]]
    assert fitter.held_out_loss(held) == pytest.approx(report.held_out_loss)


def test_a_tiny_tree_run_with_log_targets_fits_to_a_plateau(tmp_path: Path) -> None:
    out = tmp_path / "run"
    settings = [
        "training.epochs=1",
        "search.budget=30",
        "search.test_budget=30",
        "model.hidden=40",
        "model.kind=tree",
        "search.precision=float32",  # bootstrap.yaml searches in bfloat16, which the tree network refuses
        "model.cost_normalization=log",
        "training.exprs_per_epoch=2",
        "training.fit_passes=20",
        "training.fit_patience=2",
    ]
    done = subprocess.run(
        [sys.executable, "train.py", "configs/bootstrap.yaml", "--out", str(out), "--quiet"]
        + [a for s in settings for a in ("--set", s)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (epoch,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert 1 <= epoch["fit_passes"] <= 20 and 0 <= epoch["fit_best_pass"] <= epoch["fit_passes"]
    value = value_function_from_file(out / "checkpoint.pt")
    assert value.config.cost_normalization == "log"  # type: ignore[union-attr]
    with pytest.raises(KsUsageError, match=r"training\.fit_patience"):
        load_config(ROOT / "configs" / "bootstrap.yaml", ["training.fit_patience=-1"])


def test_a_very_negative_log_value_is_a_large_finite_growth(recwarn: pytest.WarningsRecorder) -> None:
    """A network's output far below zero (no target is) reads as the cost growing e^30-fold, not as
    an overflow to -inf with a RuntimeWarning."""
    out = from_network("log", np.array([10.0, 10.0]), np.array([[-1000.0], [-30.0]]))
    assert np.all(np.isfinite(out)) and out[0, 0] == out[1, 0] < -1e13
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
