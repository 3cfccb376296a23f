"""What the figure scripts share beside the result files (ksbench.results): reading rows for plots,
and running train.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ksbench.results import ROOT

if TYPE_CHECKING:
    from training.metrics import EpochMetrics

#: Training runs of the experiments (checkpoints, kept weights): large, so not in git.
RUNS = ROOT / "runs" / "experiments"


def read_rows(path: Path, program: str) -> list[dict[str, Any]]:
    """The rows of a results file, for plot scripts: a missing or empty file ends with a one-line error."""
    if not path.is_file():
        raise SystemExit(f"{program}: error: no results file {path} (run the experiment first)")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise SystemExit(f"{program}: error: {path}:{number}: not a JSON line") from None
    if not rows:
        raise SystemExit(f"{program}: error: {path} has no results yet")
    return rows


def run_train(config: str, out: Path, overrides: Iterable[str], quiet: bool = False) -> list[EpochMetrics]:
    """``train.py CONFIG --out OUT --resume --set ...``, the entry point users run; its metrics rows.

    ``--resume`` makes it carry on from the run's checkpoint if there is one, so that a rerun of an
    interrupted experiment continues the training instead of starting again.
    """
    argv = [sys.executable, str(ROOT / "train.py"), config, "--out", str(out), "--resume", "--threads", "1"]
    for item in overrides:
        argv += ["--set", item]
    if quiet:
        argv.append("--quiet")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL if quiet else None, check=False)
    if done.returncode != 0:
        raise SystemExit(f"train.py failed for {out} (exit {done.returncode}); rerun to resume it")
    return metrics_so_far(out)


def metrics_so_far(run: Path) -> list[EpochMetrics]:
    """The per-epoch metrics a train.py run has written so far (none if it has not started)."""
    from training.metrics import METRICS, parse_metrics

    metrics = run / METRICS
    if not metrics.is_file():
        return []
    return parse_metrics(metrics.read_text().splitlines(), str(metrics))
