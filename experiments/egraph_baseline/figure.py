"""egraph_baseline in the registry: `python -m experiments egraph_baseline run` (its run.py) and the
table of its searches."""

from __future__ import annotations

from experiments.figures import Figure
from ksbench.results import RESULTS, ResultsFile


def run(argv: list[str]) -> None:
    from experiments.egraph_baseline.run import main

    main(argv)


def egraph_table() -> str:
    """experiments/egraph_baseline/run.py's searches: per public set and search, the total best cost,
    the expressions at (or below) the reference's best-known cost, the seconds of search, and for the
    e-graph how many saturated."""
    path = RESULTS / "egraph_baseline" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run experiments/egraph_baseline/run.py._\n"
    rows = list(ResultsFile(path, ("set", "index", "search", "model", "budget", "depth")))
    lines = [
        "| set | search | total best cost | at best known | below it | seconds | saturated |",
        "|---|---|---|---|---|---|---|",
    ]
    runs = list(dict.fromkeys((r["search"], r["model"], r["budget"], r["depth"]) for r in rows))
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        first = [r for r in mine if (r["search"], r["model"], r["budget"], r["depth"]) == runs[0]]
        known = sum(r["best_known"] for r in first)
        start = sum(r["start_cost"] for r in first)
        lines.append(f"| {set_name} ({len(first)}) | start / best known | {start:.1f} / {known:.1f} | | | | |")
        for search, model, budget, depth in runs:
            done = [
                r for r in mine if (r["search"], r["model"], r["budget"], r["depth"]) == (search, model, budget, depth)
            ]
            if not done:
                continue
            at = sum(r["best_cost"] <= r["best_known"] + 1e-9 for r in done)
            below = sum(r["best_cost"] < r["best_known"] - 1e-9 for r in done)
            if search == "egraph":
                what = f"egraph, {budget:,} e-nodes, {depth} iterations"
                saturated = f"{sum(r['complete'] for r in done)}/{len(done)}"
            else:
                what = f"{search} `--model {model}`, {budget} evaluations, depth {depth}"
                saturated = ""
            lines.append(
                f"| | {what} | {sum(r['best_cost'] for r in done):.1f} | {at}/{len(done)} | {below} | "
                f"{sum(r['seconds'] for r in done):.1f} | {saturated} |"
            )
    return "\n".join(lines) + "\n"


FIGURE = Figure(
    "egraph_baseline", "the e-graph against A* on the public arithmetic sets", {"egraph_baseline": egraph_table}, run
)
