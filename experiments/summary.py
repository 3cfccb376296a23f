"""The tables of experiments/README.md, made from the committed results files.

Run:  python -m experiments.summary           print every table
      python -m experiments.summary --write   rewrite the tables in experiments/README.md

Each table sits in the README between ``<!-- table:FIGURE -->`` and ``<!-- /table -->``; --write
replaces only what is between those markers.  tests/test_experiments_readme.py checks that the
README's tables are what this module makes of the results, so the numbers there are measured ones.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
from collections.abc import Callable
from typing import Any

from experiments.common import RESULTS, ROOT
from experiments.curves import unique_rows

README = ROOT / "experiments" / "README.md"
CURVES = ("fig5_generalisation", "fig5_bootstrap", "fig6_blas", "fig6_cnn", "fig9_search")
MARKER = re.compile(r"(<!-- table:(?P<figure>[\w]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def _rows(figure: str) -> list[dict[str, Any]]:
    path = RESULTS / figure / "results.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _g(x: float) -> str:
    return f"{x:.6g}"


def curve_table(figure: str) -> str:
    """Per agent and budget: the total test cost at the last epoch (median over seeds, range), the
    number of test expressions at their best-known cost, and the seeds; then baselines and references."""
    rows = unique_rows(_rows(figure))
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


def walltime_table() -> str:
    """Per program and size: min seconds per call of each variant, and baseline / optimised."""
    rows = _rows("fig7_walltime")
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


TABLES: dict[str, Callable[[], str]] = {figure: functools.partial(curve_table, figure) for figure in CURVES}
TABLES["fig7_walltime"] = walltime_table


def rewrite(text: str) -> str:
    """``text`` with every marked table replaced by the current one."""

    def table(m: re.Match[str]) -> str:
        make = TABLES.get(m["figure"])
        if make is None:
            raise SystemExit(f"{README}: error: no table named {m['figure']} (known: {', '.join(TABLES)})")
        return m.group(1) + make() + m.group(4)

    return MARKER.sub(table, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables in experiments/README.md")
    args = ap.parse_args()
    if args.write:
        text = README.read_text()
        new = rewrite(text)
        if new != text:
            README.write_text(new)
        print(f"{README}: tables up to date")
        return
    for figure, make in TABLES.items():
        print(f"## {figure}\n\n{make()}")


if __name__ == "__main__":
    main()
