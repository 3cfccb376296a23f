"""Training with beam search (``search.algorithm: beam``, as the reference's BLAS runs), pseudo-beam or lazy A*: its
searches give samples to fit, and the checkpoint tells optimize.py to search with it to the trained depth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gnn.checkpoint import load_checkpoint, trained_for
from gnn.config import load_config
from gnn.training import Trainer

TINY = [
    "search.depth=6",
    "training.epochs=2",
    "training.exprs_per_epoch=2",
    "training.warmup_epochs=1",
    "training.targets=explored_and_reached",
    "search.budget=60",
    "search.test_budget=40",
    "model.hidden=40",
    "model.steps=1",
]


@pytest.mark.parametrize("search", ["beam", "pseudo-beam", "lazy-astar"])
def test_a_run_fits_its_searches_and_carries_the_search(tmp_path: Path, search: str) -> None:
    torch.set_num_threads(1)
    algorithm = [f"search.algorithm={search}", f"search.test_algorithm={search}"]
    Trainer(load_config("configs/bootstrap.yaml", [*algorithm, *TINY]), tmp_path).train()
    epochs = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert all(e["samples"] > 0 and e["train_evaluations"] > 0 for e in epochs)
    assert epochs[-1]["test"]["evaluations"] > 0
    assert trained_for(load_checkpoint(tmp_path / "checkpoint.pt")) == {"search": search, "depth": 6}
