"""Search every def of blas_test.kso and compare with the reference's best-known costs.

Run:  python experiments/blas_test/run.py [--models none,blas] [--search astar] [--budget 5000] [--depth 30] [--quick]

A search (A* unless ``--search``) with each value function (``none``: the zero value function;
shipped model names or checkpoints), depth 30, ``ml_rules_no_bind``, on each of the 49 defs of
``ksdata/programs/blas_test.kso``.  Rows (def, model, search, start and best cost of the
def, seconds) are appended to
``experiments/results/blas_test/searches.jsonl`` as each search ends, so an interrupted run carries
on where it stopped; ``python -m experiments.summary --write`` turns them into the README's table
(per def: start, best known and who found it, each model's cost and seconds; how many reach the best
known, and how many of those the reference's agent found, ``by=rlo``).  ``--quick``: the first 3
defs at 50 evaluations, into runs/quick/.

Costs are whole-def costs, as the reference lists them (the body's cost plus a constant for the
parameters).  A def *reaches* the best known cost when its optimised body costs no more than it: the
reference passes a def's parameters as a tuple unpacked by one ``let`` per parameter (0.1 each),
which its rules may inline and delete; our defs have no such lets to remove, so its best-known
costs can be up to that constant below any cost our whole def can have.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from app.models import load_value_function
from knossos.errors import KsError
from knossos.parser import load_program
from knossos.perf import fewer_gc_pauses
from ksbench.results import QUICK, RESULTS, ResultsFile
from ksdata.loader import DATA
from search.plan import Plan
from search.plan import run as run_plan
from search.registry import SEARCHES, get_search

PROGRAM = DATA / "programs" / "blas_test.kso"
BEST_KNOWN = DATA / "best_known_costs_programs.txt"
SECTION = "== ksc/blas/blas_test.kso ml_rules_no_bind"
RULES = "ml_rules_no_bind"
#: What identifies a row: the def and the run (value function, search, budget, depth).
KEY = ("def_", "model", "search", "budget", "depth", "prune_commutes", "prune_inlines")
#: What rows written before a field existed had.
DEFAULTS = {"prune_commutes": False, "prune_inlines": False}
LINE = re.compile(r"\s*(?P<name>\S+)\s+start=\s*(?P<start>\S+)\s+best=\s*(?P<best>\S+)\s+by=(?P<by>\S+)")


@dataclass(frozen=True)
class Known:
    start: float
    best: float
    by: str


def reference_costs() -> dict[str, Known]:
    """The reference's start and best-known def costs for blas_test, and who found each (rlo, expert)."""
    out: dict[str, Known] = {}
    inside = False
    for line in BEST_KNOWN.read_text().splitlines():
        if line.startswith("=="):
            inside = line.startswith(SECTION)
            continue
        found = LINE.match(line)
        if inside and found:
            out[found["name"]] = Known(float(found["start"]), float(found["best"]), found["by"])
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--models", default="none", help="value functions, comma-separated (none, shipped names, checkpoints)"
    )
    ap.add_argument("--search", default="astar", choices=[s for s in SEARCHES if s != "egraph"])
    ap.add_argument("--budget", type=int, default=5000)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument(
        "--prune-commutes", action="store_true", help="drop commutations that enable nothing (search/symmetry.py)"
    )
    ap.add_argument(
        "--prune-inlines", action="store_true", help="drop uphill inlines that open nothing (search/idle_inlines.py)"
    )
    ap.add_argument("--quick", action="store_true", help="3 defs at 50 evaluations, into runs/quick/")
    ap.add_argument("--out", type=Path, help="the results file (default experiments/results/blas_test/searches.jsonl)")
    args = ap.parse_args(argv)
    program = load_program(PROGRAM)
    defs = [d for d in program.targets]
    folder = RESULTS / "blas_test"
    if args.quick:
        defs, args.budget, folder = defs[:3], 50, QUICK / "blas_test"
    results = ResultsFile(args.out or folder / "searches.jsonl", KEY, DEFAULTS)
    get_search(args.search)  # an unknown search is refused before any model is loaded
    with fewer_gc_pauses():
        for model in [m.strip() for m in args.models.split(",") if m.strip()]:
            try:
                value = load_value_function(model)
            except KsError as err:
                raise SystemExit(str(err)) from None
            run = {
                "model": model,
                "search": args.search,
                "budget": args.budget,
                "depth": args.depth,
                "prune_commutes": args.prune_commutes,
                "prune_inlines": args.prune_inlines,
            }
            todo = [d for d in defs if not results.has(def_=d.name, **run)]
            for d in tqdm(todo, desc=f"blas_test {model}", unit="def", file=sys.stderr):
                if hasattr(value, "clear"):
                    value.clear()
                plan = Plan(rules=RULES).overridden(
                    algorithm=args.search,
                    depth=args.depth,
                    budget=args.budget,
                    prune_commutes=args.prune_commutes,
                    prune_inlines=args.prune_inlines,
                )
                r = run_plan(d.body, plan, value)
                offset = program.def_cost(d.name) - d.body.cost  # best-known costs are whole-def costs
                results.add(
                    {
                        "def_": d.name,
                        **run,
                        "start_cost": round(r.start_cost + offset, 6),
                        "best_cost": round(r.best_cost + offset, 6),
                        "best_body_cost": round(r.best_cost, 6),
                        "seconds": round(r.seconds, 3),
                        "evaluations": r.evaluations,
                    }
                )


if __name__ == "__main__":
    main()
