"""Training with beam search (``search.algorithm: beam``, as the reference's BLAS runs), pseudo-beam or lazy A*: its
searches give samples to fit, and the checkpoint tells optimize.py to search with it to the trained depth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gnn.model_file import rules_of, search_settings_of
from knossos.parser import parse_expr
from training.checkpoint import load_checkpoint
from training.config import load_config
from training.executors import LocalExecutor, make_executor
from training.search_jobs import SearchJob, run_search
from training.trainer import Trainer

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
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    settings = search_settings_of(state)
    assert (settings.algorithm, settings.depth, settings.prune_commutes, settings.prune_inlines) == (
        search,
        6,
        False,
        False,
    )
    assert rules_of(state) == "binding_simplify_rules"


def test_a_run_can_prune_in_its_searches_and_says_so_in_its_checkpoint(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    config = load_config("configs/bootstrap.yaml", ["search.prune_commutes=true", "search.prune_inlines=true", *TINY])
    executor = make_executor(config)
    assert isinstance(executor, LocalExecutor)
    assert config.plan.search.prune_commutes and config.plan.search.prune_inlines
    start = parse_expr("(add (mul x y) (div z 2.0))")[0]
    relabelled = parse_expr("(add (div z 2.0) (mul x y))")[0]
    plan = config.plan.overridden(algorithm="astar", budget=50)
    pruned = run_search(SearchJob(start, plan, "explored_and_reached"), None)
    unpruned = plan.overridden(prune_commutes=False, prune_inlines=False)
    full = run_search(SearchJob(start, unpruned, "explored_and_reached"), None)
    assert relabelled in {s.expr for s in full.expanded + full.passed_over}
    assert relabelled not in {s.expr for s in pruned.expanded + pruned.passed_over}
    Trainer(config, tmp_path).train()
    trained = search_settings_of(load_checkpoint(tmp_path / "checkpoint.pt"))
    assert trained.prune_commutes is True and trained.prune_inlines is True
