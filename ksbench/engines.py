"""The engines benchmarks/bench_engines.py runs side by side, and the summary of its rows (also the
table of docs/egraph.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ksbench.best_known import best_known


@dataclass(frozen=True)
class Engine:
    name: str
    #: A registered search's name, ``saturate-astar-before`` (the first pass only) or ``default``
    #: (optimize.py's choice for the expression, :meth:`search.plan.Plan.default_for`).
    search: str
    model: str
    #: Evaluations, or e-nodes for the e-graph; None: optimize.py's default for the expression.
    budget: int | None
    #: What the table says.
    label: str


ENGINES = (
    Engine("egraph", "egraph", "none", 5000, "e-graph alone (5000 e-nodes, 10 iterations)"),
    Engine("learned", "lazy-astar", "default", 300, "learned: `--model default` (lazy A\\*, 300 evaluations)"),
    Engine("astar", "astar", "none", 5000, "plain A\\* (5000 evaluations)"),
    Engine("sat-astar-300", "saturate-astar", "none", 300, "saturate-astar, plain, 300 evaluations"),
    Engine("sat-astar-1000", "saturate-astar", "none", 1000, "saturate-astar, plain, 1000 evaluations"),
    Engine("sat-astar-5000", "saturate-astar", "none", 5000, "saturate-astar, plain, 5000 evaluations"),
    Engine(
        "sat-before-1000", "saturate-astar-before", "none", 1000, "first pass only, then plain A\\* (1000 evaluations)"
    ),
    Engine("sat-learned", "saturate-lazy-astar", "default", 300, "saturate-lazy-astar, `--model default`, 300"),
    Engine("default", "default", "none", None, "optimize.py's default (no flags): saturate-astar, 300 evaluations"),
)
BY_NAME = {e.name: e for e in ENGINES}


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (set, engine): expressions, hits at the best cost known, total best cost, seconds."""
    known = best_known(rows)
    out = []
    for set_name in dict.fromkeys(r["set"] for r in rows):
        for name in dict.fromkeys(r["engine"] for r in rows):
            mine = [r for r in rows if r["set"] == set_name and r["engine"] == name]
            if not mine:
                continue
            out.append(
                {
                    "set": set_name,
                    "engine": name,
                    "expressions": len(mine),
                    "hits": sum(r["best_cost"] <= known[r["set"], r["index"]] + 1e-9 for r in mine),
                    "total_cost": round(sum(r["best_cost"] for r in mine), 4),
                    "seconds": round(sum(r["seconds"] for r in mine), 4),
                }
            )
    return out
