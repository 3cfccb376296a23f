"""Figure 7 from the results of run.py: time per call against size, and the optimised variant's speed-up.

Run:  python experiments/fig7_walltime/plot.py [--quick] [--results FILE] [--out PNG]

Reads only the results file (default experiments/results/fig7_walltime/results.jsonl; --quick: the
quick run's, runs/quick/fig7_walltime/results.jsonl) and writes a PNG next to it (fig7_walltime.png)
unless --out says where: one panel per program (GEMM, rev$conv1d), the minimum time per call of
every variant against the size on log axes, and under each a small axis with the speed-up of the
optimised variant over the baseline (baseline time / optimised time, min times, > 1: optimised is
faster) at every size.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt
from matplotlib import ticker
from matplotlib.axes import Axes

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results" / "fig7_walltime" / "results.jsonl"
QUICK_RESULTS = ROOT / "runs" / "quick" / "fig7_walltime" / "results.jsonl"
PNG_NAME = "fig7_walltime.png"

PROGRAMS = {
    "gemm": ("GEMM (alpha*A*B + beta*C)", "n (n x n matrices)"),
    "rev$conv1d": ("rev$conv1d (gradient of a 1-d convolution)", "n (image width; k = l = 8, kernel width 5)"),
}
#: colour, marker, line style per variant; the ones search compares come first and solid.
STYLE = {
    "original": ("tab:gray", "s", "-"),
    "baseline": ("tab:blue", "o", "-"),
    "optimised": ("tab:red", "^", "-"),
    "gradient_rules plain": ("tab:orange", "v", "-"),
    "gradient_rules model": ("tab:purple", "P", "-"),
    "hand i-k-j": ("tab:green", "D", "--"),
    "numpy": ("black", "x", ":"),
}
REQUIRED = ("program", "x", "variant", "min_s")

Row = dict[str, Any]


class PlotError(Exception):
    """Something wrong with the results file: one line for the user."""


def load_rows(path: Path) -> list[Row]:
    """The result rows; PlotError when the file is missing, empty or malformed."""
    if not path.is_file():
        raise PlotError(f"no results file {path} (run experiments/fig7_walltime/run.py first)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise PlotError(f"cannot read {path}: {err}") from None
    rows = []
    for i, line in enumerate(lines, 1):
        if line.strip():
            rows.append(parse_row(line, f"{path}:{i}"))
    if not rows:
        raise PlotError(f"{path} holds no results")
    return rows


def parse_row(line: str, where: str) -> Row:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise PlotError(f"{where}: not JSON ({err.msg})") from None
    if not isinstance(row, dict) or any(k not in row for k in REQUIRED):
        raise PlotError(f"{where}: a result row needs {', '.join(REQUIRED)}")
    if not isinstance(row["x"], int | float) or not isinstance(row["min_s"], int | float) or row["min_s"] <= 0:
        raise PlotError(f"{where}: x and min_s must be numbers, min_s positive")
    return row


def series(rows: Sequence[Row], program: str) -> dict[str, list[tuple[float, float]]]:
    """(size, min seconds) per variant, sorted by size, variants in STYLE's order then any others."""
    out: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["program"] == program:
            out.setdefault(r["variant"], []).append((float(r["x"]), float(r["min_s"])))
    order = [v for v in STYLE if v in out] + sorted(v for v in out if v not in STYLE)
    return {v: sorted(out[v]) for v in order}


def speedups(lines: dict[str, list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """baseline / optimised at every size that has both."""
    base = dict(lines.get("baseline", []))
    return [(x, base[x] / t) for x, t in lines.get("optimised", []) if x in base]


def draw_times(ax: Axes, lines: dict[str, list[tuple[float, float]]], title: str) -> None:
    for variant, points in lines.items():
        colour, marker, style = STYLE.get(variant, ("tab:purple", ".", "-."))
        xs, ys = zip(*points)
        ax.plot(xs, ys, color=colour, marker=marker, linestyle=style, label=variant, markersize=6, alpha=0.85)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_ylabel("seconds per call (min)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def draw_ratio(ax: Axes, ratio: list[tuple[float, float]], xlabel: str) -> None:
    ax.axhline(1.0, color="black", linewidth=0.8)
    if ratio:
        xs, ys = zip(*ratio)
        ax.plot(xs, ys, color="tab:red", marker="^", linestyle="-")
        for x, y in ratio:  # the label away from the 1.0 line
            below = y < 1.0
            ax.annotate(
                f"{y:.2f}x",
                (x, y),
                textcoords="offset points",
                xytext=(0, -12 if below else 6),
                ha="center",
                fontsize=8,
            )
        # ratios on a log axis, symmetric about 1.0: 2x faster and 2x slower are the same distance
        reach = max(1.05, *(max(y, 1.0 / y) for y in ys)) ** 1.3
        ax.set_yscale("log")
        ax.set_ylim(1.0 / reach, reach)
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_ylabel("optimised speed-up\n(baseline / optimised)", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.grid(True, which="major", alpha=0.3)


def plot(rows: Sequence[Row], out: Path) -> None:
    programs = [p for p in PROGRAMS if any(r["program"] == p for r in rows)]
    programs += sorted({r["program"] for r in rows} - set(programs))
    fig, axes = plt.subplots(
        2, len(programs), figsize=(6 * len(programs), 6.5), squeeze=False, height_ratios=[3, 1], sharex="col"
    )
    for col, program in enumerate(programs):
        title, xlabel = PROGRAMS.get(program, (program, "size"))
        lines = series(rows, program)
        draw_times(axes[0][col], lines, title)
        draw_ratio(axes[1][col], speedups(lines), xlabel)
        axes[1][col].set_xticks(sorted({x for pts in lines.values() for x, _ in pts}))
        axes[1][col].get_xaxis().set_major_formatter(ticker.ScalarFormatter())
        axes[1][col].minorticks_off()
    fig.suptitle(subtitle(rows), fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def subtitle(rows: Sequence[Row]) -> str:
    """Where and with what the times were measured (from the rows themselves)."""

    cpus = ", ".join(sorted({str(r.get("cpu", "?")) for r in rows}))
    revs = ", ".join(sorted({short_revision(str(r.get("revision", "?"))) for r in rows}))
    return f"Knossos Figure 7: wall-clock time per call (min over calls); {cpus}; revision {revs}"


def short_revision(rev: str) -> str:
    """The commit's first 10 digits, keeping "-dirty"."""
    return rev[:10] + ("-dirty" if rev.endswith("-dirty") else "")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="plot.py", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the quick run's results (runs/quick/fig7_walltime/)")
    ap.add_argument("--results", type=Path, help=f"results file (default {RESULTS.relative_to(ROOT)})")
    ap.add_argument("--out", type=Path, help=f"PNG to write (default {PNG_NAME} next to the results)")
    args = ap.parse_args(argv)
    results: Path = args.results or (QUICK_RESULTS if args.quick else RESULTS)
    out: Path = args.out or results.with_name(PNG_NAME)
    try:
        plot(load_rows(results), out)
    except PlotError as err:
        print(f"plot.py: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"plot.py: error: cannot write {out}: {err.strerror}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
