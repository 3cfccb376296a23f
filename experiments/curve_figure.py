"""A learning-curve figure (:class:`experiments.curves.CurveExperiment`) in the registry: its run,
its plot and its table."""

from __future__ import annotations

import functools
import statistics
from typing import Any

from experiments.curve_plot import plot_main
from experiments.curves import CurveExperiment, run_main, unique_rows
from experiments.figures import Figure
from experiments.tables import results_rows


def curve_figure(exp: CurveExperiment) -> Figure:
    """``exp``'s Figure: run_main and plot_main of it, and :func:`curve_table` of its results."""
    table = {exp.figure: functools.partial(curve_table, exp.figure)}
    return Figure(exp.figure, exp.title, table, functools.partial(run_main, exp), functools.partial(plot_main, exp))


def _g(x: float) -> str:
    return f"{x:.6g}"


def curve_table(figure: str) -> str:
    """Per agent and budget: the total test cost at the last epoch (median over seeds, range), the
    number of test expressions at their best-known cost, and the seeds; then baselines and references."""
    rows = unique_rows(results_rows(figure))
    if not rows:
        return "_No results yet: run the experiment (see above)._\n"
    known = next((r["costs"] for r in rows if r["kind"] == "reference" and r["agent"] == "best_known"), None)

    def reached(costs: list[float]) -> int:
        return sum(c <= k + 1e-9 for c, k in zip(costs, known or [], strict=False))

    lines = [
        "| what | budget | epoch | total test cost (median [min, max] over seeds) | at best-known (median) | seeds |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, int | None], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["agent"], r["budget"]), []).append(r)
    order = {"agent": 0, "baseline": 1, "reference": 2}
    for (kind, agent, budget), members in sorted(
        groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][1], kv[0][2] or 0)
    ):
        if kind == "agent":  # the last epoch each seed reached
            last: dict[int, dict[str, Any]] = {}
            for r in members:
                if r["seed"] not in last or r["epoch"] > last[r["seed"]]["epoch"]:
                    last[r["seed"]] = r
            members = list(last.values())
            epochs = sorted({r["epoch"] for r in members})
            epoch = "-".join(map(str, (epochs[0], epochs[-1]))) if len(epochs) > 1 else str(epochs[0])
        else:
            epoch = ""
        totals = [r["total"] for r in members]
        spread = f" [{_g(min(totals))}, {_g(max(totals))}]" if len(totals) > 1 else ""
        at_known = _g(statistics.median(reached(r["costs"]) for r in members)) if known else ""
        seeds = str(len(members)) if kind != "reference" else ""
        lines.append(
            f"| {kind} {agent} | {budget if budget is not None else ''} | {epoch} | "
            f"{_g(statistics.median(totals))}{spread} | {at_known} | {seeds} |"
        )
    return "\n".join(lines) + "\n"
