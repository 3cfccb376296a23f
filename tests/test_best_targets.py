"""training.trainer.BestTargets: fitting to the best target any search has found (training.best_targets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from test_train_cli import metrics, run, train_cmd

from gnn.sample import Sample
from knossos.parser import parse_expr
from training.trainer import BestTargets

A = parse_expr("(add x 1.0)")[0]
B = parse_expr("(mul x 2.0)")[0]


def targets(samples: list[Sample]) -> list[float]:
    return [s.target for s in samples]


def test_a_later_worse_target_is_replaced_by_the_best_seen() -> None:
    best = BestTargets(depth=5)
    assert targets(best.merge([Sample(A, 3, 2.0), Sample(B, 1, 0.5)])) == [2.0, 0.5]
    # a later search of A misses what the first found, and finds more for B
    assert targets(best.merge([Sample(A, 3, 0.0), Sample(B, 1, 1.5)])) == [2.0, 1.5]


def test_more_steps_left_never_has_a_smaller_target() -> None:
    best = BestTargets(depth=5)
    best.merge([Sample(A, 2, 3.0)])
    # with 4 steps left A can still do what it did with 2; with 1 step left nothing is known
    assert targets(best.merge([Sample(A, 4, 1.0), Sample(A, 1, 0.0)])) == [3.0, 0.0]
    assert np.array_equal(best.table[A], [0.0, 0.0, 3.0, 3.0, 3.0, 3.0])


def test_steps_beyond_the_depth_share_the_last_column() -> None:
    best = BestTargets(depth=3)
    assert targets(best.merge([Sample(A, 7, 4.0), Sample(A, 3, 1.0)])) == [4.0, 4.0]


def test_training_keeps_the_best_targets_in_its_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "best"
    done = run(train_cmd(out, "--set", "training.best_targets=true"))
    assert done.returncode == 0, done.stderr
    assert len(metrics(out)) == 2
    saved = torch.load(out / "checkpoint.pt", weights_only=False)
    table = saved["best_targets"]
    assert table and all(row.shape == (11,) and np.all(np.diff(row) >= 0) for row in table.values())
