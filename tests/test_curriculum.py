"""A curriculum for training (``training.later_defs``, ``training.later_from_epoch``): named training
expressions are searched only from a given epoch on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from knossos.errors import KsUsageError
from training.config import load_config
from training.trainer import Trainer

PROGRAM = "ksdata/programs/blas_train.kso"
DEFS = "[scal, dot, axpy, vector_vector_add, gemm]"
TINY = [
    f"data.train.file={PROGRAM}",
    f"data.train.defs={DEFS}",
    f"data.test.file={PROGRAM}",
    "data.test.defs=[scal]",
    "search.depth=4",
    "search.budget=30",
    "search.test_budget=20",
    "training.epochs=3",
    "training.exprs_per_epoch=4",
    "model.hidden=40",
    "model.steps=1",
]


def searched(tmp_path: Path, *overrides: str) -> list[list[str]]:
    torch.set_num_threads(1)
    Trainer(load_config("configs/blas.yaml", [*TINY, *overrides]), tmp_path).train()
    return [json.loads(line)["train_exprs"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]


def test_later_defs_wait_for_their_epoch(tmp_path: Path) -> None:
    epochs = searched(tmp_path, "training.later_defs=[gemm, dot]", "training.later_from_epoch=3")
    assert [len(e) for e in epochs] == [3, 3, 4]  # three defs are left for the first two epochs
    assert all({"gemm", "dot"}.isdisjoint(e) for e in epochs[:2])


def test_without_a_curriculum_the_draws_are_as_before(tmp_path: Path) -> None:
    """An empty later_defs draws exactly as a config without the keys."""
    plain = searched(tmp_path / "plain")
    assert searched(tmp_path / "empty", "training.later_defs=[]", "training.later_from_epoch=3") == plain


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["training.later_defs=[gemv]"], "'gemv' is not one of the training expressions"),
        (
            ["training.later_defs=[scal, dot, axpy, vector_vector_add, gemm]", "training.later_from_epoch=2"],
            "nothing is left for the first epochs",
        ),
    ],
)
def test_a_bad_curriculum_is_a_clear_error(tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(KsUsageError, match=message):
        Trainer(load_config("configs/blas.yaml", [*TINY, *overrides]), tmp_path)


def test_later_from_epoch_must_be_positive() -> None:
    with pytest.raises(KsUsageError, match=r"training\.later_from_epoch: must be at least 1"):
        load_config("configs/blas.yaml", [*TINY, "training.later_from_epoch=0"])
