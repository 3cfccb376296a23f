"""Training metrics as typed records: every committed metrics.jsonl line reads into them and writes back
as the same text (same keys, same order, same numbers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knossos.errors import KsUsageError
from training.metrics import EpochMetrics, Evaluation, parse_metrics, read_metrics, write_metrics

from conftest import ROOT

RESULTS = ROOT / "experiments" / "results"
#: The metrics files train.py runs wrote (the offline fits' files have their own lines: below).
TRAINED = sorted(p for p in RESULTS.rglob("*metrics.jsonl") if not p.name.startswith("offline_"))
OFFLINE = sorted(RESULTS.rglob("offline_*_metrics.jsonl"))


def lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def test_there_are_committed_metrics() -> None:
    assert len(TRAINED) >= 10 and OFFLINE


@pytest.mark.parametrize("path", TRAINED, ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_committed_train_run_reads_and_writes_back_the_same_lines(path: Path, tmp_path: Path) -> None:
    history = read_metrics(path)
    assert [json.dumps(m.to_json()) for m in history] == lines(path)
    write_metrics(tmp_path, history)
    assert (tmp_path / "metrics.jsonl").read_text() == "".join(line + "\n" for line in lines(path))


@pytest.mark.parametrize("path", OFFLINE, ids=lambda p: p.name)
def test_a_committed_offline_fit_reads_and_writes_back_the_same_lines(path: Path) -> None:
    from experiments.default_model.passes import PassMetrics

    for line in lines(path):
        assert json.dumps(PassMetrics.from_json(json.loads(line)).to_json()) == line


def test_optional_parts_are_left_out() -> None:
    test = Evaluation(best_costs=(1.0, 2.0), total_cost=3.0, mean_ratio_to_start=0.5, evaluations=7)
    epoch = EpochMetrics(epoch=1, loss=0.25, samples=3, train_exprs=("a",), train_evaluations=9, test=test, seconds=1.5)
    assert list(epoch.to_json()) == ["epoch", "loss", "samples", "train_exprs", "train_evaluations", "test", "seconds"]
    assert list(epoch.to_json()["test"]) == ["best_costs", "total_cost", "mean_ratio_to_start", "evaluations"]
    full = EpochMetrics(
        epoch=2,
        loss=0.5,
        samples=3,
        train_exprs=("a", "b"),
        train_evaluations=9,
        fit_passes=4,
        fit_best_pass=2,
        held_out_loss=0.125,
        replayed=5,
        train=Evaluation((1.0,), 1.0, 1.0, 2, mean_ratio_to_best_known=1.0, reached_best_known=1),
        test=test,
        seconds=2.0,
    )
    assert list(full.to_json()) == [
        "epoch",
        "loss",
        "samples",
        "train_exprs",
        "train_evaluations",
        "fit_passes",
        "fit_best_pass",
        "held_out_loss",
        "replayed",
        "train",
        "test",
        "seconds",
    ]
    for m in (epoch, full):
        assert EpochMetrics.from_json(json.loads(json.dumps(m.to_json()))) == m


def test_a_line_that_is_not_an_epoch_is_a_one_line_error() -> None:
    good = '{"epoch": 1, "loss": 0.5, "samples": 1, "train_exprs": [], "train_evaluations": 0, "seconds": 1}'
    with pytest.raises(KsUsageError) as info:
        parse_metrics([good, "", '{"epoch": 2, "loss": 0.5}'], "m.jsonl")
    assert info.value.render() == "m.jsonl:3:1: error: not the metrics of a train.py epoch (no 'samples')"
    with pytest.raises(KsUsageError, match="not JSON lines"):
        parse_metrics(["{"], "m.jsonl")
