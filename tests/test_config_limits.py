"""Training configs refuse values no machine can run (a depth in the millions, a hundred million GNN
steps, a budget beyond memory) with a one-line error naming the key, rather than running out of time
or memory later."""

from __future__ import annotations

from pathlib import Path

import pytest

from knossos.errors import KsUsageError
from training.config import load_config

from conftest import ROOT

GOOD = """\
name: tiny
rules: binding_simplify_rules
data:
  train: {set: binding_simplify_8}
  test: {set: binding_simplify_8}
"""


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("search.depth=5000000", "search.depth: must be at most 1000"),
        ("search.budget=99999999999999999999", "search.budget: must be at most 1000000000"),
        ("search.test_budget=10000000000", "search.test_budget: must be at most"),
        ("training.warmup_budget=10000000000", "training.warmup_budget: must be at most"),
        ("model.steps=100000000", "model.steps: must be at most 1000"),
        ("model.hidden=1000000", "model.hidden: must be at most 8192"),
        ("training.batch_size=1000000000", "training.batch_size: must be at most"),
        ("training.lr=.inf", "training.lr: must be positive and finite"),
    ],
)
def test_absurd_values_are_refused(tmp_path: Path, override: str, fragment: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    with pytest.raises(KsUsageError) as info:
        load_config(path, [override])
    rendered = info.value.render()
    assert "\n" not in rendered and fragment in rendered, rendered


def test_the_largest_values_allowed_load(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    config = load_config(path, ["search.depth=1000", "model.steps=1000", "search.budget=1000000000"])
    assert (config.search.depth, config.model.steps, config.search.budget) == (1000, 1000, 10**9)


@pytest.mark.parametrize(
    ("option", "fragment"),
    [("--repetitions", "--repetitions must be at least 1 and at most 256"), ("--threads", "--threads must be")],
)
def test_train_refuses_absurd_process_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, fragment: str
) -> None:
    """--repetitions 10^9 built a billion run folders' names before failing; now refused before any work."""
    from app.train_cli import main

    code = main([str(ROOT / "configs" / "bootstrap.yaml"), "--out", str(tmp_path / "run"), option, "1000000000"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and fragment in err
    assert not (tmp_path / "run").exists()
