"""The equality-saturation baseline against A* with and without the default model, on the public
arithmetic sets.

Run:  python experiments/egraph_baseline/run.py [--sets NAME,...] [--quick] [--out FILE]

Every expression of the public arithmetic sets (ksdata/arithmetic_sets.json) is searched
with ``binding_simplify_rules`` (the rules the default model was trained with) by:

* ``egraph``: ``optimize.py --search egraph`` with egg's default limits, 10,000 e-nodes and 30
  iterations (``--budget 10000 --depth 30``), no time limit;
* ``astar``, ``--model none`` and ``--model default``, depth 10, 300 evaluations, and plain A* at
  5000 evaluations.

One row per (expression, search) is appended to experiments/results/egraph_baseline/results.jsonl as
each search ends, so an interrupted run carries on where it stopped; ``python -m experiments.summary
--write`` turns the rows into the table of docs/egraph.md.  ``--quick``: the first two expressions of
each set at small limits, into runs/quick/.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from app.models import load_value_function
from knossos.perf import fewer_gc_pauses
from knossos.printer import format_expr
from ksbench.results import QUICK, RESULTS, ResultsFile
from ksdata.loader import DATA, DataSource, Target, load_targets
from search.plan import Plan, run
from search.value import ValueFunction

RULES = "binding_simplify_rules"
KEY = ("set", "index", "search", "model", "budget", "depth")


@dataclass(frozen=True)
class Setting:
    search: str
    model: str
    budget: int
    depth: int


SETTINGS = (
    Setting("egraph", "none", 10_000, 30),
    Setting("astar", "none", 300, 10),
    Setting("astar", "default", 300, 10),
    Setting("astar", "none", 5000, 10),
)
QUICK_SETTINGS = (
    Setting("egraph", "none", 500, 5),
    Setting("astar", "none", 50, 5),
    Setting("astar", "default", 50, 5),
)


def public_sets() -> list[str]:
    return list(json.loads((DATA / "arithmetic_sets.json").read_text())["sets"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sets", default=",".join(public_sets()), help="arithmetic sets, comma-separated (all public)")
    ap.add_argument("--quick", action="store_true", help="two expressions a set at small limits, into runs/quick/")
    ap.add_argument(
        "--out", type=Path, help="the results file (default experiments/results/egraph_baseline/results.jsonl)"
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    folder = QUICK / "egraph_baseline" if args.quick else RESULTS / "egraph_baseline"
    results = ResultsFile(args.out or folder / "results.jsonl", KEY)
    targets = {name: load_targets(DataSource(set=name), "egraph_baseline") for name in args.sets.split(",")}
    if args.quick:
        targets = {name: ts[:2] for name, ts in targets.items()}
    values: dict[str, ValueFunction] = {}
    with fewer_gc_pauses():
        for s in QUICK_SETTINGS if args.quick else SETTINGS:
            todo = [
                (name, i, t)
                for name, ts in targets.items()
                for i, t in enumerate(ts)
                if not results.has(set=name, index=i, search=s.search, model=s.model, budget=s.budget, depth=s.depth)
            ]
            if not todo:
                continue
            if s.model not in values:
                values[s.model] = load_value_function(s.model)
            label = f"{s.search} {s.model} {s.budget}"
            for name, i, t in tqdm(todo, desc=label, unit="expr", file=sys.stderr, disable=args.quiet or None):
                results.add(_search(name, i, t, s, values[s.model]))


def _search(name: str, i: int, t: Target, s: Setting, value: ValueFunction) -> dict[str, object]:
    if hasattr(value, "clear"):  # a model's cache of values: each search starts cold
        value.clear()
    r = run(t.expr, Plan(rules=RULES).overridden(algorithm=s.search, depth=s.depth, budget=s.budget), value)
    return {
        "set": name,
        "index": i,
        "search": s.search,
        "model": s.model,
        "budget": s.budget,
        "depth": s.depth,
        "rules": RULES,
        "start_cost": round(r.start_cost, 6),
        "best_known": t.best_known,
        "best_cost": round(r.best_cost, 6),
        "best": format_expr(r.best),
        "seconds": round(r.seconds, 3),
        "complete": r.complete,
        "note": r.notes[-1] if r.notes else "",
    }


if __name__ == "__main__":
    main()
