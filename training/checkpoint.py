"""Training checkpoints: model files (gnn/model_file.py) with the training's state in them (replay
samples, optimiser, history), checked against the training config; averaged and exported to model files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gnn.model_file import (
    load_model_file,
    network_from,
    save_model_file,
    value_scale_of,
)
from knossos.errors import KsUsageError
from search.value import check_value_scale
from training.config import check_stored_config


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A training checkpoint's state (:func:`gnn.model_file.load_model_file`, with the whole training
    config checked)."""
    return load_model_file(path, check_config=check_stored_config)


def average_weights(checkpoints: list[Path]) -> dict[str, Any]:
    """The first checkpoint's state with its weights averaged with those of the others (the same
    network at other epochs of a run: an average of several epochs' weights is a steadier value
    function than any one of them)."""
    states = [load_checkpoint(path) for path in checkpoints]
    first = states[0]
    for path, state in zip(checkpoints[1:], states[1:], strict=True):
        if state["model_config"] != first["model_config"] or state["model"].keys() != first["model"].keys():
            raise KsUsageError("not the same network as the first checkpoint: cannot average them", None, str(path))
    averaged = {k: sum(s["model"][k] for s in states) / len(states) for k in first["model"]}
    return {**first, "model": averaged, "averaged": [str(p) for p in checkpoints]}


def export_model(
    checkpoint: Path | list[Path], out: Path, value_scale: float | None = None, budget: int | None = None
) -> None:
    """Write only what inference needs (weights, model settings, the config it came from, the value
    scale to search with: ``value_scale``, or the training's; and the evaluations optimize.py gives a
    search by default, ``budget``, where one is chosen).  Several checkpoints: their weights averaged
    (:func:`average_weights`)."""
    paths = checkpoint if isinstance(checkpoint, list) else [checkpoint]
    state = average_weights(paths) if len(paths) > 1 else load_checkpoint(paths[0])
    network_from(state, str(paths[0]))  # refuse to export something that does not load
    scale = value_scale_of(state) if value_scale is None else value_scale
    check_value_scale(scale)
    save_model_file(
        out,
        {
            "model": state["model"],
            "model_config": state["model_config"],
            "config": state.get("config"),
            "epoch": state.get("epoch"),
            "history": state.get("history", [])[-1:],
            "value_scale": scale,
            **({"budget": budget} if budget is not None else {}),
            "averaged": state.get("averaged", [str(p) for p in paths]),
            # how an offline fit was made (experiments/default_model/export_offline.py), where it was
            **({"offline": state["offline"]} if "offline" in state else {}),
        },
    )
