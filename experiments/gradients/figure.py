"""The gradient programs (benchmarks/bench_gradients.py's rows and the optimised rev$conv1d of
experiments/results/gradients/): the tables of docs/programs.md and the README."""

from __future__ import annotations

import json
from typing import Any

from experiments.figures import Figure
from experiments.tables import jsonl
from ksbench.results import RESULTS


def gradients_table(file: str = "bench.jsonl") -> str:
    """benchmarks/bench_gradients.py's rows: per size, each variant's search, costs, time, speed-up over
    the program as written and time over numpy's; then Spearman's rho of each cost with the time."""
    from cpp_backend.bench import format_seconds  # not at the top: it loads numpy (see experiments.figures)
    from knossos.rank import spearman

    path = RESULTS / "gradients" / file
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_gradients.py._\n"
    rows = jsonl(path)
    lines = [
        "| size | variant | found by | alloc cost | reference cost | time per call | vs as written | / numpy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rho_lines = []
    for size in dict.fromkeys(r["size_label"] for r in rows):
        at = [r for r in rows if r["size_label"] == size]
        timed = {r["variant"]: r["min_s"] for r in at if not r.get("skipped") and r.get("min_s")}
        original, numpy = timed.get("original"), timed.get("numpy")
        for r in at:
            if r.get("kind") == "path":
                continue  # ranked below with the others, not listed
            t = timed.get(r["variant"])
            found = _found_by(r)
            cost = "-" if r.get("alloc_cost") is None else f"{r['alloc_cost']:.4g}"
            ref = "-" if r.get("cost") is None else f"{r['cost']:.4g}"
            speed = f"{original / t:.0f}x" if original and t else "-"
            over = f"{t / numpy:.2f}" if numpy and t else "-"
            lines.append(
                f"| {size} | {r['variant']} | {found} | {cost} | {ref} | {'skipped' if t is None else format_seconds(t)} | "
                f"{speed} | {over} |"
            )
        programs = [r for r in at if r["variant"] != "numpy" and r["variant"] in timed]
        rhos = []
        for key, name in (("cost", "reference"), ("alloc_cost", "alloc")):
            pairs = [(r[key], timed[r["variant"]]) for r in programs if r.get(key) is not None]
            if len(pairs) > 1:
                rhos.append(f"{name} {spearman([p[0] for p in pairs], [p[1] for p in pairs]):.3f}")
        rho_lines.append(f"{size}: {', '.join(rhos)} ({len(programs)} programs)")
    return (
        "\n".join(lines)
        + "\n\nSpearman's rho of cost and time over these and the points along the best path: "
        + "; ".join(rho_lines)
        + ".\n"
    )


def gradients_brief_table() -> str:
    """For the README: rev$conv1d's seconds per call at k = l = kn = n = N, as written, the best plain
    search's program, the gradients model's and numpy's (benchmarks/bench_gradients.py)."""
    from cpp_backend.bench import format_seconds  # not at the top: it loads numpy (see experiments.figures)

    path = RESULTS / "gradients" / "bench.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_gradients.py._\n"
    rows = jsonl(path)
    lines = ["| N | as written | best plain search | `--model gradients` | numpy |", "|---|---|---|---|---|"]
    for n in dict.fromkeys(r["n"] for r in rows if r.get("n")):
        at = {r["variant"]: r for r in rows if r.get("n") == n and not r.get("skipped")}
        plain = [r for r in at.values() if r.get("kind") == "search" and r["search"].get("model") in (None, "none")]
        best = min(plain, key=lambda r: r["min_s"], default=None)
        cells = [at.get("original"), best, at.get("model gradients"), at.get("numpy")]
        lines.append(f"| {n} | " + " | ".join("-" if c is None else format_seconds(c["min_s"]) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def gradients_program_table() -> str:
    """The optimised rev$conv1d of experiments/results/gradients/ (optimize.py's -o and --json files):
    its rewrite sequence, runs of one rule folded, and the def."""
    from cpp_backend.bench import format_seconds  # not at the top: it loads numpy (see experiments.figures)

    folder = RESULTS / "gradients"
    report, program = folder / "rev_conv1d.json", folder / "rev_conv1d.ks"
    if not (report.is_file() and program.is_file()):
        return "_No results yet: run the optimize.py command above._\n"
    found = json.loads(report.read_text())
    runs: list[list[Any]] = []
    for step in found["steps"]:
        if runs and runs[-1][0] == step["rule"]:
            runs[-1][1] += 1
        else:
            runs.append([step["rule"], 1])
    sequence = ", ".join(rule if n == 1 else f"{rule} x{n}" for rule, n in runs)
    text = program.read_text()
    body = text[text.index("(def rev$conv1d") :].rstrip()
    bench = ["| n | as written | ksc-style simplifier | optimised | as written / optimised | verified, agrees |"]
    bench.append("|---|---|---|---|---|---|")
    for n in dict.fromkeys(r["size"]["n"] for r in found.get("bench", [])):
        at = {r["variant"]: r for r in found["bench"] if r["size"]["n"] == n}
        o, b, opt = at["original"], at["baseline"], at["optimised"]
        checks = all(r["verified"] and r["agrees"] for r in at.values())
        bench.append(
            f"| {n} | {format_seconds(o['min_s'])} | {format_seconds(b['min_s'])} | {format_seconds(opt['min_s'])} | "
            f"{o['min_s'] / opt['min_s']:.0f}x | {'yes' if checks else 'NO'} |"
        )
    return (
        "\n".join(bench)
        + "\n\n"
        + (
            f"{len(found['steps'])} rewrites, cost ({found['cost_model']} model) {found['start_cost']:.6g} to "
            f"{found['best_cost']:.6g}, {found['evaluations']} evaluations, {found['seconds']:.1f} s: {sequence}.\n\n"
            f"```lisp\n{body}\n```\n"
        )
    )


def _found_by(row: dict[str, Any]) -> str:
    search = row.get("search")
    if not isinstance(search, dict):
        names = {"original": "as written", "baseline": "ksc-style simplifier", "numpy": "numpy"}
        return names.get(row["variant"], str(row.get("kind", "")))
    model = "" if search.get("model") in (None, "none") else f"`--model {search['model']}`, "
    cost = search.get("cost", "reference")
    return (
        f"{model}{search['search']}, {cost} cost, {search['search_seconds']:.0f} s, {search['evaluations']} evaluations"
    )


FIGURE = Figure(
    "gradients",
    "compiled gradients against numpy (benchmarks/bench_gradients.py)",
    {
        "gradients_bench": gradients_table,
        "gradients_program": gradients_program_table,
        "gradients_brief": gradients_brief_table,
    },
)
