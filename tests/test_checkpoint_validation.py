"""A checkpoint's metadata is checked before any network is built from it: settings of the wrong
type, or beyond what a config may ask for (a stored ``hidden`` of 100000 asked for 360 GB), are
one line naming the file, with status 1, in optimize.py --model, python -m training.export and
train.py --resume alike; the checkpoints train.py writes and the shipped models still load."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from app.optimize_cli import main as optimize_main
from app.train_cli import main as train_main
from gnn.model_file import SHIPPED_MODELS, value_function_from_file
from training.export import main as export_main

from conftest import ROOT, run_cli

CONFIG = str(ROOT / "configs" / "bootstrap.yaml")
TINY = [
    *("--set", "training.epochs=1", "--set", "search.budget=30", "--set", "search.test_budget=30"),
    *("--set", "model.hidden=48", "--set", "model.steps=2", "--set", "training.exprs_per_epoch=2"),
]
START = "(div (div 1.0 x) (add 1.0 (div 1.0 x)))"
MODEL = "the checkpoint's model settings are not usable: "
TRAINING = "the checkpoint's training settings are not usable: "


def setup_module() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run of one epoch (train.py's checkpoint.pt in it)."""
    out = tmp_path_factory.mktemp("run") / "run"
    assert train_main([CONFIG, "--out", str(out), "--quiet", *TINY]) == 0
    return out


def edited(run_folder: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    """A copy of the run folder whose checkpoint's state ``edit`` changed."""
    folder = tmp_path / "run"
    shutil.copytree(run_folder, folder)
    state = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=False)
    edit(state)
    torch.save(state, folder / "checkpoint.pt")
    return folder


def set_key(key: str, value: object) -> Callable[[dict[str, Any]], object]:
    """An edit setting ``key`` (``model_config.hidden``: a key of a stored section) to ``value``."""
    *sections, last = key.split(".")

    def edit(state: dict[str, Any]) -> None:
        here = state
        for s in sections:
            here = here[s]
        here[last] = value

    return edit


def one_line(capsys: pytest.CaptureFixture[str], main: Callable[[list[str]], int], *argv: str) -> str:
    code, _, err = run_cli(main, capsys, *argv)
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    return err.rstrip("\n")


def every_entry_point(capsys: pytest.CaptureFixture[str], folder: Path) -> list[str]:
    """The error lines of optimize.py --model, training.export and train.py --resume for the folder's checkpoint."""
    checkpoint = str(folder / "checkpoint.pt")
    argv = ["--model", checkpoint, "--expr", START, "--rules", "binding_simplify_rules", "--budget", "5", "--quiet"]
    out = folder.parent / "exported.pt"
    lines = [
        one_line(capsys, optimize_main, *argv),
        one_line(capsys, export_main, checkpoint, str(out)),
        one_line(capsys, train_main, CONFIG, "--out", str(folder), "--resume", "--quiet", *TINY),
    ]
    assert not out.exists()
    return lines


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "model_config.hidden",
            100_000,
            MODEL + "model hidden: must be at most 8192 (the weights grow with its square), not 100000",
        ),
        (
            "model_config.steps",
            10**8,
            MODEL + "model steps: must be at most 1000 (each step is a pass over every graph)",
        ),
        ("model_config.depth", 10**7, MODEL + "model depth: must be at most 1000"),
        ("model_config.hidden", "200", MODEL + "model hidden: expected a whole number, not '200'"),
        ("model_config.mlp_head", "yes", MODEL + "model mlp head: expected true or false, not 'yes'"),
        ("model_config.kind", "rnn", MODEL + "model kind: 'rnn' is not one of ggnn, tree"),
        ("model_config.cost_model", None, MODEL + "model cost model: expected text, not None"),
        ("model_config.width", 3, MODEL + "unknown setting 'width' (known: hidden, steps, depth, "),
        ("model_config", "garbage", MODEL + "expected a mapping of settings, not str"),
        ("config", "garbage", TRAINING + "config: expected a mapping of keys, not str"),
        ("config.search", [1, 2], TRAINING + "search: expected a mapping of keys, not list"),
        ("config.search.depth", "ten", TRAINING + "search.depth: expected a whole number, not 'ten'"),
        ("config.search.depth", 10**9, TRAINING + "search.depth: must be at least 1 and at most 1000, not 1000000000"),
        ("config.search.value_scale", float("nan"), TRAINING + "search.value_scale: the value scale must be in"),
        ("config.rules", 7, TRAINING + "rules: expected text, not 7"),
        ("model", "garbage", "the checkpoint's weights are not usable: expected a mapping of tensors, not str"),
        (
            "value_scale",
            "1",
            "the checkpoint's search settings are not usable: value_scale: expected a number, not str",
        ),
        ("budget", 0, "the checkpoint's search settings are not usable: budget: expected a whole number from 1 to"),
    ],
)
def test_bad_metadata_is_one_line_everywhere(
    capsys: pytest.CaptureFixture[str], run_folder: Path, tmp_path: Path, key: str, value: object, message: str
) -> None:
    """Was: hidden=100000 allocated until memory ran out; config='garbage' was an AttributeError."""
    folder = edited(run_folder, tmp_path, set_key(key, value))
    for line in every_entry_point(capsys, folder):
        assert line.startswith(f"{folder / 'checkpoint.pt'}: error: {message}"), line


def test_resuming_an_exported_model_is_one_line(
    capsys: pytest.CaptureFixture[str], run_folder: Path, tmp_path: Path
) -> None:
    folder = edited(run_folder, tmp_path, lambda state: state.pop("optimizer"))
    line = one_line(capsys, train_main, CONFIG, "--out", str(folder), "--resume", "--quiet", *TINY)
    assert line == (
        f"{folder / 'checkpoint.pt'}: error: not a training checkpoint: it has no optimizer to resume from "
        "(an exported model?)"
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("epoch", "1", "epoch: expected int, not str"),
        ("epoch", -1, "epoch -1 < 0"),
        ("numpy_rng", {"bit_generator": "nope"}, "(ValueError: "),
        ("torch_rng", torch.zeros(3), "(TypeError: RNG state must be a torch.ByteTensor)"),
        ("history", [{"epoch": 1}], "(KeyError: "),
        ("best_targets", [1], "best_targets: expected dict"),
    ],
)
def test_bad_training_state_is_one_line_on_resume(
    capsys: pytest.CaptureFixture[str], run_folder: Path, tmp_path: Path, key: str, value: object, message: str
) -> None:
    folder = edited(run_folder, tmp_path, set_key(key, value))
    line = one_line(capsys, train_main, CONFIG, "--out", str(folder), "--resume", "--quiet", *TINY)
    assert line.startswith(f"{folder / 'checkpoint.pt'}: error: the checkpoint's training state is not usable")
    assert message in line, line


def test_good_checkpoints_still_load(capsys: pytest.CaptureFixture[str], run_folder: Path, tmp_path: Path) -> None:
    for path in sorted(SHIPPED_MODELS.glob("*.pt")):
        value_function_from_file(path)
    # a checkpoint written before a model setting existed takes its default
    folder = edited(run_folder, tmp_path, lambda state: state["model_config"].pop("cost_model"))
    argv = ["--model", str(folder / "checkpoint.pt"), "--expr", START, "--rules", "binding_simplify_rules"]
    code, _, err = run_cli(optimize_main, capsys, *argv, "--budget", "5", "--quiet")
    assert code == 0, err
    code, _, err = run_cli(train_main, capsys, CONFIG, "--out", str(folder), "--resume", "--quiet", *TINY)
    assert code == 0, err
