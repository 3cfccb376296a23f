"""What the figures' tables share: the rows of a results file, and a search's name as a table writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ksbench.results import RESULTS


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON-lines results file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def results_rows(figure: str) -> list[dict[str, Any]]:
    """The rows of ``experiments/results/FIGURE/results.jsonl`` (none when there is no such file)."""
    path = RESULTS / figure / "results.jsonl"
    return jsonl(path) if path.is_file() else []


def search_name(search: str) -> str:
    """A search as a table names it."""
    return {"astar": "A*", "lazy-astar": "lazy A*"}.get(search, search)
