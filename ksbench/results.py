"""Result files: JSON lines of measured rows, each with the code revision, appended as they come.

Every figure and benchmark writes JSON lines under ``experiments/results/<name>/`` (``--quick``:
under ``runs/quick/<name>/``, which git ignores), one row per measured thing, each with the code
revision.  Rows are appended as they are measured, and a rerun skips the rows already there, so
an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
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
