"""fig7_walltime in the registry: `python -m experiments fig7_walltime run|plot` (its run.py and
plot.py, imported only when asked for: run.py pins numpy to one thread before numpy loads), and its table."""

from __future__ import annotations

from experiments.figures import Figure
from experiments.tables import results_rows


def run(argv: list[str]) -> int:
    from experiments.fig7_walltime.run import main

    return main(argv)


def plot(argv: list[str]) -> int:
    from experiments.fig7_walltime.plot import main

    return main(argv)


def walltime_table() -> str:
    """Per program and size: min seconds per call of each variant, and baseline / optimised."""
    rows = results_rows("fig7_walltime")
    if not rows:
        return "_No results yet: run the experiment (see above)._\n"
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    times: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items())
        times.setdefault((r["program"], size), {})[r["variant"]] = r["min_s"]
    lines = [
        "| program | size | " + " | ".join(variants) + " | baseline / optimised |",  # min seconds per call
        "|---|---|" + "---|" * len(variants) + "---|",
    ]
    for (program, size), t in times.items():
        cells = [f"{t[v]:.3g} s" if v in t else "" for v in variants]
        ratio = f"{t['baseline'] / t['optimised']:.2f}x" if "baseline" in t and "optimised" in t else ""
        lines.append(f"| {program} | {size} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


FIGURE = Figure(
    "fig7_walltime", "wall-clock time of gemm and rev$conv1d across sizes", {"fig7_walltime": walltime_table}, run, plot
)
