"""What the figure scripts share: result files, the code revision, and running train.py.

Every figure writes JSON lines under ``experiments/results/<figure>/`` (``--quick``: under
``runs/quick/<figure>/``, which git ignores), one row per measured thing, each with the code
revision.  Rows are appended as they are measured, and a rerun skips the rows already there, so
an interrupted experiment resumes where it stopped.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from training.metrics import EpochMetrics

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
#: Training runs of the experiments (checkpoints, kept weights): large, so not in git.
RUNS = ROOT / "runs" / "experiments"
QUICK = ROOT / "runs" / "quick"


def _git(*args: str) -> str | None:
    """``git ARGS`` in the repository (a fixed argument list, no shell); None when git fails."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def revision() -> str:
    """HEAD's commit, with ``-dirty`` when the tree has changes (results folders aside: writing them
    is no change), or ``unknown`` without git."""
    head = _git("rev-parse", "HEAD")
    if head is None:
        return "unknown"
    status = _git("status", "--porcelain", "--", ".", ":(exclude)experiments/results")
    return head + ("-dirty" if status else "")


class ResultsFile:
    """A JSON-lines file of result rows, keyed by some of their fields, appended to as rows come.

    ``defaults``: the value of a field for rows written before the field existed (read, not rewritten).
    """

    def __init__(self, path: Path, key_fields: tuple[str, ...], defaults: dict[str, Any] | None = None) -> None:
        self.path = path
        self.key_fields = key_fields
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        if path.exists():
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise SystemExit(
                        f"{path}:{number}: error: not a JSON line (remove it to measure it again)"
                    ) from None
                row = {**(defaults or {}), **row}
                self.rows[self.key(row)] = row

    def key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(f) for f in self.key_fields)

    def has(self, **key: Any) -> bool:
        return self.key(key) in self.rows

    def add(self, row: dict[str, Any]) -> None:
        """Append ``row`` (with the code revision) and flush, so that nothing measured is lost."""
        row = {**row, "revision": revision()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        self.rows[self.key(row)] = row

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows.values())


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
    return read_metrics(out)


def read_metrics(run: Path) -> list[EpochMetrics]:
    """The per-epoch metrics a train.py run has written so far (none if it has not started)."""
    from training.metrics import METRICS, parse_metrics

    metrics = run / METRICS
    if not metrics.is_file():
        return []
    return parse_metrics(metrics.read_text().splitlines(), str(metrics))
