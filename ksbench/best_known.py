"""The best cost known for each expression of a benchmark's rows: the set's, lowered by any search
of the rows (benchmarks/bench_default_model.py counts its hits against it, and so does
experiments/default_model/candidates.py)."""

from __future__ import annotations

from typing import Any


def best_known(rows: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """The best cost known for each (set, expression): the set's, lowered by any search of this benchmark."""
    known: dict[tuple[str, int], float] = {}
    for r in rows:
        key = (r["set"], r["index"])
        candidates = [r["best_cost"], known.get(key, float("inf"))]
        if r["best_known"] is not None:
            candidates.append(r["best_known"])
        known[key] = min(candidates)
    return known
