"""The engines side by side (benchmarks/bench_engines.py's rows, and blas_test searched by each engine):
the tables of docs/egraph.md.  No run here: the benchmarks run them."""

from __future__ import annotations

from typing import Any

from experiments.figures import Figure
from experiments.tables import jsonl
from ksbench.results import RESULTS, ResultsFile


def engines_table() -> str:
    """benchmarks/bench_engines.py's searches: per set and engine, the expressions at the best cost known
    (the set's, lowered by any engine), the total best cost, the seconds and their ratio to the e-graph's."""
    path = RESULTS / "engines" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_engines.py._\n"
    from ksbench.engines import BY_NAME, summarise

    rows = summarise(list(ResultsFile(path, ("set", "index", "engine"))))
    lines = [
        "| set | engine | at best known | total best cost | seconds | seconds / e-graph's |",
        "|---|---|---|---|---|---|",
    ]
    for set_name in dict.fromkeys(r["set"] for r in rows):
        mine = [r for r in rows if r["set"] == set_name]
        egraph = next((r["seconds"] for r in mine if r["engine"] == "egraph"), None)
        for i, r in enumerate(mine):
            engine = BY_NAME[r["engine"]].label if r["engine"] in BY_NAME else r["engine"]
            ratio = f"{r['seconds'] / egraph:.2f}" if egraph else ""
            first = f"{set_name} ({r['expressions']})" if i == 0 else ""
            lines.append(
                f"| {first} | {engine} | {r['hits']}/{r['expressions']} | {r['total_cost']:.1f} | "
                f"{r['seconds']:.1f} | {ratio} |"
            )
    return "\n".join(lines) + "\n"


def blas_engines_table() -> str:
    """blas_test with no model, one engine a row (``experiments/results/engines/blas_test.jsonl``): defs
    at the best-known cost, total body cost, seconds, and defs where the engine is worse than plain A*
    (depth 10, 5000) and than pruned pseudo-beam (depth 99, 5000, both prunings)."""
    path = RESULTS / "engines" / "blas_test.jsonl"
    if not path.is_file():
        return "_No results yet: see docs/egraph.md, The default._\n"
    from experiments.blas_test.run import reference_costs

    known = reference_costs()
    runs: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in jsonl(path):
        key = (r["search"], r["budget"], r["depth"], r.get("prune_commutes", False), r.get("prune_inlines", False))
        runs.setdefault(key, {})[r["def_"]] = r
    astar = runs.get(("astar", 5000, 10, False, False), {})
    pruned = runs.get(("pseudo-beam", 5000, 99, True, True), {})
    lines = [
        "| search | evaluations | depth | prunings | at best known | total body cost | seconds | worse than A\\* | worse than pruned pseudo-beam |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (search, budget, depth, commutes, inlines), rows in runs.items():
        hits = sum(r["best_body_cost"] <= known[d].best + 1e-9 for d, r in rows.items() if d in known)

        def worse(than: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]] = rows) -> str:
            if not than:
                return ""
            return str(
                sum(r["best_body_cost"] > than[d]["best_body_cost"] + 1e-9 for d, r in rows.items() if d in than)
            )

        prunings = "both" if commutes and inlines else "commutes" if commutes else "inlines" if inlines else "none"
        lines.append(
            f"| {search} | {budget} | {depth} | {prunings} | {hits}/{len(rows)} | "
            f"{sum(r['best_body_cost'] for r in rows.values()):,.1f} | {sum(r['seconds'] for r in rows.values()):.1f} | "
            f"{worse(astar)} | {worse(pruned)} |"
        )
    return "\n".join(lines) + "\n"


FIGURE = Figure(
    "engines",
    "every engine side by side (benchmarks/bench_engines.py)",
    {"engines": engines_table, "blas_engines": blas_engines_table},
)
