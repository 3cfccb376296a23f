"""The Python e-graph against egglog (benchmarks/bench_egglog.py's rows): a table of docs/egraph.md."""

from __future__ import annotations

from experiments.figures import Figure
from experiments.tables import jsonl
from ksbench.results import RESULTS


def egglog_table() -> str:
    """benchmarks/bench_egglog.py's rows: per set and engine, e-nodes, seconds, their rate, the total
    tree cost, how many trees cost what the Python engine's does, and how many saturated."""
    path = RESULTS / "engines" / "egglog.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_egglog.py (needs pip install egglog)._\n"
    rows = jsonl(path)
    lines = [
        "| set | engine | expressions | e-nodes | seconds | e-nodes/s | total tree cost | equal | saturated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        python_cost = {r["index"]: r["cost"] for r in mine if r["engine"] == "python"}
        for engine in dict.fromkeys(r["engine"] for r in mine):
            rs = [r for r in mine if r["engine"] == engine]
            nodes, seconds = sum(r["enodes"] for r in rs), sum(r["seconds"] for r in rs)
            equal = sum(abs(r["cost"] - python_cost[r["index"]]) < 1e-9 for r in rs if r["index"] in python_cost)
            lines.append(
                f"| {set_name} | {engine} | {len(rs)} | {nodes:,} | {seconds:.2f} | {nodes / seconds:,.0f} | "
                f"{sum(r['cost'] for r in rs):.1f} | {equal}/{len(rs)} | {sum(r['saturated'] for r in rs)}/{len(rs)} |"
            )
    return "\n".join(lines) + "\n"


FIGURE = Figure(
    "egglog_engine",
    "the Python e-graph against egglog (benchmarks/bench_egglog.py)",
    {"egglog": egglog_table},
)
