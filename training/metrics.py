"""What a training run measures, epoch by epoch: typed records, and their lines of ``metrics.jsonl``.

A run's ``metrics.jsonl`` has one JSON object per epoch (:class:`EpochMetrics`), the checkpoint's
``history`` the same objects as plain dicts.  ``to_json`` writes the keys a run has always written,
in the same order, and leaves out what a run did not measure (the plateau fit's keys without
``training.fit_patience``, ``replayed`` without ``training.replay_best``, ``train`` without
``training.eval_train``, an epoch's evaluations between ``training.eval_every``); ``from_json``
reads them back, so a line read and written again is the same text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from knossos.atomic import atomic_write_text
from knossos.errors import KsUsageError, Pos

METRICS = "metrics.jsonl"


class JsonLine(Protocol):
    """A record written as one line of a metrics file."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Evaluation:
    """Searches of a train or test set with the current network (``search.test_algorithm`` at
    ``search.test_budget``)."""

    #: The best cost each search reached, in the set's order.
    best_costs: tuple[float, ...]
    total_cost: float
    #: Mean over the set of best cost / start cost.
    mean_ratio_to_start: float
    #: Value-function evaluations of all the searches.
    evaluations: int
    #: Mean of best cost / best known cost, and how many reached the best known (to 1e-9): only for
    #: sets whose every expression has a best known cost.
    mean_ratio_to_best_known: float | None = None
    reached_best_known: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "best_costs": list(self.best_costs),
            "total_cost": self.total_cost,
            "mean_ratio_to_start": self.mean_ratio_to_start,
            "evaluations": self.evaluations,
        }
        if self.mean_ratio_to_best_known is not None:
            out["mean_ratio_to_best_known"] = self.mean_ratio_to_best_known
        if self.reached_best_known is not None:
            out["reached_best_known"] = self.reached_best_known
        return out

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Evaluation:
        return cls(
            best_costs=tuple(row["best_costs"]),
            total_cost=row["total_cost"],
            mean_ratio_to_start=row["mean_ratio_to_start"],
            evaluations=row["evaluations"],
            mean_ratio_to_best_known=row.get("mean_ratio_to_best_known"),
            reached_best_known=row.get("reached_best_known"),
        )


@dataclass(frozen=True)
class EpochMetrics:
    """One epoch of Algorithm 1: the searches of the training expressions, the fit, the evaluations."""

    #: 1-based.
    epoch: int
    #: Mean training loss of the fit.
    loss: float
    #: Samples (search targets) this epoch's searches gave.
    samples: int
    #: The training expressions searched, by name.
    train_exprs: tuple[str, ...]
    #: Value-function evaluations of those searches.
    train_evaluations: int
    #: With ``training.fit_patience``: the passes made, the pass whose weights were kept and its loss
    #: on the samples held back.
    fit_passes: int | None = None
    fit_best_pass: int | None = None
    held_out_loss: float | None = None
    #: With ``training.replay_best``: the remembered states fitted besides this epoch's samples.
    replayed: int | None = None
    #: The evaluations of this epoch (none between ``training.eval_every`` epochs; ``train`` only with
    #: ``training.eval_train``).
    train: Evaluation | None = None
    test: Evaluation | None = None
    #: Wall-clock seconds of the epoch.
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epoch": self.epoch,
            "loss": self.loss,
            "samples": self.samples,
            "train_exprs": list(self.train_exprs),
            "train_evaluations": self.train_evaluations,
        }
        for key, value in (
            ("fit_passes", self.fit_passes),
            ("fit_best_pass", self.fit_best_pass),
            ("held_out_loss", self.held_out_loss),
            ("replayed", self.replayed),
        ):
            if value is not None:
                out[key] = value
        for key, evaluation in (("train", self.train), ("test", self.test)):
            if evaluation is not None:
                out[key] = evaluation.to_json()
        out["seconds"] = self.seconds
        return out

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> EpochMetrics:
        train, test = row.get("train"), row.get("test")
        return cls(
            epoch=row["epoch"],
            loss=row["loss"],
            samples=row["samples"],
            train_exprs=tuple(row["train_exprs"]),
            train_evaluations=row["train_evaluations"],
            fit_passes=row.get("fit_passes"),
            fit_best_pass=row.get("fit_best_pass"),
            held_out_loss=row.get("held_out_loss"),
            replayed=row.get("replayed"),
            train=None if train is None else Evaluation.from_json(train),
            test=None if test is None else Evaluation.from_json(test),
            seconds=row["seconds"],
        )


def write_metrics(run: Path, history: Sequence[JsonLine]) -> None:
    """RUN/metrics.jsonl from a checkpointed history, replaced whole (so a resumed run has no gaps
    and no repeats)."""
    atomic_write_text(run / METRICS, "".join(json.dumps(m.to_json()) + "\n" for m in history))


def read_metrics(run: Path) -> list[EpochMetrics]:
    """The epochs of a train.py run folder (or of its metrics.jsonl); a one-line error if there are none
    or a line is not an epoch's metrics."""
    path = run / METRICS if run.is_dir() else run
    try:
        lines = path.read_text().splitlines()
    except OSError:
        raise KsUsageError("no metrics.jsonl here (is it a train.py run folder?)", None, str(run)) from None
    return parse_metrics(lines, str(path))


def parse_metrics(lines: Sequence[str], label: str) -> list[EpochMetrics]:
    """The epochs of the lines of a metrics.jsonl (blank lines skipped)."""
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise KsUsageError(f"metrics.jsonl is not JSON lines: {err.msg}", None, label) from None
        try:
            out.append(EpochMetrics.from_json(row))
        except (KeyError, TypeError, AttributeError) as err:
            missing = f" (no {err})" if isinstance(err, KeyError) else ""
            raise KsUsageError(f"not the metrics of a train.py epoch{missing}", Pos(number, 1), label) from None
    return out
