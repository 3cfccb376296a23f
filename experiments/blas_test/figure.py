"""blas_test in the registry: `python -m experiments blas_test run` (its run.py) and the table of its
searches."""

from __future__ import annotations

from typing import Any

from experiments.figures import Figure
from experiments.tables import search_name
from ksbench.results import RESULTS, ResultsFile


def run(argv: list[str]) -> None:
    from experiments.blas_test.run import main

    main(argv)


def blas_test_table() -> str:
    """experiments/blas_test/run.py's searches: per def of blas_test, the reference's start and best
    known whole-def costs, and each run's (value function, search, budget, depth) best cost and seconds."""
    from experiments.blas_test.run import DEFAULTS, KEY, reference_costs

    path = RESULTS / "blas_test" / "searches.jsonl"
    if not path.is_file():
        return "_No results yet: run experiments/blas_test/run.py._\n"
    rows = list(ResultsFile(path, KEY, DEFAULTS))
    known = reference_costs()

    def run_of(r: dict[str, Any]) -> BlasTestRun:
        return (r["model"], r["search"], r["budget"], r["depth"], r["prune_commutes"], r["prune_inlines"])

    runs = list(dict.fromkeys(run_of(r) for r in rows))
    by_run = {(*run_of(r), r["def_"]): r for r in rows}

    def named(run: BlasTestRun) -> str:
        m, s, b, d, commutes, inlines = run
        plain = ("plain" if m == "none" else f"`--model {m}`") + f" {search_name(s)} @ {b}, depth {d}"
        pruned = [what for what, on in (("commutations", commutes), ("idle inlines", inlines)) if on]
        return plain + (f", {' and '.join(pruned)} pruned" if pruned else "")

    def hit(r: dict[str, Any], k: Any) -> bool:
        return bool(r["best_body_cost"] <= k.best + 1e-9)

    shown = [run for run in BLAS_TEST_COLUMNS if run in runs] or runs
    lines = ["| def | start | best known (by) | " + " | ".join(f"{named(run)} | s" for run in shown) + " |"]
    lines.append("|---|---|---|" + "---|---|" * len(shown))
    for name, k in known.items():
        cells = []
        for run in shown:
            r = by_run.get((*run, name))
            bold = "**" if r is not None and hit(r, k) else ""
            cells.append(" | " if r is None else f"{bold}{r['best_cost']:,.1f}{bold} | {r['seconds']:.1f}")
        lines.append(f"| {name} | {k.start:,.1f} | {k.best:,.1f} ({k.by}) | " + " | ".join(cells) + " |")
    rlo = sum(k.by == "rlo" for k in known.values())
    lines += ["", "Every run (the table above shows some of them):", ""]
    lines += ["| run | best known reached (of 49) | of the 30 the reference's agent found | seconds of search |"]
    lines += ["|---|---|---|---|"]
    for run in runs:
        mine = [(r, known[r["def_"]]) for r in rows if run_of(r) == run]
        reached = [k for r, k in mine if hit(r, k)]
        seconds = sum(r["seconds"] for r, _ in mine)
        lines.append(
            f"| {named(run)} | {len(reached)} | {sum(k.by == 'rlo' for k in reached)} of {rlo} | {seconds:.1f} |"
        )
    return "\n".join(lines) + "\n"


#: A blas_test run: value function, search, budget, depth, commutations pruned, idle inlines pruned.
BlasTestRun = tuple[str, str, int, int, bool, bool]

#: The runs blas_test's per-def table shows, when measured.
BLAS_TEST_COLUMNS: list[BlasTestRun] = [
    ("none", "astar", 5000, 30, False, False),
    ("blas_astar", "astar", 5000, 30, False, False),
    ("none", "beam", 5000, 60, False, False),
    ("blas_beam", "beam", 5000, 60, False, False),
    ("none", "pseudo-beam", 5000, 60, False, False),
    ("none", "pseudo-beam", 5000, 60, True, False),
    ("none", "pseudo-beam", 5000, 99, True, True),
    ("blas", "pseudo-beam", 5000, 99, True, True),
]


FIGURE = Figure(
    "blas_test",
    "every def of blas_test.kso searched by each value function and search",
    {"blas_test": blas_test_table},
    run,
)
