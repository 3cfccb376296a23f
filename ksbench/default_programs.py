"""The engines benchmarks/bench_default_programs.py compares on the program defs, and the summary of
its rows (also the table of docs/egraph.md)."""

from __future__ import annotations

from typing import Any

from search.plan import Plan
from search.settings import SearchSettings

#: The engines by name; the default's plan (None here) is decided per def (search.plan.Plan.default_for).
PROGRAM_ENGINES: dict[str, Plan | None] = {
    "default": None,
    "astar": Plan(search=SearchSettings(algorithm="astar", depth=10, budget=5000)),
    "pruned pseudo-beam": Plan(
        search=SearchSettings(algorithm="pseudo-beam", depth=99, budget=5000, prune_commutes=True, prune_inlines=True)
    ),
}


def summary(rows: list[dict[str, Any]]) -> str:
    """A table: per program file and engine, the defs, total best cost, seconds, and the defs where the
    default is worse than that engine."""
    lines = [
        "| program | engine | defs | total best cost | seconds | the default is worse on |",
        "|---|---|---|---|---|---|",
    ]
    for program in dict.fromkeys(r["program"] for r in rows):
        by: dict[str, dict[str, dict[str, Any]]] = {}
        for r in rows:
            if r["program"] == program:
                by.setdefault(r["engine"], {})[r["def_"]] = r
        default = by.get("default", {})
        engines = [e for e in PROGRAM_ENGINES if e in by] + [e for e in by if e not in PROGRAM_ENGINES]
        for i, (engine, found) in enumerate((e, by[e]) for e in engines):
            worse = ""
            if engine != "default":
                names = [d for d, r in default.items() if d in found and r["best_cost"] > found[d]["best_cost"] + 1e-9]
                worse = f"{len(names)}" + (f" ({', '.join(names)})" if names else "")
            lines.append(
                f"| {program if i == 0 else ''} | {engine} | {len(found)} | "
                f"{sum(r['best_cost'] for r in found.values()):,.1f} | {sum(r['seconds'] for r in found.values()):.1f} | "
                f"{worse} |"
            )
    return "\n".join(lines) + "\n"
