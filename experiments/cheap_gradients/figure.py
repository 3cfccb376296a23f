"""The cheap-gradient principle, measured (benchmarks/bench_cheap_gradients.py's rows, issue 45 item 1):
the table of docs/autodiff.md."""

from __future__ import annotations

import math
from typing import Any

from experiments.figures import Figure
from experiments.tables import jsonl
from ksbench.results import RESULTS

#: The issue's target: every generated rev$ within this many times its def's time, compiled.
TARGET = 5.0
#: The rows of the generator as it is now (``before``: an old generator's, kept for comparison).
LABEL = "current"
WORST = 5

NO_RESULTS = "_No results yet: run benchmarks/bench_cheap_gradients.py._\n"


def _rows() -> list[dict[str, Any]]:
    path = RESULTS / "cheap_gradients" / "bench.jsonl"
    return [r for r in jsonl(path) if r.get("generator") == LABEL] if path.is_file() else []


def cheap_gradients_table() -> str:
    """How many rev$ are within the target, the geometric mean of rev$ / def, and the slowest."""
    rows = _rows()
    timed = [r for r in rows if "ratio" in r]
    if not timed:
        return NO_RESULTS
    failed = [r for r in rows if "ratio" not in r]
    ratios = [r["ratio"] for r in timed]
    within = sum(x <= TARGET for x in ratios)
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    unverified = sum(r.get("verified") is not True for r in timed)
    revisions = sorted({str(r["revision"])[:7] for r in rows})
    worst = sorted(timed, key=lambda r: -r["ratio"])[:WORST]
    lines = [
        f"| rev$ within {TARGET:g}x of its def | geometric mean of rev$ / def | not measured (error) | not checked against the interpreter | revision |",
        "|---|---|---|---|---|",
        f"| {within} of {len(timed)} | {geomean:.2f} | {len(failed)} | {unverified} | {', '.join(revisions)} |",
        "",
        "| slowest rev$ (file:def) | size | def | rev$ | rev$ / def |",
        "|---|---|---|---|---|",
    ]
    for r in worst:
        size = ", ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in r["size"].items())
        lines.append(
            f"| {r['file']}:{r['def']} | {size} | {r['f_s'] * 1e6:.3g} us | {r['rev_s'] * 1e6:.3g} us | {r['ratio']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


FIGURE = Figure(
    "cheap_gradients",
    "Each def's generated rev$ against the def, compiled (benchmarks/bench_cheap_gradients.py)",
    {"cheap_gradients": cheap_gradients_table},
)
