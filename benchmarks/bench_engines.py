"""Every engine side by side: the e-graph alone, the learned search alone, plain A*, and the searches
between saturation passes (search/saturated.py), on the arithmetic sets.

Run:  python benchmarks/bench_engines.py [--sets NAME,...] [--engines NAME,...] [--jobs N] [--quick]

Every expression of each set (default: the generated validation and held-out sets and the four public
arithmetic sets) is searched with ``binding_simplify_rules`` (the rules the default model was trained
with), depth 10, by each engine of :data:`ENGINES`.  Each engine runs in a process of its own (``--jobs``
at once; 1 by default, so that the seconds of one engine are not slowed by another's), its value
function loaded once; each search starts with an empty cache of values, as an optimize.py run does.
Rows are appended to ``experiments/results/engines/results.jsonl`` as searches end (an interrupted run
resumes); ``python -m experiments.summary --write`` turns them into the table of docs/egraph.md: per
set and engine the expressions at the best cost known (the set's, lowered by anything this benchmark
found), the total best cost and the seconds of search (the sum of the searches' own times, start-up
aside).  ``--quick``: the first 3 expressions of each set, into runs/quick/.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.models import default_pipeline, load_value_function
from experiments.common import QUICK, RESULTS, ResultsFile
from gnn.config import DataSource
from knossos.expr import Expr
from knossos.perf import fewer_gc_pauses
from knossos.printer import format_expr
from ksdata.loader import load_targets
from rules.rule_set import RuleSet
from rules.sets import get_rule_set
from search.astar import astar
from search.registry import Search, get_search
from search.saturated import saturated
from search.spec import SearchSpec
from search.value import ValueFunction

ROOT = Path(__file__).resolve().parent.parent

RULES, DEPTH = "binding_simplify_rules", 10
SETS = (
    "generated_validation",
    "generated_heldout",
    "bindgen_36",
    "bindgen_test",
    "binding_simplify_8",
    "simplify_expressions",
)


@dataclass(frozen=True)
class Engine:
    name: str
    #: A registered search's name, ``saturate-astar-before`` (the first pass only) or ``default``
    #: (optimize.py's choice for the expression, :func:`app.models.default_pipeline`).
    search: str
    model: str
    #: Evaluations, or e-nodes for the e-graph; None: optimize.py's default for the expression.
    budget: int | None
    #: What the table says.
    label: str


ENGINES = (
    Engine("egraph", "egraph", "none", 5000, "e-graph alone (5000 e-nodes, 10 iterations)"),
    Engine("learned", "lazy-astar", "default", 300, "learned: `--model default` (lazy A\\*, 300 evaluations)"),
    Engine("astar", "astar", "none", 5000, "plain A\\* (5000 evaluations)"),
    Engine("sat-astar-300", "saturate-astar", "none", 300, "saturate-astar, plain, 300 evaluations"),
    Engine("sat-astar-1000", "saturate-astar", "none", 1000, "saturate-astar, plain, 1000 evaluations"),
    Engine("sat-astar-5000", "saturate-astar", "none", 5000, "saturate-astar, plain, 5000 evaluations"),
    Engine(
        "sat-before-1000", "saturate-astar-before", "none", 1000, "first pass only, then plain A\\* (1000 evaluations)"
    ),
    Engine("sat-learned", "saturate-lazy-astar", "default", 300, "saturate-lazy-astar, `--model default`, 300"),
    Engine("default", "default", "none", None, "optimize.py's default (no flags): saturate-astar, 300 evaluations"),
)
BY_NAME = {e.name: e for e in ENGINES}


def search_of(engine: Engine, start: Expr, rules: RuleSet, value: ValueFunction) -> tuple[Search, SearchSpec]:
    """The search ``engine`` runs on ``start``, and its spec."""
    if engine.search == "default":
        p = default_pipeline(start)
        return get_search(p.search), p.spec(rules, value)
    assert engine.budget is not None
    spec = SearchSpec(rules, DEPTH, engine.budget, value=value)
    if engine.search == "saturate-astar-before":
        return saturated(astar, after=False), spec
    return get_search(engine.search), spec


def results_file(quick: bool) -> ResultsFile:
    folder = QUICK / "engines" if quick else RESULTS / "engines"
    return ResultsFile(folder / "results.jsonl", ("set", "index", "engine"))


def run_engine(engine: Engine, sets: list[str], quick: bool) -> None:
    results = results_file(quick)
    rules = get_rule_set(RULES)
    value = load_value_function(engine.model)
    for set_name in sets:
        targets = load_targets(DataSource(set=set_name), "--sets")[: 3 if quick else None]
        todo = [(i, t) for i, t in enumerate(targets) if not results.has(set=set_name, index=i, engine=engine.name)]
        for i, t in tqdm(todo, desc=f"{engine.name} {set_name}", unit="expr", file=sys.stderr):
            if hasattr(value, "clear"):
                value.clear()
            search, spec = search_of(engine, t.expr, rules, value)
            r = search(t.expr, spec)
            results.add(
                {
                    "set": set_name,
                    "index": i,
                    "engine": engine.name,
                    "search": engine.search,
                    "model": engine.model,
                    "budget": spec.budget,
                    "depth": spec.depth,
                    "start_cost": round(r.start_cost, 6),
                    "best_known": t.best_known,
                    "best_cost": round(r.best_cost, 6),
                    "seconds": round(r.seconds, 4),
                    "evaluations": r.evaluations,
                    "complete": r.complete,
                    "best": format_expr(r.best),
                }
            )


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (set, engine): expressions, hits at the best cost known, total best cost, seconds."""
    known: dict[tuple[str, int], float] = {}
    for r in rows:
        key = (r["set"], r["index"])
        candidates = [r["best_cost"], known.get(key, float("inf"))]
        if r["best_known"] is not None:
            candidates.append(r["best_known"])
        known[key] = min(candidates)
    out = []
    for set_name in dict.fromkeys(r["set"] for r in rows):
        for name in dict.fromkeys(r["engine"] for r in rows):
            mine = [r for r in rows if r["set"] == set_name and r["engine"] == name]
            if not mine:
                continue
            out.append(
                {
                    "set": set_name,
                    "engine": name,
                    "expressions": len(mine),
                    "hits": sum(r["best_cost"] <= known[r["set"], r["index"]] + 1e-9 for r in mine),
                    "total_cost": round(sum(r["best_cost"] for r in mine), 4),
                    "seconds": round(sum(r["seconds"] for r in mine), 4),
                }
            )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS), help="sets, comma-separated")
    ap.add_argument("--engines", default=",".join(BY_NAME), help=f"engines ({', '.join(BY_NAME)})")
    ap.add_argument("--jobs", type=int, default=1, help="engines at once, each in its own process (1)")
    ap.add_argument("--quick", action="store_true", help="three expressions a set, into runs/quick/")
    ap.add_argument("--engine-process", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sets = args.sets.split(",")
    if args.engine_process:
        with fewer_gc_pauses():
            run_engine(BY_NAME[args.engine_process], sets, args.quick)
        return
    names = args.engines.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"bench_engines.py: error: unknown engines {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> int:
        command = [sys.executable, str(Path(__file__).resolve()), "--engine-process", name, "--sets", args.sets]
        command += ["--quick"] if args.quick else []
        return subprocess.run(command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}).returncode

    with ThreadPoolExecutor(args.jobs) as pool:
        for name, code in zip(names, list(pool.map(one, names)), strict=True):
            if code != 0:
                raise SystemExit(f"bench_engines.py: error: the searches of {name} failed")
    for row in summarise(list(results_file(args.quick))):
        print(
            f"{row['set']:<22} {row['engine']:<16} {row['hits']:>3}/{row['expressions']:<3} "
            f"{row['total_cost']:>9.1f} {row['seconds']:>8.1f} s"
        )


if __name__ == "__main__":
    main()
