"""The per-epoch table of training runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knossos.errors import KsUsageError
from training.report import main, table


def write_run(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """A run folder whose epochs are ``rows``, with what the table does not show filled in."""
    folder.mkdir()
    epoch = {"samples": 10, "train_exprs": ["a"], "train_evaluations": 30, "seconds": 1.0}
    test = {"best_costs": [1.0], "evaluations": 30}
    for r in rows:
        if "test" in r:
            r["test"] = {**test, **r["test"]}
    (folder / "metrics.jsonl").write_text("".join(json.dumps({**epoch, **r}) + "\n" for r in rows))
    return folder


def test_table_lists_every_epoch_of_every_run(tmp_path: Path) -> None:
    a = write_run(
        tmp_path / "a",
        [
            {
                "epoch": 1,
                "loss": 0.5,
                "test": {"total_cost": 100.0, "reached_best_known": 1, "mean_ratio_to_start": 0.9},
            },
            {
                "epoch": 2,
                "loss": 0.25,
                "test": {"total_cost": 90.0, "reached_best_known": 3, "mean_ratio_to_start": 0.8},
            },
        ],
    )
    b = write_run(tmp_path / "b", [{"epoch": 1, "loss": 0.125}])
    lines = table([a, b]).splitlines()
    assert len(lines) == 4 and lines[-1].startswith("loss: training loss")  # the legend says what columns mean
    assert lines[0].split("|")[1].split() == ["a", "loss", "total", "reached", "cost/start"]
    assert "0.5000" in lines[1] and "100.0" in lines[1] and "0.900" in lines[1] and "0.1250" in lines[1]
    assert "90.0" in lines[2] and " 3/" in lines[2]  # reached, out of the test set's expressions


def test_missing_run_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KsUsageError):
        table([tmp_path / "nothing"])
    assert main([str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metrics.jsonl" in err[0]


def test_a_run_of_another_kind_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "offline"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "loss": 0.5, "validation": {}}) + "\n")
    assert main([str(run)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "metrics.jsonl:1:1: error: not the metrics of a train.py epoch" in err[0]


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_the_usage(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag]) == 0
    assert "python -m training.report RUN" in capsys.readouterr().out
