"""Plots of the learning-curve experiments (see :mod:`experiments.curves`): one panel per test
budget, total test cost against epoch; agents as the median over seeds with a 20-80 percentile band,
baselines and reference costs as horizontal lines."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from experiments.common import read_rows
from experiments.curves import CurveExperiment, results_path, unique_rows


def plot(exp: CurveExperiment, rows: list[dict[str, Any]], out: Path) -> None:
    """One panel per budget: total test cost against epoch; agents as the median over seeds with a
    20-80 percentile band, baselines and references as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    budgets = sorted(
        {r["budget"] for r in rows if r["kind"] == "agent"} | {r["budget"] for r in rows if r["kind"] == "baseline"}
    )
    budgets = [b for b in budgets if b is not None]
    if not budgets:
        raise SystemExit(f"plot.py: error: no agent or baseline rows in the results of {exp.figure}")
    # constrained layout leaves room for the legend below the plots, where it hides no curve
    fig, axes = plt.subplots(
        1, len(budgets), figsize=(6.4 * len(budgets), 6.4), squeeze=False, sharey=True, layout="constrained"
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = {a.name: a.label for a in exp.agents} | {b.name: b.label for b in exp.baselines}
    references = {"initial": ("initial cost", "black", ":"), "best_known": ("best known", "green", "--")}
    references["ksc_baseline"] = ("ksc baseline simplifier", "purple", "-.")
    epochs_seen = [r["epoch"] for r in rows if r["kind"] == "agent"] or [1]
    span = (0.5, max(epochs_seen) + 0.5)
    for ax, budget in zip(axes[0], budgets):
        for i, name in enumerate(dict.fromkeys(r["agent"] for r in rows if r["kind"] == "agent")):
            mine = [r for r in rows if r["kind"] == "agent" and r["agent"] == name and r["budget"] == budget]
            by_epoch: dict[int, list[float]] = {}
            for r in mine:
                by_epoch.setdefault(r["epoch"], []).append(r["total"])
            if not by_epoch:
                continue
            seeds = len({r["seed"] for r in mine})
            # an epoch that not every seed has (a run still going, an extra recording of a stopped
            # one) would draw one seed's value as the median: such epochs are left out
            xs = [x for x in sorted(by_epoch) if len(by_epoch[x]) == seeds] or sorted(by_epoch)
            median = [float(np.median(by_epoch[x])) for x in xs]
            low = [float(np.percentile(by_epoch[x], 20)) for x in xs]
            high = [float(np.percentile(by_epoch[x], 80)) for x in xs]
            colour = colours[i % len(colours)]
            ax.plot(
                xs,
                median,
                marker="o",
                markersize=3,
                color=colour,
                label=f"{labels.get(name, name)} ({seeds} seed{'s' if seeds != 1 else ''})",
            )
            ax.fill_between(xs, low, high, color=colour, alpha=0.2)
        for j, name in enumerate(dict.fromkeys(r["agent"] for r in rows if r["kind"] == "baseline")):
            totals = [
                r["total"] for r in rows if r["kind"] == "baseline" and r["agent"] == name and r["budget"] == budget
            ]
            if totals:
                colour = colours[(j + 4) % len(colours)]
                ax.hlines(float(np.median(totals)), *span, color=colour, label=labels.get(name, name))
                if len(totals) > 1:
                    ax.axhspan(
                        float(np.percentile(totals, 20)), float(np.percentile(totals, 80)), color=colour, alpha=0.15
                    )
        for r in rows:
            if r["kind"] == "reference" and r["agent"] in references:
                text, colour, style = references[r["agent"]]
                ax.hlines(r["total"], *span, color=colour, linestyles=style, label=text)
        if exp.log_scale:  # costs that span orders of magnitude
            ax.set_yscale("log")
        ax.set_title(f"test budget {budget} evaluations")
        ax.set_xlabel("epoch")
        ax.set_xlim(*span)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("total best cost on the test set")
    handles, texts = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, texts, fontsize=8, loc="outside lower center", ncol=1 if len(budgets) == 1 else 2)
    title = textwrap.fill(exp.title, 80 * len(budgets))  # a long title would run off a narrow figure
    fig.suptitle(title + (f"\n({exp.reduced})" if exp.reduced else ""), fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_main(exp: CurveExperiment, argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=f"Plot {exp.figure} from its results file")
    ap.add_argument("--quick", action="store_true", help="plot the --quick results")
    ap.add_argument("--results", type=Path, help="results file (default: the figure's)")
    ap.add_argument("--out", type=Path, help="PNG to write (default: next to the results)")
    args = ap.parse_args(argv)
    if args.quick:
        exp = exp.quick()
    path = args.results or results_path(exp, args.quick)
    out = args.out or path.parent / f"{exp.figure}.png"
    plot(exp, unique_rows(read_rows(path, "plot.py")), out)
    print(out)
